"""The reasoning-format reward: one `<think>...</think>` block, then an answer (DESIGN.md section 4).

The completion (or, with `prefilled`, an implied opening tag plus the completion) must hold exactly one block,
with nothing but whitespace before it and, when `require_answer`, a non-empty answer after it. An empty
block is allowed, as TRL's `think_format_reward` allows it. The first rule broken, in reading order, names the verdict.

>>> score_format("<think>2 + 2 is 4.</think>4", options=FormatOptions())
FormatResult(score=1.0, verdict=<Verdict.OK: 'ok'>, detail=None)
>>> score_format("4</think>", options=FormatOptions()).verdict
<Verdict.MISSING_OPEN_TAG: 'missing_open_tag'>
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from itertools import islice

from verifier_service.schema import ComponentResult, FormatOptions, ScoreItem, Verdict


@dataclass(frozen=True)
class FormatResult:
    score: float  # 1.0 or 0.0
    verdict: Verdict  # Verdict.OK or the rule that failed
    detail: str | None  # one short sentence saying what was wrong; None when ok


def score_format(completion: str, *, options: FormatOptions) -> FormatResult:
    """Score the reasoning format of one completion: 1.0 when well formed, else 0.0 and the broken rule."""
    opening, closing = f"<{options.tag}>", f"</{options.tag}>"
    text = opening + completion if options.prefilled else completion
    # A literal pattern cannot backtrack, so the scan is linear; the first three tags are all the rules need.
    tags = [(m.start(), m.group(1) == "/") for m in islice(_tag_pattern(options.tag).finditer(text), 3)]

    if not tags:
        return _fail(Verdict.MISSING_OPEN_TAG, f"No {opening} tag opens the reasoning.")
    start, first_is_close = tags[0]
    if first_is_close:
        if opening in text[start:]:
            return _fail(Verdict.REVERSED_TAGS, f"{closing} appears before the first {opening}.")
        return _fail(Verdict.MISSING_OPEN_TAG, f"{closing} appears but no {opening} opens the reasoning.")
    if text[:start].strip():
        return _fail(Verdict.TEXT_BEFORE_REASONING, f"Text other than whitespace comes before {opening}.")
    if len(tags) == 1:
        return _fail(Verdict.MISSING_CLOSE_TAG, f"The reasoning is never closed with {closing}.")
    end, second_is_close = tags[1]
    if not second_is_close:
        where = "the template already opened it" if options.prefilled else "the reasoning is still open"
        return _fail(Verdict.NESTED_TAGS, f"{opening} appears again while {where}.")
    if len(tags) == 3:
        _, third_is_close = tags[2]
        extra = f"A stray {closing}" if third_is_close else f"A second {opening}"
        return _fail(Verdict.MULTIPLE_BLOCKS, f"{extra} follows the first {options.tag} block.")
    if options.require_answer and not text[end + len(closing) :].strip():
        return _fail(Verdict.EMPTY_ANSWER, f"No answer follows {closing}.")
    return FormatResult(score=1.0, verdict=Verdict.OK, detail=None)


def _tag_pattern(tag: str) -> re.Pattern[str]:
    # re caches compiled patterns, so rebuilding it per call costs a dict lookup.
    return re.compile(f"<(/?){re.escape(tag)}>")


def _fail(verdict: Verdict, detail: str) -> FormatResult:
    return FormatResult(score=0.0, verdict=verdict, detail=detail)


def score(item: ScoreItem, spec: FormatOptions) -> ComponentResult:
    """The `format` component of an item."""
    found = score_format(item.completion, options=spec)
    return ComponentResult(score=found.score, verdict=found.verdict.value, detail=found.detail)
