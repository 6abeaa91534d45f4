"""How the `sql` component compares a predicted query's rows with the gold's: by value, never by column name; an
integral float equals its int (1.0 == 1, as SQLite compares them); numbers within a tolerance, relatively or
absolutely (math.isclose with both set to it); as sets (order and duplicates ignored: BIRD's and SkyRL's rule), as
multisets, or in order."""

from __future__ import annotations

import collections
import math
from typing import Any

from verifier_service.schema import SqlCompare


def normal_value(value: Any) -> Any:
    """A value as it is compared: an integral float as an int (1.0 == 1, as SQLite itself compares them)."""
    if isinstance(value, float) and value.is_integer() and abs(value) < 2**53:
        return int(value)
    return value


def _sort_key(row: tuple[Any, ...]) -> tuple[Any, ...]:
    """Orders rows of mixed types (SQLite's own order: NULL, numbers, text, blobs)."""
    return tuple(
        (0, 0)
        if v is None
        else (1, float(v))
        if isinstance(v, int | float)
        else (2, v)
        if isinstance(v, str)
        else (3, v)
        for v in row
    )


def _values_close(a: Any, b: Any, tol: float) -> bool:
    if isinstance(a, int | float) and isinstance(b, int | float) and not (isinstance(a, int) and isinstance(b, int)):
        return math.isclose(a, b, rel_tol=tol, abs_tol=tol)
    return type(a) is type(b) and a == b


def rows_match(gold: list[tuple[Any, ...]], pred: list[tuple[Any, ...]], compare: SqlCompare, tol: float) -> bool:
    """Whether the predicted rows are the gold ones under `compare` (column names are never seen). Exact equality of
    the normalised rows first; failing that, with a tolerance, rows sorted (unless ordered) and paired one to one,
    numbers within `tol` relatively or absolutely (math.isclose). Pairing by sorted order can miss a match only when
    one result holds rows that differ by less than the tolerance: then it is a mismatch, never a false match."""
    gold = [tuple(map(normal_value, row)) for row in gold]
    pred = [tuple(map(normal_value, row)) for row in pred]
    if compare == "set":
        gold, pred = list(dict.fromkeys(gold)), list(dict.fromkeys(pred))
        if set(gold) == set(pred):
            return True
    elif compare == "multiset":
        if collections.Counter(gold) == collections.Counter(pred):
            return True
    elif gold == pred:
        return True
    if tol == 0 or len(gold) != len(pred):
        return False
    if compare != "ordered":
        gold, pred = sorted(gold, key=_sort_key), sorted(pred, key=_sort_key)
    return all(
        len(g) == len(p) and all(_values_close(a, b, tol) for a, b in zip(g, p, strict=True))
        for g, p in zip(gold, pred, strict=True)
    )
