"""Tuning knobs of the verifier clients: timeouts, retries, chunking. Frozen, checked on construction."""

from __future__ import annotations

import os
from dataclasses import dataclass

import httpx

DEFAULT_URL = "http://127.0.0.1:8088"
API_KEY_ENV = "VERIFIER_API_KEY"  # the variable the service reads its key from, and the clients' fallback


def api_key_or_env(api_key: str | None) -> str | None:
    """The key given, else the VERIFIER_API_KEY environment variable; None when neither is set (or either is empty).

    >>> api_key_or_env("k1"), api_key_or_env(None) == (os.environ.get("VERIFIER_API_KEY") or None)
    ('k1', True)
    """
    return api_key or os.environ.get(API_KEY_ENV) or None


# The clients' own httpx clients open a fresh connection per request. A batch costs milliseconds to seconds, so a
# TCP handshake is noise; in exchange, after a verifier restart the next request fails to connect (and is retried)
# instead of failing on a dead pooled connection (which is not retried: the request may have reached the server),
# and no socket outlives the event loop that opened it.
FRESH_CONNECTIONS = httpx.Limits(max_keepalive_connections=0)


@dataclass(frozen=True)
class ClientConfig:
    """How a client talks to the verifier. The defaults suit a training step of up to a few thousand completions.

    The read timeout is longer than the server's own batch deadline (`VERIFIER_BATCH_TIMEOUT_S`, 120 s by default),
    so a slow batch comes back with per-item nulls from the server rather than as a client timeout.

    >>> ClientConfig(chunk_size=128).timeout().read
    180.0
    """

    connect_timeout_s: float = 5.0
    read_timeout_s: float = 180.0
    max_retries: int = 3  # extra attempts after the first, for connect errors, 429 and 5xx only
    backoff_base_s: float = 0.5  # the first retry waits about this long; each later one twice as long ...
    backoff_max_s: float = 8.0  # ... but never longer than this (Retry-After included)
    chunk_size: int = 512  # items per HTTP request; a batch is split into chunks sent concurrently
    max_concurrency: int = 4  # chunks in flight at once, per call
    ready_poll_s: float = 0.5  # how often `wait_until_ready` asks

    def __post_init__(self) -> None:
        positive = ("connect_timeout_s", "read_timeout_s", "chunk_size", "max_concurrency", "ready_poll_s")
        for name in positive:
            if not getattr(self, name) > 0:
                raise ValueError(f"ClientConfig.{name} must be > 0, got {getattr(self, name)!r}")
        if self.max_retries < 0 or self.backoff_base_s < 0 or self.backoff_max_s < self.backoff_base_s:
            raise ValueError("ClientConfig needs max_retries >= 0 and 0 <= backoff_base_s <= backoff_max_s")

    def timeout(self) -> httpx.Timeout:
        """The httpx timeout for one request: connect, then read/write/pool."""
        return httpx.Timeout(self.read_timeout_s, connect=self.connect_timeout_s)
