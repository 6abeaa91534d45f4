"""Which of a completion's token ids produced each character span of it: a process reward model's steps located in
the policy's ids, so that a trainer can put each step's score on its tokens.

The ids are the policy's (TRL gives a reward function `completion_ids`), read with the tokenizer that produced them.
The mapping is verified, never assumed: where the ids do not produce the completion's text, or where their
decoding is not consistent at a step's boundary, there are no indices and the reason says why (`Unmapped`).

- A byte-level BPE (GPT-2's, Qwen's, Llama 3's: each token is bytes): the tokens' bytes are joined and must decode
  to the completion; a character's token is the one holding its first byte (its last, for a span's end). A character
  of several bytes (Chinese, an emoji) may span several tokens, and a step may start or end inside a token: the
  token holding that byte is in the step's range. O(tokens).
- Any other tokenizer (SentencePiece's, where a token alone decodes otherwise than in its context): each boundary is
  found by binary search over the lengths of the ids' prefixes decoded, each probed prefix checked to decode to a
  prefix of the completion, and each boundary certified by its two neighbouring prefixes: a span starts at the token
  that begins its first character and ends after the one that completes its last. O(steps x log(tokens))
  decodes, galloping from the last boundary (about log(step length) each), never one per token; at most
  SEARCH_BUDGET ids decoded in all.

A span's tokens are half-open, `[token_start, token_end)`, indices into the ids as given (special tokens, such as
the EOS at the end, count as positions but produce no text).
"""

from __future__ import annotations

import bisect
import functools
import weakref
from collections.abc import Sequence
from typing import Any

REPLACEMENT = "\ufffd"  # what a character cut in the middle of its bytes decodes to
# Token ids decoded at most, all prefixes together, to find one completion's steps with a tokenizer that is not
# byte-level (about a second): past it, the steps get no indices (and the reason), the model's thread is not held.
SEARCH_BUDGET = 4_000_000


class Unmapped(ValueError):
    """The ids cannot be mapped onto the text; the message says why, without quoting either."""


@functools.cache
def byte_decoder() -> dict[str, int]:
    """GPT-2's byte-level alphabet, inverted: the character a byte is written as in a token -> the byte."""
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    chars, extra = list(printable), 0
    for byte in range(256):
        if byte not in printable:
            printable.append(byte)
            chars.append(256 + extra)
            extra += 1
    return {chr(char): byte for byte, char in zip(printable, chars, strict=True)}


@functools.lru_cache(maxsize=8)
def load_policy_tokenizer(path: str) -> Any:
    """The tokenizer at `path` (a local directory, or a hub id where the hub is reachable), loaded once."""
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(path)


def _byte_level(tokenizer: Any) -> bool:
    backend = getattr(tokenizer, "backend_tokenizer", None)
    return backend is not None and type(backend.decoder).__name__ == "ByteLevel"


_PIECES: weakref.WeakKeyDictionary[Any, dict[int, bytes | None]] = weakref.WeakKeyDictionary()


def token_bytes(tokenizer: Any, ids: Sequence[int]) -> list[bytes] | None:
    """Each token's bytes, for a byte-level BPE: special tokens none (decoding skips them), other added tokens their
    text; None for a tokenizer that is not byte-level, or a token outside its byte alphabet. Each id's bytes are
    worked out once per tokenizer (a completion of 8,000 tokens is then 8,000 lookups)."""
    if not _byte_level(tokenizer):
        return None
    known = _PIECES.setdefault(tokenizer, {})
    if missing := [token_id for token_id in set(ids) if token_id not in known]:
        added, decoder = tokenizer.added_tokens_decoder, byte_decoder()
        for token_id, token in zip(missing, tokenizer.convert_ids_to_tokens(missing), strict=True):
            if token_id in added:
                known[token_id] = b"" if added[token_id].special else added[token_id].content.encode()
            elif token is None:
                raise Unmapped("a token id is not in the tokenizer's vocabulary")
            else:
                try:
                    known[token_id] = bytes(decoder[char] for char in token)
                except KeyError:  # not a byte-level token after all
                    known[token_id] = None
    pieces = [known[token_id] for token_id in ids]
    return None if None in pieces else pieces  # type: ignore[return-value]


def token_spans(
    tokenizer: Any, ids: Sequence[int], text: str, spans: Sequence[tuple[int, int]]
) -> list[tuple[int, int]]:
    """For each non-empty character span of `text` (in order, not overlapping), the half-open range of `ids` whose
    tokens produce it; Unmapped when the ids do not produce `text` or decode inconsistently."""
    size = len(tokenizer)
    if ids and (min(ids) < 0 or max(ids) >= size):
        raise Unmapped("a token id is not in the tokenizer's vocabulary")
    pieces = token_bytes(tokenizer, ids)
    if pieces is not None and b"".join(pieces) == text.encode():
        return _byte_spans(pieces, text, spans)
    return _searched_spans(tokenizer, ids, text, spans)  # not byte-level, or its decode cleans up spaces


def _byte_spans(pieces: Sequence[bytes], text: str, spans: Sequence[tuple[int, int]]) -> list[tuple[int, int]]:
    starts, offset = [], 0
    for piece in pieces:
        starts.append(offset)
        offset += len(piece)
    located, char, byte = [], 0, 0
    for start, end in spans:
        first = byte + len(text[char:start].encode())  # the span's first byte, counted on from the last boundary
        last = first + len(text[start:end].encode())  # one past its last byte
        char, byte = end, last
        located.append((bisect.bisect_right(starts, first) - 1, bisect.bisect_right(starts, last - 1)))
    return located


def _searched_spans(
    tokenizer: Any, ids: Sequence[int], text: str, spans: Sequence[tuple[int, int]]
) -> list[tuple[int, int]]:
    ids = list(ids)
    if tokenizer.decode(ids, skip_special_tokens=True) != text:
        raise Unmapped("the token ids do not decode to the completion")
    known: dict[int, tuple[int, int]] = {0: (0, 0), len(ids): (len(text), len(text))}
    budget = [SEARCH_BUDGET]

    def probe(k: int) -> tuple[int, int]:
        """The characters of `text` that the first k ids produce whole, and those they have begun (a character whose
        bytes are cut short decodes to U+FFFD), checked to be its beginning."""
        if k not in known:
            budget[0] -= k
            if budget[0] < 0:
                raise Unmapped("too many steps to find in this many token ids with a tokenizer that is not byte-level")
            decoded = tokenizer.decode(ids[:k], skip_special_tokens=True)
            whole = decoded.rstrip(REPLACEMENT)
            if not text.startswith(whole):
                raise Unmapped("the token ids' prefixes do not decode to the completion's beginning")
            known[k] = (len(whole), len(whole) + (len(decoded) > len(whole)))
        return known[k]

    def last_below(low: int, bound: int, read: int) -> int:
        """The last k whose probe(k)[read] is below `bound`, given probe(low)[read] < bound <= probe(len(ids))[read]:
        galloping from `low` (a step's boundary is near the last one), then halving; certified by its neighbour."""
        step, high = 1, len(ids)
        while low + step < high and probe(low + step)[read] < bound:
            low, step = low + step, step * 2
        high = min(high, low + step)
        while high - low > 1:  # probe(low)[read] < bound <= probe(high)[read]
            middle = (low + high) // 2
            low, high = (middle, high) if probe(middle)[read] < bound else (low, middle)
        return low

    located, floor = [], 0
    for start, end in spans:
        first = last_below(floor, start + 1, 1)  # begun(first) <= start < begun(first + 1): it begins the span
        after = last_below(first, end, 0) + 1  # whole(after - 1) < end <= whole(after): token after - 1 ends it
        located.append((first, after))
        floor = first
    return located
