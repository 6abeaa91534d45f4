"""A text's units and the share of its n-grams that repeat an earlier one, fast enough for 8,000-token completions.

The definition is `units` and `repeated_share_of`: lowercase whitespace-separated words, and (units "auto") each Han,
kana or Thai character as a unit of its own; the share is 1 - distinct n-grams / all n-grams, as TRL and open-r1
compute it. `repeated_share` gives the same number: in C (`_repetition.c`: about 5 us for a 200-word completion instead
of 28 us, 0.2 ms for 12,000 Han characters instead of 0.5), where the package was built with a C compiler. Without
it, a short text is counted as the definition says, and a long one with numpy, where no Python object is made per
unit in a script without spaces and the n-grams are counted by sorting integer keys instead of hashing strings (an
8,000-token completion: about 0.3 ms instead of 1 to 4 ms).
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

# Scripts written without spaces between words: Han (with extensions and compatibility ideographs), kana, Thai. The
# `language` component counts the same characters one each, by script.
HAN_RANGES = ((0x3400, 0x4DBF), (0x4E00, 0x9FFF), (0xF900, 0xFAFF))
KANA_RANGES = ((0x3040, 0x30FF), (0xFF66, 0xFF9F))
THAI_RANGES = ((0x0E00, 0x0E7F),)
UNSPACED_RANGES = tuple(sorted((*HAN_RANGES, *KANA_RANGES, *THAI_RANGES)))
_UNSPACED = "".join(f"{chr(low)}-{chr(high)}" for low, high in UNSPACED_RANGES)
_HAS_UNSPACED = re.compile(f"[{_UNSPACED}]")
_AUTO_UNITS = re.compile(f"[{_UNSPACED}]|[^\\s{_UNSPACED}]+")

# Texts up to this long are counted unit by unit, as the definition says: below it that costs less than numpy's ~0.1
# ms per call (ASCII words are split by str.split, other scripts by a slower regex).
SHORT_CHARS = 2_000
SHORT_ASCII_CHARS = 10_000
# Code points are classed through a table over the Basic Multilingual Plane; no whitespace and none of the unspaced
# scripts lie above it (tests/unit/test_repetition.py checks the table against str.isspace and the regex).
_OTHER, _SPACE, _UNSPACED_CHAR = 0, 1, 2
_FIRST_UNSPACED = UNSPACED_RANGES[0][0]
_UNSPACED_SPAN = UNSPACED_RANGES[-1][1] + 1 - _FIRST_UNSPACED  # ids of unspaced characters: code point - first
_INT64_KEYS = 2**63


def _compiled() -> Callable[[str, int, bool], tuple[int, int]] | None:
    """`count_ngrams(text, n, auto) -> (units, distinct n-grams)` of `units(text, "auto" if auto else "words")`, in C
    (`_repetition.c`), where the package was built with a C compiler (setup.py); else None, and Python and numpy
    count the same."""
    try:
        from verifier_service.scoring._repetition import count_ngrams
    except ImportError:
        return None
    return count_ngrams


COUNT_NGRAMS = _compiled()


def _classes() -> npt.NDArray[np.uint8]:
    table = np.zeros(0x10000, dtype=np.uint8)
    table[[code for code in range(0x10000) if chr(code).isspace()]] = _SPACE
    for low, high in UNSPACED_RANGES:
        table[low : high + 1] = _UNSPACED_CHAR
    return table


CLASSES = _classes()  # a constant: code point -> other, space or unspaced


def units(text: str, kind: str) -> list[str]:
    """The text's units, lowercased.

    >>> units("Hello World 你好", "auto"), units("Hello World 你好", "words")
    (['hello', 'world', '你', '好'], ['hello', 'world', '你好'])
    """
    lowered = text.lower()
    if kind == "words" or lowered.isascii() or not _HAS_UNSPACED.search(lowered):
        return lowered.split()
    return _AUTO_UNITS.findall(lowered)


def repeated_share_of(parts: list[str], n: int) -> float | None:
    """1 - distinct n-grams / all n-grams of `parts`; None when there are fewer than n units (the definition).

    >>> repeated_share_of(["a", "b", "a", "b", "a", "b"], 2)
    0.6
    """
    total = len(parts) - n + 1
    if total <= 0:
        return None
    grams = set(zip(*(parts[i:] for i in range(n)), strict=False))
    return 1.0 - len(grams) / total


def repeated_share(text: str, kind: str, n: int) -> float | None:
    """`repeated_share_of(units(text, kind), n)`, counted the fast way for the text's size.

    >>> repeated_share("a b a b a b", "auto", 2), repeated_share("a b " * 1000, "auto", 2)
    (0.6, 0.9989994997498749)
    """
    return repeated_shares([text], kind, n)[0]


def repeated_shares(texts: Sequence[str], kind: str, n: int) -> list[float | None]:
    """`repeated_share_of(units(text, kind), n)` for each text: in C where it was built; else short texts one by one,
    as the definition says (numpy costs more per word on them: its words are a few characters, each paying a dozen
    array passes), and the long ones in one numpy pass over them all.

    >>> repeated_shares(["a b a b a b", "", "a b c " * 4000], "auto", 2)
    [0.6, None, 0.9997499791649304]
    """
    compiled, auto = COUNT_NGRAMS, kind == "auto"
    if compiled is not None:
        return [_share(*compiled(text, n, auto), n) for text in texts]
    big = [len(text) > (SHORT_ASCII_CHARS if text.isascii() else SHORT_CHARS) for text in texts]
    shares = [
        None if large else repeated_share_of(units(text, kind), n) for text, large in zip(texts, big, strict=True)
    ]
    long = [index for index, large in enumerate(big) if large]
    if long:
        ids, bound, counts = unit_ids_of([texts[index].lower() for index in long], kind)
        distinct = _distinct_per_text(ids, bound, counts, n).tolist()
        for index, count, found in zip(long, counts, distinct, strict=True):
            shares[index] = _share(count, found, n)
    return shares


def _share(count: int, distinct: int, n: int) -> float | None:
    """`repeated_share_of`'s number from a text's unit count and its distinct n-grams."""
    return None if count < n else 1.0 - distinct / (count - n + 1)


def unit_ids(text: str, kind: str) -> tuple[npt.NDArray[np.int64], int]:
    """One id per unit of `text`, equal exactly for equal units, and a bound on them (every id < bound)."""
    ids, bound, _ = unit_ids_of([text.lower()], kind)
    return ids, bound


def unit_ids_of(lowered: Sequence[str], kind: str) -> tuple[npt.NDArray[np.int64], int, list[int]]:
    """The units of lowercased texts, one after the other: an id per unit (equal exactly for equal units), a bound on
    the ids, and how many units each text has."""
    joined = "\n".join(lowered)  # a line break ends a unit: none spans two texts
    if joined.isascii():
        ids, bound, starts = _ascii_word_ids(joined)
    elif kind == "words" or not _HAS_UNSPACED.search(joined):
        parts = [text.split() for text in lowered]
        ids, bound = _word_ids(list(itertools.chain.from_iterable(parts)), 0)
        return ids, bound, [len(words) for words in parts]
    else:
        ids, bound, starts = _auto_ids(joined)
    text_starts = np.cumsum([0, *(len(text) + 1 for text in lowered)])
    return ids, bound, np.diff(np.searchsorted(starts, text_starts)).tolist()


def _auto_ids(lowered: str) -> tuple[npt.NDArray[np.int64], int, npt.NDArray[np.intp]]:
    """Units "auto" of a text with unspaced characters: each such character is its own id (code point -
    _FIRST_UNSPACED), the words between them get ids above; and where each unit starts."""
    codes = np.frombuffer(lowered.encode("utf-32-le", "surrogatepass"), dtype=np.uint32)
    classes = CLASSES[np.minimum(codes, 0xFFFF)]
    word = classes == _OTHER
    starts = classes == _UNSPACED_CHAR
    starts[0] |= word[0]
    starts[1:] |= word[1:] & ~word[:-1]
    positions = np.flatnonzero(starts)
    ids = codes[positions].astype(np.int64) - _FIRST_UNSPACED
    words = np.where(word, codes, 0x20).astype(np.uint32).tobytes().decode("utf-32-le", "surrogatepass").split()
    word_ids, bound = _word_ids(words, _UNSPACED_SPAN)
    ids[word[positions]] = word_ids
    return ids, bound, positions


def _word_ids(words: list[str], first: int) -> tuple[npt.NDArray[np.int64], int]:
    """Ids from `first` up for `words`, equal for equal words, and their bound."""
    vocabulary: dict[str, int] = {}
    ids = np.fromiter(map(vocabulary.setdefault, words, itertools.count(first)), dtype=np.int64, count=len(words))
    return ids, first + len(words)


def _ascii_word_ids(lowered: str) -> tuple[npt.NDArray[np.int64], int, npt.NDArray[np.intp]]:
    """The words of an ASCII text, their ids and where each starts, with no Python object per word: a word of up to 8
    characters is its own 64-bit code (its bytes; ASCII leaves the top bit clear), a longer one gets a code from 2**63
    up through a dict; the codes are then numbered through a hash table (`_table_ids`)."""
    data = np.frombuffer(lowered.encode("ascii"), dtype=np.uint8)
    word = CLASSES[data] != _SPACE
    edges = np.zeros(len(data) + 1, dtype=bool)
    edges[0], edges[-1] = word[:1].any(), word[-1:].any()
    np.not_equal(word[1:], word[:-1], out=edges[1:-1])
    bounds = np.flatnonzero(edges)
    starts, ends = bounds[0::2], bounds[1::2]
    lengths = ends - starts
    padded = np.zeros(len(data) + _PACKED, dtype=np.uint8)
    padded[: len(data)] = data
    windows = np.lib.stride_tricks.sliding_window_view(padded, _PACKED)[starts]
    codes = windows.view(np.uint64).ravel() & _LOW_BYTES[np.minimum(lengths, _PACKED)]
    long = np.flatnonzero(lengths > _PACKED)
    if len(long):
        spans = zip(starts[long].tolist(), ends[long].tolist(), strict=True)
        long_ids, _ = _word_ids([lowered[start:end] for start, end in spans], 0)
        codes[long] = long_ids.astype(np.uint64) | np.uint64(_INT64_KEYS)
    ids, bound = _table_ids(codes)
    return ids, bound, starts


_PACKED = 8  # characters of an ASCII word that fit in its 64-bit code
_LOW_BYTES = np.array([(1 << (8 * k)) - 1 for k in range(_PACKED + 1)], dtype=np.uint64)
_MIX = np.uint64(0x9E3779B97F4A7C15)  # Fibonacci hashing: code * this, top bits
_MAX_PROBES = 32


def _table_ids(codes: npt.NDArray[np.uint64]) -> tuple[npt.NDArray[np.int64], int]:
    """An id per code, equal exactly for equal codes: the slot each distinct code takes in an open-addressing hash
    table at most half full, filled a probe round at a time for all codes at once. Every occurrence of a code
    starts at the same slot and moves with the others, so a code takes one slot. Codes that collide past
    `_MAX_PROBES` rounds are numbered by a sort instead."""
    bits = max(4, (2 * len(codes)).bit_length())
    size = 1 << bits
    table = np.zeros(size, dtype=np.uint64)
    used = np.zeros(size, dtype=bool)
    ids = np.empty(len(codes), dtype=np.int64)
    pending = np.arange(len(codes))
    slots = (codes * _MIX) >> np.uint64(64 - bits)
    for _ in range(_MAX_PROBES):
        free = ~used[slots]
        table[slots[free]] = codes[pending[free]]  # of codes that claim one slot, the last written stays
        used[slots[free]] = True
        found = table[slots] == codes[pending]
        ids[pending[found]] = slots[found]
        pending, slots = pending[~found], (slots[~found] + np.uint64(1)) & np.uint64(size - 1)
        if not len(pending):
            return ids, size
    dense, count = _dense_by_sort(codes)
    return dense, count


def distinct_ngrams(ids: npt.NDArray[np.int64], n: int, bound: int) -> int:
    """How many distinct n-grams `ids` (each < bound, at least n of them) hold.

    >>> distinct_ngrams(np.array([0, 1, 0, 1, 0, 1]), 2, 2)
    2
    """
    return int(_distinct_per_text(ids, bound, [len(ids)], n)[0])


def _distinct_per_text(ids: npt.NDArray[np.int64], bound: int, counts: Sequence[int], n: int) -> npt.NDArray[np.int64]:
    """How many distinct n-grams each text holds, its units being the next `counts[i]` of `ids` (each < bound).

    Each n-gram becomes one integer key: its ids as the digits of a number in base (distinct ids), and its text's
    index as the leading digit; a key that would not fit in 63 bits is renumbered before the next digit. The keys are
    sorted and their runs counted: the leading digit keeps each text's keys together."""
    texts = len(counts)
    ids, base = _dense(ids, bound)
    total = len(ids) - n + 1
    if total <= 0:
        return np.zeros(texts, dtype=np.int64)
    owner = np.repeat(np.arange(texts), counts)[:total]
    ends = np.cumsum(counts)
    whole = np.arange(n, total + n) <= ends[owner]  # the n-gram lies inside one text
    key, key_bound = owner, texts
    for offset in range(n):
        if key_bound * base > _INT64_KEYS:
            key, key_bound = _dense(key, key_bound)
        key = key * base + ids[offset : offset + total]
        key_bound *= base
    key = key[whole]
    if key_bound <= 2**32:  # a 32-bit sort takes about half the time of a 64-bit one
        key = key.astype(np.uint32)
    key = np.sort(key)
    first = np.ones(len(key), dtype=bool)  # the first key of each run: one per distinct n-gram
    np.not_equal(key[1:], key[:-1], out=first[1:])
    # Renumbering keeps the order, so the sorted keys come text by text, as the texts' n-grams do.
    return np.bincount(owner[whole][first], minlength=texts)


def _dense(ids: npt.NDArray[np.int64], bound: int) -> tuple[npt.NDArray[np.int64], int]:
    """The ids (each < bound) renumbered 0, 1, ... in order of value, and how many distinct ones there are: through a
    table when the bound is small, else a sort."""
    if bound <= 4 * len(ids) + 0x10000:
        present = np.zeros(bound, dtype=np.int32)
        present[ids] = 1
        rank = np.cumsum(present, dtype=np.int32)
        return rank[ids].astype(np.int64) - 1, int(rank[-1])
    return _dense_by_sort(ids)


def _dense_by_sort(values: npt.NDArray[np.integer[Any]]) -> tuple[npt.NDArray[np.int64], int]:
    distinct, dense = np.unique(values, return_inverse=True)
    return dense.astype(np.int64), len(distinct)
