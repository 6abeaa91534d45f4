"""Batch dispatch: extract, dedupe, cache, fan out to the worker pool, keep order, assemble rewards.

Every item gets exactly one result, in request order. The three outcomes stay apart: a wrong answer is 0
with a verdict, a verifier failure is `null` with a verdict, and invalid requests never get here.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field
from typing import Any, cast

from verifier_service.pool import TaskTimeout
from verifier_service.schema import ComponentResult, ItemResult, ScoreItem, Verdict
from verifier_service.scoring import GATED, POOLED
from verifier_service.scoring.pooled import PooledComponent, Request, Resources, cancel, deadline_exceeded
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

log = logging.getLogger(__name__)

# Extraction runs on the event loop in slices of up to this many characters of completions and golds in all
# (`Engine._prepare`), and a batch whose text components read this few (`texts.text_chars`) is scored there too (a
# larger one in a thread): every scorer is linear in what it reads, so this bounds the time the loop is held.
INLINE_PREPARE_CHARS = 32_000
# Batches with at least this many items with text components score those in the worker pool (text.TextTask).
WORKER_TEXT_ITEMS = 64


@dataclass
class _Batch:
    """Per-request working state: the components scored so far, each pooled component's jobs, each with the items
    that wait on it (equal jobs are run once), and the pooled components that read correctness (rm with gate
    "right"), as (item index, name): they are prepared in a second round, once what they read is scored."""

    components: list[dict[str, ComponentResult]]
    jobs: dict[str, dict[Any, list[int]]] = field(default_factory=dict)
    gated: list[tuple[int, str]] = field(default_factory=list)


@dataclass
class _Chunk:
    """Items whose text components a worker scores: the first one's index in the batch, the items, the run."""

    start: int
    items: list[ScoreItem]
    run: asyncio.Future[Any]


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
    def __init__(self, resources: Resources) -> None:
        self.settings = resources.settings
        self.pool = resources.pool
        self.metrics = resources.metrics
        self.pooled: dict[str, PooledComponent] = {name: make(resources) for name, make in POOLED.items()}

    async def score(self, items: list[ScoreItem]) -> list[ItemResult]:
        deadline = asyncio.get_running_loop().time() + self.settings.batch_timeout_s
        owner = Request()  # this request: its tasks share the worker pool fairly with other requests'
        # Many items' text components go to the worker pool, in chunks, while this process extracts the math
        # answers; a few are scored in place, where sending them would cost more than the work.
        sent: list[_Chunk] = []
        try:
            if sum(1 for item in items if text_components(item)) >= WORKER_TEXT_ITEMS:
                sent = self._send_texts(items, deadline, owner)
                await asyncio.sleep(0)  # the chunks reach the workers before the extraction starts
            batch = await self._prepare(items, with_texts=not sent)
            await self._run_jobs(batch, deadline, owner)
            if sent:
                results = await self._finish_with_texts(items, batch, sent, deadline, owner)
            else:
                await self._run_gated(items, batch, deadline, owner)
                results = [_result(item, found) for item, found in zip(items, batch.components, strict=True)]
        except BaseException:  # the client went away, or a bug: the text chunks' workers are retired too
            await cancel([chunk.run for chunk in sent])
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

    async def _run_jobs(self, batch: _Batch, deadline: float, owner: object) -> None:
        """Run every pooled component's jobs at once, then forget them."""
        await asyncio.gather(*(self._run_pooled(batch, name, deadline, owner) for name in batch.jobs))
        batch.jobs = {}

    async def _run_gated(self, items: list[ScoreItem], batch: _Batch, deadline: float, owner: object) -> None:
        """The second round: the pooled components that read correctness, now that what they read is scored. The
        gate settles an item the model is not to see (a wrong answer: 0, gated_out; an unjudged one: null) without a
        job; the others are prepared and run as in the first round, on the loop a slice of up to
        INLINE_PREPARE_CHARS at a time."""
        chars = 0
        for index, name in batch.gated:
            item = items[index]
            spec = getattr(item, name)
            settled = spec.settled_by_gate(batch.components[index][item.correctness_source(spec)])
            if settled is not None:
                batch.components[index][name] = settled
                continue
            reads = self.pooled[name].reads(item, spec)
            if chars and chars + reads > INLINE_PREPARE_CHARS:
                chars = 0
                await asyncio.sleep(0)  # between slices the loop answers health checks
            chars += reads
            self._prepare_one(batch, name, self.pooled[name], index, item, spec)
        await self._run_jobs(batch, deadline, owner)

    async def _finish_with_texts(
        self, items: list[ScoreItem], batch: _Batch, sent: list[_Chunk], deadline: float, owner: object
    ) -> list[ItemResult]:
        """The items' results, once math and code are scored, chunk by chunk as the text components come back: the
        items of one chunk are put together while the workers still score others. A chunk not back by the deadline
        is null. When a pooled component reads correctness (which may come from a text component), every chunk is
        awaited first, then that second round runs, then the items are put together."""
        results: list[ItemResult | None] = [None] * len(items)
        assemble = not batch.gated
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
                    texts = await self._texts_of(by_run[run])
                    self._put_together(items, batch, results, by_run[run], texts, assemble)
        finally:
            await cancel(pending)
        for run in pending:
            self._put_together(items, batch, results, by_run[run], self._late_texts(by_run[run].items), assemble)
        if not assemble:
            await self._run_gated(items, batch, deadline, owner)
            return [_result(item, found) for item, found in zip(items, batch.components, strict=True)]
        return cast(list[ItemResult], results)

    @staticmethod
    def _put_together(
        items: list[ScoreItem],
        batch: _Batch,
        results: list[ItemResult | None],
        chunk: _Chunk,
        texts: list[dict[str, ComponentResult]],
        assemble: bool,
    ) -> None:
        for index, scored in zip(range(chunk.start, chunk.start + len(chunk.items)), texts, strict=True):
            batch.components[index].update(scored)
            if assemble:
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
        late = deadline_exceeded(self.settings)
        return [{name: late for name in text_components(item)} for item in items]

    async def _prepare(self, items: list[ScoreItem], with_texts: bool) -> _Batch:
        """Prepare each pooled component of each item (extract the math answers and the programs), and score the
        text components when `with_texts`.

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
            end, chars = start + 1, self._reads(items[start])
            while end < len(items) and chars + (more := self._reads(items[end])) <= INLINE_PREPARE_CHARS:
                chars += more
                end += 1
            for index in range(start, end):
                item = items[index]
                for name, component in self.pooled.items():
                    if (spec := getattr(item, name)) is None:
                        continue
                    if spec.reads_correctness():  # prepared in the second round (_run_gated)
                        batch.gated.append((index, name))
                    else:
                        self._prepare_one(batch, name, component, index, item, spec)
            start = end
            if start < len(items):
                await asyncio.sleep(0)
        return batch

    def _reads(self, item: ScoreItem) -> int:
        """What preparing the item's pooled components reads, at most."""
        return sum(component.reads(item, spec) for name, component in self.pooled.items()
                   if (spec := getattr(item, name)) is not None)  # fmt: skip

    @staticmethod
    def _prepare_one(
        batch: _Batch, name: str, component: PooledComponent, index: int, item: ScoreItem, spec: Any
    ) -> None:
        try:
            prepared = component.prepare(item, spec)
        except Exception:  # a bug in extraction costs this item this component's result, never the batch
            log.exception("preparing the %s of item %d failed", name, index)
            batch.components[index][name] = failed(Verdict.INTERNAL_ERROR, ITEM_FAILED)
            return
        if isinstance(prepared, ComponentResult):
            batch.components[index][name] = prepared
        else:
            batch.jobs.setdefault(name, {}).setdefault(prepared, []).append(index)

    async def _run_pooled(self, batch: _Batch, name: str, deadline: float, owner: object) -> None:
        """Run a pooled component's jobs and give each item its job's result."""
        jobs = batch.jobs[name]
        results = await self.pooled[name].run(jobs, deadline, owner)
        for job, indexes in jobs.items():
            for index in indexes:
                batch.components[index][name] = results[job]
