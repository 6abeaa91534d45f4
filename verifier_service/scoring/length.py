"""The `length` component: conciseness, gated on whether the answer is right.

Correctness is read from the item's primary component, already scored (it is never judged twice): right when its
score reaches `correct_threshold`, null when it could not judge. Two modes:

- cosine (Demystifying Long CoT, App. C.1; TRL's `get_cosine_scaled_reward`): from `*_short` at length 0 to `*_long`
  at `max_tokens` along half a cosine, with progress clamped at 1 so the score never climbs back past the cap
  (open-r1#312). With TRL's endpoints the score is TRL's to the bit.
- target (open-instruct's MaxLen / UpToMaxLen): a right answer scores 1 - excess / scale_tokens, at least 0; a wrong
  one `wrong_score`.

Lengths are the item's tokens, never characters unless asked for (ms-swift#3353).

>>> spec = LengthSpec(max_tokens=100)
>>> item = ScoreItem(completion="...", completion_tokens=50, math={"gold": "4"}, length=spec)
>>> found = score(item, spec, ComponentResult(score=1.0, verdict="correct"))
>>> found.score, found.verdict, found.detail
(0.75, 'correct', '50 tokens: 50% of the way to max_tokens 100.')
"""

from __future__ import annotations

import math

from verifier_service.schema import ComponentResult, LengthSpec, ScoreItem, Verdict
from verifier_service.scoring.text import length_unknown, measured_length, result

_UNIT_WORDS = {"tokens": "tokens", "chars": "characters"}


def cosine(length: int, max_tokens: int, short: float, long: float) -> tuple[float, float]:
    """(score, progress): `short` at length 0, `long` at `max_tokens` and past it, half a cosine between.

    >>> cosine(50, 100, 1.0, 0.5), cosine(300, 100, 1.0, 0.5)
    ((0.75, 0.5), (0.5, 1.0))
    """
    progress = min(length / max_tokens, 1.0)
    # TRL's operations in TRL's order, so that with its endpoints the score is equal to the bit.
    return long + 0.5 * (short - long) * (1.0 + math.cos(progress * math.pi)), progress


def excess(length: int, target: int, kind: str) -> int:
    """How far `length` misses `target`: only above it for kind up_to, either way for kind exact.

    >>> excess(80, 100, "up_to"), excess(80, 100, "exact"), excess(130, 100, "up_to")
    (0, 20, 30)
    """
    return abs(length - target) if kind == "exact" else max(0, length - target)


def score(item: ScoreItem, spec: LengthSpec, correctness: ComponentResult) -> ComponentResult:
    """The `length` component of an item, given the result of the component it reads correctness from."""
    if correctness.score is None:
        detail = f"Whether the answer is right is unknown: its component gave {correctness.verdict}."
        return result(None, Verdict.PRIMARY_UNJUDGED, detail)
    length = measured_length(item, spec.unit)
    if length is None:
        return length_unknown()
    right = correctness.score >= spec.correct_threshold
    verdict = Verdict.CORRECT if right else Verdict.WRONG
    units = _UNIT_WORDS[spec.unit]
    if spec.mode == "cosine":
        assert spec.max_tokens is not None  # LengthSpec refuses cosine without it
        ends = (spec.correct_short, spec.correct_long) if right else (spec.wrong_short, spec.wrong_long)
        value, progress = cosine(length, spec.max_tokens, *ends)
        return result(value, verdict, f"{length} {units}: {progress:.0%} of the way to max_tokens {spec.max_tokens}.")
    assert spec.target_tokens is not None  # LengthSpec refuses target without it
    missed = excess(length, spec.target_tokens, spec.kind)
    value = max(0.0, 1.0 - missed / spec.scale) if right else spec.wrong_score  # excess >= 0: never above 1
    how = "from" if spec.kind == "exact" else "past"
    return result(value, verdict, f"{length} {units}: {missed} {how} the target of {spec.target_tokens}.")
