"""The worker pool on its own: deadlines from outside, crashes contained, workers replaced."""

from __future__ import annotations

import asyncio
import os
import signal
import time

import pytest

from verifier_service.pool import PoolClosed, TaskTimeout, WorkerCrashed, WorkerPool


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


def _ended_before(outcomes: list[tuple[int, float, int]], moment: float) -> int:
    return sum(1 for _, ended, _ in outcomes if ended < moment)


@pytest.mark.timeout(60)
def test_a_request_waiting_with_no_worker_gets_one_after_the_current_task_not_the_whole_group() -> None:
    """One request's long groups hold both workers; another's task runs as soon as one of those tasks ends, and the
    tasks the group left behind still run, in order."""

    async def main() -> None:
        pool = WorkerPool(2, "tests.unit.pool_tasks:timed", give_way_after_s=0)
        await pool.start()
        try:
            big = [[(group * 8 + i, 0.2) for i in range(8)] for group in range(2)]
            groups = [asyncio.ensure_future(pool.run_group(tasks, timeout_s=5, owner="big")) for tasks in big]
            await asyncio.sleep(0.05)  # both groups are on the workers
            _, small_ended, _ = await pool.run((99, 0), timeout_s=5, owner="small")
            outcomes = [outcome for group in await asyncio.gather(*groups) for outcome in group]
            assert [index for index, _, _ in outcomes] == list(range(16))
            # One task per worker at most ran before it (16 of the big request's tasks wait behind them); without
            # fairness, a whole group of 8 did.
            assert _ended_before(outcomes, small_ended) <= 4
        finally:
            await pool.close()

    run(main)


@pytest.mark.timeout(60)
def test_a_young_group_keeps_its_worker() -> None:
    """A group that has not run for give_way_after_s finishes on its worker (the gold it parsed stays useful); the
    other request's task runs after it."""

    async def main() -> None:
        pool = WorkerPool(1, "tests.unit.pool_tasks:timed", give_way_after_s=30)
        await pool.start()
        try:
            group = asyncio.ensure_future(pool.run_group([(i, 0.1) for i in range(4)], timeout_s=5, owner="big"))
            await asyncio.sleep(0.05)
            _, small_ended, _ = await pool.run((99, 0), timeout_s=5, owner="small")
            outcomes = await group
            assert _ended_before(outcomes, small_ended) == 4
            assert len({pid for _, _, pid in outcomes}) == 1
        finally:
            await pool.close()

    run(main)


@pytest.mark.timeout(60)
def test_a_request_that_has_had_no_worker_goes_before_the_next_group_of_one_that_has() -> None:
    async def main() -> None:
        pool = WorkerPool(1, "tests.unit.pool_tasks:timed")
        await pool.start()
        try:
            first = [asyncio.ensure_future(pool.run((i, 0.1), timeout_s=5, owner="first")) for i in range(3)]
            await asyncio.sleep(0.05)
            later = asyncio.ensure_future(pool.run((99, 0), timeout_s=5, owner="later"))
            ended = {index: moment for index, moment, _ in await asyncio.gather(*first, later)}
            assert sorted(ended, key=ended.__getitem__) == [0, 99, 1, 2]
        finally:
            await pool.close()

    run(main)


@pytest.mark.timeout(60)
def test_a_cancelled_wait_leaves_the_worker_to_the_next() -> None:
    async def main() -> None:
        pool = WorkerPool(1, "tests.unit.pool_tasks:timed")
        await pool.start()
        try:
            busy = asyncio.ensure_future(pool.run((0, 0.2), timeout_s=5, owner="a"))
            await asyncio.sleep(0.05)
            gone = asyncio.ensure_future(pool.run((1, 0), timeout_s=5, owner="b"))
            waiting = asyncio.ensure_future(pool.run((2, 0), timeout_s=5, owner="c"))
            await asyncio.sleep(0.05)
            gone.cancel()
            assert [index for index, _, _ in await asyncio.gather(busy, waiting)] == [0, 2]
            assert pool.restarts == 0
        finally:
            await pool.close()

    run(main)


@pytest.mark.timeout(60)
def test_closing_the_pool_ends_the_waits() -> None:
    async def main() -> None:
        pool = WorkerPool(1, "tests.unit.pool_tasks:timed")
        await pool.start()
        busy = asyncio.ensure_future(pool.run((0, 5), timeout_s=10, owner="a"))
        waiting = asyncio.ensure_future(pool.run((1, 0), timeout_s=5, owner="b"))
        await asyncio.sleep(0.05)
        await pool.close()
        busy.cancel()
        with pytest.raises(PoolClosed):
            await waiting
        await asyncio.gather(busy, return_exceptions=True)

    run(main)


@pytest.mark.timeout(60)
def test_a_worker_handed_on_past_a_cancelled_wait_goes_to_one_that_still_waits() -> None:
    """A group's cancelled wait stays queued until its task runs again (Task.cancel cancels the wait at once, the
    task resumes a loop turn later). A worker handed on in between goes to the next group that still waits: it is
    not taken for the cancelled one (which cost the group that handed it on its results and leaked the worker)."""

    async def main() -> None:
        pool = WorkerPool(1, "tests.unit.pool_tasks:timed")
        await pool.start()
        try:
            handed: asyncio.Future[list[object]] = asyncio.ensure_future(asyncio.sleep(3600))  # set below

            async def first_then_cancel() -> list[object]:
                outcomes = await pool.run_group([(0, 0.2)], timeout_s=5, owner="x")
                # The group's worker went to `handed`, whose task resumes later in this loop turn; both `handed` and
                # `gone` are cancelled now, so `handed` passes the worker on while `gone`'s wait is still queued.
                gone.cancel()
                handed.cancel()
                return outcomes

            first = asyncio.ensure_future(first_then_cancel())
            await asyncio.sleep(0.05)
            handed = asyncio.ensure_future(pool.run_group([(1, 0)], timeout_s=5, owner="a"))
            gone = asyncio.ensure_future(pool.run_group([(2, 0)], timeout_s=5, owner="y"))
            waiting = asyncio.ensure_future(pool.run_group([(3, 0)], timeout_s=5, owner="z"))
            assert [index for index, _, _ in await first] == [0]
            for cancelled in (handed, gone):
                with pytest.raises(asyncio.CancelledError):
                    await cancelled
            [(index, _, _)] = await asyncio.wait_for(waiting, 10)
            assert index == 3
            assert pool.restarts == 0
            assert await pool.run((4, 0), timeout_s=5, owner="later") is not None  # the worker is free again
        finally:
            await pool.close()

    run(main)


@pytest.mark.timeout(60)
def test_a_cancelled_wait_asks_no_worker_to_give_way() -> None:
    """Only a request that still waits makes a long group give way: one whose wait was cancelled (its task has not
    run since to forget it) counts for nothing."""

    async def main() -> None:
        pool = WorkerPool(2, "tests.unit.pool_tasks:timed", give_way_after_s=0)
        await pool.start()
        try:
            big = [[(group * 4 + i, 0.2) for i in range(4)] for group in range(2)]
            groups = [asyncio.ensure_future(pool.run_group(tasks, timeout_s=5, owner="big")) for tasks in big]
            await asyncio.sleep(0.05)  # both groups are on the workers, three tasks after their current one
            gone = asyncio.ensure_future(pool.run((98, 0), timeout_s=5, owner="gone"))
            await asyncio.sleep(0)  # it waits with no worker: one group is asked to give way
            assert sum(worker.giving_way for worker in pool._all) == 1
            small = asyncio.ensure_future(pool.run((99, 0), timeout_s=5, owner="small"))  # runs first, then:
            gone.cancel()
            await asyncio.sleep(0)
            # `small` waits with no worker, and so did `gone` when `small` asked; the group already asked serves it.
            assert sum(worker.giving_way for worker in pool._all) == 1
            await small
            with pytest.raises(asyncio.CancelledError):
                await gone
            outcomes = [outcome for group in await asyncio.gather(*groups) for outcome in group]
            assert sorted(index for index, _, _ in outcomes) == list(range(8))
        finally:
            await pool.close()

    run(main)


@pytest.mark.timeout(60)
def test_closing_the_pool_with_a_cancelled_wait_retires_every_worker() -> None:
    async def main() -> None:
        pool = WorkerPool(2, "tests.unit.pool_tasks:timed")
        await pool.start()
        busy = [asyncio.ensure_future(pool.run((i, 5), timeout_s=10, owner="a")) for i in range(2)]
        gone = asyncio.ensure_future(pool.run((2, 0), timeout_s=5, owner="b"))
        waiting = asyncio.ensure_future(pool.run((3, 0), timeout_s=5, owner="c"))
        await asyncio.sleep(0.05)
        gone.cancel()
        await pool.close()  # before `gone`'s task runs again: its wait is still queued, and done
        assert pool.pids() == [] and not pool.ready
        with pytest.raises(PoolClosed):
            await waiting
        with pytest.raises(asyncio.CancelledError):
            await gone
        for task in busy:
            task.cancel()
        await asyncio.gather(*busy, return_exceptions=True)

    run(main)
