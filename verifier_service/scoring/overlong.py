"""The `overlong` component: DAPO's soft overlong punishment (Eq. 13), scaled by `penalty`.

With cap M and buffer B: 0 up to M - B, then a straight fall to -penalty at M, and -penalty past M. The branches and
the arithmetic are those of TRL's `get_soft_overlong_punishment`, so with penalty 1 the score is TRL's to the bit. A
truncated completion scores -penalty whatever its length, or null with `on_truncated: "null"` (the item is skipped,
as TRL's `mask_truncated_completions` skips it). Lengths are the item's tokens, never characters unless asked for.

>>> spec = OverlongSpec(max_tokens=100, buffer_tokens=20)
>>> found = score(ScoreItem(completion="...", completion_tokens=90, overlong=spec), spec)
>>> found.score, found.verdict, found.detail
(-0.5, 'in_buffer', '90 tokens: 10 into the 20-token buffer before the cap of 100.')
"""

from __future__ import annotations

from verifier_service.schema import ComponentResult, OverlongSpec, ScoreItem, Verdict
from verifier_service.scoring.text import length_unknown, measured_length, result

_UNIT_WORDS = {"tokens": ("tokens", "token"), "chars": ("characters", "character")}


def punishment(length: int, max_tokens: int, buffer: int, penalty: float = 1.0) -> tuple[float, Verdict]:
    """The score of a completion of `length` under cap `max_tokens` with a soft zone of `buffer` before it.

    >>> [punishment(n, 100, 20)[0] for n in (80, 90, 100, 101)]
    [0.0, -0.5, -1.0, -1.0]
    """
    soft_start = max_tokens - buffer
    if length <= soft_start:
        return 0.0, Verdict.WITHIN_BUDGET
    if length <= max_tokens:  # never reached with buffer 0, so no division by zero
        # TRL's own expression, times penalty: with penalty 1 the two agree exactly.
        return penalty * ((soft_start - length) / buffer), Verdict.IN_BUFFER
    return -penalty, Verdict.OVER_LIMIT


def score(item: ScoreItem, spec: OverlongSpec) -> ComponentResult:
    """The `overlong` component of an item."""
    length = measured_length(item, spec.unit)
    units, unit = _UNIT_WORDS[spec.unit]
    if item.truncated:  # cut off at the cap: the penalty needs no length
        measured = f" after {length} {units}" if length is not None else ""
        detail = f"The completion was cut off{measured} (cap {spec.max_tokens})."
        return result(None if spec.on_truncated == "null" else -spec.penalty, Verdict.TRUNCATED, detail)
    if length is None:
        return length_unknown()
    value, verdict = punishment(length, spec.max_tokens, spec.buffer, spec.penalty)
    soft_start = spec.max_tokens - spec.buffer
    if verdict == Verdict.WITHIN_BUDGET:
        detail = f"{length} {units}: within the {soft_start} allowed before the buffer (cap {spec.max_tokens})."
    elif verdict == Verdict.IN_BUFFER:
        into = length - soft_start
        detail = f"{length} {units}: {into} into the {spec.buffer}-{unit} buffer before the cap of {spec.max_tokens}."
    else:
        detail = f"{length} {units}: over the cap of {spec.max_tokens}."
    return result(value, verdict, detail)
