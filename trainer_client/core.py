"""What `VerifierClient` and `AsyncVerifierClient` share, without I/O: requests to send, answers to read, which
verifier to send them to, when to retry and how long to wait. The two clients differ only in how they send and sleep.
"""

from __future__ import annotations

import math
import random
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import httpx
from pydantic import ValidationError

from trainer_client.config import ClientConfig
from trainer_client.errors import (
    RETRYABLE_ERRORS,
    VerifierError,
    VerifierResponseError,
    status_error,
)
from verifier_service.schema import ErrorResponse, ItemResult, ScoreItem, ScoreRequest, ScoreResponse

USER_AGENT = "reward-verifier-client/0.1"
SCORE_PATH = "/v1/score"
READY_PATH = "/readyz"
COOLDOWN_S = 5.0  # a URL that just failed is passed over this long while another one is there


def base_of(url: str) -> str:
    """A verifier's base URL as given, or given with the score route: without surrounding spaces, trailing slashes
    or a final `/v1/score` (the route is what a user copies from the docs; the clients add it themselves).

    >>> base_of(" http://a:8088/ "), base_of("http://a:8088/v1/score/")
    ('http://a:8088', 'http://a:8088')
    """
    return url.strip().rstrip("/").removesuffix(SCORE_PATH).rstrip("/")


def parse_urls(base_url: str | Sequence[str]) -> tuple[str, ...]:
    """The verifier URLs (`base_of` each): one, a comma-separated list of them, or a sequence.

    >>> parse_urls("http://a:8088/, http://b:8088/v1/score")
    ('http://a:8088', 'http://b:8088')
    """
    parts = base_url.split(",") if isinstance(base_url, str) else list(base_url)
    urls = tuple(base_of(url) for url in parts if base_of(url))
    if not urls:
        raise ValueError(f"no verifier URL in {base_url!r}")
    return urls


class Endpoints:
    """The URLs a client spreads its chunks over: each chunk goes to the one with the fewest chunks in flight (taking
    turns among equals), passing over for COOLDOWN_S one that just failed (no connection, 429, 5xx) while another
    one is there. Thread-safe: the blocking client sends from several threads."""

    def __init__(self, urls: Sequence[str], clock: Callable[[], float] = time.monotonic) -> None:
        self.urls = tuple(urls)
        self._clock = clock
        self._in_flight = [0] * len(self.urls)
        self._failed_at = [-math.inf] * len(self.urls)
        self._turn = 0
        self._lock = threading.Lock()

    def acquire(self, avoid: int | None = None) -> int:
        """The index of the URL for the next request (counted in flight until `release`), other than `avoid`
        when there is another."""
        with self._lock:
            n, now = len(self.urls), self._clock()
            others = [i for i in range(n) if i != avoid] or list(range(n))
            fresh = [i for i in others if now - self._failed_at[i] >= COOLDOWN_S] or others
            chosen = min(fresh, key=lambda i: (self._in_flight[i], (i - self._turn) % n))
            self._turn = (chosen + 1) % n
            self._in_flight[chosen] += 1
            return chosen

    def release(self, index: int, *, failed: bool = False) -> None:
        with self._lock:
            self._in_flight[index] -= 1
            if failed:
                self._failed_at[index] = self._clock()

    def in_flight(self) -> tuple[int, ...]:
        """Requests in flight, per URL."""
        with self._lock:
            return tuple(self._in_flight)

    def has_fresh_other(self, index: int) -> bool:
        """Whether a URL other than `index` has not failed lately (a retry can go there at once)."""
        with self._lock:
            now = self._clock()
            return any(now - at >= COOLDOWN_S for i, at in enumerate(self._failed_at) if i != index)


@dataclass(frozen=True)
class Chunk:
    """A slice of the caller's batch, sent as one request; `start` is where its results go."""

    start: int
    items: Sequence[ScoreItem]

    def body(self) -> bytes:
        # Every field that may be None defaults to None in the schema, so leaving them out changes nothing and
        # saves bytes. (exclude_unset would drop the `type` discriminator of code tests.)
        return ScoreRequest(items=list(self.items)).model_dump_json(exclude_none=True).encode()


@dataclass(frozen=True)
class Retry:
    """Try again at URL number `target`, after `delay_s` seconds."""

    target: int
    delay_s: float


class ClientCore:
    """Requests, parsing and retry decisions for the verifiers at `base_url`: one URL, or several (a list or a
    comma-separated string) that the chunks of a batch are spread over."""

    def __init__(
        self, base_url: str | Sequence[str], api_key: str | None, config: ClientConfig, rng: random.Random | None = None
    ) -> None:
        self.endpoints = Endpoints(parse_urls(base_url))
        self.urls = self.endpoints.urls
        self.base_url = self.urls[0] if len(self.urls) == 1 else ",".join(self.urls)
        self.config = config
        self.headers = {"accept": "application/json", "content-type": "application/json", "user-agent": USER_AGENT}
        if api_key:
            self.headers["authorization"] = f"Bearer {api_key}"
        self._rng = rng or random.Random()

    @property
    def sends_key(self) -> bool:
        return "authorization" in self.headers

    @property
    def score_url(self) -> str:
        return self.score_url_at(0)

    @property
    def ready_url(self) -> str:
        return self.urls[0] + READY_PATH

    def score_url_at(self, target: int) -> str:
        return self.urls[target] + SCORE_PATH

    def chunks(self, items: Sequence[ScoreItem]) -> list[Chunk]:
        size = self.config.chunk_size
        return [Chunk(start, items[start : start + size]) for start in range(0, len(items), size)]

    def parse_score(self, response: httpx.Response, chunk: Chunk, target: int = 0) -> list[ItemResult]:
        """The chunk's results, in order; raises a `VerifierError` for anything else."""
        what = f"POST {self.score_url_at(target)} ({len(chunk.items)} items)"
        if response.status_code == 401:
            hint = "the api_key= given was refused" if self.sends_key else "no API key was sent: pass api_key="
            raise status_error(401, error_detail(response), what, hint=hint)
        if response.status_code != 200:
            raise status_error(response.status_code, error_detail(response), what)
        try:
            results = ScoreResponse.model_validate_json(response.content).results
        except ValidationError as exc:
            raise VerifierResponseError(f"{what}: the answer does not follow the wire contract: {exc}") from exc
        if len(results) != len(chunk.items):
            raise VerifierResponseError(f"{what}: {len(results)} results for {len(chunk.items)} items")
        for index, (item, result) in enumerate(zip(chunk.items, results, strict=True)):
            if result.id != item.id:
                raise VerifierResponseError(f"{what}: result {index} has id {result.id!r}, expected {item.id!r}")
        return results

    def retry(
        self, attempt: int, target: int, *, response: httpx.Response | None = None, error: Exception | None = None
    ) -> Retry | None:
        """Where and when to send a chunk again after attempt number `attempt` at URL `target` failed, or None: do not
        retry (`retry_delay` decides). A retry goes to another URL where there is one; at once when that one has not
        failed lately, else after the backoff. The chunk's place in flight moves with it."""
        delay = self.retry_delay(attempt, response=response, error=error)
        if delay is None:
            return None
        if self.endpoints.has_fresh_other(target):
            delay = 0.0
        self.endpoints.release(target, failed=True)
        return Retry(self.endpoints.acquire(avoid=target), delay)

    def retry_delay(
        self, attempt: int, *, response: httpx.Response | None = None, error: Exception | None = None
    ) -> float | None:
        """Seconds to wait before trying again after attempt number `attempt` (0-based), or None: do not retry.

        Retried: connect errors (the request never reached the server), 429 and 5xx. Never: other 4xx, read
        timeouts and broken connections (the server may be busy with the batch; sending it again doubles the work).
        """
        if attempt >= self.config.max_retries:
            return None
        if error is not None:
            return self.backoff_s(attempt) if isinstance(error, RETRYABLE_ERRORS) else None
        if response is not None and (response.status_code == 429 or response.status_code >= 500):
            return self.backoff_s(attempt, retry_after_s(response))
        return None

    def backoff_s(self, attempt: int, retry_after: float | None = None) -> float:
        """Capped exponential backoff with jitter: in [c/2, c] for c = min(max, base * 2**attempt).

        A server's Retry-After is honoured up to the same cap.
        """
        ceiling = min(self.config.backoff_max_s, self.config.backoff_base_s * 2.0 ** min(attempt, 32))
        delay = ceiling * (0.5 + 0.5 * self._rng.random())
        if retry_after is not None:
            delay = max(delay, min(retry_after, self.config.backoff_max_s))
        return delay


def error_detail(response: httpx.Response) -> str | None:
    """The server's error message (`{"detail": ...}`), else the start of the body."""
    try:
        return str(ErrorResponse.model_validate_json(response.content).detail)[:1000]
    except ValidationError:
        return response.text[:500] or None


def retry_after_s(response: httpx.Response) -> float | None:
    """The Retry-After header in seconds, when it is a number (HTTP dates are ignored)."""
    try:
        return max(0.0, float(response.headers["retry-after"]))
    except (KeyError, ValueError):
        return None


def place(chunks: Sequence[Chunk], results: Sequence[list[ItemResult]], total: int) -> list[ItemResult]:
    """Put each chunk's results back where its items were."""
    merged: list[ItemResult | None] = [None] * total
    for chunk, chunk_results in zip(chunks, results, strict=True):
        merged[chunk.start : chunk.start + len(chunk_results)] = chunk_results
    if any(result is None for result in merged):
        raise VerifierError("internal error: a chunk's results are missing")  # a bug in this module
    return [result for result in merged if result is not None]
