"""Drive a real executor from synchronous tests: it runs on its own event loop, in a thread of the test process."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine, Iterable
from typing import Any, TypeVar

from sandbox import CallTest, Executor, Limits, RunResult, Submission, Test
from sandbox.runner import decode

T = TypeVar("T")


class LiveExecutor:
    def __init__(self, executor: Executor) -> None:
        self.executor = executor
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name=f"{executor.name}-executor", daemon=True)
        self._thread.start()
        self.call(executor.start())

    @property
    def name(self) -> str:
        return self.executor.name

    def call(self, coro: Coroutine[Any, Any, T], timeout: float = 600) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def run(self, program: str, *tests: Test, **limits: Any) -> RunResult:
        return self.call(self.executor.run(Submission(program, tests, Limits(**limits))))

    def run_all(self, submissions: Iterable[Submission]) -> list[RunResult]:
        async def run_all() -> list[RunResult]:
            return list(await asyncio.gather(*(self.executor.run(s) for s in submissions)))

        return self.call(run_all())

    def probe(self, program: str, *args: Any, **limits: Any) -> Any:
        """What `probe(*args)` returned in the sandbox (its facts, where it returned no plain value)."""
        test = CallTest("probe", args)
        collect = self.executor._collect(program, (test,), Limits(**limits), lambda _, facts: facts)  # type: ignore[attr-defined]
        facts = self.call(collect)
        return decode(facts[0]["value"]) if "value" in facts[0] else facts[0]

    def status(self) -> dict[str, Any]:
        async def status() -> dict[str, Any]:
            return self.executor.status()

        return self.call(status())

    def close(self) -> None:
        try:
            self.call(self.executor.close(), timeout=120)
        finally:
            self.loop.call_soon_threadsafe(self.loop.stop)
            self._thread.join(timeout=30)
            self.loop.close()
