"""Coalescing: per-sample score calls made concurrently on one event loop become one `/v1/score` request.

verl, OpenRLHF and slime call a reward once per sample, many at once (verl's reward worker gathers its whole chunk);
one HTTP request per sample would cost a round trip, a request parse and a batch dispatch each. A `Coalescer` holds
the items that arrive close together and sends them as one request through `AsyncVerifierClient` once no call has
come for `idle_s` (1 ms), at the latest `window_s` (5 ms) after the first, or at once when `max_batch` (256) are
waiting, or as many as the largest of the last few batches: with a fixed number of samples in flight (a worker's
concurrency) everyone is then waiting, and a timer would only add latency. Each caller gets its own result. An
error of the shared request reaches every caller waiting on it; a caller that is cancelled leaves the others'
request alone (and a request all of whose callers are gone is cancelled).

An `httpx.AsyncClient` belongs to the event loop it ran on: one kept in a module global fails with "Event loop is
closed" once the loop changes (TRL and verifiers run reward functions on loops that come and go). So the coalescers
live per event loop (`coalescer_for`), share that loop's one client, and close it when the loop shuts down. This is
the package's one piece of module-level state beyond constants: the trainers call plain functions, so there is no
object of ours to keep it in. Synchronous callers (verl's `remote` manager, OpenRLHF's file mode, NeMo-RL) go
through one background event loop per process (`run_sync`), so their concurrent calls coalesce too.
"""

from __future__ import annotations

import asyncio
import atexit
import functools
import os
import ssl
import threading
import weakref
from collections import deque
from collections.abc import AsyncGenerator, Coroutine, Sequence
from typing import Any, TypeVar

import httpx

from trainer_client.async_client import AsyncVerifierClient
from trainer_client.config import FRESH_CONNECTIONS
from trainer_client.errors import VerifierConfigError
from trainer_client.integrations.common import DEFAULT_IDLE_MS, DEFAULT_MAX_BATCH, DEFAULT_WINDOW_MS, AdapterConfig
from verifier_service.schema import ItemResult, ScoreItem

T = TypeVar("T")
RECENT_BATCHES = 8  # a batch as large as the largest of the last this many goes out at once ...
MIN_USUAL_BATCH = 8  # ... when that is at least this large
_CLOCK_SLACK_S = 1e-4  # a timer may fire this much before its time
_Waiter = tuple[ScoreItem, "asyncio.Future[ItemResult]"]


class Coalescer:
    """Gathers the items of concurrent `score` calls on one event loop into shared `/v1/score` requests.

    >>> async def main() -> list[float | None]:
    ...     from verifier_service.schema import MathSpec
    ...     async with AsyncVerifierClient(VERIFIER_URL) as client:
    ...         coalescer = Coalescer(client)
    ...         items = [ScoreItem(completion=f"The answer is {n}.", math=MathSpec(gold="4")) for n in (4, 5)]
    ...         results = await asyncio.gather(*(coalescer.score(item) for item in items))  # one request
    ...     return [result.reward for result in results]
    >>> asyncio.run(main())
    [1.0, 0.0]
    """

    def __init__(
        self,
        client: AsyncVerifierClient,
        *,
        window_s: float = DEFAULT_WINDOW_MS / 1000,
        idle_s: float = DEFAULT_IDLE_MS / 1000,
        max_batch: int = DEFAULT_MAX_BATCH,
    ) -> None:
        if window_s < 0 or idle_s < 0 or max_batch < 1:
            raise ValueError("window_s and idle_s must be >= 0, max_batch >= 1")
        self.client = client
        self.window_s = window_s
        self.idle_s = idle_s
        self.max_batch = max_batch
        self._deadline = self._last = 0.0  # loop times: when the window ends, when the last call came
        self._recent: deque[int] = deque(maxlen=RECENT_BATCHES)  # sizes of the last batches sent
        self._loop: weakref.ref[asyncio.AbstractEventLoop] | None = None  # weak: per-loop registries hold us
        self._pending: list[_Waiter] = []
        self._timer: asyncio.TimerHandle | None = None
        self._sending: set[asyncio.Task[None]] = set()

    async def score(self, item: ScoreItem) -> ItemResult:
        """The item's result, from a request shared with the calls that arrive around the same time."""
        future = self._submit([item])[0]
        return await future

    async def score_many(self, items: Sequence[ScoreItem]) -> list[ItemResult]:
        """Results for several items (a group), in order; they join the current window like single calls."""
        futures = self._submit(items)
        results = []
        for outcome in await asyncio.gather(*futures, return_exceptions=True):
            if isinstance(outcome, BaseException):
                raise outcome
            results.append(outcome)
        return results

    async def aclose(self) -> None:
        """Cancel what is waiting or in flight, and close the client."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        for _, future in self._pending:
            future.cancel()
        self._pending = []
        for task in list(self._sending):
            task.cancel()
        await asyncio.gather(*self._sending, return_exceptions=True)
        await self.client.aclose()

    def _submit(self, items: Sequence[ScoreItem]) -> list[asyncio.Future[ItemResult]]:
        loop = self._bind()
        futures: list[asyncio.Future[ItemResult]] = [loop.create_future() for _ in items]
        self._pending.extend(zip(items, futures, strict=True))
        self._last = loop.time()
        if len(self._pending) >= self._full_size():
            self._flush()
        elif self._timer is None:
            self._deadline = self._last + self.window_s
            self._timer = loop.call_at(min(self._deadline, self._last + self.idle_s), self._on_timer)
        return futures

    def _full_size(self) -> int:
        """How many waiting items make a batch go out without waiting for a timer."""
        usual = max(self._recent, default=0)
        return min(self.max_batch, usual) if usual >= MIN_USUAL_BATCH else self.max_batch

    def _on_timer(self) -> None:
        """Send the batch when calls have stopped coming (`idle_s`) or the window is over; else wait for that."""
        loop = asyncio.get_running_loop()
        due = min(self._deadline, self._last + self.idle_s)
        if loop.time() + _CLOCK_SLACK_S >= due:
            self._flush()
        else:
            self._timer = loop.call_at(due, self._on_timer)

    def _bind(self) -> asyncio.AbstractEventLoop:
        """The running loop, which must be the one this coalescer ran on, unless that one is closed (or gone): then
        nothing of it is left to wait for, and the coalescer moves to the new loop."""
        loop = asyncio.get_running_loop()
        bound = self._loop() if self._loop is not None else None
        if bound is loop:
            return loop
        if bound is not None and not bound.is_closed():
            raise VerifierConfigError(
                "a Coalescer belongs to the event loop it first ran on while that loop is open; get one per loop "
                "with coalescer_for()"
            )
        self._loop, self._pending, self._timer, self._sending = weakref.ref(loop), [], None, set()
        return loop

    def _flush(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        pending, self._pending = self._pending, []
        for start in range(0, len(pending), self.max_batch):
            batch = [(item, future) for item, future in pending[start : start + self.max_batch] if not future.done()]
            self._recent.append(len(batch))
            if batch:
                task = asyncio.get_running_loop().create_task(self._send(batch))
                self._sending.add(task)
                task.add_done_callback(self._sending.discard)
                _cancel_when_abandoned(task, [future for _, future in batch])

    async def _send(self, batch: list[_Waiter]) -> None:
        futures = [future for _, future in batch]
        try:
            results = await self.client.score([item for item, _ in batch])
        except asyncio.CancelledError:
            for future in futures:
                future.cancel()
            raise
        except Exception as exc:  # every caller of this request gets the request's error
            for future in futures:
                if not future.done():
                    future.set_exception(exc)
            return
        for future, result in zip(futures, results, strict=True):
            if not future.done():
                future.set_result(result)


def _cancel_when_abandoned(task: asyncio.Task[None], futures: list[asyncio.Future[ItemResult]]) -> None:
    """Cancel the request once every caller waiting on it has been cancelled: nobody wants its answer."""

    def check(_: asyncio.Future[ItemResult]) -> None:
        if not task.done() and all(future.cancelled() for future in futures):
            task.cancel()

    for future in futures:
        future.add_done_callback(check)


class _LoopClients:
    """One event loop's coalescers, sharing the loop's one `httpx.AsyncClient`.

    The client is closed when the loop shuts down: `asyncio.run` (and Ray, uvicorn, ...) call
    `loop.shutdown_asyncgens()`, which closes every async generator started on the loop, so an async generator
    that closes the client in its `finally` is a shutdown hook. A loop closed without that leaves only an idle
    client behind (no keep-alive: it holds no socket), dropped with the loop.
    """

    def __init__(self) -> None:
        self.http = httpx.AsyncClient(limits=FRESH_CONNECTIONS, verify=_ssl_context())
        self.coalescers: dict[tuple[Any, ...], Coalescer] = {}
        self._closer = self._close_at_shutdown()
        self._started = False

    async def start(self) -> None:
        if not self._started:
            self._started = True
            await self._closer.asend(None)

    async def _close_at_shutdown(self) -> AsyncGenerator[None, None]:
        try:
            yield
        finally:
            await self.close()

    async def close(self) -> None:
        with _LOCK:
            loop = asyncio.get_running_loop()
            if _BY_LOOP.get(loop) is self:
                del _BY_LOOP[loop]
        for coalescer in list(self.coalescers.values()):
            await coalescer.aclose()
        self.coalescers.clear()
        await self.http.aclose()


@functools.cache
def _ssl_context() -> ssl.SSLContext:
    """httpx's default TLS context (certifi's CAs, SSL_CERT_FILE honoured), made once: it costs ~20 ms, and a
    context is not tied to an event loop, so the clients of all loops share it."""
    return httpx.create_ssl_context()


_LOCK = threading.Lock()
_BY_LOOP: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _LoopClients] = weakref.WeakKeyDictionary()


async def coalescer_for(config: AdapterConfig) -> Coalescer:
    """The running loop's coalescer for `config`'s verifier, key and client settings (made on first use)."""
    loop = asyncio.get_running_loop()
    with _LOCK:
        clients = _BY_LOOP.get(loop)
        if clients is None:
            for closed in [other for other in _BY_LOOP if other.is_closed()]:
                del _BY_LOOP[closed]  # closed without shutdown_asyncgens: let them go now
            clients = _BY_LOOP[loop] = _LoopClients()
    await clients.start()
    coalescer = clients.coalescers.get(config.client_key)
    if coalescer is None:
        client = AsyncVerifierClient(config.url, api_key=config.api_key, config=config.client, http_client=clients.http)
        coalescer = Coalescer(client, window_s=config.window_s, idle_s=config.idle_s, max_batch=config.max_batch)
        clients.coalescers[config.client_key] = coalescer
    return coalescer


def active_loops() -> int:
    """How many event loops hold verifier clients now (for tests and diagnostics: it must not grow with every loop)."""
    with _LOCK:
        return sum(1 for loop in _BY_LOOP if not loop.is_closed())


class _BackgroundLoop:
    """An event loop on a daemon thread, where synchronous callers' requests are coalesced."""

    def __init__(self) -> None:
        self.pid = os.getpid()
        self._ready = threading.Event()
        self.loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self.thread = threading.Thread(target=asyncio.run, args=(self._main(),), name="verifier-coalescer", daemon=True)
        self.thread.start()
        self._ready.wait()

    async def _main(self) -> None:
        self.loop, self._stop = asyncio.get_running_loop(), asyncio.Event()
        self._ready.set()
        await self._stop.wait()  # then asyncio.run closes the loop's clients (see _LoopClients)

    def stop(self, timeout_s: float = 5.0) -> None:
        if self.loop is not None and self._stop is not None and not self.loop.is_closed():
            self.loop.call_soon_threadsafe(self._stop.set)
            self.thread.join(timeout_s)


_BACKGROUND: _BackgroundLoop | None = None


def _background() -> _BackgroundLoop:
    global _BACKGROUND
    with _LOCK:
        if _BACKGROUND is None or _BACKGROUND.pid != os.getpid():  # a forked child has no such thread
            _BACKGROUND = _BackgroundLoop()
            atexit.register(_BACKGROUND.stop)
        return _BACKGROUND


def run_sync(coroutine: Coroutine[Any, Any, T]) -> T:
    """Run `coroutine` on the background loop and wait for its result, from any thread but that loop's own."""
    background = _background()
    assert background.loop is not None
    try:
        running = asyncio.get_running_loop()
    except RuntimeError:
        running = None
    if running is background.loop:
        coroutine.close()
        raise VerifierConfigError("run_sync was called from the coalescing loop itself: await the coroutine instead")
    future = asyncio.run_coroutine_threadsafe(coroutine, background.loop)
    try:
        return future.result()
    except BaseException:
        future.cancel()
        raise
