"""Every text component, and the math and code extraction, in time linear in the completion (issue 23, point 12).

A regex that backtracks (`\\s*X` tried from each character of a long run of spaces, `<answer>(.*?)</answer>` from each
of many unclosed tags) or a loop that redoes work per match (every option normalised again for every box) costs time
quadratic in the text: `<answer>x` + 60,000 spaces + `y</answer>` took 78 s and held the whole service. Each case
below is built at the completion size limit and at a 64th of it; a linear scorer takes about 64 times as long on the
larger, a quadratic one 4,096 times (in practice hours, and the test times out). Times are the thread's CPU time, the
least of a few runs, so that other processes on the machine do not enter them.

The `overlong` and `length` components have no case: they read the completion's length only, `completion_tokens` or,
in chars mode, len() of the string (constant time: 2 to 4 us at both sizes here), and never its text.
"""

from __future__ import annotations

import random
import re
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from verifier_service.schema import (
    AnswerSpec,
    ChoiceSpec,
    FormatOptions,
    MathOptions,
    RepetitionSpec,
    ScoreItem,
)
from verifier_service.scoring import answer, choice, numbers, repetition, think_format
from verifier_service.scoring.code import extract_program
from verifier_service.scoring.math import prepare_math
from verifier_service.settings import VerifierSettings

LIMIT = VerifierSettings().max_completion_chars  # 1,000,000 characters
SMALL = LIMIT // 64
# A linear scorer: about 64 times the time, more where the larger text no longer fits the processor's caches:
# repetition's n-gram table at a million units is random access to 32 MB, 228 times here on an idle machine (3.6 times
# the per-unit cost), and CI on a busy machine measured 34 to 43 times for 8 times the text (5.4 times the per-unit
# cost). A quadratic scorer: 4,096 (in practice hours, the quadratic term dominating long before the size limit). The
# bound leaves a linear scorer 16 times its per-unit cost at the larger size, and is 4 times under what a quadratic one
# takes; a ratio over the bound is measured again, twice at most, and the least counts.
LINEAR_BOUND = 1024

Scoring = Callable[[], object]


def fill(n: int, head: str, unit: str, tail: str = "") -> str:
    """head, then unit repeated, then tail: n characters or a few fewer."""
    return head + unit * ((n - len(head) - len(tail)) // len(unit)) + tail


def with_choice(options_share: float = 0.0) -> Callable[[str, int], Scoring]:
    """The choice scorer, with 26 options that together take `options_share` of the size (they grow with it)."""

    def build(text: str, n: int) -> Scoring:
        option = "an option " * max(1, int(n * options_share) // 260)
        spec = ChoiceSpec(gold="B", options=tuple(f"{option}{i}" for i in range(26)))
        item = ScoreItem(completion=text, choice=spec)
        return lambda: choice.score(item, spec)

    return build


def with_answer(match: str = "exact") -> Callable[[str, int], Scoring]:
    def build(text: str, n: int) -> Scoring:
        spec = AnswerSpec(gold=("Eiffel Tower", "1,234"), match=match)  # type: ignore[arg-type]
        item = ScoreItem(completion=text, answer=spec)
        return lambda: answer.score(item, spec)

    return build


def with_format(text: str, n: int) -> Scoring:
    spec = FormatOptions()
    item = ScoreItem(completion=text, format=spec)
    return lambda: think_format.score(item, spec)


def with_repetition(scope: str = "all") -> Callable[[str, int], Scoring]:
    def build(text: str, n: int) -> Scoring:
        spec = RepetitionSpec(scope=scope)  # type: ignore[arg-type]
        item = ScoreItem(completion=text, repetition=spec)
        return lambda: repetition.score(item, spec)

    return build


def with_math(language: str = "en") -> Callable[[str, int], Scoring]:
    """The math extraction (everything the service does before a worker), with the answer window and the answer
    length limit as large as the text: the service's defaults (the last 20,000 characters, answers up to 2,000) would
    bound the work whatever the regexes did."""
    options = MathOptions(language=language)  # type: ignore[arg-type]
    return lambda text, n: lambda: prepare_math(text, "1/2", options, window=n, max_answer=n)


def with_code(text: str, n: int) -> Scoring:
    return lambda: extract_program(text)


SPACES = " " * 7 + "\n"
CASES: list[tuple[str, Callable[[str, int], Scoring], Callable[[int], str]]] = [
    # the reproduction of point 12, and what the answer component split candidates and found blocks in
    ("answer-spaces-in-a-block", with_answer(), lambda n: fill(n, "<answer>x", " ", "y</answer>")),
    ("answer-newlines-in-a-block", with_answer(), lambda n: fill(n, "<answer>x", "\n", "y</answer>")),
    ("answer-f1-spaces-in-a-block", with_answer("f1"), lambda n: fill(n, "<answer>x", " \t", "y</answer>")),
    ("answer-unclosed-tags", with_answer(), lambda n: fill(n, "", "<answer>")),
    ("answer-tags-after-reasoning", with_answer(), lambda n: fill(n, "</think>", "<answer>a</answer>")),
    ("answer-separators", with_answer(), lambda n: fill(n, "<answer>", " or / ;", "x</answer>")),
    ("answer-lines", with_answer(), lambda n: fill(n, "", "Answer:" + SPACES)),
    ("answer-boxes", with_answer(), lambda n: fill(n, "", "\\boxed{1} ")),
    ("answer-nested-braces", with_answer(), lambda n: fill(n, "\\boxed{", "{", "}")),
    # choice: many boxes against long options (each box compared with every option), answer lines, letters
    ("choice-boxes-and-long-options", with_choice(0.5), lambda n: fill(n, "", "\\boxed{an option} ")),
    ("choice-spaces-in-a-box", with_choice(), lambda n: fill(n, "\\boxed{", " ", "}")),
    ("choice-unclosed-boxes", with_choice(), lambda n: fill(n, "", "\\boxed{")),
    ("choice-answer-lines", with_choice(), lambda n: fill(n, "", "the answer is" + SPACES)),
    ("choice-letters", with_choice(), lambda n: fill(n, "\\boxed{", "A or B ", "}")),
    ("format-opening-tags", with_format, lambda n: fill(n, "", "<think>")),
    ("format-spaces", with_format, lambda n: fill(n, "<think>", " ", "</think>")),
    ("repetition-words", with_repetition(), lambda n: " ".join(f"w{i}" for i in range(n // 8)).ljust(n)),
    ("repetition-one-character", with_repetition(), lambda n: "a" * n),
    ("repetition-han", with_repetition(), lambda n: "".join(chr(0x4E00 + i % 20_000) for i in range(n))),
    ("repetition-answer-scope", with_repetition("answer"), lambda n: fill(n, "", "</think>a ")),
    # math extraction and the rewrites before math-verify
    ("math-spaces-in-a-block", with_math(), lambda n: fill(n, "<answer>x", " ", "y</answer>")),
    ("math-spaces-in-a-box", with_math(), lambda n: fill(n, "\\boxed{", " ", "}")),
    ("math-newlines-after-gsm8k", with_math(), lambda n: fill(n, "#### ", "\n", " 1/2")),
    ("math-thousands-groups", with_math(), lambda n: fill(n, "1", " 999", " x 1/2")),
    ("math-spaces-before-quad", with_math(), lambda n: fill(n, "1", " ", "x\\quad\\text{and}\\quad 2")),
    ("math-punctuation", with_math(), lambda n: fill(n, "\\boxed{", " .", "}")),
    ("math-boxes", with_math(), lambda n: fill(n, "", "\\boxed{1} and ")),
    ("math-answer-lines", with_math(), lambda n: fill(n, "", "The answer is 1." + SPACES)),
    ("math-nesting", with_math(), lambda n: fill(n, "#### ", "{", "1")),
    ("math-chinese-answer-words", with_math("zh"), lambda n: fill(n, "", "答案是1 ")),
    ("code-opening-fences", with_code, lambda n: fill(n, "", "```python\n")),
    ("code-empty-lines", with_code, lambda n: fill(n, "```\n", "\n", "```")),
]


def cpu_seconds(scoring: Scoring, runs: int = 3) -> float:
    best = float("inf")
    for _ in range(runs):
        start = time.thread_time()
        scoring()
        best = min(best, time.thread_time() - start)
    return best


@pytest.mark.timeout(120)
@pytest.mark.parametrize(("build", "text"), [pytest.param(b, t, id=name) for name, b, t in CASES])
def test_scoring_is_linear_at_the_size_limit(build: Callable[[str, int], Scoring], text: Callable[[int], str]) -> None:
    small, large = text(SMALL), text(LIMIT)
    assert len(large) > LIMIT - 100  # the size limit, give or take the last unit
    scoring_small, scoring_large = build(small, SMALL), build(large, LIMIT)
    ratios: list[float] = []
    while len(ratios) < 3 and min(ratios, default=LINEAR_BOUND) >= LINEAR_BOUND:
        ratios.append(cpu_seconds(scoring_large, runs=2) / max(cpu_seconds(scoring_small), 1e-6))
    assert min(ratios) < LINEAR_BOUND, f"{', '.join(f'{r:.1f}' for r in ratios)} times the time for 64 times the text"


# The linear forms read what the backtracking patterns they replace read (small texts, where backtracking is cheap).

OLD_BLOCK = re.compile(r"<answer>(.*?)</answer>", re.DOTALL | re.IGNORECASE)
OLD_CANDIDATES = re.compile(r"(?i)\s+(?:and/)?or\s+|;|(?<!\d)\s*/\s*(?!\d)")
OLD_NUMBERS = {
    "_TEXT_AND": r"\s*\\q?quad\s*\\text\s*\{\s*(?:and|or)\s*\}\s*\\q?quad\s*",
    "_PUNCT_BEFORE_CLOSE": r"(?<!\\)\s*[.,;](\s*)(?=\$|\\\]|\\\)|\}\s*$)",
    "_TRAILING": r"[\s.,;:!*]+$",
    "MIXED_NUMBER": r"(?<![\d.,/\w])(?P<sign>[-+]?)(?P<whole>\d{1,3}(?: \d{3})+|\d+)[ \t]+(?P<num>\d+)/(?P<den>\d+)"
    r"(?![\d/.]\d|\d|/)(?P<pct>\s*(?:%|[Pp]ercentage|[Pp]ercent|[Pp]ct))?",
}
PIECES = {
    "answer": ["<answer>", "</answer>", "<ANSWER>", "</Answer>", "a", " ", "\n", " or ", "and/or", "/", ";", "1", "ſ"],
    "_TEXT_AND": [" ", "\n", "\\quad", "\\qquad", "\\text{and}", "\\text{ or }", "x", "\\", "}"],
    "_PUNCT_BEFORE_CLOSE": [" ", "\n", "\\", ".", ",", ";", "$", "\\]", "\\)", "}", "x"],
    "_TRAILING": [" ", ".", ",", ";", ":", "!", "*", "x", "\n"],
    "MIXED_NUMBER": ["1", "12", "123", "000", " ", "\t", "/", "-", ".", ",", "%", " percent", "x", "4/9", " 000"],
}


def texts(pieces: list[str], count: int = 20_000) -> Iterator[str]:
    rng = random.Random(0)
    for _ in range(count):
        yield "".join(rng.choice(pieces) for _ in range(rng.randint(0, 10)))


def spans(pattern: re.Pattern[str], text: str) -> list[tuple[Any, ...]]:
    return [(*found.span(), *found.groups()) for found in pattern.finditer(text)]


def test_answer_blocks_and_candidates_are_read_as_the_regexes_read_them() -> None:
    for text in texts(PIECES["answer"]):
        assert answer.answer_blocks(text) == OLD_BLOCK.findall(text), text
        parts = [part for part in OLD_CANDIDATES.split(text) if part.strip()]
        assert answer.candidates(text) == [" ".join(part.split()) for part in parts], text  # runs of spaces made one


@pytest.mark.parametrize("name", list(OLD_NUMBERS))
def test_the_rewrites_match_where_the_backtracking_patterns_matched(name: str) -> None:
    """Mixed numbers differ in one case only: the backtracking pattern could start at a group of digits right after
    another number and a space (`12,1 000 0004/9` from its `000`), where the linear one does not."""
    old, new = re.compile(OLD_NUMBERS[name]), getattr(numbers, name)
    for text in texts(PIECES[name]):
        if name == "MIXED_NUMBER":
            lost = {found[0] for found in spans(old, text)} - {found[0] for found in spans(new, text)}
            if lost:
                assert all(text[start - 2 : start - 1].isdigit() and text[start - 1] == " " for start in lost), text
                continue
        assert spans(new, text) == spans(old, text), text
