"""The `choice` component: multiple choice (GPQA, MMLU, SuperGPQA), 1 for the right letter, else 0.

Only the answer after the reasoning is read. The answer is the last `\\boxed{}` there (every box must name the same
option, else the answer is hedged), else the last "answer is" / "Answer:" line, else the whole answer when it is
nothing but a letter. In it, a letter is read in the forms `C`, `(C)`, `**C**`, `\\text{C}`, `C: text`, `C. text`;
only capital letters count, so the article "a" is never option A. An option's text counts as its letter only when
exactly one option matches it. Two different letters ("A or B", "A/C"), boxes that disagree, and a negation ("not A")
are `hedged`: the model does not get to spread its bets.

>>> spec = ChoiceSpec(gold="C", options=("Paris", "Rome", "Berlin"))
>>> [score(ScoreItem(completion=c, choice=spec), spec).verdict for c in (
...     "<think>hm</think>The answer is \\\\boxed{\\\\text{C}}.", "Answer: Berlin", "A or C", "Answer: D")]
['correct', 'correct', 'hedged', 'not_an_option']
"""

from __future__ import annotations

import functools
import re
import unicodedata
from collections.abc import Callable

from verifier_service.schema import ChoiceSpec, ComponentResult, ScoreItem, Verdict
from verifier_service.scoring.extract import boxed_spans, final_answer_region
from verifier_service.scoring.text import result, without_punctuation

_WRAPPER = re.compile(r"^\\(?:text|textbf|mathrm|mathbf|mbox)\s*\{(.*)\}$", re.DOTALL)
_ANSWER_LINE = re.compile(r"(?i)\banswer\b(?:\s+is)?[\s:*]*(?:option\s+|choice\s+)?([^\n]{1,200})")
_LEADING = re.compile(r"^[(\[]?([A-Z])(?:[)\]]|[.:)](?=\s|$)|(?=\s*$))")
_LETTER = re.compile(r"(?<![A-Za-z0-9'’])([A-Z])(?![A-Za-z0-9'’])")
_NEGATION = re.compile(r"(?i)\b(?:not|none of|neither|nor|except)\b")
_OR = re.compile(r"(?i)\bor\b")
_SPACES = re.compile(r"\s+")


def _clean(text: str) -> str:
    """The answer without math delimiters, bold, \\text{} and a final full stop."""
    text = text.strip().strip("$").strip()
    for _ in range(4):
        wrapped = _WRAPPER.match(text)
        text = wrapped.group(1).strip() if wrapped else text
        text = text.strip("*").strip().removesuffix(".").strip()
    return text


def _normal(text: str) -> str:
    text = unicodedata.normalize("NFKC", text).casefold()
    return _SPACES.sub(" ", without_punctuation(text)).strip()


def _read(
    answer: str, spec: ChoiceSpec, options: Callable[[], list[str]], letters: str, multi: bool
) -> tuple[Verdict, frozenset[str]]:
    """What one extracted answer chooses: (no_answer | hedged | not_an_option | chosen, the letters chosen).
    `options` gives the options' texts normalised."""
    text = _clean(answer)
    if not text:
        return Verdict.NO_ANSWER, frozenset()
    if _NEGATION.search(text):
        return Verdict.HEDGED, frozenset()
    leading = _LEADING.match(text)
    if leading is not None and not multi:
        letter = leading.group(1)
        return (Verdict.CORRECT, frozenset(letter)) if letter in letters else (Verdict.NOT_AN_OPTION, frozenset())
    if spec.options:
        wanted = _normal(text)
        matching = [letters[i] for i, option in enumerate(options()) if option == wanted]
        if len(matching) == 1:
            return Verdict.CORRECT, frozenset(matching)
    found = frozenset(_LETTER.findall(text))
    if found:
        if (len(found) > 1 and not multi) or (multi and _OR.search(text)):
            return Verdict.HEDGED, found
        if not found <= set(letters):
            return Verdict.NOT_AN_OPTION, found
        return Verdict.CORRECT, found
    return Verdict.NO_ANSWER, frozenset()


def _box_contents(region: str) -> list[str]:
    contents = []
    for start, end in boxed_spans(region):
        opening = region.index("{", start)
        contents.append(region[opening + 1 : end - 1])
    return contents


def score(item: ScoreItem, spec: ChoiceSpec) -> ComponentResult:
    """The `choice` component of an item."""
    letters = spec.option_letters()
    golds = (spec.gold,) if isinstance(spec.gold, str) else spec.gold
    gold = frozenset(g.strip().upper() for g in golds)
    if not gold or any(len(g) != 1 or g not in letters for g in gold):
        return result(None, Verdict.BAD_GOLD, f"The gold answer is not one of the letters {letters}.")
    multi = len(gold) > 1
    region = final_answer_region(item.completion, spec.think_tag)
    if region is None:
        return result(0.0, Verdict.NO_ANSWER, "The reasoning was opened and never closed.")
    # The options normalised once, when first compared with: every box is read, and normalising every option again
    # for each box would cost boxes times options.
    options = functools.cache(lambda: [_normal(option) for option in (spec.options or ())[: len(letters)]])
    boxes = _box_contents(region)
    if boxes:
        readings = [_read(box, spec, options, letters, multi) for box in boxes]
        if len({chosen for verdict, chosen in readings if verdict == Verdict.CORRECT}) > 1:
            return result(0.0, Verdict.HEDGED, "The boxed answers name different options.", boxes[-1][:200])
        answer, (verdict, chosen) = boxes[-1], readings[-1]
    else:
        lines = list(_ANSWER_LINE.finditer(region))
        stripped = region.strip()
        if lines:
            answer = lines[-1].group(1)
        elif len(stripped) <= 16:
            answer = stripped
        else:
            return result(0.0, Verdict.NO_ANSWER, "No boxed answer and no answer line after the reasoning.")
        verdict, chosen = _read(answer, spec, options, letters, multi)
    extracted = answer.strip()[:200] or None
    if verdict == Verdict.NO_ANSWER:
        return result(0.0, verdict, "No option letter in the answer.", extracted)
    if verdict == Verdict.HEDGED:
        return result(0.0, verdict, "The answer names several options, or negates one.", extracted)
    if verdict == Verdict.NOT_AN_OPTION:
        return result(0.0, verdict, f"The answer names a letter that is not one of {letters}.", extracted)
    if chosen == gold:
        return result(1.0, Verdict.CORRECT, None, extracted)
    return result(0.0, Verdict.WRONG, None, extracted)
