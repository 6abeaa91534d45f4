import doctest
import json
import re
from pathlib import Path

import pytest

from verifier_service.schema import FormatOptions, Verdict
from verifier_service.scoring import think_format
from verifier_service.scoring.think_format import FormatResult, score_format

DEFAULT = FormatOptions()
V = Verdict

# TRL's think_format_reward, verbatim, so the conformance data can be checked against its own harness.
TRL_PATTERN = re.compile(r"^<think>(?!.*<think>)(.*?)</think>.*$", re.DOTALL)

CONFORMANCE = [
    json.loads(line)
    for line in (Path(__file__).parents[1] / "data" / "think_format.jsonl").read_text().splitlines()
    if line.strip()
]


def _trl_reward(completion: str) -> float:
    return 1.0 if TRL_PATTERN.match(completion) else 0.0


def _check(completion: str, options: FormatOptions, verdict: Verdict) -> FormatResult:
    result = score_format(completion, options=options)
    assert result.verdict == verdict, result.detail
    if verdict == V.OK:
        assert (result.score, result.detail) == (1.0, None)
    else:
        assert result.score == 0.0
        assert result.detail
    return result


# --- conformance with TRL's own test cases ---------------------------------------------------------------


def test_conformance_data_is_what_trl_scores() -> None:
    assert len(CONFORMANCE) == 14
    assert [_trl_reward(row["completion"]) for row in CONFORMANCE] == [row["expected"] for row in CONFORMANCE]


@pytest.mark.parametrize("row", CONFORMANCE, ids=[f"row{i}" for i in range(len(CONFORMANCE))])
def test_conformance_row(row: dict) -> None:
    result = score_format(row["completion"], options=DEFAULT)
    assert result.score == row["expected"], result


# --- one table per rule ------------------------------------------------------------------------------------

VERDICT_CASES = [
    # ok
    ("<think>r</think>a", V.OK),
    ("<think>\nThis is my reasoning.\n</think>\nThis is my answer.", V.OK),
    ("<think>2 < 3 and <b>bold</b> and </thinking></think>a", V.OK),
    # missing open tag
    ("", V.MISSING_OPEN_TAG),
    ("just an answer", V.MISSING_OPEN_TAG),
    ("reasoning</think>answer", V.MISSING_OPEN_TAG),
    ("<Think>r</Think>a", V.MISSING_OPEN_TAG),
    ("<think >r</think>a", V.MISSING_OPEN_TAG),
    ("<thinking>r</thinking>a", V.MISSING_OPEN_TAG),
    ("</think></think></think></think>", V.MISSING_OPEN_TAG),
    # missing close tag
    ("<think>r", V.MISSING_CLOSE_TAG),
    ("<think>reasoning</thinking> answer", V.MISSING_CLOSE_TAG),
    ("<think>", V.MISSING_CLOSE_TAG),
    # text before the reasoning
    ("This<think>r</think>a", V.TEXT_BEFORE_REASONING),
    ("Sure!\n<think>r</think>a", V.TEXT_BEFORE_REASONING),
    ("\u200b<think>r</think>a", V.TEXT_BEFORE_REASONING),  # a zero-width space is not whitespace
    ("x<think>r<think>", V.TEXT_BEFORE_REASONING),
    # nested
    ("<think>a<think>b</think></think>c", V.NESTED_TAGS),
    ("<think>a<think>b</think>c", V.NESTED_TAGS),
    ("<think>a<think>b", V.NESTED_TAGS),
    ("<think><think>", V.NESTED_TAGS),
    # multiple blocks (a stray closing tag after the block counts as a repeat)
    ("<think>a</think>b<think>c</think>d", V.MULTIPLE_BLOCKS),
    ("<think>a</think><think>b</think>c", V.MULTIPLE_BLOCKS),
    ("<think>a</think>b<think>c", V.MULTIPLE_BLOCKS),
    ("<think>a</think>b</think>c", V.MULTIPLE_BLOCKS),
    ("<think></think><think>r</think>a", V.MULTIPLE_BLOCKS),
    # reversed
    ("</think>a<think>b", V.REVERSED_TAGS),
    ("</think>r<think>a</think>b", V.REVERSED_TAGS),
    ("</think></think></think><think>r</think>a", V.REVERSED_TAGS),
    # empty reasoning is allowed, as TRL allows it
    ("<think></think>a", V.OK),
    ("<think> \n\t </think>a", V.OK),
    # empty answer
    ("<think>r</think>", V.EMPTY_ANSWER),
    ("<think>r</think>  \n\t", V.EMPTY_ANSWER),
    ("<think></think>", V.EMPTY_ANSWER),
]


@pytest.mark.parametrize(("completion", "verdict"), VERDICT_CASES)
def test_verdict(completion: str, verdict: Verdict) -> None:
    _check(completion, DEFAULT, verdict)


def test_every_format_verdict_is_covered() -> None:
    format_verdicts = {
        V.OK,
        V.MISSING_OPEN_TAG,
        V.MISSING_CLOSE_TAG,
        V.TEXT_BEFORE_REASONING,
        V.NESTED_TAGS,
        V.MULTIPLE_BLOCKS,
        V.REVERSED_TAGS,
        V.EMPTY_ANSWER,
    }
    assert {verdict for _, verdict in VERDICT_CASES} == format_verdicts


@pytest.mark.parametrize(("completion", "verdict"), VERDICT_CASES)
def test_default_rules_are_stricter_than_trl(completion: str, verdict: Verdict) -> None:
    if verdict == V.OK:
        assert _trl_reward(completion) == 1.0


LEADING_WHITESPACE_CASES = [
    (" <think>r</think>a", V.OK),
    ("\n\n<think>r</think>a", V.OK),
    ("\t \r\n<think>r</think>a", V.OK),
    ("\u3000<think>r</think>a", V.OK),  # ideographic space
    ("  <think>r</think>", V.EMPTY_ANSWER),
    ("\n<think>r", V.MISSING_CLOSE_TAG),
    ("\n.<think>r</think>a", V.TEXT_BEFORE_REASONING),
]


@pytest.mark.parametrize(("completion", "verdict"), LEADING_WHITESPACE_CASES)
def test_leading_whitespace(completion: str, verdict: Verdict) -> None:
    _check(completion, DEFAULT, verdict)


PREFILLED_CASES = [
    ("reasoning</think>answer", V.OK),
    ("\nreasoning\n</think>\nanswer", V.OK),
    ("Sure, let me think.</think>a", V.OK),  # text at the start is reasoning, not text before it
    ("<think>reasoning</think>answer", V.NESTED_TAGS),
    ("  \n<think>reasoning</think>answer", V.NESTED_TAGS),
    ("r<think>s</think>a", V.NESTED_TAGS),
    ("", V.MISSING_CLOSE_TAG),
    ("reasoning and answer", V.MISSING_CLOSE_TAG),
    ("</think>answer", V.OK),
    ("  \n</think>answer", V.OK),
    ("reasoning</think>", V.EMPTY_ANSWER),
    ("a</think>b<think>c</think>d", V.MULTIPLE_BLOCKS),
    ("a</think>b</think>", V.MULTIPLE_BLOCKS),
]


@pytest.mark.parametrize(("completion", "verdict"), PREFILLED_CASES)
def test_prefilled(completion: str, verdict: Verdict) -> None:
    _check(completion, FormatOptions(prefilled=True), verdict)


def test_prefilled_nested_detail_says_the_template_opened_the_tag() -> None:
    result = _check("<think>r</think>a", FormatOptions(prefilled=True), V.NESTED_TAGS)
    assert "template" in (result.detail or "")


CUSTOM_TAG_CASES = [
    ("reasoning", "<reasoning>r</reasoning>a", False, V.OK),
    ("reasoning", "<reasoning><think>r</think></reasoning>a", False, V.OK),
    ("reasoning", "<think>r</think>a", False, V.MISSING_OPEN_TAG),
    ("reasoning", "<reasoning>r</reasoning>", False, V.EMPTY_ANSWER),
    ("reasoning", "<reasoning>a<reasoning>b</reasoning></reasoning>c", False, V.NESTED_TAGS),
    ("reasoning", "r</reasoning>a", True, V.OK),
    ("reasoning", "<reasoning>r</reasoning>a", True, V.NESTED_TAGS),
    ("thought-process", "<thought-process>r</thought-process>a", False, V.OK),
    ("thought-process", "<thought_process>r</thought_process>a", False, V.MISSING_OPEN_TAG),
    ("Think", "<think>r</think>a", False, V.MISSING_OPEN_TAG),
    ("Think", "<Think>r</Think>a", False, V.OK),
]


@pytest.mark.parametrize(("tag", "completion", "prefilled", "verdict"), CUSTOM_TAG_CASES)
def test_custom_tag(tag: str, completion: str, prefilled: bool, verdict: Verdict) -> None:
    _check(completion, FormatOptions(tag=tag, prefilled=prefilled), verdict)


def test_detail_names_the_custom_tag() -> None:
    result = _check("<answer>r</answer>", FormatOptions(tag="answer"), V.EMPTY_ANSWER)
    assert "</answer>" in (result.detail or "")


NO_ANSWER_REQUIRED_CASES = [
    ("<think>r</think>", V.OK),
    ("<think>r</think> \n", V.OK),
    ("<think>r</think>a", V.OK),
    ("<think></think>", V.OK),
    ("<think>r", V.MISSING_CLOSE_TAG),
    ("<think>r</think><think>s</think>", V.MULTIPLE_BLOCKS),
    ("x<think>r</think>", V.TEXT_BEFORE_REASONING),
]


@pytest.mark.parametrize(("completion", "verdict"), NO_ANSWER_REQUIRED_CASES)
def test_require_answer_false(completion: str, verdict: Verdict) -> None:
    _check(completion, FormatOptions(require_answer=False), verdict)


# --- linear time on adversarial input ----------------------------------------------------------------------

ADVERSARIAL_CASES = [
    ("<think>" * 30_000, V.NESTED_TAGS),
    ("</think>" * 30_000, V.MISSING_OPEN_TAG),
    ("</think>" * 25_000 + "<think>", V.REVERSED_TAGS),
    ("<think>" + "<" * 200_000, V.MISSING_CLOSE_TAG),
    ("<think>" + "</think" * 30_000, V.MISSING_CLOSE_TAG),
    ("<think>a</think>" * 15_000, V.MULTIPLE_BLOCKS),
    (" " * 200_000 + "x<think>r</think>a", V.TEXT_BEFORE_REASONING),
    ("<think>" + " " * 200_000 + "</think>", V.EMPTY_ANSWER),
    ("<think>r</think>" + "\n" * 200_000, V.EMPTY_ANSWER),
    ("<thin" * 40_000, V.MISSING_OPEN_TAG),
]


@pytest.mark.timeout(10)
@pytest.mark.parametrize(
    ("completion", "verdict"),
    ADVERSARIAL_CASES,
    ids=[f"adversarial{i}" for i in range(len(ADVERSARIAL_CASES))],
)
def test_adversarial_input_finishes(completion: str, verdict: Verdict) -> None:
    assert len(completion) >= 200_000
    _check(completion, DEFAULT, verdict)


@pytest.mark.timeout(10)
def test_adversarial_input_finishes_when_prefilled() -> None:
    _check("<think>" * 30_000, FormatOptions(prefilled=True), V.NESTED_TAGS)


def test_docstring_example() -> None:
    assert doctest.testmod(think_format, raise_on_error=True).attempted == 2
