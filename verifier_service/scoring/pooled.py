"""The pooled kind of component: one whose judgement cannot run on the event loop (math's sympy work in the worker
processes, code's programs in the sandbox). It is listed in `scoring.POOLED`, name -> its class, which the engine
builds once with the service's `Resources` and then drives the same way for every such component:

- `reads(item, spec)`: how many characters `prepare` reads for the item, which bounds the time it holds the loop
  (the engine prepares a slice of items of at most `engine.INLINE_PREPARE_CHARS` at a time);
- `prepare(item, spec)`, on the event loop: either the item's result (settled without a worker: no answer, plain
  numbers, a cached verdict) or a job, a hashable value; equal jobs of one request are run once;
- `run(jobs, deadline, owner)`: a result for every job, by the loop time `deadline` (a job not done by then is
  `deadline_exceeded`, null), sharing the pool fairly with other requests (`owner` is the request).

A component of another kind is a text component (`scoring.TEXT`) or a gated one (`scoring.GATED`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Collection, Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from verifier_service.schema import ComponentResult, ScoreItem, Verdict

if TYPE_CHECKING:
    from sandbox import Executor
    from verifier_service.metrics import Metrics
    from verifier_service.pool import WorkerPool
    from verifier_service.settings import VerifierSettings


@dataclass(frozen=True)
class Resources:
    """What a pooled component is built with: the settings, the worker pool, the sandbox (None: none runs here) and
    the metrics."""

    settings: VerifierSettings
    pool: WorkerPool
    metrics: Metrics
    executor: Executor | None


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
