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

from collections.abc import Callable, Sequence

from verifier_service.schema import ComponentResult, RepetitionSpec, ScoreItem, Verdict
from verifier_service.scoring.ngrams import repeated_shares
from verifier_service.scoring.text import result, scoped

LOOP_SPAN = 200  # the longest repeated span looked for, in characters
LOOP_COPIES = 4  # copies of it at the end that make a loop
LOOP_MIN_CHARS = 32  # and at least this many characters of them: "!!!!" or "ha ha ha ha" end a text, not a loop
_KEY = 8  # characters of the end looked for again, to find the longer candidate periods


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


def _compiled() -> Callable[[str, int, int, int], tuple[int, int] | None] | None:
    """The loop check in C (`_repetition.c`, the definition spelled out), where a C compiler built it (setup.py)."""
    try:
        from verifier_service.scoring._repetition import end_loop as compiled
    except ImportError:
        return None
    return compiled


END_LOOP = _compiled()


def end_loop(text: str) -> tuple[int, int] | None:
    """(span length, characters of repetition) when the text ends in a loop, else None: in C where it was built
    (about 0.3 us for a GSM8K completion instead of 4), else by the candidate periods below.

    >>> end_loop("Fine. " + "ab" * 20 + "a")
    (2, 41)
    >>> end_loop("It is four!!!!") is None
    True
    """
    if END_LOOP is not None:
        return END_LOOP(text, LOOP_SPAN, LOOP_COPIES, LOOP_MIN_CHARS)
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
    return score_batch([item], [spec])[0]


def score_batch(items: Sequence[ScoreItem], specs: Sequence[RepetitionSpec]) -> list[ComponentResult]:
    """The `repetition` component of several items, their n-grams counted together (`ngrams.repeated_shares`)."""
    texts = [scoped(item.completion, spec.scope, spec.think_tag) for item, spec in zip(items, specs, strict=True)]
    results = [_loop(text, spec) for text, spec in zip(texts, specs, strict=True)]
    counted: dict[tuple[str, int], list[int]] = {}  # the others, by how their n-grams are counted
    for index, (found, spec) in enumerate(zip(results, specs, strict=True)):
        if found is None:
            counted.setdefault((spec.units, spec.n), []).append(index)
    for (kind, n), indexes in counted.items():
        for index, share in zip(indexes, repeated_shares([texts[i] for i in indexes], kind, n), strict=True):
            results[index] = _repetition(share, specs[index])
    return [found for found in results if found is not None]


def _loop(text: str, spec: RepetitionSpec) -> ComponentResult | None:
    loop = end_loop(text)
    if loop is None:
        return None
    period, length = loop
    detail = f"The text ends in a loop: a {period}-character span repeated over its last {length} characters."
    return result(spec.max_penalty, Verdict.LOOP, detail)


def _repetition(share: float | None, spec: RepetitionSpec) -> ComponentResult:
    if share is None:
        return result(0.0, Verdict.TOO_SHORT, f"Fewer than {spec.n} units: nothing to measure.")
    if share == 0.0:
        return result(0.0, Verdict.NO_REPETITION)
    detail = f"{share:.0%} of the {spec.n}-grams repeat an earlier one."
    return result(share * spec.max_penalty + 0.0, Verdict.REPETITIVE, detail)
