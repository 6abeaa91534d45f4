"""Sequences cut into forward passes under a token budget. Pure: no torch."""

from __future__ import annotations

from collections.abc import Sequence


def batches(lengths: Sequence[int], budget: int) -> list[list[int]]:
    """The indexes of `lengths`, longest first, cut into batches whose padded size (rows x the longest row) is at
    most `budget`; a sequence longer than the budget goes alone. Sorting by length keeps padding small: the rows of
    a batch are of nearly one length.

    >>> batches([3, 9, 4, 8, 1], budget=16)
    [[1], [3, 2], [0, 4]]
    """
    order = sorted(range(len(lengths)), key=lambda index: -lengths[index])
    cut: list[list[int]] = []
    for index in order:
        if cut and (len(cut[-1]) + 1) * lengths[cut[-1][0]] <= budget:
            cut[-1].append(index)
        else:
            cut.append([index])
    return cut
