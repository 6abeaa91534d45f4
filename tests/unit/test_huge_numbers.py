"""Numbers past Python's limit on int() and str() (4,300 digits) in an answer or a gold (issue 23, point 11).

A mixed number with 4,400 digits (`#### 99...9 1/2`) made `numbers.rewrite` call int() on it, which raised before the
answer's length was checked, and the whole batch answered 500. Such an answer is too long (0), or wrong where the
length limit allows it; such a gold cannot be judged (null); nothing raises.
"""

from __future__ import annotations

import sys

import pytest

from verifier_service.schema import AnswerSpec, MathOptions, ScoreItem, Verdict
from verifier_service.scoring import answer, numbers
from verifier_service.scoring.math import MathResult, MathTask, prepare_math, verify_math

NINES = "9" * 4_400  # past int()'s 4,300 digits
HUGE_ANSWERS = {
    "gsm8k": f"#### {NINES} 1/2",
    "boxed": f"The answer is \\boxed{{{NINES} 1/2}}.",
    "bare tail": f"so it is {NINES} 1/2",
    "thousands groups": "#### 1" + " 999" * 1_500 + " 1/2",
    "long numerator": f"#### 1 {NINES}/{NINES}9",
    "long denominator": f"#### 1 1/{NINES}",
    "percent": f"#### {NINES} 1/2 %",
}


@pytest.mark.parametrize("completion", HUGE_ANSWERS.values(), ids=HUGE_ANSWERS.keys())
def test_a_huge_mixed_number_is_too_long(completion: str) -> None:
    found = prepare_math(completion, "1/2", MathOptions())
    assert isinstance(found, MathResult)
    assert (found.score, found.verdict) == (0.0, Verdict.ANSWER_TOO_LONG)


def test_a_huge_number_on_an_answer_line_is_wrong() -> None:
    """An 'answer is' line is read up to 300 characters: the number is cut, and wrong."""
    found = prepare_math(f"<think>a</think>The answer is {NINES} 1/2.", "1/2", MathOptions())
    assert isinstance(found, MathResult)
    assert (found.score, found.verdict) == (0.0, Verdict.WRONG)


@pytest.mark.parametrize("completion", HUGE_ANSWERS.values(), ids=HUGE_ANSWERS.keys())
def test_a_huge_mixed_number_within_a_raised_length_limit_is_wrong(completion: str) -> None:
    """An operator may allow long answers (VERIFIER_MAX_ANSWER_CHARS): the number goes to math-verify as written, which
    reads an answer from it (not its value) and finds it wrong."""
    found = prepare_math(completion, "1/2", MathOptions(), max_answer=100_000)
    assert isinstance(found, MathTask)  # not settled before math-verify: the answer is within the limit
    judged = verify_math(found)
    assert (judged.score, judged.verdict) == (0.0, Verdict.WRONG)


def test_a_mixed_number_past_the_digits_this_path_converts_is_left_as_written() -> None:
    longest = "1" * (numbers.MAX_DIGITS - 2)  # with the numerator and denominator: MAX_DIGITS digits
    assert numbers.rewrite(f"{longest} 1/2", latex=False) == f"{int(longest) * 2 + 1}/2"
    assert numbers.rewrite(f"1{longest} 1/2", latex=False) == f"1{longest} 1/2"


HUGE_GOLDS = {
    "fraction": f"{NINES}/7",
    "latex fraction": f"\\frac{{{NINES}}}{{7}}",
    "integer": NINES,
    "gsm8k solution": f"So she pays that much.\n#### {NINES}/7",
}


@pytest.mark.parametrize("gold", HUGE_GOLDS.values(), ids=HUGE_GOLDS.keys())
def test_a_huge_gold_cannot_be_judged(gold: str) -> None:
    found = prepare_math("The answer is \\boxed{3}.", gold, MathOptions())
    assert isinstance(found, MathTask)  # not settled here: past the digits the fast path converts
    judged = verify_math(found)
    assert (judged.score, judged.verdict) == (None, Verdict.GOLD_UNPARSEABLE)


def _judged(completion: str, gold: str) -> tuple[float | None, Verdict]:
    found = prepare_math(completion, gold, MathOptions())
    if isinstance(found, MathTask):
        found = verify_math(found)
    return found.score, found.verdict


@pytest.mark.parametrize("digits", [700, 1_500])
def test_a_gold_past_the_digits_this_path_converts_is_judged_by_math_verify(digits: int) -> None:
    """Past numbers.MAX_DIGITS the fast path leaves a gold to math-verify, which reads it up to int()'s limit
    (docs/architecture.md, 'Math grading beyond math-verify 0.9.0')."""
    integer, fraction = "9" * digits, f"{'9' * digits}/7"
    for gold in (integer, fraction):
        assert numbers.plain_number(gold) is None
        assert _judged(f"\\boxed{{{gold}}}", gold) == (1.0, Verdict.CORRECT)
        assert _judged("\\boxed{3}", gold) == (0.0, Verdict.WRONG)
    assert _judged(f"\\boxed{{\\frac{{{integer}}}{{7}}}}", fraction) == (1.0, Verdict.CORRECT)


def test_a_gold_is_unparseable_only_past_the_limit_of_int() -> None:
    limit = sys.get_int_max_str_digits()  # 4,300 unless the process changed it
    for gold in ("{}", "-{}", "{}/7", "\\frac{{{}}}{{7}}", "\\frac{{1}}{{{}}}"):
        assert _judged("\\boxed{3}", gold.format("9" * limit)) == (0.0, Verdict.WRONG), gold
        assert _judged("\\boxed{3}", gold.format("9" * (limit + 1))) == (None, Verdict.GOLD_UNPARSEABLE), gold


def test_a_mixed_number_answer_past_the_digits_this_path_converts_is_wrong_within_the_length_limit() -> None:
    """Left as written, math-verify does not read it as its value: even the right one is wrong."""
    whole = "9" * 700
    assert _judged(f"#### {whole} 1/2", f"{int(whole) * 2 + 1}/2") == (0.0, Verdict.WRONG)
    assert _judged(f"#### {whole[:600]} 1/2", f"{int(whole[:600]) * 2 + 1}/2") == (1.0, Verdict.CORRECT)


def test_a_huge_decimal_gold_is_read_as_a_float() -> None:
    found = prepare_math("The answer is \\boxed{3}.", f"{NINES}.5", MathOptions())
    assert isinstance(found, MathTask)
    assert verify_math(found).verdict == Verdict.WRONG


def test_long_plain_numbers_are_left_to_math_verify() -> None:
    assert numbers.plain_number("9" * numbers.MAX_DIGITS) is not None
    assert numbers.plain_number("9" * (numbers.MAX_DIGITS + 1)) is None
    assert numbers.plain_number(f"\\boxed{{{'1' * 300}/{'3' * 300}}}") is not None
    assert numbers.plain_number(f"\\boxed{{{'1' * 400}/{'3' * 400}}}") is None


def test_answer_numbers_too_large_for_a_float_are_compared_as_text() -> None:
    """float() reads them all as infinity, which would make any two of them equal."""
    spec = AnswerSpec(gold="9" * 400)
    for completion, verdict in [
        (f"<answer>{'9' * 400}</answer>", "correct"),
        (f"<answer>{'8' * 400}</answer>", "wrong"),
    ]:
        assert answer.score(ScoreItem(completion=completion, answer=spec), spec).verdict == verdict
