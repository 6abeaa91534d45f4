"""A completion's length inputs (`completion_tokens`, `truncated`) from TRL's `completion_ids`.

TRL's GRPOTrainer passes the token ids of each completion, padding removed and the EOS kept when generation
stopped, and decides truncation as `ids[-1] not in [*eos_token_ids, pad_token_id]` (its `clipped_ratio` metric and
`mask_truncated_completions`). The same test is made here, with the same ids; without them `truncated` stays
unset (unknown), never guessed.
"""

from __future__ import annotations

import operator
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class StopTokens:
    """The ids that end a completion which was not cut off: every EOS id, and the pad id (None: the tokenizer has
    none, and TRL pads with EOS).

    >>> StopTokens.of([2, 7], 0)
    StopTokens(eos=(2, 7), pad=0)
    >>> StopTokens.of(None) is None  # no EOS id: truncation is unknown
    True
    """

    eos: tuple[int, ...]
    pad: int | None = None

    @classmethod
    def of(cls, eos_token_id: int | Sequence[int] | None, pad_token_id: int | None = None) -> StopTokens | None:
        """From the ids as a tokenizer or TRL holds them (one EOS id or several); None without an EOS id."""
        if eos_token_id is None:
            if pad_token_id is not None:
                raise ValueError("pad_token_id without eos_token_id: give both (or tokenizer=) to detect truncation")
            return None
        eos = (eos_token_id,) if isinstance(eos_token_id, int) else tuple(eos_token_id)
        if not eos or not all(_is_id(i) for i in eos) or (pad_token_id is not None and not _is_id(pad_token_id)):
            raise ValueError(f"token ids must be ints >= 0, got eos={eos_token_id!r}, pad={pad_token_id!r}")
        pad = None if pad_token_id is None else operator.index(pad_token_id)
        return cls(tuple(operator.index(i) for i in eos), pad)

    @classmethod
    def from_tokenizer(cls, tokenizer: Any) -> StopTokens | None:
        """A tokenizer's (or a processor's tokenizer's) EOS and pad ids; a missing pad is EOS, as TRL sets it.
        Models that declare more EOS ids in their generation config (Llama 3's end-of-turn tokens) need those too:
        once the trainer is built, `reward.set_token_ids(*stop_token_ids(trainer))` gives a reward TRL's own."""
        tokenizer = getattr(tokenizer, "tokenizer", tokenizer)  # a ProcessorMixin holds its tokenizer
        eos = getattr(tokenizer, "eos_token_id", None)
        if eos is None:
            raise ValueError(f"{type(tokenizer).__name__} has no eos_token_id: pass eos_token_id= instead")
        pad = getattr(tokenizer, "pad_token_id", None)
        return cls.of(eos, eos if pad is None else pad)

    def truncated(self, ids: Sequence[int]) -> bool | None:
        """TRL's test: the last id is neither EOS nor pad. None for an empty completion (no last id to test)."""
        if len(ids) == 0:
            return None
        return int(ids[-1]) not in (*self.eos, *(() if self.pad is None else (self.pad,)))


def _is_id(value: Any) -> bool:
    """An int-like token id (a numpy or torch integer too), not a bool."""
    try:
        return not isinstance(value, bool) and operator.index(value) >= 0
    except TypeError:
        return False


def length_fields(completion_ids: Sequence[int] | None, stop: StopTokens | None) -> dict[str, Any]:
    """`completion_tokens` and `truncated` for one completion, as `ScoreItem` fields; only those known.

    >>> length_fields([5, 9, 2], StopTokens((2,), 0))
    {'completion_tokens': 3, 'truncated': False}
    >>> length_fields([5, 9, 9], StopTokens((2,), 0))
    {'completion_tokens': 3, 'truncated': True}
    >>> length_fields([5, 9, 2], None)  # no EOS id given: truncation unknown
    {'completion_tokens': 3}
    """
    if completion_ids is None:
        return {}
    fields: dict[str, Any] = {"completion_tokens": len(completion_ids)}
    truncated = stop.truncated(completion_ids) if stop is not None else None
    if truncated is not None:
        fields["truncated"] = truncated
    return fields


def stop_token_ids(trainer: Any) -> tuple[list[int], int | None]:
    """The ids a GRPOTrainer tells a finished completion from a truncated one by, for `set_token_ids`: its
    `eos_token_ids` (the tokenizer's EOS and every one the model's generation config declares; the tokenizer's EOS
    in TRL versions without them) and its tokenizer's pad id (which it sets to EOS when the tokenizer has none).

    >>> from types import SimpleNamespace
    >>> stop_token_ids(SimpleNamespace(eos_token_ids=[2, 9], processing_class=SimpleNamespace(pad_token_id=0)))
    ([2, 9], 0)
    """
    tokenizer = getattr(trainer.processing_class, "tokenizer", trainer.processing_class)
    eos = getattr(trainer, "eos_token_ids", None) or [tokenizer.eos_token_id]
    return [operator.index(i) for i in eos], tokenizer.pad_token_id
