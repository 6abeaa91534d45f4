"""Waiting for a verifier to be ready, without I/O: what each answer or error means, when to give up, what to log.

A verifier that answers but is not ready (HTTP 503 while its workers and sandboxes start, or a port that accepts
and drops connections, as Docker's port proxy does before the service listens) is waited for up to the timeout.
Nothing listening at all (connection refused, unknown host, no route) is most often a wrong URL: with
`connect_grace` it fails once that has lasted `connect_grace` seconds, long enough for a verifier started at the
same moment to come up. `VerifierClient.wait_until_ready` and its async twin drive this and differ only in how
they send and sleep.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

import httpx

from trainer_client.core import READY_PATH, ClientCore, error_detail
from trainer_client.errors import (
    RETRYABLE_ERRORS,
    VerifierConfigError,
    VerifierConnectionError,
    VerifierNotReadyError,
    map_httpx_error,
    status_error,
)

logger = logging.getLogger("trainer_client")

PROGRESS_EVERY_S = 10.0  # a progress line at most this often while the reason stays the same
MAX_REQUEST_S = 5.0  # one GET /readyz never waits longer than this


class ReadinessWait:
    """One `wait_until_ready(timeout, connect_grace=...)` call, for the verifier at `base_url` (default: the client's
    first). The client asks `request_timeout()` before each `GET /readyz` at `ready_url` and hands the answer to
    `answered` (True: ready) or the error to `failed`; either may raise. Then it sleeps `delay()` seconds and asks
    again. A client with several URLs makes one per URL at once (one deadline) and waits for each in turn.
    """

    def __init__(
        self,
        core: ClientCore,
        timeout: float,
        connect_grace: float | None = None,
        clock: Callable[[], float] = time.monotonic,
        base_url: str | None = None,
    ) -> None:
        self.core = core
        self.base_url = base_url or core.urls[0]
        self.ready_url = self.base_url + READY_PATH
        self.timeout = timeout
        self.connect_grace = connect_grace
        self.clock = clock
        self.started = clock()
        self.reason = "no answer yet"
        self.unreachable_since: float | None = None  # start of the current run of "nothing listening"
        self._logged: tuple[str, float] | None = None  # the last progress line's reason kind, and when

    def request_timeout(self) -> float:
        """The timeout of the next `GET /readyz`; raises `VerifierNotReadyError` once the time is up."""
        remaining = self._remaining()
        if remaining <= 0:
            raise VerifierNotReadyError(f"{self.base_url} not ready after {self.timeout:g}s: {self.reason}")
        return min(remaining, MAX_REQUEST_S)

    def answered(self, response: httpx.Response) -> bool:
        """True when the verifier is ready. A 4xx other than 429 means no verifier is there: raised."""
        self.unreachable_since = None
        if response.status_code == 200:
            if self._logged is not None:
                logger.info("verifier at %s ready after %.0fs", self.base_url, self.clock() - self.started)
            return True
        if 400 <= response.status_code < 500 and response.status_code != 429:
            raise status_error(response.status_code, error_detail(response), f"GET {self.ready_url}")
        self.reason = not_ready_reason(response)
        self._progress("not ready", f"{self.reason}; waiting up to {self._remaining():.0f}s more")
        return False

    def failed(self, error: Exception) -> None:
        """Take in the httpx error `error` of a `GET /readyz`.

        Raises (from `error`) `VerifierConfigError` at once, since an invalid URL stays invalid, and
        `VerifierConnectionError` once nothing has listened for `connect_grace` seconds.
        """
        mapped = map_httpx_error(error, f"GET {self.ready_url}")
        if isinstance(mapped, VerifierConfigError):
            raise mapped from error
        self.reason = str(mapped)
        if not isinstance(error, RETRYABLE_ERRORS):  # connected, then no answer: something is there, starting
            self.unreachable_since = None
            self._progress("no answer", f"{self.reason}; waiting up to {self._remaining():.0f}s more")
            return
        now = self.clock()
        if self.unreachable_since is None:
            self.unreachable_since = now
        if self.connect_grace is not None and now - self.unreachable_since >= self.connect_grace:
            raise VerifierConnectionError(
                f"nothing is listening at {self.base_url} ({type(error).__name__}: {error}; for "
                f"{now - self.unreachable_since:.0f}s): is the verifier running, and is that its address?"
            ) from error
        if self.connect_grace is None:
            more = f"waiting up to {self._remaining():.0f}s more"
        else:
            left = min(self.unreachable_since + self.connect_grace, self.started + self.timeout) - now
            more = f"giving up in {max(0.0, left):.0f}s unless it starts listening"
        self._progress("unreachable", f"nothing listening ({type(error).__name__}: {error}); {more}")

    def _remaining(self) -> float:
        return max(0.0, self.started + self.timeout - self.clock())

    def delay(self) -> float:
        """Seconds to sleep before the next `GET /readyz`."""
        return min(self.core.config.ready_poll_s, self._remaining())

    def _progress(self, kind: str, text: str) -> None:
        """An INFO line when the kind of reason changes, and every PROGRESS_EVERY_S while it stays."""
        now = self.clock()
        if self._logged is None or self._logged[0] != kind or now - self._logged[1] >= PROGRESS_EVERY_S:
            logger.info("waiting for the verifier at %s: %s", self.base_url, text)
            self._logged = (kind, now)


def not_ready_reason(response: httpx.Response) -> str:
    """Why `GET /readyz` did not answer 200, in a line: the status and the verifier's own summary.

    >>> body = {"status": "starting", "math_workers": {"alive": 0, "pids": []}, "sandbox": {"ready": False, "up": 0,
    ...         "pool_size": 2, "last_error": None}}
    >>> not_ready_reason(httpx.Response(503, json=body))
    'HTTP 503: starting (math workers alive: 0; sandbox: 0 of 2 up)'
    """
    try:
        body = response.json()
    except ValueError:
        body = None
    if not (isinstance(body, dict) and isinstance(body.get("status"), str)):
        return f"HTTP {response.status_code}: {response.text[:200]}".rstrip(": ")
    parts = []
    workers = body.get("math_workers")
    if isinstance(workers, dict) and "alive" in workers:
        parts.append(f"math workers alive: {workers['alive']}")
    sandbox = body.get("sandbox")
    if isinstance(sandbox, dict) and not sandbox.get("ready", True):
        text = f"sandbox: {sandbox.get('up', 0)} of {sandbox.get('pool_size', '?')} up"
        if sandbox.get("last_error"):
            text += f", last error: {str(sandbox['last_error'])[:200]}"
        parts.append(text)
    return f"HTTP {response.status_code}: {body['status']}" + (f" ({'; '.join(parts)})" if parts else "")
