"""The `repetition` component: n-gram repetition, and a completion that ends in a loop.

Score = (1 - unique n-grams / all n-grams) * max_penalty (TRL's and open-r1's formula), over the units of the
scoped text: lowercase whitespace-separated words, and with `units: "auto"` each Han, kana or Thai character as a unit
of its own, so Chinese and Japanese are measured without a word segmenter. A text that ends in a loop, one span of at
most `LOOP_SPAN` characters repeated at least `LOOP_COPIES` times at its very end and `LOOP_MIN_CHARS` characters in
all (the last copy may be cut short, as truncation cuts it), scores `max_penalty` with verdict `loop`: a global ratio
dilutes a ramble that ate only the last part of a long completion.

>>> spec = RepetitionSpec()
>>> score(ScoreItem(completion="the cat sat on the mat", repetition=spec), spec).verdict
'no_repetition'
>>> score(ScoreItem(completion="Done." + "\\n" * 40, repetition=spec), spec).verdict
'loop'
"""

from __future__ import annotations

import re

from verifier_service.schema import ComponentResult, RepetitionSpec, ScoreItem, Verdict
from verifier_service.scoring.text import result, scoped

LOOP_SPAN = 200  # the longest repeated span looked for, in characters
LOOP_COPIES = 4  # copies of it at the end that make a loop
LOOP_MIN_CHARS = 32  # and at least this many characters of them: "!!!!" or "ha ha ha ha" end a text, not a loop
_KEY = 8  # characters of the end looked for again, to find the longer candidate periods

# Scripts written without spaces between words: Han (with extensions and compatibility ideographs), kana, Thai.
_UNSPACED = "\u0e00-\u0e7f\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uff66-\uff9f"
_HAS_UNSPACED = re.compile(f"[{_UNSPACED}]")
_AUTO_UNITS = re.compile(f"[{_UNSPACED}]|[^\\s{_UNSPACED}]+")


def units(text: str, kind: str) -> list[str]:
    """The text's units, lowercased.

    >>> units("Hello World 你好", "auto"), units("Hello World 你好", "words")
    (['hello', 'world', '你', '好'], ['hello', 'world', '你好'])
    """
    lowered = text.lower()
    if kind == "words" or not _HAS_UNSPACED.search(lowered):
        return lowered.split()
    return _AUTO_UNITS.findall(lowered)


def repeated_share(parts: list[str], n: int) -> float | None:
    """1 - unique n-grams / all n-grams; None when there are fewer than n units."""
    total = len(parts) - n + 1
    if total <= 0:
        return None
    # Words hold no whitespace, so joined n-grams are equal exactly when the n-grams are; a set of strings (whose
    # hashes are cached) is built faster than one of tuples.
    grams = set(parts) if n == 1 else set(map(" ".join, zip(*(parts[i:] for i in range(n)), strict=False)))
    return 1.0 - len(grams) / total


def _candidate_periods(text: str) -> list[int]:
    """The periods a loop at the end of `text` can have, smallest first: every period under `_KEY`, and the longer
    ones at which the last `_KEY` characters occur again (found by `str.rfind`, so ordinary text costs a few scans
    rather than a comparison per period)."""
    size = len(text)
    periods = list(range(1, min(_KEY, size // LOOP_COPIES + 1)))
    key, start, end = text[-_KEY:], max(0, size - _KEY - LOOP_SPAN), size - 1
    while size > _KEY and (found := text.rfind(key, start, end)) >= 0:
        period = size - _KEY - found
        if period >= _KEY:
            periods.append(period)
        end = found + _KEY - 1
    return sorted(periods)


def _periodic_tail(text: str, period: int, length: int) -> bool:
    """Whether the last `length` characters of `text` repeat with `period`."""
    size = len(text)
    return length <= size and text[size - length + period :] == text[size - length : size - period]


def end_loop(text: str) -> tuple[int, int] | None:
    """(span length, characters of repetition) when the text ends in a loop, else None.

    >>> end_loop("Fine. " + "ab" * 20 + "a")
    (2, 41)
    >>> end_loop("It is four!!!!") is None
    True
    """
    for period in _candidate_periods(text):
        needed = max(LOOP_COPIES * period, LOOP_MIN_CHARS)
        if not _periodic_tail(text, period, needed):
            continue
        # how far the repetition reaches back: double the length checked, then bisect
        good, step = needed, needed
        while _periodic_tail(text, period, good + step):
            good += step
            step *= 2
        bad = good + step  # not periodic (or past the start)
        while bad - good > 1:
            middle = (good + bad) // 2
            good, bad = (middle, bad) if _periodic_tail(text, period, middle) else (good, middle)
        return period, good
    return None


def score(item: ScoreItem, spec: RepetitionSpec) -> ComponentResult:
    """The `repetition` component of an item."""
    text = scoped(item.completion, spec.scope, spec.think_tag)
    loop = end_loop(text)
    if loop is not None:
        period, length = loop
        detail = f"The text ends in a loop: a {period}-character span repeated over its last {length} characters."
        return result(spec.max_penalty, Verdict.LOOP, detail)
    share = repeated_share(units(text, spec.units), spec.n)
    if share is None:
        return result(0.0, Verdict.TOO_SHORT, f"Fewer than {spec.n} units: nothing to measure.")
    if share == 0.0:
        return result(0.0, Verdict.NO_REPETITION)
    detail = f"{share:.0%} of the {spec.n}-grams repeat an earlier one."
    return result(share * spec.max_penalty + 0.0, Verdict.REPETITIVE, detail)
