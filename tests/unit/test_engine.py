"""Engine pieces that need no worker: the result cache and reward assembly."""

from __future__ import annotations

from verifier_service.engine import ResultCache, _reward
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


def test_reward_is_weighted_sum_or_null() -> None:
    item = ScoreItem(completion="x", math={"gold": "1"}, format={}, weights={"math": 3.0})
    right = ComponentResult(score=1.0, verdict="correct")
    half = ComponentResult(score=0.5, verdict="ok")
    null = ComponentResult(score=None, verdict="worker_crashed")
    assert _reward(item, {"math": right, "format": half}) == 3.5
    assert _reward(item, {"math": null, "format": half}) is None
