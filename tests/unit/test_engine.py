"""Engine pieces that need no worker: the result cache and reward assembly."""

from __future__ import annotations

import pytest

from verifier_service.engine import CACHEABLE, ResultCache, _reward
from verifier_service.schema import ComponentResult, MathOptions, ScoreItem, Verdict
from verifier_service.scoring.math import MathResult, MathTask


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
