"""`VerifierClient`: the blocking client. Chunks of a batch go out concurrently on a small thread pool."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from types import TracebackType
from typing import Any
from urllib.parse import quote

import httpx

from trainer_client.config import DEFAULT_URL, FRESH_CONNECTIONS, ClientConfig
from trainer_client.core import Chunk, ClientCore, error_detail, place
from trainer_client.errors import HTTPX_ERRORS, VerifierResponseError, map_httpx_error, status_error
from trainer_client.readiness import ReadinessWait
from verifier_service.schema import ItemResult, ScoreItem


class VerifierClient:
    """Score completions with a verifier service.

    `base_url` may name several verifiers (a list, or one string with commas: "http://a:8088,http://b:8088"), e.g.
    the replicas of a Ray Serve deployment at their nodes' own addresses (docs/scale.md): the chunks of a batch are
    spread over them, each to the one with the fewest in flight, and a chunk whose verifier cannot be reached, is
    busy or fails (5xx) is retried on another.

    Pass `http_client` to bring your own `httpx.Client` (a test transport, proxies, TLS settings); the caller then
    owns it and `close()` leaves it open. Every request carries the timeouts of `config` either way. The client
    made here keeps no idle connections (see `config.FRESH_CONNECTIONS`).

    >>> from verifier_service.schema import MathSpec, ScoreItem
    >>> with VerifierClient(VERIFIER_URL) as client:
    ...     client.wait_until_ready(timeout=60)
    ...     [result] = client.score([ScoreItem(completion="The answer is 4.", math=MathSpec(gold="4"))])
    >>> result.reward, result.components["math"].verdict
    (1.0, 'correct')
    """

    def __init__(
        self,
        base_url: str | Sequence[str] = DEFAULT_URL,
        *,
        api_key: str | None = None,
        config: ClientConfig | None = None,
        http_client: httpx.Client | None = None,
    ) -> None:
        self.core = ClientCore(base_url, api_key, config or ClientConfig())
        self._owns_http = http_client is None
        self._http = http_client or httpx.Client(limits=FRESH_CONNECTIONS)

    def score(self, items: Sequence[ScoreItem]) -> list[ItemResult]:
        """One result per item, in order. Chunks are sent concurrently; the first error is raised."""
        chunks = self.core.chunks(items)
        if len(chunks) <= 1:
            return place(chunks, [self._send_chunk(chunk) for chunk in chunks], len(items))
        workers = min(len(chunks), self.core.config.max_concurrency)
        with ThreadPoolExecutor(workers, thread_name_prefix="verifier-client") as pool:
            futures = [pool.submit(self._send_chunk, chunk) for chunk in chunks]
            return place(chunks, _results_or_cancel(futures), len(items))

    def wait_until_ready(self, timeout: float = 60.0, *, connect_grace: float | None = None) -> None:
        """Block until `GET /readyz` answers 200 (at every URL, when there are several), logging progress (INFO,
        logger `trainer_client`) while it waits.

        Raises `VerifierNotReadyError` after `timeout` seconds. With `connect_grace`, raises
        `VerifierConnectionError` once nothing has listened at a URL (connection refused, unknown host) for that
        many seconds: a verifier that is starting answers 503 or at least accepts connections. See
        `trainer_client.readiness`.
        """
        for wait in [ReadinessWait(self.core, timeout, connect_grace, base_url=url) for url in self.core.urls]:
            self._wait_until_ready(wait)

    def models(self) -> dict[str, Any]:
        """`GET /v1/models` of the first verifier: its reward models by name (kind, path, version, device)."""
        return self._model_call("GET", "/v1/models", None, self.core.urls[:1])[0]

    def reload_model(self, name: str, path: str | None = None, *, timeout: float = 600.0) -> list[dict[str, Any]]:
        """`POST /v1/models/{name}/reload` at every verifier (each serves its own copy): load the checkpoint at `path`
        (default: the configured one, read again) beside the old and swap. Returns each verifier's answer (the new
        version); raises a `VerifierError` when one refuses or fails (those before it have swapped)."""
        body = {} if path is None else {"path": path}
        return self._model_call("POST", f"/v1/models/{quote(name, safe='')}/reload", body, self.core.urls, timeout)

    def evaluate_model(
        self, name: str, groups: Sequence[Mapping[str, Any]], *, timeout: float = 600.0, **options: Any
    ) -> dict[str, Any]:
        """`POST /v1/models/{name}/eval` at the first verifier: the model's ranking accuracy, AUROC, calibration and
        drift on `groups` (each a prompt, its completions and their rule outcomes)."""
        body = {"groups": list(groups), **options}
        path = f"/v1/models/{quote(name, safe='')}/eval"
        return self._model_call("POST", path, body, self.core.urls[:1], timeout)[0]

    def _model_call(
        self, method: str, path: str, body: Any, urls: Sequence[str], timeout: float | None = None
    ) -> list[dict[str, Any]]:
        answers = []
        for url in urls:
            what = f"{method} {url}{path}"
            try:
                wait = timeout or self.core.config.timeout()
                response = self._http.request(method, url + path, json=body, headers=self.core.headers, timeout=wait)
            except HTTPX_ERRORS as exc:
                raise map_httpx_error(exc, what) from exc
            if response.status_code != 200:
                raise status_error(response.status_code, error_detail(response), what)
            try:
                answers.append(response.json())
            except ValueError as exc:
                raise VerifierResponseError(f"{what}: the answer is not JSON") from exc
        return answers

    def close(self) -> None:
        if self._owns_http:
            self._http.close()

    def __enter__(self) -> VerifierClient:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def _wait_until_ready(self, wait: ReadinessWait) -> None:
        while True:
            request_timeout = wait.request_timeout()
            try:
                response = self._http.get(wait.ready_url, headers=self.core.headers, timeout=request_timeout)
            except HTTPX_ERRORS as exc:
                wait.failed(exc)
            else:
                if wait.answered(response):
                    return
            time.sleep(wait.delay())

    def _send_chunk(self, chunk: Chunk) -> list[ItemResult]:
        body = chunk.body()
        attempt, target = 0, self.core.endpoints.acquire()
        try:
            while True:
                url = self.core.score_url_at(target)
                try:
                    response = self._http.post(
                        url, content=body, headers=self.core.headers, timeout=self.core.config.timeout()
                    )
                except HTTPX_ERRORS as exc:
                    retry = self.core.retry(attempt, target, error=exc)
                    if retry is None:
                        raise map_httpx_error(exc, f"POST {url}") from exc
                else:
                    retry = self.core.retry(attempt, target, response=response)
                    if retry is None:
                        return self.core.parse_score(response, chunk, target)
                target = retry.target
                time.sleep(retry.delay_s)
                attempt += 1
        finally:
            self.core.endpoints.release(target)


def _results_or_cancel(futures: list[Future[list[ItemResult]]]) -> list[list[ItemResult]]:
    """Each future's result in order; on the first error, cancel the chunks not yet started and raise it."""
    try:
        return [future.result() for future in futures]
    except BaseException:
        for future in futures:
            future.cancel()
        raise
