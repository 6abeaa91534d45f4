"""The `answer` component: SQuAD normalisation, numbers, hedges, and no credit for a substring."""

from __future__ import annotations

import pytest

from verifier_service.schema import AnswerSpec, ScoreItem
from verifier_service.scoring.answer import score


def judged(completion: str, gold: str | tuple[str, ...] = "Paris", match: str = "exact") -> tuple[float | None, str]:
    spec = AnswerSpec(gold=gold, match=match)  # type: ignore[arg-type]
    found = score(ScoreItem(completion=completion, answer=spec), spec)
    return found.score, found.verdict


@pytest.mark.parametrize(
    ("completion", "gold"),
    [
        ("<answer>Paris</answer>", "Paris"),
        ("<think>x</think><answer> paris. </answer>", "Paris"),
        ("<answer>The Eiffel Tower</answer>", ("eiffel tower", "tour eiffel")),
        ("<answer>Tour Eiffel</answer>", ("eiffel tower", "tour eiffel")),
        ("<think>x</think>The answer is \\boxed{\\text{Paris}}.", "Paris"),
        ("<think>x</think>Answer: Paris", "Paris"),
        ("<answer>1,000</answer>", "1000"),
        ("<answer>$7.50</answer>", "7.5"),
        ("<answer>0.333333333</answer>", "0.3333333333"),
        ("<answer>Ｐａｒｉｓ</answer>", "Paris"),  # NFKC
        ("<answer>Paris</answer><answer>paris</answer>", "Paris"),  # blocks that agree
    ],
)
def test_right_answers(completion: str, gold: str | tuple[str, ...]) -> None:
    assert judged(completion, gold) == (1.0, "correct")


@pytest.mark.parametrize(
    ("completion", "verdict"),
    [
        ("<answer>London</answer>", "wrong"),
        ("<answer>not Paris</answer>", "wrong"),  # no substring credit
        ("<answer>Paris, France</answer>", "wrong"),
        ("<answer>Paris or London</answer>", "hedged"),
        ("<answer>Paris; London</answer>", "hedged"),
        ("<answer>Paris / London</answer>", "hedged"),
        ("<answer>London</answer><answer>Paris</answer>", "hedged"),  # tag spam
        ("<answer></answer>", "no_answer"),  # Visual-RFT#176: an empty answer wins nothing
        ("<answer> ... </answer>", "no_answer"),
        ("The capital of France is Paris.", "no_answer"),  # never the whole text
        ("<think>the answer is <answer>Paris</answer>", "no_answer"),  # the reasoning never closed
        ("<think><answer>Paris</answer></think>Answer: London", "wrong"),  # only what follows the reasoning
    ],
)
def test_what_earns_nothing(completion: str, verdict: str) -> None:
    assert judged(completion) == (0.0, verdict)


def test_numbers_compare_as_numbers_and_fractions_are_not_hedges() -> None:
    assert judged("<answer>1/2</answer>", "1/2") == (1.0, "correct")
    assert judged("<answer>1001</answer>", "1,000") == (0.0, "wrong")
    assert judged("<answer>12%</answer>", "12") == (1.0, "correct")


def test_f1_gives_partial_credit_but_never_for_a_hedge() -> None:
    found, verdict = judged("<answer>Barack Obama Jr</answer>", "Barack Obama", match="f1")
    assert verdict == "partial" and found == pytest.approx(0.8)
    assert judged("<answer>Obama or Bush</answer>", "Barack Obama", match="f1") == (0.0, "hedged")
    assert judged("<answer>the Barack Obama</answer>", "Barack Obama", match="f1") == (1.0, "correct")
    assert judged("<answer>Bush</answer>", "Barack Obama", match="f1") == (0.0, "wrong")


@pytest.mark.parametrize("gold", ["the", "...", ("a", "!")])
def test_a_gold_that_normalises_to_nothing_cannot_be_judged(gold: str | tuple[str, ...]) -> None:
    assert judged("<answer>the</answer>", gold) == (None, "bad_gold")


def test_a_gold_that_is_itself_a_list_is_matched_whole() -> None:
    assert judged("<answer>rock or roll</answer>", "Rock or roll") == (1.0, "correct")


def test_a_megabyte_returns() -> None:
    assert judged("<answer>x</answer> " * 50_000 + "<answer>Paris</answer>") == (0.0, "hedged")
    assert judged("<think>" + "a " * 500_000 + "</think><answer>Paris</answer>") == (1.0, "correct")


def test_golds_are_read_once_and_long_ones_are_not_kept() -> None:
    from verifier_service.scoring import answer

    answer._cached_forms.cache_clear()
    assert judged("<answer>Paris</answer>") == judged("<answer>paris</answer>") == (1.0, "correct")
    assert answer._cached_forms.cache_info().currsize == 1  # one gold, read once for both items
    long_gold = "word " * 200  # 1,000 characters: read every time, never kept
    assert judged(f"<answer>{long_gold}</answer>", long_gold) == (1.0, "correct")
    assert judged("<answer>word</answer>", long_gold)[1] == "wrong"
    assert answer._cached_forms.cache_info().currsize == 1
