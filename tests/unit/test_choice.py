"""The `choice` component: the cases peers and users reported, and hedges that must earn nothing."""

from __future__ import annotations

import pytest

from verifier_service.schema import ChoiceSpec, ScoreItem
from verifier_service.scoring.choice import score

OPTIONS = ("Paris", "Rome", "Berlin", "Madrid")


def judged(completion: str, gold: str | tuple[str, ...] = "C", **options: object) -> tuple[float | None, str]:
    spec = ChoiceSpec(gold=gold, **options)  # type: ignore[arg-type]
    found = score(ScoreItem(completion=completion, choice=spec), spec)
    return found.score, found.verdict


@pytest.mark.parametrize(
    "completion",
    [
        "<think>It is C.</think>\\boxed{C}",
        "<think>x</think>The answer is $\\boxed{\\text{C}}$.",  # NeMo-Gym#1844
        "<think>x</think>\\boxed{\\textbf{C}}",
        "<think>x</think>\\boxed{(C)}",
        "<think>x</think>\\boxed{C: Berlin}",
        "<think>x</think>Answer: C",
        "<think>x</think>**Answer:** (C)",
        "<think>x</think>The correct answer is **C**.",
        "<think>x</think>Final answer: C. Berlin",
        "<think>x</think>C",
        "<think>x</think>(C)",
        # the reasoning may weigh other options: only the answer after it counts
        "<think>Is it \\boxed{A}? No, A is wrong.</think>\\boxed{C}",
        # tinker-cookbook#895: the last box wins, not the first
        "<think>x</think>First I thought \\boxed{C}. Checking again, it is still \\boxed{C}.",
    ],
)
def test_right_answers(completion: str) -> None:
    assert judged(completion) == (1.0, "correct")


@pytest.mark.parametrize(
    ("completion", "verdict"),
    [
        ("<think>x</think>\\boxed{B}", "wrong"),
        ("<think>x</think>The answer is A or C.", "hedged"),  # Visual-RFT#79
        ("<think>x</think>\\boxed{A, B, C, D}", "hedged"),
        ("<think>x</think>\\boxed{A/C}", "hedged"),
        ("<think>x</think>\\boxed{A} or maybe \\boxed{C}", "hedged"),  # boxes that disagree
        ("<think>x</think>The answer is not A.", "hedged"),  # medmarks#63
        ("<think>x</think>\\boxed{Z}", "not_an_option"),
        ("<think>x</think>I am not sure which one it is, to be honest with you.", "no_answer"),
        ("<think>x</think>", "no_answer"),
        ("<think>It is \\boxed{C} but I keep thinking", "no_answer"),  # reasoning never closed
        ("<think>x</think>The answer is a tricky one.", "no_answer"),  # the article is not option A
    ],
)
def test_wrong_and_hedged_answers_earn_nothing(completion: str, verdict: str) -> None:
    assert judged(completion) == (0.0, verdict)


def test_option_text_counts_only_when_exactly_one_option_matches() -> None:
    assert judged("<think>x</think>\\boxed{Berlin}", options=OPTIONS) == (1.0, "correct")
    assert judged("<think>x</think>Answer: berlin.", options=OPTIONS) == (1.0, "correct")
    assert judged("<think>x</think>\\boxed{Rome}", options=OPTIONS) == (0.0, "wrong")
    ambiguous = ("Berlin", "Rome", "Berlin", "Madrid")  # two options read the same
    assert judged("<think>x</think>\\boxed{Berlin}", options=ambiguous) == (0.0, "no_answer")


def test_letters_come_from_the_options_or_the_spec() -> None:
    assert judged("<think>x</think>\\boxed{E}", gold="E", letters="ABCDE") == (1.0, "correct")
    assert judged("<think>x</think>\\boxed{E}", options=OPTIONS) == (0.0, "not_an_option")
    assert judged("<think>x</think>\\boxed{J}", gold="J") == (1.0, "correct")  # default: A to J


def test_multi_select_needs_the_exact_set() -> None:
    assert judged("<think>x</think>\\boxed{A, C}", gold=("A", "C")) == (1.0, "correct")
    assert judged("<think>x</think>Answer: C and A", gold=("A", "C")) == (1.0, "correct")
    assert judged("<think>x</think>\\boxed{A}", gold=("A", "C")) == (0.0, "wrong")
    assert judged("<think>x</think>\\boxed{A, B, C}", gold=("A", "C")) == (0.0, "wrong")
    assert judged("<think>x</think>\\boxed{A or C}", gold=("A", "C")) == (0.0, "hedged")


@pytest.mark.parametrize("gold", ["E", "AB", "", "1"])
def test_a_gold_outside_the_letters_cannot_be_judged(gold: str) -> None:
    assert judged("<think>x</think>\\boxed{C}", gold=gold, letters="ABCD") == (None, "bad_gold")


def test_a_megabyte_returns() -> None:
    assert judged("<think>" + "A or B? " * 100_000 + "</think>" + "\\boxed{C}" * 1000) == (1.0, "correct")
