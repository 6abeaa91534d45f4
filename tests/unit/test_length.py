"""The `length` component: parity with TRL's cosine-scaled reward, the target mode, and the bugs users reported."""

from __future__ import annotations

import itertools
import math
from typing import Any

import pytest
from trl.rewards import accuracy_reward, get_cosine_scaled_reward

from verifier_service.schema import ComponentResult, LengthSpec, ScoreItem
from verifier_service.scoring import length

SECRET = "SECRET-completion-text"  # must never appear in a detail
RIGHT = ComponentResult(score=1.0, verdict="correct")
WRONG = ComponentResult(score=0.0, verdict="wrong")
UNJUDGED = ComponentResult(score=None, verdict="gold_unparseable")


def run(
    tokens: int | None, correctness: ComponentResult, *, completion: str = SECRET, **options: Any
) -> ComponentResult:
    # The order guard (may a wrong answer outscore a right one) is the schema's business, tested with it.
    item = ScoreItem(
        completion=completion, completion_tokens=tokens, math={"gold": "4"}, length=options, allow_order_inversion=True
    )
    assert item.length is not None
    return length.score(item, item.length, correctness)


def close(found: float | None, expected: float) -> bool:
    return found is not None and math.isclose(found, expected, rel_tol=1e-12, abs_tol=1e-15)


# --- parity with TRL's get_cosine_scaled_reward ------------------------------------------------------------------

# TRL judges correctness itself with math-verify: "\boxed{4}" is right against "4", wrong against "5", and an
# unparseable gold gives None. Ours reads the same outcome from the primary component.
TRL_CASES = [("4", RIGHT), ("5", WRONG), ("\\frac{", UNJUDGED)]
ENDS = [  # (correct_short, correct_long, wrong_short, wrong_long)
    (1.0, 0.5, -1.0, -0.5),  # the defaults of both
    (2.0, 1.25, -3.0, -0.25),  # every end different, so a swapped mapping fails
    (0.9, 0.1, -0.2, -0.8),  # wrong answers fall with length
    (-0.1, -0.9, -1.0, -2.0),  # all negative
    (1e6, -1e6, -1e6, 1e6),  # the largest allowed
]


def trl_lengths(max_len: int) -> list[int]:
    return sorted({0, 1, max_len // 4, max_len // 2, max_len - 1, max_len, max_len + 1, 3 * max_len // 2,
                   2 * max_len, 3 * max_len, 10**8})  # fmt: skip


def test_trl_judges_these_golds_as_we_pass_them() -> None:
    completions = [[{"content": "\\boxed{4}"}]] * len(TRL_CASES)
    assert accuracy_reward(completions, [gold for gold, _ in TRL_CASES]) == [c.score for _, c in TRL_CASES]


@pytest.mark.parametrize("ends", ENDS)
@pytest.mark.parametrize("max_len", [1, 7, 100, 4096])
def test_equal_to_trl(max_len: int, ends: tuple[float, float, float, float]) -> None:
    correct_short, correct_long, wrong_short, wrong_long = ends
    trl = get_cosine_scaled_reward(
        max_len,
        min_value_wrong=wrong_short,  # TRL's names: a wrong answer at length 0
        max_value_wrong=wrong_long,  # a wrong answer at max_len
        min_value_correct=correct_long,  # a right answer at max_len
        max_value_correct=correct_short,  # a right answer at length 0
    )
    options: dict[str, Any] = {"max_tokens": max_len, "correct_short": correct_short, "correct_long": correct_long,
                               "wrong_short": wrong_short, "wrong_long": wrong_long}  # fmt: skip
    cases = [(gold, correctness, n) for gold, correctness in TRL_CASES for n in trl_lengths(max_len)]
    # TRL reads only len() of each completion's ids: a range stands in for 10**8 ids without allocating them.
    expected = trl([[{"content": "\\boxed{4}"}]] * len(cases), [g for g, _, _ in cases], [range(n) for *_, n in cases])
    for (_, correctness, n), want in zip(cases, expected, strict=True):
        found = run(n, correctness, **options)
        assert found.score == want, (n, correctness.verdict, found)  # TRL's operations in TRL's order: to the bit


def test_the_trl_grid_reaches_both_ends_and_beyond() -> None:
    """Parity is checked at length 0, at the cap and past it, for right and wrong: not just in the middle."""
    assert {0, 100, 101, 200, 10**8} <= set(trl_lengths(100))
    assert run(0, RIGHT, max_tokens=100).score == 1.0 and run(0, WRONG, max_tokens=100).score == -1.0
    assert run(10**8, RIGHT, max_tokens=100).score == 0.5 and run(10**8, WRONG, max_tokens=100).score == -0.5


# --- cosine, with exact values -------------------------------------------------------------------------------------

COSINE = [
    # (tokens, correctness, options, score, verdict)
    (0, RIGHT, {}, 1.0, "correct"),
    (250, RIGHT, {}, 0.5 + 0.25 * (1 + math.sqrt(0.5)), "correct"),
    (500, RIGHT, {}, 0.75, "correct"),
    (1000, RIGHT, {}, 0.5, "correct"),
    (0, WRONG, {}, -1.0, "wrong"),
    (500, WRONG, {}, -0.75, "wrong"),
    (1000, WRONG, {}, -0.5, "wrong"),
    (500, RIGHT, {"correct_short": 3.0, "correct_long": 1.0}, 2.0, "correct"),
    (500, WRONG, {"wrong_short": 0.0, "wrong_long": -4.0}, -2.0, "wrong"),  # wrong answers that fall with length
    (500, RIGHT, {"correct_short": -0.1, "correct_long": -0.9}, -0.5, "correct"),  # negative ends
    (0, RIGHT, {"correct_short": -1e6, "correct_long": 1e6}, -1e6, "correct"),  # the largest ends, reversed
    (10**8, RIGHT, {"correct_short": -1e6, "correct_long": 1e6}, 1e6, "correct"),
    (500, RIGHT, {"correct_short": 0.7, "correct_long": 0.7}, 0.7, "correct"),  # flat
]


@pytest.mark.parametrize(("tokens", "correctness", "options", "expected", "verdict"), COSINE)
def test_cosine(
    tokens: int, correctness: ComponentResult, options: dict[str, Any], expected: float, verdict: str
) -> None:
    found = run(tokens, correctness, max_tokens=1000, **options)
    assert found.verdict == verdict
    assert close(found.score, expected), found


UNCLAMPED = [  # open-r1#312: cos is periodic, so without the clamp a completion twice the cap scores as one of length 0
    # (tokens, correctness, score)
    (1000, RIGHT, 0.5),
    (1500, RIGHT, 0.5),  # unclamped: 0.75
    (2000, RIGHT, 0.5),  # unclamped: 1.0
    (10**8, RIGHT, 0.5),
    (1500, WRONG, -0.5),  # unclamped: -0.75
    (2000, WRONG, -0.5),  # unclamped: -1.0
]


@pytest.mark.parametrize(("tokens", "correctness", "expected"), UNCLAMPED)
def test_cosine_never_climbs_back_past_the_cap(tokens: int, correctness: ComponentResult, expected: float) -> None:
    found = run(tokens, correctness, max_tokens=1000)
    assert found.score == expected
    assert found.detail == f"{tokens} tokens: 100% of the way to max_tokens 1000."


def test_cosine_is_monotone_in_length() -> None:
    right = [run(n, RIGHT, max_tokens=64).score or 0.0 for n in range(0, 200)]
    wrong = [run(n, WRONG, max_tokens=64).score or 0.0 for n in range(0, 200)]
    assert all(a >= b for a, b in itertools.pairwise(right)) and right[0] > right[64] == right[199]
    assert all(a <= b for a, b in itertools.pairwise(wrong)) and wrong[0] < wrong[64] == wrong[199]
    assert min(right) > max(wrong)  # the defaults keep every right answer above every wrong one


# --- target mode ---------------------------------------------------------------------------------------------------

TARGET = [
    # (tokens, correctness, options, score, verdict)
    (50, RIGHT, {}, 1.0, "correct"),  # up_to: short is free
    (100, RIGHT, {}, 1.0, "correct"),
    (150, RIGHT, {}, 0.5, "correct"),  # scale defaults to target_tokens
    (200, RIGHT, {}, 0.0, "correct"),
    (250, RIGHT, {}, 0.0, "correct"),  # clamped at 0: open-instruct's formula gives -0.5 here
    (10**8, RIGHT, {}, 0.0, "correct"),
    (50, RIGHT, {"kind": "exact"}, 0.5, "correct"),  # exact: short costs too
    (0, RIGHT, {"kind": "exact"}, 0.0, "correct"),
    (150, RIGHT, {"kind": "exact"}, 0.5, "correct"),
    (100, RIGHT, {"kind": "exact"}, 1.0, "correct"),
    (150, RIGHT, {"scale_tokens": 400}, 0.875, "correct"),
    (150, RIGHT, {"scale_tokens": 1}, 0.0, "correct"),
    (50, WRONG, {}, 0.0, "wrong"),  # a wrong answer: wrong_score, whatever its length
    (10**8, WRONG, {}, 0.0, "wrong"),
    (50, WRONG, {"wrong_score": -0.25}, -0.25, "wrong"),
    (100, WRONG, {"wrong_score": -1e6, "kind": "exact"}, -1e6, "wrong"),
    (0, RIGHT, {"target_tokens": 0}, 1.0, "correct"),  # target 0: scale max(1, 0) = 1, no division by zero
    (1, RIGHT, {"target_tokens": 0}, 0.0, "correct"),
    (0, RIGHT, {"target_tokens": 0, "kind": "exact"}, 1.0, "correct"),
]


@pytest.mark.parametrize(("tokens", "correctness", "options", "expected", "verdict"), TARGET)
def test_target(
    tokens: int, correctness: ComponentResult, options: dict[str, Any], expected: float, verdict: str
) -> None:
    target: dict[str, Any] = {"mode": "target", "target_tokens": 100} | options
    found = run(tokens, correctness, **target)
    assert found.verdict == verdict
    assert close(found.score, expected), found
    low, high = LengthSpec(**target).score_range()
    assert low <= expected <= high


@pytest.mark.parametrize(
    ("kind", "tokens", "detail"),
    [("up_to", 150, "150 tokens: 50 past the target of 100."), ("up_to", 50, "50 tokens: 0 past the target of 100."),
     ("exact", 50, "50 tokens: 50 from the target of 100.")],
)  # fmt: skip
def test_target_detail(kind: str, tokens: int, detail: str) -> None:
    for correctness in (RIGHT, WRONG):
        assert run(tokens, correctness, mode="target", target_tokens=100, kind=kind).detail == detail


# --- correctness: the threshold and a primary that could not judge ------------------------------------------------

THRESHOLD = [  # code scores the share of tests passed: by default only all of them counts as right
    # (primary score, correct_threshold, verdict, score)
    (1.0, 1.0, "correct", 0.75),
    (0.8, 1.0, "wrong", -0.75),
    (0.99, 1.0, "wrong", -0.75),
    (0.8, 0.8, "correct", 0.75),
    (0.7999, 0.8, "wrong", -0.75),
    (0.0, 0.0, "correct", 0.75),  # threshold 0: every judged answer counts as right
    (0.0, 0.01, "wrong", -0.75),
]


@pytest.mark.parametrize(("primary", "threshold", "verdict", "expected"), THRESHOLD)
def test_threshold_for_partial_scores(primary: float, threshold: float, verdict: str, expected: float) -> None:
    correctness = ComponentResult(score=primary, verdict="passed" if primary == 1.0 else "failed", passed=4, total=5)
    item = ScoreItem(
        completion=SECRET,
        completion_tokens=500,
        code={"tests": [{"type": "call", "fn": "f", "expected": 1}]},
        length={"max_tokens": 1000, "correct_threshold": threshold},
        allow_order_inversion=True,  # a threshold below 1 lets a partly right program outscore a right one
    )
    assert item.length is not None
    found = length.score(item, item.length, correctness)
    assert (found.verdict, found.score) == (verdict, expected)


@pytest.mark.parametrize("options", [{"max_tokens": 10}, {"mode": "target", "target_tokens": 10}])
@pytest.mark.parametrize("tokens", [None, 0, 5, 10**8])
def test_a_primary_that_could_not_judge_makes_length_null(options: dict[str, Any], tokens: int | None) -> None:
    found = run(tokens, UNJUDGED, **options)
    assert (found.score, found.verdict) == (None, "primary_unjudged")
    assert found.detail == "Whether the answer is right is unknown: its component gave gold_unparseable."


# --- length inputs: tokens, never a silent count of characters (ms-swift#3353) ------------------------------------

CHARS_VS_TOKENS = [
    # (completion, tokens, options, score, verdict)
    ("x" * 950, None, {"max_tokens": 1000}, None, "length_unknown"),
    ("x" * 950, None, {"mode": "target", "target_tokens": 100}, None, "length_unknown"),
    ("x" * 500, 1000, {"max_tokens": 1000}, 0.5, "correct"),  # 500 characters, but 1000 tokens
    ("x" * 500, 1000, {"max_tokens": 1000, "unit": "chars"}, 0.75, "correct"),  # characters only when asked for
    ("x" * 500, None, {"max_tokens": 1000, "unit": "chars"}, 0.75, "correct"),
    ("漢" * 500, 3, {"max_tokens": 1000, "unit": "chars"}, 0.75, "correct"),  # characters, not UTF-8 bytes
    ("", None, {"max_tokens": 1000, "unit": "chars"}, 1.0, "correct"),
    ("x" * 150, 0, {"mode": "target", "target_tokens": 100, "unit": "chars"}, 0.5, "correct"),
]


@pytest.mark.parametrize(("completion", "tokens", "options", "expected", "verdict"), CHARS_VS_TOKENS)
def test_characters_versus_tokens(
    completion: str, tokens: int | None, options: dict[str, Any], expected: float | None, verdict: str
) -> None:
    found = run(tokens, RIGHT, completion=completion, **options)
    assert found.verdict == verdict
    assert found.score == expected if expected is None else close(found.score, expected)


def test_details_never_carry_the_completion() -> None:
    outcomes = [
        run(tokens, correctness, **options)
        for tokens in (None, 0, 700, 5000)
        for correctness in (RIGHT, WRONG, UNJUDGED)
        for options in ({"max_tokens": 1000}, {"mode": "target", "target_tokens": 100, "kind": "exact"})
    ]
    assert {o.verdict for o in outcomes} == {"correct", "wrong", "length_unknown", "primary_unjudged"}
    for found in outcomes:
        assert found.detail and "SECRET" not in found.model_dump_json()
        assert set(found.model_dump(exclude_none=True)) <= {"score", "verdict", "detail"}


def test_cosine_detail() -> None:
    assert run(250, WRONG, max_tokens=1000).detail == "250 tokens: 25% of the way to max_tokens 1000."
    chars = run(7, RIGHT, max_tokens=1000, unit="chars")  # the 22 characters of SECRET, not the 7 tokens
    assert chars.detail == "22 characters: 2% of the way to max_tokens 1000."
