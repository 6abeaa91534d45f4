"""What the text-only components share: the part of a completion they look at, and its length."""

from __future__ import annotations

import functools
import re
import unicodedata
from typing import Literal

from verifier_service.schema import ComponentResult, ScoreItem, Verdict
from verifier_service.scoring.extract import final_answer_region

# Punctuation (Unicode categories P*) of the Basic Multilingual Plane, a str.translate table that deletes it: a test of
# every character in Python costs 0.5 s per million characters, the table 20 ms. The little punctuation above the plane
# (`_ASTRAL`) is looked up character by character, in the texts that have such characters at all.
_PUNCTUATION = dict.fromkeys(code for code in range(0x10000) if unicodedata.category(chr(code))[0] == "P")
_ASTRAL = re.compile("[\U00010000-\U0010ffff]")


def without_punctuation(text: str) -> str:
    """The text without its punctuation (every character of a Unicode category P*).

    >>> without_punctuation("«Paris», c'est ça!")
    'Paris cest ça'
    """
    text = text.translate(_PUNCTUATION)
    if _ASTRAL.search(text) is None:
        return text
    return _ASTRAL.sub(lambda found: "" if unicodedata.category(found[0])[0] == "P" else found[0], text)


def reasoning_block(completion: str, tag: str = "think") -> str:
    """The text inside the reasoning block: from the first opening tag to the last closing one. A block opened and
    never closed runs to the end; a closing tag with no opening one (the chat template opened it) starts the
    completion's block at its beginning; no tag at all: no reasoning.

    >>> [reasoning_block(text) for text in ("<think>a</think>b", "a</think>b", "<think>a", "b")]
    ['a', 'a', 'a', '']
    """
    opening, closing = f"<{tag}>", f"</{tag}>"
    start = completion.find(opening)
    end = completion.rfind(closing)
    begin = start + len(opening) if start >= 0 else 0
    if end < begin:
        return completion[begin:] if start >= 0 else ""
    return completion[begin:end]


def scoped(completion: str, scope: Literal["all", "reasoning", "answer"], tag: str = "think") -> str:
    """all: the completion; reasoning: its reasoning block; answer: the text after the reasoning (empty when the
    reasoning never ends)."""
    if scope == "all":
        return completion
    if scope == "reasoning":
        return reasoning_block(completion, tag)
    return final_answer_region(completion, tag) or ""


def measured_length(item: ScoreItem, unit: Literal["tokens", "chars"]) -> int | None:
    """The completion's length in `unit`; None for tokens the item does not give (never a guess from characters)."""
    return item.completion_tokens if unit == "tokens" else len(item.completion)


def length_unknown() -> ComponentResult:
    return ComponentResult(
        score=None,
        verdict=Verdict.LENGTH_UNKNOWN.value,
        detail='the item has no completion_tokens; send them, or set unit "chars" to measure characters',
    )


def result(
    score: float | None, verdict: Verdict, detail: str | None = None, extracted: str | None = None
) -> ComponentResult:
    return component(score, verdict.value, detail, extracted)


@functools.lru_cache(maxsize=4096)
def component(score: float | None, verdict: str, detail: str | None, extracted: str | None) -> ComponentResult:
    """A component result. Results are frozen, so equal ones are shared: many of a batch's results repeat."""
    return ComponentResult(score=score, verdict=verdict, detail=detail, extracted=extracted)
