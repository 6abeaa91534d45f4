"""The `overlong` component: parity with TRL's soft overlong punishment, and the bugs users reported elsewhere."""

from __future__ import annotations

import itertools
import math
from typing import Any

import pytest
from trl.rewards import get_soft_overlong_punishment

from verifier_service.schema import ComponentResult, OverlongSpec, ScoreItem
from verifier_service.scoring import overlong

SECRET = "SECRET-completion-text"  # must never appear in a detail


def run(
    tokens: int | None, *, truncated: bool | None = None, completion: str = SECRET, **options: Any
) -> ComponentResult:
    item = ScoreItem(completion=completion, completion_tokens=tokens, truncated=truncated, overlong=options)
    assert item.overlong is not None
    return overlong.score(item, item.overlong)


def trl(length: int, max_tokens: int, buffer: int) -> float:
    # TRL reads only len() of each completion's ids: a range stands in for 10**8 token ids without allocating them.
    (reward,) = get_soft_overlong_punishment(max_tokens, buffer)([range(length)])
    return float(reward)


def lengths(max_tokens: int, buffer: int) -> list[int]:
    """Both sides of every branch boundary, the middle of the buffer, and far past the cap."""
    soft = max_tokens - buffer
    points = {0, 1, soft - 1, soft, soft + 1, soft + buffer // 2, max_tokens - 1, max_tokens, max_tokens + 1}
    return sorted(n for n in points | {2 * max_tokens, 10**8} if n >= 0)


GRID = [
    (max_tokens, buffer)
    for max_tokens in (1, 2, 7, 100, 1000, 4096, 20480)
    for buffer in sorted({0, 1, max_tokens // 5, max_tokens // 2, max_tokens - 1, max_tokens})
    if 0 <= buffer <= max_tokens
]


# --- parity with TRL -----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("max_tokens", "buffer"), GRID)
def test_equal_to_trl(max_tokens: int, buffer: int) -> None:
    for length in lengths(max_tokens, buffer):
        found = run(length, truncated=False, max_tokens=max_tokens, buffer_tokens=buffer)
        assert found.score == trl(length, max_tokens, buffer), (length, found)  # same operations: equal to the bit


@pytest.mark.parametrize("penalty", [0.5, 2.0, 3.7, 1e6])
@pytest.mark.parametrize(("max_tokens", "buffer"), [(100, 20), (4096, 1000), (7, 0), (3, 3)])
def test_equal_to_trl_times_penalty(max_tokens: int, buffer: int, penalty: float) -> None:
    for length in lengths(max_tokens, buffer):
        found = run(length, max_tokens=max_tokens, buffer_tokens=buffer, penalty=penalty)
        expected = penalty * trl(length, max_tokens, buffer)
        assert found.score is not None and math.isclose(found.score, expected, rel_tol=1e-12, abs_tol=0.0)


def test_the_trl_grid_reaches_every_branch() -> None:
    """The parity grid is not all zeros: it covers the buffer and past the cap, with buffers of 0 and of the cap."""
    verdicts = {
        run(length, max_tokens=max_tokens, buffer_tokens=buffer).verdict
        for max_tokens, buffer in GRID
        for length in lengths(max_tokens, buffer)
    }
    assert verdicts == {"within_budget", "in_buffer", "over_limit"}
    assert (1, 0) in GRID and (1, 1) in GRID and (100, 0) in GRID and (100, 100) in GRID


# --- branches, with exact values -----------------------------------------------------------------------------------

BRANCHES = [
    # (tokens, options, score, verdict)
    (800, {"max_tokens": 1000}, 0.0, "within_budget"),  # buffer defaults to max_tokens // 5 = 200
    (801, {"max_tokens": 1000}, -0.005, "in_buffer"),
    (900, {"max_tokens": 1000}, -0.5, "in_buffer"),
    (1000, {"max_tokens": 1000}, -1.0, "in_buffer"),  # at the cap: the bottom of the ramp, not over it
    (1001, {"max_tokens": 1000}, -1.0, "over_limit"),
    (6, {"max_tokens": 7}, 0.0, "within_budget"),  # 7 // 5 = 1
    (7, {"max_tokens": 7}, -1.0, "in_buffer"),
    (4, {"max_tokens": 4}, 0.0, "within_budget"),  # 4 // 5 = 0: a hard cap
    (5, {"max_tokens": 4}, -1.0, "over_limit"),
    (16384, {"max_tokens": 20480, "buffer_tokens": 4096}, 0.0, "within_budget"),  # DAPO's setting
    (18432, {"max_tokens": 20480, "buffer_tokens": 4096}, -0.5, "in_buffer"),
    (18432, {"max_tokens": 20480, "buffer_tokens": 4096, "penalty": 0.2}, -0.1, "in_buffer"),
    (0, {"max_tokens": 1, "buffer_tokens": 1}, 0.0, "within_budget"),  # an empty completion
    (1, {"max_tokens": 1, "buffer_tokens": 1}, -1.0, "in_buffer"),
    (0, {"max_tokens": 100, "buffer_tokens": 100}, 0.0, "within_budget"),
    (50, {"max_tokens": 100, "buffer_tokens": 100}, -0.5, "in_buffer"),
    (10**8, {"max_tokens": 1}, -1.0, "over_limit"),  # the largest length against the smallest cap
    (10**8, {"max_tokens": 10**8}, -1.0, "in_buffer"),
    (90, {"max_tokens": 100, "buffer_tokens": 20, "penalty": 1e6}, -5e5, "in_buffer"),  # the largest penalty
    (101, {"max_tokens": 100, "penalty": 1e6}, -1e6, "over_limit"),
    (101, {"max_tokens": 100, "penalty": 1e-9}, -1e-9, "over_limit"),
]


@pytest.mark.parametrize(("tokens", "options", "expected", "verdict"), BRANCHES)
def test_branch(tokens: int, options: dict[str, Any], expected: float, verdict: str) -> None:
    found = run(tokens, truncated=False, **options)
    assert found.verdict == verdict
    assert found.score is not None and math.isclose(found.score, expected, rel_tol=1e-12, abs_tol=1e-15)
    spec = OverlongSpec(**options)
    low, high = spec.score_range()
    assert low <= found.score <= high


def test_the_buffer_default_is_a_fifth_of_the_cap() -> None:
    assert OverlongSpec(max_tokens=1000).buffer == 200
    assert OverlongSpec(max_tokens=9).buffer == 1
    assert OverlongSpec(max_tokens=1000, buffer_tokens=0).buffer == 0  # 0 is a value, not "unset"
    assert run(850, max_tokens=1000).score == -0.25
    assert run(850, max_tokens=1000, buffer_tokens=500).score == -0.7


def test_the_ramp_falls_steadily_from_zero_to_minus_penalty() -> None:
    scores = [run(length, max_tokens=100, buffer_tokens=40, penalty=3.0).score or 0.0 for length in range(0, 130)]
    assert all(a >= b for a, b in itertools.pairwise(scores))
    assert scores[60] == 0.0 and scores[61] == pytest.approx(-0.075) and scores[100] == -3.0 and scores[129] == -3.0


# --- user-reported bugs --------------------------------------------------------------------------------------------

TRUNCATION = [
    # (tokens, truncated, options, score, verdict)
    (10, True, {"max_tokens": 1000}, -1.0, "truncated"),  # short but cut off (e.g. a stop string): still penalised
    (1000, True, {"max_tokens": 1000, "penalty": 2.5}, -2.5, "truncated"),
    (1000, True, {"max_tokens": 1000, "on_truncated": "null"}, None, "truncated"),  # skipped, like TRL's masking
    (10, True, {"max_tokens": 1000, "on_truncated": "null"}, None, "truncated"),
    (None, True, {"max_tokens": 1000}, -1.0, "truncated"),  # the penalty needs no length
    (None, True, {"max_tokens": 1000, "on_truncated": "null"}, None, "truncated"),
    (10, False, {"max_tokens": 1000, "on_truncated": "null"}, 0.0, "within_budget"),  # not truncated: by length
    (10, None, {"max_tokens": 1000}, 0.0, "within_budget"),  # not said: by length
    (1001, None, {"max_tokens": 1000, "on_truncated": "null"}, -1.0, "over_limit"),
]


@pytest.mark.parametrize(("tokens", "truncated", "options", "expected", "verdict"), TRUNCATION)
def test_truncation(
    tokens: int | None, truncated: bool | None, options: dict[str, Any], expected: float | None, verdict: str
) -> None:
    found = run(tokens, truncated=truncated, **options)
    assert (found.score, found.verdict) == (expected, verdict)


CHARS_VS_TOKENS = [  # ms-swift#3353, open-r1's help text: the cap is in tokens; characters are never a silent stand-in
    # (completion, tokens, unit, score, verdict)
    ("x" * 950, None, "tokens", None, "length_unknown"),
    ("x" * 950, 10, "tokens", 0.0, "within_budget"),  # 950 characters, but 10 tokens
    ("x" * 950, 10, "chars", -0.75, "in_buffer"),  # characters only when asked for
    ("x" * 950, None, "chars", -0.75, "in_buffer"),
    ("漢" * 1001, 3, "chars", -1.0, "over_limit"),  # characters, not UTF-8 bytes
    ("漢" * 1000, 3, "chars", -1.0, "in_buffer"),
    ("", None, "tokens", None, "length_unknown"),
    ("", None, "chars", 0.0, "within_budget"),
]


@pytest.mark.parametrize(("completion", "tokens", "unit", "expected", "verdict"), CHARS_VS_TOKENS)
def test_characters_versus_tokens(
    completion: str, tokens: int | None, unit: str, expected: float | None, verdict: str
) -> None:
    found = run(tokens, completion=completion, max_tokens=1000, unit=unit)
    assert (found.score, found.verdict) == (expected, verdict)


def test_a_missing_length_is_explained() -> None:
    found = run(None, max_tokens=10)
    assert found.detail is not None and "completion_tokens" in found.detail and '"chars"' in found.detail


# --- details -------------------------------------------------------------------------------------------------------

CAP_100 = {"max_tokens": 100, "buffer_tokens": 20}
DETAILS = [
    (10, False, CAP_100, "10 tokens: within the 80 allowed before the buffer (cap 100)."),
    (90, False, CAP_100, "90 tokens: 10 into the 20-token buffer before the cap of 100."),
    (150, False, CAP_100, "150 tokens: over the cap of 100."),
    (
        150,
        False,
        CAP_100 | {"unit": "chars"},
        f"{len(SECRET)} characters: within the 80 allowed before the buffer (cap 100).",
    ),
    (100, True, {"max_tokens": 100}, "The completion was cut off after 100 tokens (cap 100)."),
    (None, True, {"max_tokens": 100}, "The completion was cut off (cap 100)."),
]


@pytest.mark.parametrize(("tokens", "truncated", "options", "detail"), DETAILS)
def test_detail_gives_the_numbers_never_the_text(
    tokens: int | None, truncated: bool, options: dict[str, Any], detail: str
) -> None:
    found = run(tokens, truncated=truncated, **options)
    assert found.detail == detail
    assert SECRET not in found.detail and "SECRET" not in found.model_dump_json()


def test_no_result_carries_math_or_code_fields() -> None:
    dumped = run(90, max_tokens=100).model_dump(exclude_none=True)
    assert set(dumped) == {"score", "verdict", "detail"}
