"""The verifier inside a script, with no server: the same engine, math workers and sandbox as `/v1/score`.

>>> from verifier_service import score
>>> [result] = score([{"completion": "<think>6*7</think>The answer is 42.", "math": {"gold": "42"}, "format": {}}])
>>> result.reward, result.components["math"].verdict
(2.0, 'correct')

`score` starts everything and stops it again (a second or two); to score many times, keep one `Verifier` open:

    if __name__ == "__main__":                  # as with multiprocessing: the math workers import your script again
        with Verifier() as verifier:            # settings from VERIFIER_* variables, or Verifier(math_workers=4, ...)
            results = verifier.score(items)     # ScoreItems or dicts of the wire format; one ItemResult each, in order

`AsyncVerifier` is the same for code that runs an event loop. Items are checked as the server checks them: one it
would refuse raises `ValueError` naming the item and the field; nothing is scored then.
"""

from __future__ import annotations

import asyncio
import sys
import threading
from collections.abc import Coroutine, Iterable, Mapping
from types import TracebackType
from typing import Any, TypeVar

from pydantic import TypeAdapter, ValidationError

from verifier_service.problems import summarize
from verifier_service.runtime import Runtime, item_problem
from verifier_service.schema import ItemResult, ScoreItem
from verifier_service.settings import VerifierSettings

T = TypeVar("T")
ItemLike = ScoreItem | Mapping[str, Any]
_ITEM = TypeAdapter(ScoreItem)


def refuse_in_a_worker() -> None:
    """Workers import the script's main module again (multiprocessing's forkserver does): a verifier started at
    module level would start there too, and without end. Say what to do instead."""
    if getattr(sys.modules.get("__main__"), "__name__", None) == "__mp_main__":
        raise RuntimeError(
            "a Verifier was started while a worker process imported your script: start it under "
            "`if __name__ == '__main__':` (the README's in-process example shows how)"
        )


def check_items(items: Iterable[ItemLike], settings: VerifierSettings) -> list[ScoreItem]:
    """The items as ScoreItems; ValueError for the first one the server would refuse (the value is never echoed)."""
    checked = []
    for index, item in enumerate(items):
        try:
            parsed = item if isinstance(item, ScoreItem) else _ITEM.validate_python(item)
        except ValidationError as exc:
            raise ValueError(summarize(exc.errors(include_input=False), ScoreItem, f"items.{index}")) from None
        problem = item_problem(parsed, settings)
        if problem is not None:
            raise ValueError(f"items.{index}.{problem[0]}: {problem[1]}")
        checked.append(parsed)
    return checked


class AsyncVerifier:
    """The verifier's runtime on the running event loop: `async with AsyncVerifier() as v: await v.score(items)`."""

    def __init__(self, settings: VerifierSettings | None = None, **overrides: Any) -> None:
        if settings is not None and overrides:
            raise TypeError("pass either settings or keyword overrides of them, not both")
        self.settings = settings or VerifierSettings(**overrides)
        self._runtime: Runtime | None = None

    async def start(self) -> None:
        if self._runtime is None:
            refuse_in_a_worker()
            runtime = Runtime(self.settings)
            await runtime.start()
            self._runtime = runtime

    async def close(self) -> None:
        if self._runtime is not None:
            runtime, self._runtime = self._runtime, None
            await runtime.close()

    async def score(self, items: Iterable[ItemLike]) -> list[ItemResult]:
        """One result per item, in order; batches over VERIFIER_MAX_BATCH_ITEMS are scored in parts."""
        if self._runtime is None:
            raise RuntimeError("the verifier is not started: use `async with AsyncVerifier()` or `await start()`")
        checked = check_items(items, self.settings)
        size = self.settings.max_batch_items
        results: list[ItemResult] = []
        for start in range(0, len(checked), size):
            results += await self._runtime.engine.score(checked[start : start + size])
        return results

    def status(self) -> dict[str, Any]:
        """What /readyz would say."""
        return self._runtime.readiness()[1] if self._runtime is not None else {"status": "stopped"}

    async def __aenter__(self) -> AsyncVerifier:
        await self.start()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()


class Verifier:
    """The blocking twin of `AsyncVerifier`: its event loop runs in a thread of its own."""

    def __init__(self, settings: VerifierSettings | None = None, **overrides: Any) -> None:
        self._inner = AsyncVerifier(settings, **overrides)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None

    @property
    def settings(self) -> VerifierSettings:
        return self._inner.settings

    def start(self) -> None:
        if self._loop is None:
            self._loop = asyncio.new_event_loop()
            self._thread = threading.Thread(target=self._loop.run_forever, name="verifier-loop", daemon=True)
            self._thread.start()
        try:
            self._call(self._inner.start())
        except BaseException:  # the runtime stopped what it had started; stop the loop too
            self.close()
            raise

    def score(self, items: Iterable[ItemLike]) -> list[ItemResult]:
        return self._call(self._inner.score(list(items)))

    def status(self) -> dict[str, Any]:
        async def status() -> dict[str, Any]:
            return self._inner.status()

        return self._call(status())

    def close(self) -> None:
        if self._loop is None:
            return
        try:
            self._call(self._inner.close())
        finally:
            self._loop.call_soon_threadsafe(self._loop.stop)
            if self._thread is not None:
                self._thread.join(timeout=30)
            self._loop.close()
            self._loop = self._thread = None

    def __enter__(self) -> Verifier:
        self.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def _call(self, coro: Coroutine[Any, Any, T]) -> T:
        if self._loop is None:
            coro.close()
            raise RuntimeError("the verifier is not started: use `with Verifier()` or `start()`")
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result()


def score(items: Iterable[ItemLike], settings: VerifierSettings | None = None, **overrides: Any) -> list[ItemResult]:
    """Score items in this process: start the verifier, score, stop it. Settings as for `Verifier`."""
    with Verifier(settings, **overrides) as verifier:
        return verifier.score(items)
