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
from verifier_service.scoring.texts import (
    ITEM_FAILED,
    TextTask,
    failed,
    results_of,
    safely,
    score_texts,
    text_chars,
    text_components,
)
from verifier_service.settings import VerifierSettings

log = logging.getLogger(__name__)

GROUP_SIZE = 8  # math tasks sent to a worker at once
# Extraction runs on the event loop in slices of up to this many characters of completions and golds in all
# (`Engine._prepare`), and a batch whose text components read this few (`texts.text_chars`) is scored there too (a
# larger one in a thread): every scorer is linear in what it reads, so this bounds the time the loop is held.
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

    Read and written on the event loop (extraction runs there); the lock keeps it safe for any other thread.
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
class _Chunk:
    """Items whose text components a worker scores: the first one's index in the batch, the items, the run."""

    start: int
    items: list[ScoreItem]
    run: asyncio.Future[Any]


@dataclass
class _Program:
    submission: Submission
    total: int
    fenced: bool  # False: the whole answer, no code block (not compiling, it is prose: no_code)
    indexes: list[int] = field(default_factory=list)


def _extraction_chars(item: ScoreItem) -> int:
    """What extracting the item's math answer and program reads, at most: its completion, and its math gold."""
    return len(item.completion) + (len(item.math.gold) if item.math is not None else 0)


def _component(result: MathResult) -> ComponentResult:
    return ComponentResult(
        score=result.score, verdict=result.verdict.value, detail=result.detail, extracted=result.extracted
    )


def _reward(item: ScoreItem, components: dict[str, ComponentResult]) -> float | None:
    weights = cast("dict[str, float] | None", item.weights)  # keys are component names; a string: not built per call
    total = 0.0
    for name, component in components.items():
        score = component.score
        if score is None:
            return None
        total += score if weights is None else weights.get(name, 1.0) * score
    return total


def _result(item: ScoreItem, found: dict[str, ComponentResult]) -> ItemResult:
    """The item's result from its components scored so far: the gated ones are scored now, from the component each
    reads correctness from."""
    requested = item.requested()
    for name, scorer in GATED.items():
        spec = getattr(item, name)
        if spec is not None:
            found[name] = safely(name, scorer, item, spec, found[item.correctness_source(spec)])
    components = {name: found[name] for name in requested}  # in the fixed order of COMPONENTS
    reward = _reward(item, components)
    return ItemResult(id=item.id, reward=reward, status="ok" if reward is not None else "error", components=components)


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
        owner = object()  # this request: its tasks share the worker pool fairly with other requests'
        # Many items' text components go to the worker pool, in chunks, while this process extracts the math
        # answers; a few are scored in place, where sending them would cost more than the work.
        sent: list[_Chunk] = []
        try:
            if sum(1 for item in items if text_components(item)) >= WORKER_TEXT_ITEMS:
                sent = self._send_texts(items, deadline, owner)
                await asyncio.sleep(0)  # the chunks reach the workers before the extraction starts
            batch = await self._prepare(items, with_texts=not sent)
            await asyncio.gather(self._run_math(batch, deadline, owner), self._run_code(batch, deadline))
            if sent:
                results = await self._finish_with_texts(items, batch, sent, deadline)
            else:
                results = [_result(item, found) for item, found in zip(items, batch.components, strict=True)]
        except BaseException:  # the client went away, or a bug: the text chunks' workers are retired too
            await _cancel([chunk.run for chunk in sent])
            raise
        self.metrics.observe_results(results)
        return results

    def _send_texts(self, items: list[ScoreItem], deadline: float, owner: object) -> list[_Chunk]:
        """Start scoring the items' text components in the worker pool, in chunks: about four per worker once a batch
        has 128 items per worker (at least 32 items a chunk), so that a worker that gets more of the machine takes
        more of them."""
        size = max(WORKER_TEXT_ITEMS // 2, -(-len(items) // (4 * self.pool.size)))
        timeout = max(0.001, deadline - asyncio.get_running_loop().time())
        return [
            _Chunk(
                start, chunk, asyncio.ensure_future(self.pool.run(TextTask.of(chunk), timeout_s=timeout, owner=owner))
            )
            for start in range(0, len(items), size)
            if (chunk := items[start : start + size])
        ]

    async def _finish_with_texts(
        self, items: list[ScoreItem], batch: _Batch, sent: list[_Chunk], deadline: float
    ) -> list[ItemResult]:
        """The items' results, once math and code are scored, chunk by chunk as the text components come back: the
        items of one chunk are put together while the workers still score others. A chunk not back by the deadline
        is null."""
        results: list[ItemResult | None] = [None] * len(items)
        by_run = {chunk.run: chunk for chunk in sent}
        pending = set(by_run)
        loop = asyncio.get_running_loop()
        try:
            while pending:
                done, pending = await asyncio.wait(
                    pending, timeout=max(0.0, deadline - loop.time()), return_when=asyncio.FIRST_COMPLETED
                )
                if not done:
                    break
                for run in done:
                    self._put_together(items, batch, results, by_run[run], await self._texts_of(by_run[run]))
        finally:
            await _cancel(pending)
        for run in pending:
            self._put_together(items, batch, results, by_run[run], self._late_texts(by_run[run].items))
        return cast(list[ItemResult], results)

    @staticmethod
    def _put_together(
        items: list[ScoreItem],
        batch: _Batch,
        results: list[ItemResult | None],
        chunk: _Chunk,
        texts: list[dict[str, ComponentResult]],
    ) -> None:
        for index, scored in zip(range(chunk.start, chunk.start + len(chunk.items)), texts, strict=True):
            batch.components[index].update(scored)
            results[index] = _result(items[index], batch.components[index])

    async def _texts_of(self, chunk: _Chunk) -> list[dict[str, ComponentResult]]:
        """The text components of a chunk whose run finished. When its worker failed they are scored here instead."""
        failure = chunk.run.exception()
        if isinstance(failure, TaskTimeout):
            return self._late_texts(chunk.items)
        if failure is not None:
            log.warning("a worker failed on text components (%s); scoring them here", failure)
            return await asyncio.to_thread(score_texts, chunk.items)
        return results_of(chunk.run.result())

    def _late_texts(self, items: list[ScoreItem]) -> list[dict[str, ComponentResult]]:
        """The text components of items that were not scored in time: null."""
        late = self._deadline_exceeded()
        failure = failed(late.verdict, late.detail or "")
        return [{name: failure for name in text_components(item)} for item in items]

    async def _prepare(self, items: list[ScoreItem], with_texts: bool) -> _Batch:
        """Extract the math answers and the programs, and score the text components when `with_texts`.

        Extraction is regex work on up to a few MB. It runs on the event loop a slice of up to INLINE_PREPARE_CHARS
        at a time (typically 0.1 ms; text built to be slow takes up to about 30 ms, the math answer window bounds it),
        and between slices the loop answers health checks and hands text chunks to workers as they come back: a
        thread would hold the GIL for 5 ms at a time instead (the regex engine holds it) and leave the workers
        waiting."""
        if not with_texts:
            components: list[dict[str, ComponentResult]] = [{} for _ in items]
        elif sum(text_chars(item) for item in items) <= INLINE_PREPARE_CHARS:
            components = score_texts(items)
        else:
            components = await asyncio.to_thread(score_texts, items)
        batch = _Batch(components=components)
        start = 0
        while start < len(items):
            end, chars = start + 1, _extraction_chars(items[start])
            while end < len(items) and chars + (more := _extraction_chars(items[end])) <= INLINE_PREPARE_CHARS:
                chars += more
                end += 1
            for index in range(start, end):
                item = items[index]
                if item.math is not None:
                    self._prepare_math(batch, index, item.completion, item.math)
                if item.code is not None:
                    self._prepare_code(batch, index, item.completion, item.code)
            start = end
            if start < len(items):
                await asyncio.sleep(0)
        return batch

    def _prepare_math(self, batch: _Batch, index: int, completion: str, spec: MathSpec) -> None:
        try:
            prepared = prepare_math(
                completion,
                spec.gold,
                spec.options,
                window=self.settings.answer_window_chars,
                max_answer=self.settings.max_answer_chars,
            )
        except Exception:  # a bug in extraction costs this item its math result, never the batch
            log.exception("extracting the math answer of item %d failed", index)
            batch.components[index]["math"] = failed(Verdict.INTERNAL_ERROR, ITEM_FAILED)
            return
        if not isinstance(prepared, MathTask):
            batch.components[index]["math"] = _component(prepared)
        elif (cached := self.cache.get(prepared)) is not None:
            self.metrics.cache_hits.inc()
            batch.components[index]["math"] = _component(cached)
        else:
            batch.waiting.setdefault(prepared, []).append(index)

    def _prepare_code(self, batch: _Batch, index: int, completion: str, spec: CodeSpec) -> None:
        total = len(spec.tests)
        try:
            program = extract_program(completion, spec.think_tag)
            if program is None:
                batch.components[index]["code"] = no_code(total, "no program after the reasoning")
                return
            key = f"{program.fenced:d}{program.text}\0{spec.model_dump_json()}"
            if key not in batch.programs:
                batch.programs[key] = _Program(submission(program.text, spec), total, program.fenced)
        except Exception:  # as for math: this item's code result, never the batch
            log.exception("extracting the program of item %d failed", index)
            batch.components[index]["code"] = failed(Verdict.INTERNAL_ERROR, ITEM_FAILED)
            return
        batch.programs[key].indexes.append(index)

    async def _run_code(self, batch: _Batch, deadline: float) -> None:
        if not batch.programs:
            return
        programs = list(batch.programs.values())
        runs = [asyncio.ensure_future(self._run_program(p.submission)) for p in programs]
        done = await _finished_by(runs, deadline)
        for run, program in zip(runs, programs, strict=True):
            if run in done:
                component = code_component(run.result(), program.total, program.fenced)
            else:
                late = self._deadline_exceeded()
                component = ComponentResult(score=None, verdict=late.verdict.value, detail=late.detail)
            for index in program.indexes:
                batch.components[index]["code"] = component

    async def _run_program(self, job: Submission) -> RunResult:
        if self.executor is None:
            return RunResult(RunVerdict.SANDBOX_UNAVAILABLE, detail="this server runs no sandbox")
        return await self.executor.run(job)

    async def _run_math(self, batch: _Batch, deadline: float, owner: object) -> None:
        if not batch.waiting:
            return
        self.metrics.math_tasks.inc(len(batch.waiting))
        self.metrics.deduplicated.inc(sum(len(v) for v in batch.waiting.values()) - len(batch.waiting))
        groups = {asyncio.ensure_future(self._run_group(group, owner)): group for group in _groups(batch.waiting)}
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

    async def _run_group(self, group: list[MathTask], owner: object) -> list[MathResult]:
        timeout = self.settings.math_timeout_s
        outcomes = await self.pool.run_group(group, timeout_s=timeout, owner=owner)
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
        return MathResult(None, Verdict.INTERNAL_ERROR, detail=ITEM_FAILED)


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
