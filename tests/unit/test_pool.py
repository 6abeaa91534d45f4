"""The worker pool on its own: deadlines from outside, crashes contained, workers replaced."""

from __future__ import annotations

import asyncio
import os
import signal
import time

import pytest

from verifier_service.pool import TaskTimeout, WorkerCrashed, WorkerPool


async def _ready(pool: WorkerPool, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while not pool.ready:
        assert time.monotonic() < deadline, "pool did not refill"
        await asyncio.sleep(0.05)


def run(coro_fn: object) -> None:
    asyncio.run(coro_fn())  # type: ignore[operator]


@pytest.mark.timeout(60)
def test_timeout_kills_only_that_task() -> None:
    async def main() -> None:
        sleeper = WorkerPool(2, "tests.unit.pool_tasks:sleep")
        await sleeper.start()
        try:
            before = set(sleeper.pids())
            started = time.monotonic()
            outcomes = await asyncio.gather(
                sleeper.run(60, timeout_s=0.5), sleeper.run(0.01, timeout_s=5), return_exceptions=True
            )
            assert time.monotonic() - started < 30  # bounded by the deadline, not by the 60 s sleep
            assert isinstance(outcomes[0], TaskTimeout)
            assert outcomes[1] in before  # the other task ran normally on a worker of the pool
            await _ready(sleeper)
            assert len(set(sleeper.pids()) - before) == 1 and sleeper.restarts == 1
            assert await sleeper.run(0, timeout_s=5) in sleeper.pids()
        finally:
            await sleeper.close()

    run(main)


@pytest.mark.timeout(60)
def test_exception_in_task_keeps_the_worker() -> None:
    async def main() -> None:
        pool = WorkerPool(1, "tests.unit.pool_tasks:fail")
        await pool.start()
        try:
            pids = pool.pids()
            with pytest.raises(RuntimeError, match="ValueError: boom"):
                await pool.run("boom", timeout_s=5)
            assert pool.pids() == pids and pool.restarts == 0
        finally:
            await pool.close()

    run(main)


@pytest.mark.timeout(60)
def test_worker_that_exits_is_replaced() -> None:
    async def main() -> None:
        pool = WorkerPool(1, "tests.unit.pool_tasks:die")
        await pool.start()
        try:
            with pytest.raises(WorkerCrashed):
                await pool.run(3, timeout_s=5)
            await _ready(pool)
            assert pool.restarts == 1
        finally:
            await pool.close()
        assert not pool.ready and pool.pids() == []

    run(main)


@pytest.mark.timeout(60)
def test_cancelled_task_does_not_leave_a_stale_result() -> None:
    async def main() -> None:
        pool = WorkerPool(1, "tests.unit.pool_tasks:echo")
        await pool.start()
        try:
            slow = asyncio.ensure_future(pool.run("first", timeout_s=5))
            await asyncio.sleep(0)  # let it take the worker
            slow.cancel()
            await asyncio.gather(slow, return_exceptions=True)
            await _ready(pool)
            assert await pool.run("second", timeout_s=5) == "second"
        finally:
            await pool.close()

    run(main)


@pytest.mark.timeout(60)
def test_group_runs_on_one_worker_and_a_bad_task_costs_only_itself() -> None:
    async def main() -> None:
        pool = WorkerPool(2, "tests.unit.pool_tasks:sleep")
        await pool.start()
        try:
            together = await pool.run_group([0, 0, 0], timeout_s=5)
            assert len(set(together)) == 1  # the same worker ran all three
            outcomes = await pool.run_group([0, 60, 0, 0], timeout_s=0.5)
            assert isinstance(outcomes[1], TaskTimeout)
            assert all(isinstance(pid, int) for pid in outcomes[:1] + outcomes[2:])
            assert outcomes[0] != outcomes[2]  # the tasks after the timeout moved to another worker
            await _ready(pool)
        finally:
            await pool.close()

    run(main)


@pytest.mark.timeout(60)
def test_a_worker_killed_while_idle_is_replaced_without_a_task() -> None:
    async def main() -> None:
        pool = WorkerPool(2, "tests.unit.pool_tasks:echo")
        await pool.start()
        try:
            [victim, other] = pool.pids()
            os.kill(victim, signal.SIGKILL)
            deadline = time.monotonic() + 30
            while not (pool.ready and victim not in pool.pids()):
                assert time.monotonic() < deadline, "the dead worker was not replaced"
                await asyncio.sleep(0.05)
            assert other in pool.pids() and pool.restarts == 1
            assert await pool.run("still works", timeout_s=5) == "still works"
        finally:
            await pool.close()

    run(main)
