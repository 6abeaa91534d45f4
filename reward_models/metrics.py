"""How well a reward model's scores agree with the rule outcomes: the numbers `POST /v1/models/{name}/eval` returns.
Pure functions over lists of floats (no torch, no numpy), each with a hand-computed example.

- `ranking_accuracy`: within each group (completions of one prompt), the share of (right, wrong) pairs whose right
  completion scores higher; a tie counts half.
- `auroc`: the probability that a right completion outscores a wrong one, over all items (ties count half: midranks).
- `calibration_error`: the expected calibration error of probabilities against outcomes, in equal-width bins.
- `summary`: mean, standard deviation and quantiles of the scores.
- `spearman`: the rank correlation of two versions' scores of the same items (midranks for ties).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

QUANTILES = {"p5": 0.05, "p25": 0.25, "p50": 0.5, "p75": 0.75, "p95": 0.95}


def ranking_accuracy(groups: Sequence[tuple[Sequence[float], Sequence[bool]]]) -> tuple[float | None, int]:
    """The share of pairs ranked right, and the number of pairs: a pair is a right and a wrong completion of one
    group; it counts 1 when the right one scores higher, 0.5 on a tie, 0 otherwise. None when there is no pair.

    >>> ranking_accuracy([([3.0, 1.0, 2.0], [True, False, False]), ([0.0, 0.0], [True, False])])
    (0.8333333333333334, 3)
    >>> ranking_accuracy([([1.0, 2.0], [True, True])])
    (None, 0)
    """
    won, pairs = 0.0, 0
    for scores, right in groups:
        good = [score for score, ok in zip(scores, right, strict=True) if ok]
        bad = [score for score, ok in zip(scores, right, strict=True) if not ok]
        won += sum(1.0 if g > b else 0.5 if g == b else 0.0 for g in good for b in bad)
        pairs += len(good) * len(bad)
    return (won / pairs if pairs else None), pairs


def midranks(values: Sequence[float]) -> list[float]:
    """Each value's rank, 1-based; tied values share the mean of the ranks they span.

    >>> midranks([10.0, 20.0, 10.0, 5.0])
    [2.5, 4.0, 2.5, 1.0]
    """
    order = sorted(range(len(values)), key=lambda index: values[index])
    ranks = [0.0] * len(values)
    start = 0
    while start < len(order):
        end = start
        while end + 1 < len(order) and values[order[end + 1]] == values[order[start]]:
            end += 1
        for position in range(start, end + 1):
            ranks[order[position]] = (start + end) / 2 + 1
        start = end + 1
    return ranks


def auroc(scores: Sequence[float], right: Sequence[bool]) -> float | None:
    """The area under the ROC curve of `scores` against `right` (Mann-Whitney: the rank sum of the right items, ties
    at their midranks); None unless both classes are present.

    >>> auroc([0.9, 0.2, 0.5, 0.5], [True, False, True, False])
    0.875
    >>> auroc([1.0, 2.0], [True, True]) is None
    True
    """
    positives = sum(right)
    negatives = len(right) - positives
    if not positives or not negatives:
        return None
    rank_sum = sum(rank for rank, ok in zip(midranks(scores), right, strict=True) if ok)
    return (rank_sum - positives * (positives + 1) / 2) / (positives * negatives)


def calibration_error(probabilities: Sequence[float], outcomes: Sequence[float], bins: int = 10) -> float | None:
    """The expected calibration error: the probabilities cut into `bins` equal-width bins over [0, 1] (the last one
    closed), and the mean over bins, weighted by their share of the items, of |mean probability - mean outcome|.
    None for no items.

    >>> round(calibration_error([0.05, 0.15, 0.95, 0.91], [0.0, 1.0, 1.0, 0.0]), 12)  # (0.05 + 0.85 + 0.86) / 4
    0.44
    """
    if not probabilities:
        return None
    cells: dict[int, list[tuple[float, float]]] = {}
    for probability, outcome in zip(probabilities, outcomes, strict=True):
        cells.setdefault(min(int(probability * bins), bins - 1), []).append((probability, outcome))
    gap = 0.0
    for cell in cells.values():
        gap += abs(sum(p for p, _ in cell) - sum(o for _, o in cell))  # = count * |mean p - mean outcome|
    return gap / len(probabilities)


def quantile(ordered: Sequence[float], q: float) -> float:
    """The q-quantile of sorted values, interpolated linearly between the closest ranks (numpy's default).

    >>> quantile([1.0, 2.0, 3.0, 4.0], 0.25), quantile([7.0], 0.95)
    (1.75, 7.0)
    """
    position = q * (len(ordered) - 1)
    low = math.floor(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def summary(scores: Sequence[float]) -> dict[str, float] | None:
    """Mean, standard deviation (of the scores themselves: divided by n) and the 5th, 25th, 50th, 75th and 95th
    percentiles; None for no scores.

    >>> summary([1.0, 2.0, 3.0, 4.0])
    {'mean': 2.5, 'std': 1.118033988749895, 'p5': 1.15, 'p25': 1.75, 'p50': 2.5, 'p75': 3.25, 'p95': 3.8499999999999996}
    """
    if not scores:
        return None
    mean = math.fsum(scores) / len(scores)
    std = math.sqrt(math.fsum((score - mean) ** 2 for score in scores) / len(scores))
    ordered = sorted(scores)
    return {"mean": mean, "std": std, **{name: quantile(ordered, q) for name, q in QUANTILES.items()}}


def spearman(first: Sequence[float], second: Sequence[float]) -> float | None:
    """Spearman's rank correlation: Pearson's over the midranks. None for fewer than two items, or when either side
    is constant (no ranking to compare).

    >>> spearman([1.0, 2.0, 3.0], [10.0, 30.0, 20.0]), spearman([1.0, 2.0, 3.0], [3.0, 2.0, 1.0])
    (0.5, -1.0)
    """
    if len(first) < 2:
        return None
    a, b = midranks(first), midranks(second)
    mean = (len(a) + 1) / 2  # midranks of n items always average (n + 1) / 2
    cross = math.fsum((x - mean) * (y - mean) for x, y in zip(a, b, strict=True))
    spread = math.sqrt(math.fsum((x - mean) ** 2 for x in a) * math.fsum((y - mean) ** 2 for y in b))
    return cross / spread if spread else None
