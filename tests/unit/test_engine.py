"""Engine pieces that need no worker: the result cache, reward assembly, and a scorer that fails on one item."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest

from verifier_service import engine as engine_module
from verifier_service.engine import Engine, _reward
from verifier_service.metrics import Metrics
from verifier_service.pool import WorkerPool
from verifier_service.resources import WORKER_TASK, MathWorkers
from verifier_service.schema import ComponentResult, MathOptions, ScoreItem, Verdict
from verifier_service.scoring import code as code_module
from verifier_service.scoring import judge as judge_module
from verifier_service.scoring import math as math_module
from verifier_service.scoring.math import CACHEABLE, MathResult, MathTask, ResultCache
from verifier_service.scoring.pooled import Resources
from verifier_service.settings import VerifierSettings


def resources(pool: WorkerPool, settings: VerifierSettings) -> Resources:
    metrics = Metrics()
    return Resources(settings, metrics, {"math_workers": MathWorkers(pool, metrics)})


def engine_over(pool: WorkerPool) -> Engine:
    return Engine(resources(pool, VerifierSettings(math_workers=1)))


def _task(answer: str) -> MathTask:
    return MathTask(gold="1", answer=answer, options=MathOptions())


def test_cache_is_bounded_lru() -> None:
    cache = ResultCache(2)
    ok = MathResult(1.0, Verdict.CORRECT)
    cache.put(_task("a"), ok)
    cache.put(_task("b"), ok)
    assert cache.get(_task("a")) == ok  # a is now the most recent
    cache.put(_task("c"), ok)
    assert cache.get(_task("b")) is None
    assert cache.get(_task("a")) == ok and cache.get(_task("c")) == ok


def test_cache_never_keeps_failures() -> None:
    cache = ResultCache(10)
    cache.put(_task("a"), MathResult(None, Verdict.WORKER_CRASHED))
    assert cache.get(_task("a")) is None
    ResultCache(0).put(_task("a"), MathResult(1.0, Verdict.CORRECT))


@pytest.mark.parametrize("verdict", [Verdict.TIMEOUT, Verdict.DEADLINE_EXCEEDED, Verdict.GOLD_UNPARSEABLE])
def test_cache_never_keeps_what_a_healthy_worker_may_judge_otherwise(verdict: Verdict) -> None:
    """A timeout scores 0 but says as much about the worker (stopped, starved) as about the answer."""
    cache = ResultCache(10)
    cache.put(_task("a"), MathResult(0.0 if verdict == Verdict.TIMEOUT else None, verdict))
    assert cache.get(_task("a")) is None


@pytest.mark.parametrize("verdict", sorted(CACHEABLE))
def test_cache_keeps_finished_comparisons(verdict: Verdict) -> None:
    cache = ResultCache(10)
    cache.put(_task("a"), MathResult(1.0 if verdict == Verdict.CORRECT else 0.0, verdict))
    assert cache.get(_task("a")) is not None


def test_reward_is_weighted_sum_or_null() -> None:
    item = ScoreItem(completion="x", math={"gold": "1"}, format={}, weights={"math": 3.0})
    right = ComponentResult(score=1.0, verdict="correct")
    half = ComponentResult(score=0.5, verdict="ok")
    null = ComponentResult(score=None, verdict="worker_crashed")
    assert _reward(item, {"math": right, "format": half}) == 3.5
    assert _reward(item, {"math": null, "format": half}) is None


@pytest.mark.parametrize("scorer", ["prepare_math", "extract_program"])
def test_a_scorer_that_raises_on_one_item_costs_that_item_only(monkeypatch: pytest.MonkeyPatch, scorer: str) -> None:
    """A bug in extracting one item's answer or program is that component's internal_error (null), never the batch's
    500; the other items are scored as ever."""
    module = math_module if scorer == "prepare_math" else code_module  # where each pooled component finds it
    real = getattr(module, scorer)

    def breaks_on_one_item(completion: str, *args: Any, **kwargs: Any) -> Any:
        if "trips the bug" in completion:
            raise ValueError("a bug in extraction")
        return real(completion, *args, **kwargs)

    monkeypatch.setattr(module, scorer, breaks_on_one_item)
    component = (
        {"math": {"gold": "4"}} if scorer == "prepare_math" else {"code": {"tests": [{"type": "assert", "code": "1"}]}}
    )
    batch = [
        ScoreItem.model_validate({"completion": text, "format": {}, **component})
        for text in ("<think>a</think>4", "<think>a</think>4 trips the bug", "<think>a</think>4")
    ]
    # The pool is never started: no item needs a worker (plain numbers are settled in the service; code has no sandbox).
    engine = engine_over(WorkerPool(1, WORKER_TASK))
    results = asyncio.run(engine.score(batch))
    name = "math" if scorer == "prepare_math" else "code"
    broken = results[1].components[name]
    assert (broken.score, broken.verdict, results[1].reward) == (None, "internal_error", None)
    assert broken.detail == "the verifier failed on this item"  # nothing of the exception
    assert results[1].components["format"].verdict == "ok"
    for result in (results[0], results[2]):
        assert result.components[name].verdict == ("correct" if name == "math" else "sandbox_unavailable")


def scored_where(monkeypatch: pytest.MonkeyPatch, batch: list[ScoreItem]) -> set[str]:
    """The threads the batch's text components were scored in."""
    threads = set()
    real = engine_module.score_texts

    def recorded(items: list[ScoreItem]) -> Any:
        threads.add(threading.current_thread().name)
        return real(items)

    monkeypatch.setattr(engine_module, "score_texts", recorded)
    engine = engine_over(WorkerPool(1, WORKER_TASK))  # text only: no worker
    asyncio.run(engine.score(batch))
    return threads


def test_a_small_batch_s_text_components_are_scored_on_the_event_loop(monkeypatch: pytest.MonkeyPatch) -> None:
    batch = [ScoreItem(completion="<answer>Paris</answer>", answer={"gold": "Paris"}, format={}) for _ in range(8)]
    assert scored_where(monkeypatch, batch) == {threading.main_thread().name}  # a thread would cost more than it


def test_text_components_that_read_much_are_never_scored_on_the_event_loop(monkeypatch: pytest.MonkeyPatch) -> None:
    """Short completions, but 100 aliases of 10,000 characters each to compare with: the work is in the specs, and
    counting only the completions would leave it on the loop (health checks unanswered while it runs)."""
    golds = [f"{n} " + "alias " * 1_600 for n in range(100)]
    batch = [ScoreItem(completion="<answer>Paris</answer>", answer={"gold": golds}) for _ in range(8)]
    assert sum(map(len, golds)) > engine_module.INLINE_PREPARE_CHARS
    assert threading.main_thread().name not in scored_where(monkeypatch, batch)


def test_extraction_yields_the_event_loop_every_slice_of_completions_and_golds(monkeypatch: pytest.MonkeyPatch) -> None:
    """Math answers are extracted on the event loop a slice at a time; a slice counts the golds as well as the
    completions (a GSM8K gold is a whole solution, up to 10,000 characters, read like a completion)."""
    gold = "So she has " + "two more, " * 995 + "\n#### 4"
    batch = [ScoreItem(completion=f"<think>a</think>{n % 2 + 3}", math={"gold": gold}) for n in range(60)]
    ticks, seen = 0, []  # how often another task ran; at which count each item was extracted
    real = math_module.prepare_math

    def recorded(completion: str, gold: str, *args: Any, **kwargs: Any) -> Any:
        seen.append((ticks, len(completion) + len(gold)))
        return real(completion, gold, *args, **kwargs)

    async def main() -> list[Any]:
        nonlocal ticks
        engine = engine_over(WorkerPool(1, WORKER_TASK))  # golds are plain
        scoring = asyncio.ensure_future(engine.score(batch))
        while not scoring.done():
            ticks += 1
            await asyncio.sleep(0)
        return scoring.result()

    monkeypatch.setattr(math_module, "prepare_math", recorded)
    results = asyncio.run(main())
    assert [result.reward for result in results] == [0.0, 1.0] * 30
    slices: dict[int, int] = {}
    for tick, chars in seen:
        slices[tick] = slices.get(tick, 0) + chars
    assert len(slices) > 1 and max(slices.values()) <= engine_module.INLINE_PREPARE_CHARS


def test_the_second_round_yields_the_event_loop_every_slice_as_the_first(monkeypatch: pytest.MonkeyPatch) -> None:
    """A judge with `when: "rule_miss"` is prepared in the second round, after the rule: its extraction reads the
    completions as the first round's does, and is sliced the same way (it ran for the whole batch at once)."""
    reasoning = "<think>" + "a step, " * 250 + "</think>Thought process:"  # the rule and the judge find no answer
    judge = {"judge": "j", "gold": "4", "when": "rule_miss"}
    batch = [ScoreItem.model_validate({"completion": reasoning, "math": {"gold": "4"}, "judge": judge})
             for _ in range(60)]  # fmt: skip
    ticks, seen = 0, []
    real = judge_module.answer_text

    def recorded(item: ScoreItem, spec: Any, window: int) -> Any:
        seen.append((ticks, len(item.completion) + len(spec.gold)))
        return real(item, spec, window)

    async def main() -> list[Any]:
        nonlocal ticks
        settings = VerifierSettings(math_workers=1, judges={"j": {"base_url": "http://127.0.0.1:9/v1", "model": "m"}})
        engine = Engine(resources(WorkerPool(1, WORKER_TASK), settings))  # no job: nothing is asked
        scoring = asyncio.ensure_future(engine.score(batch))
        while not scoring.done():
            ticks += 1
            await asyncio.sleep(0)
        return scoring.result()

    monkeypatch.setattr(judge_module, "answer_text", recorded)
    results = asyncio.run(main())
    assert [result.components["judge"].verdict for result in results] == ["no_answer"] * 60
    slices: dict[int, int] = {}
    for tick, chars in seen:
        slices[tick] = slices.get(tick, 0) + chars
    assert len(seen) == 60 and len(slices) > 1 and max(slices.values()) <= engine_module.INLINE_PREPARE_CHARS


def test_a_pooled_component_is_a_table_entry_the_engine_drives_without_naming_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """scoring.POOLED is all the engine knows of a pooled component: here code's entry is replaced by a stand-in that
    settles one item itself and asks for jobs for the others; equal jobs run once, and each item gets its job's
    result, in order."""
    calls: list[tuple[str, object]] = []

    class StandIn:
        def __init__(self, resources: Resources) -> None:
            calls.append(("built", resources.part("sandbox")))

        def reads(self, item: ScoreItem, spec: Any) -> int:
            return len(item.completion)

        def prepare(self, item: ScoreItem, spec: Any) -> ComponentResult | str:
            if item.completion == "settled":
                return ComponentResult(score=0.25, verdict="passed")
            return item.completion  # the job: equal completions, one job

        async def run(self, jobs: dict[str, list[int]], deadline: float, owner: object) -> dict[str, ComponentResult]:
            calls.append(("run", sorted(jobs.items())))
            return {job: ComponentResult(score=float(len(job)) / 10, verdict="passed") for job in jobs}

    monkeypatch.setitem(engine_module.POOLED, "code", StandIn)
    tests = {"code": {"tests": ["assert True"]}}
    batch = [ScoreItem.model_validate({"completion": text, **tests}) for text in ("ab", "settled", "abcd", "ab")]
    engine = engine_over(WorkerPool(1, WORKER_TASK))
    results = asyncio.run(engine.score(batch))
    assert [r.reward for r in results] == [0.2, 0.25, 0.4, 0.2]
    assert calls == [("built", None), ("run", [("ab", [0, 3]), ("abcd", [2])])]


def test_a_worker_component_runs_each_job_in_the_pool_and_says_what_went_wrong() -> None:
    """scoring.pooled.WorkerComponent: a job's own result comes back; one that overruns its time is the subclass's
    timeout verdict, one that kills its worker worker_crashed, one that raises internal_error (both null), one left
    at the batch deadline deadline_exceeded; the others are unaffected."""
    from tests.unit.pool_tasks import ComponentJob
    from verifier_service.scoring.pooled import WorkerComponent

    class Sleeper(WorkerComponent):
        name = "test"

        def timeout_s(self, job: Any) -> float:
            return 0.5

    async def main() -> tuple[dict[Any, ComponentResult], dict[Any, ComponentResult]]:
        pool = WorkerPool(2, WORKER_TASK)
        await pool.start()
        try:
            settings = VerifierSettings(math_workers=2)
            component = Sleeper(resources(pool, settings))
            jobs = {ComponentJob(action): [i] for i, action in enumerate(["ok", "sleep", "die", "raise"])}
            loop = asyncio.get_running_loop()
            first = await component.run(jobs, loop.time() + 20, owner=object())
            late = await component.run({ComponentJob("sleep"): [0]}, loop.time() + 0.2, owner=object())
            return first, late
        finally:
            await pool.close()

    first, late = asyncio.run(main())
    verdicts = {job.action: (result.score, result.verdict) for job, result in first.items()}
    assert verdicts == {
        "ok": (1.0, "valid"),
        "sleep": (None, "timeout"),
        "die": (None, "worker_crashed"),
        "raise": (None, "internal_error"),
    }
    assert [(r.score, r.verdict) for r in late.values()] == [(None, "deadline_exceeded")]
