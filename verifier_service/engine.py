"""Batch dispatch: extract, dedupe, cache, fan out to the worker pool, keep order, assemble rewards.

Every item gets exactly one result, in request order. The three outcomes stay apart: a wrong answer is 0
with a verdict, a verifier failure is `null` with a verdict, and invalid requests never get here.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections import OrderedDict
from collections.abc import Collection, Iterable
from dataclasses import dataclass, field
from typing import Any, cast

from sandbox import Executor, RunResult, RunVerdict, Submission
from verifier_service.metrics import Metrics
from verifier_service.pool import TaskTimeout, WorkerCrashed, WorkerPool
from verifier_service.schema import CodeSpec, ComponentResult, ItemResult, MathSpec, ScoreItem, Verdict
from verifier_service.scoring import GATED
from verifier_service.scoring.code import code_component, extract_program, no_code, submission
from verifier_service.scoring.math import MathResult, MathTask, prepare_math
from verifier_service.scoring.texts import TextTask, failed, results_of, safely, score_texts, text_components
from verifier_service.settings import VerifierSettings

log = logging.getLogger(__name__)

GROUP_SIZE = 8  # math tasks sent to a worker at once
# Completions up to this size in all are extracted on the event loop: typically 0.1 ms; text built to be slow
# takes up to about 30 ms (the math answer window bounds it), which a thread would not spare the loop either:
# the regex engine holds the GIL.
INLINE_PREPARE_CHARS = 32_000
# Batches with at least this many items with text components score those in the worker pool (text.TextTask).
WORKER_TEXT_ITEMS = 64
# What the cache may keep: verdicts that a healthy worker gives again for the same (gold, answer, options), because
# they come from a comparison that ran to its end. Never `timeout` (a worker that was stopped, starved or slowed
# by a busy host says it as well as one given an absurd expression), nor any verdict that scores null
# (`worker_crashed`, `deadline_exceeded`, `internal_error`, and `gold_unparseable`, which a worker in trouble can
# also give): those are computed again next time.
CACHEABLE = frozenset({Verdict.CORRECT, Verdict.WRONG, Verdict.NO_ANSWER, Verdict.HEDGED, Verdict.ANSWER_TOO_LONG})


class ResultCache:
    """A bounded LRU of finished math results, keyed by task (gold, answer, options); only `CACHEABLE` verdicts.

    Read from the extraction thread and written from the event loop, hence the lock.
    """

    def __init__(self, size: int) -> None:
        self.size = size
        self._data: OrderedDict[MathTask, MathResult] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, task: MathTask) -> MathResult | None:
        with self._lock:
            result = self._data.get(task)
            if result is not None:
                self._data.move_to_end(task)
            return result

    def put(self, task: MathTask, result: MathResult) -> None:
        if self.size <= 0 or result.verdict not in CACHEABLE:  # a retry may judge it otherwise
            return
        with self._lock:
            self._data[task] = result
            self._data.move_to_end(task)
            while len(self._data) > self.size:
                self._data.popitem(last=False)


@dataclass
class _Batch:
    """Per-request working state: components done so far, and which items wait on which task."""

    components: list[dict[str, ComponentResult]]
    waiting: dict[MathTask, list[int]] = field(default_factory=dict)
    programs: dict[str, _Program] = field(default_factory=dict)  # by (program, code spec), deduplicated


@dataclass
class _Program:
    submission: Submission
    total: int
    indexes: list[int] = field(default_factory=list)


def _component(result: MathResult) -> ComponentResult:
    return ComponentResult(
        score=result.score, verdict=result.verdict.value, detail=result.detail, extracted=result.extracted
    )


def _reward(item: ScoreItem, components: dict[str, ComponentResult]) -> float | None:
    weights = cast(dict[str, float], item.weights or {})  # keys are component names
    total = 0.0
    for name, component in components.items():
        if component.score is None:
            return None
        total += weights.get(name, 1.0) * component.score
    return total


def _score_gated(item: ScoreItem, components: dict[str, ComponentResult]) -> None:
    """The components that read correctness from another, once that one is scored."""
    for name, scorer in GATED.items():
        spec = getattr(item, name)
        if spec is not None:
            components[name] = safely(name, scorer, item, spec, components[item.correctness_source(spec)])


class Engine:
    def __init__(
        self, settings: VerifierSettings, pool: WorkerPool, metrics: Metrics, executor: Executor | None = None
    ) -> None:
        self.settings = settings
        self.pool = pool
        self.executor = executor
        self.metrics = metrics
        self.cache = ResultCache(settings.math_cache_size)

    async def score(self, items: list[ScoreItem]) -> list[ItemResult]:
        deadline = asyncio.get_running_loop().time() + self.settings.batch_timeout_s
        # Many items' text components go to the worker pool, in chunks, while this process extracts the math
        # answers; a few are scored in place, where sending them would cost more than the work.
        in_workers = sum(1 for item in items if text_components(item)) >= WORKER_TEXT_ITEMS
        texts = asyncio.ensure_future(self._texts_in_workers(items, deadline)) if in_workers else None
        # Extraction is regex work on up to a few MB: off the event loop, so health checks stay answered; a small
        # batch is prepared in place, where the thread hop would cost more than the work.
        if sum(len(item.completion) for item in items) <= INLINE_PREPARE_CHARS:
            batch = self._prepare(items, with_texts=texts is None)
        else:
            batch = await asyncio.to_thread(self._prepare, items, texts is None)
        await asyncio.gather(
            self._run_math(batch, deadline), self._run_code(batch, deadline), *([texts] if texts else [])
        )
        if texts is not None:
            for found, scored in zip(batch.components, texts.result(), strict=True):
                found.update(scored)
        results = []
        for item, found in zip(items, batch.components, strict=True):
            _score_gated(item, found)
            components = {name: found[name] for name in item.requested()}  # in the fixed order of COMPONENTS
            reward = _reward(item, components)
            results.append(
                ItemResult(
                    id=item.id,
                    reward=reward,
                    status="ok" if reward is not None else "error",
                    components=components,
                )
            )
        self.metrics.observe_results(results)
        return results

    def _prepare(self, items: list[ScoreItem], with_texts: bool) -> _Batch:
        batch = _Batch(components=score_texts(items) if with_texts else [{} for _ in items])
        for index, item in enumerate(items):
            if item.math is not None:
                self._prepare_math(batch, index, item.completion, item.math)
            if item.code is not None:
                self._prepare_code(batch, index, item.completion, item.code)
        return batch

    async def _texts_in_workers(self, items: list[ScoreItem], deadline: float) -> list[dict[str, ComponentResult]]:
        """The items' text components, scored by the worker pool in chunks (about two per worker). A chunk whose
        worker failed is scored here instead; one not finished at the batch deadline is null."""
        size = max(WORKER_TEXT_ITEMS // 2, -(-len(items) // (2 * self.pool.size)))
        chunks = [items[start : start + size] for start in range(0, len(items), size)]
        timeout = max(0.001, deadline - asyncio.get_running_loop().time())
        runs = [asyncio.ensure_future(self.pool.run(TextTask.of(chunk), timeout_s=timeout)) for chunk in chunks]
        done = await _finished_by(runs, deadline)
        found: list[dict[str, ComponentResult]] = []
        for chunk, run in zip(chunks, runs, strict=True):
            if run not in done or isinstance(run.exception(), TaskTimeout):
                late = self._deadline_exceeded()
                failure = failed(late.verdict, late.detail or "")
                found.extend({name: failure for name in text_components(item)} for item in chunk)
            elif run.exception() is not None:
                log.warning("a worker failed on text components (%s); scoring them here", run.exception())
                found.extend(await asyncio.to_thread(score_texts, chunk))
            else:
                found.extend(results_of(run.result()))
        return found

    def _prepare_math(self, batch: _Batch, index: int, completion: str, spec: MathSpec) -> None:
        prepared = prepare_math(
            completion,
            spec.gold,
            spec.options,
            window=self.settings.answer_window_chars,
            max_answer=self.settings.max_answer_chars,
        )
        if not isinstance(prepared, MathTask):
            batch.components[index]["math"] = _component(prepared)
        elif (cached := self.cache.get(prepared)) is not None:
            self.metrics.cache_hits.inc()
            batch.components[index]["math"] = _component(cached)
        else:
            batch.waiting.setdefault(prepared, []).append(index)

    def _prepare_code(self, batch: _Batch, index: int, completion: str, spec: CodeSpec) -> None:
        total = len(spec.tests)
        program = extract_program(completion, spec.think_tag)
        if program is None:
            batch.components[index]["code"] = no_code(total, "no program after the reasoning")
            return
        key = f"{program}\0{spec.model_dump_json()}"
        if key not in batch.programs:
            batch.programs[key] = _Program(submission(program, spec), total)
        batch.programs[key].indexes.append(index)

    async def _run_code(self, batch: _Batch, deadline: float) -> None:
        if not batch.programs:
            return
        programs = list(batch.programs.values())
        runs = [asyncio.ensure_future(self._run_program(p.submission)) for p in programs]
        done = await _finished_by(runs, deadline)
        for run, program in zip(runs, programs, strict=True):
            if run in done:
                component = code_component(run.result(), program.total)
            else:
                late = self._deadline_exceeded()
                component = ComponentResult(score=None, verdict=late.verdict.value, detail=late.detail)
            for index in program.indexes:
                batch.components[index]["code"] = component

    async def _run_program(self, job: Submission) -> RunResult:
        if self.executor is None:
            return RunResult(RunVerdict.SANDBOX_UNAVAILABLE, detail="this server runs no sandbox")
        return await self.executor.run(job)

    async def _run_math(self, batch: _Batch, deadline: float) -> None:
        if not batch.waiting:
            return
        self.metrics.math_tasks.inc(len(batch.waiting))
        self.metrics.deduplicated.inc(sum(len(v) for v in batch.waiting.values()) - len(batch.waiting))
        groups = {asyncio.ensure_future(self._run_group(group)): group for group in _groups(batch.waiting)}
        done = await _finished_by(groups, deadline)
        for future, group in groups.items():
            if future not in done:
                results = [self._deadline_exceeded()] * len(group)
            elif future.exception() is not None:
                log.error("math group failed", exc_info=future.exception())
                results = [self._result(future.exception(), 0)] * len(group)
            else:
                results = future.result()
            for task, result in zip(group, results, strict=True):
                self._fan_out(batch, task, result, batch.waiting[task])

    def _deadline_exceeded(self) -> MathResult:
        detail = f"the batch did not finish within {self.settings.batch_timeout_s}s"
        return MathResult(None, Verdict.DEADLINE_EXCEEDED, detail=detail)

    def _fan_out(self, batch: _Batch, task: MathTask, result: MathResult, indexes: Iterable[int]) -> None:
        self.cache.put(task, result)
        component = _component(result)
        for index in indexes:
            batch.components[index]["math"] = component

    async def _run_group(self, group: list[MathTask]) -> list[MathResult]:
        timeout = self.settings.math_timeout_s
        outcomes = await self.pool.run_group(group, timeout_s=timeout)
        return [self._result(outcome, timeout) for outcome in outcomes]

    def _result(self, outcome: object, timeout: float) -> MathResult:
        if isinstance(outcome, MathResult):
            return outcome
        if isinstance(outcome, TaskTimeout):
            self.metrics.timeouts.inc()
            return MathResult(0.0, Verdict.TIMEOUT, detail=f"comparing the answer took longer than {timeout}s")
        if isinstance(outcome, WorkerCrashed):
            self.metrics.worker_crashes.inc()
            return MathResult(None, Verdict.WORKER_CRASHED, detail="the worker scoring this item died")
        log.error("math task failed: %s", outcome)
        return MathResult(None, Verdict.INTERNAL_ERROR, detail="the verifier failed on this item")


async def _finished_by(futures: Collection[asyncio.Future[Any]], deadline: float) -> set[asyncio.Future[Any]]:
    """Wait until the loop time `deadline`; cancel what is still running (and let it clean up: a cancelled
    task retires its worker or sandbox) and return what finished. Cancelled itself (the client went away), it
    cancels them all first: asyncio.wait would leave them running."""
    timeout = max(0.0, deadline - asyncio.get_running_loop().time())
    try:
        done, pending = await asyncio.wait(futures, timeout=timeout)
    except asyncio.CancelledError:
        await _cancel(futures)
        raise
    await _cancel(pending)
    return done


async def _cancel(futures: Collection[asyncio.Future[Any]]) -> None:
    for future in futures:
        future.cancel()
    await asyncio.gather(*futures, return_exceptions=True)


def _groups(tasks: Iterable[MathTask], size: int = GROUP_SIZE) -> list[list[MathTask]]:
    """Tasks with the same gold go to one worker together, so it parses the gold once; groups stay small
    enough to spread over every worker."""
    by_gold: dict[tuple[str, object], list[MathTask]] = {}
    for task in tasks:
        by_gold.setdefault((task.gold, task.options), []).append(task)
    return [same[i : i + size] for same in by_gold.values() for i in range(0, len(same), size)]
