"""The pooled kind of component: one whose judgement cannot run on the event loop (math's sympy work in the worker
processes, code's programs in the sandbox, rm's forward passes in the model runtime's threads). It is listed in
`scoring.POOLED`, name -> its class, which the engine builds once with the service's `Resources` and then drives the
same way for every such component:

- `reads(item, spec)`: how many characters `prepare` reads for the item, which bounds the time it holds the loop
  (the engine prepares a slice of items of at most `engine.INLINE_PREPARE_CHARS` at a time);
- `prepare(item, spec)`, on the event loop: either the item's result (settled without a worker: no answer, plain
  numbers, a cached verdict) or a job, a hashable value; equal jobs of one request are run once;
- `run(jobs, deadline, owner)`: a result for every job, by the loop time `deadline` (a job not done by then is
  `deadline_exceeded`, null), sharing the pool fairly with other requests (`owner` is the request, a `Request`: a
  component may keep what must last the whole request in a weak mapping keyed by it, as rm and prm pin each model's
  version for both rounds).

An item whose spec reads correctness (`spec.reads_correctness()`: rm with `gate: "right"`, judge with `when:
"rule_miss"`) is prepared in a second round, once every other component (the one it reads included) is scored:
`spec.settled_by_gate(correctness)` settles an answer the model or judge is not to see, and only the others reach
`prepare` and `run`. Which components those are is the spec's say, per item: the engine names none.

A component whose jobs each run on their own in a worker process subclasses `WorkerComponent` (below), which gives
`run`. A component of another kind is a text component (`scoring.TEXT`) or a gated one (`scoring.GATED`).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Collection, Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from verifier_service.schema import ComponentResult, ScoreItem, Verdict

log = logging.getLogger(__name__)
ITEM_FAILED = "the verifier failed on this item"  # the detail of internal_error

if TYPE_CHECKING:
    from verifier_service.metrics import Metrics
    from verifier_service.pool import WorkerPool
    from verifier_service.resources import Part
    from verifier_service.settings import VerifierSettings


@dataclass(frozen=True)
class Resources:
    """What a pooled component is built with: the settings, the metrics, and the runtime's pooled resources
    (verifier_service/resources.py's table: the math workers, the sandbox, the models), by name."""

    settings: VerifierSettings
    metrics: Metrics
    parts: Mapping[str, Part]

    def part(self, name: str) -> Any:
        """The resource of that name (`resources.PARTS`), None when this runtime has none of it."""
        return self.parts.get(name)

    @property
    def pool(self) -> WorkerPool:
        """The math worker pool: the engine sends text chunks to it too, so every runtime has one."""
        pool: WorkerPool = self.parts["math_workers"].pool  # type: ignore[attr-defined]
        return pool


class Request:
    """One request, the `owner` the engine passes to `run`: compared by identity, and weakly referable, so that what a
    component keeps for the request goes with it."""

    __slots__ = ("__weakref__",)


class PooledComponent(Protocol):
    def reads(self, item: ScoreItem, spec: Any) -> int: ...

    def prepare(self, item: ScoreItem, spec: Any) -> ComponentResult | Hashable: ...

    async def run(
        self, jobs: Mapping[Any, Sequence[int]], deadline: float, owner: object
    ) -> dict[Any, ComponentResult]: ...


def deadline_exceeded(settings: VerifierSettings) -> ComponentResult:
    detail = f"the batch did not finish within {settings.batch_timeout_s}s"
    return ComponentResult(score=None, verdict=Verdict.DEADLINE_EXCEEDED.value, detail=detail)


async def finished_by(futures: Collection[asyncio.Future[Any]], deadline: float) -> set[asyncio.Future[Any]]:
    """Wait until the loop time `deadline`; cancel what is still running (and let it clean up: a cancelled
    task retires its worker or sandbox) and return what finished. Cancelled itself (the client went away), it
    cancels them all first: asyncio.wait would leave them running."""
    timeout = max(0.0, deadline - asyncio.get_running_loop().time())
    try:
        done, pending = await asyncio.wait(futures, timeout=timeout)
    except asyncio.CancelledError:
        await cancel(futures)
        raise
    await cancel(pending)
    return done


async def cancel(futures: Collection[asyncio.Future[Any]]) -> None:
    for future in futures:
        future.cancel()
    await asyncio.gather(*futures, return_exceptions=True)


class WorkerComponent:
    """The base of a pooled component whose jobs run in the worker pool, each on its own: a job is a hashable,
    picklable task whose `run()` (in a worker process) returns the job's ComponentResult. A subclass gives `reads`,
    `prepare`, the time a job may take in the worker (`timeout_s`) and what an overrun scores (`timed_out`); a worker
    that dies under a job is `worker_crashed` (null), a task that raises `internal_error` (null)."""

    name = "component"

    def __init__(self, resources: Resources) -> None:
        self.settings, self.pool, self.metrics = resources.settings, resources.pool, resources.metrics

    def timeout_s(self, job: Any) -> float:
        raise NotImplementedError

    def timed_out(self, job: Any, timeout_s: float) -> ComponentResult:
        detail = f"the {self.name} check took longer than {timeout_s:g}s"
        return ComponentResult(score=None, verdict=Verdict.TIMEOUT.value, detail=detail)

    async def run(
        self, jobs: Mapping[Any, Sequence[int]], deadline: float, owner: object
    ) -> dict[Any, ComponentResult]:
        futures = {asyncio.ensure_future(self._run_one(job, owner)): job for job in jobs}
        done = await finished_by(futures, deadline)
        results: dict[Any, ComponentResult] = {}
        for future, job in futures.items():
            if future not in done:
                results[job] = deadline_exceeded(self.settings)
            elif (failure := future.exception()) is not None:
                log.error("%s job failed", self.name, exc_info=failure)
                results[job] = ComponentResult(score=None, verdict=Verdict.INTERNAL_ERROR.value, detail=ITEM_FAILED)
            else:
                results[job] = future.result()
        return results

    async def _run_one(self, job: Any, owner: object) -> ComponentResult:
        from verifier_service.pool import TaskTimeout, WorkerCrashed  # the pool imports the scorers

        timeout = self.timeout_s(job)
        [outcome] = await self.pool.run_group([job], timeout_s=timeout, owner=owner)
        if isinstance(outcome, ComponentResult):
            return outcome
        if isinstance(outcome, TaskTimeout):
            self.metrics.timeouts.inc()
            return self.timed_out(job, timeout)
        if isinstance(outcome, WorkerCrashed):
            self.metrics.worker_crashes.inc()
            detail = "the worker scoring this item died"
            return ComponentResult(score=None, verdict=Verdict.WORKER_CRASHED.value, detail=detail)
        log.error("%s task failed: %s", self.name, outcome)
        return ComponentResult(score=None, verdict=Verdict.INTERNAL_ERROR.value, detail=ITEM_FAILED)
