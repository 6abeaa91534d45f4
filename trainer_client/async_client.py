"""`AsyncVerifierClient`: the asyncio twin of `VerifierClient`, for async reward functions and event loops."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from types import TracebackType

import httpx

from trainer_client.config import DEFAULT_URL, FRESH_CONNECTIONS, ClientConfig
from trainer_client.core import Chunk, ClientCore, place
from trainer_client.errors import HTTPX_ERRORS, map_httpx_error
from trainer_client.readiness import ReadinessWait
from verifier_service.schema import ItemResult, ScoreItem


class AsyncVerifierClient:
    """Score completions with a verifier service, without blocking the event loop.

    Same arguments and behaviour as `VerifierClient` (one URL or several); `aclose()` instead of `close()`. An
    httpx.AsyncClient belongs to the event loop it first ran on, and so does this client.

    >>> import asyncio
    >>> from verifier_service.schema import FormatOptions, ScoreItem
    >>> async def main() -> list[float | None]:
    ...     async with AsyncVerifierClient(VERIFIER_URL) as client:
    ...         results = await client.score([ScoreItem(completion="<think>hm</think>4", format=FormatOptions())])
    ...     return [result.reward for result in results]
    >>> asyncio.run(main())
    [1.0]
    """

    def __init__(
        self,
        base_url: str | Sequence[str] = DEFAULT_URL,
        *,
        api_key: str | None = None,
        config: ClientConfig | None = None,
        http_client: httpx.AsyncClient | None = None,
    ) -> None:
        self.core = ClientCore(base_url, api_key, config or ClientConfig())
        self._owns_http = http_client is None
        self._http = http_client or httpx.AsyncClient(limits=FRESH_CONNECTIONS)

    async def score(self, items: Sequence[ScoreItem]) -> list[ItemResult]:
        """One result per item, in order. Chunks are sent concurrently; the first error is raised."""
        chunks = self.core.chunks(items)
        limit = asyncio.Semaphore(self.core.config.max_concurrency)

        async def send(chunk: Chunk) -> list[ItemResult]:
            async with limit:
                return await self._send_chunk(chunk)

        tasks = [asyncio.ensure_future(send(chunk)) for chunk in chunks]
        try:
            results = await asyncio.gather(*tasks)
        except BaseException:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            raise
        return place(chunks, results, len(items))

    async def wait_until_ready(self, timeout: float = 60.0, *, connect_grace: float | None = None) -> None:
        """Wait until `GET /readyz` answers 200; as `VerifierClient.wait_until_ready`."""
        for wait in [ReadinessWait(self.core, timeout, connect_grace, base_url=url) for url in self.core.urls]:
            await self._wait_until_ready(wait)

    async def aclose(self) -> None:
        if self._owns_http:
            await self._http.aclose()

    async def __aenter__(self) -> AsyncVerifierClient:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    async def _wait_until_ready(self, wait: ReadinessWait) -> None:
        while True:
            request_timeout = wait.request_timeout()
            try:
                response = await self._http.get(wait.ready_url, headers=self.core.headers, timeout=request_timeout)
            except HTTPX_ERRORS as exc:
                wait.failed(exc)
            else:
                if wait.answered(response):
                    return
            await asyncio.sleep(wait.delay())

    async def _send_chunk(self, chunk: Chunk) -> list[ItemResult]:
        body = chunk.body()
        attempt, target = 0, self.core.endpoints.acquire()
        try:
            while True:
                url = self.core.score_url_at(target)
                try:
                    response = await self._http.post(
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
                await asyncio.sleep(retry.delay_s)
                attempt += 1
        finally:
            self.core.endpoints.release(target)
