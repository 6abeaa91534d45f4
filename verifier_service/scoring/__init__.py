"""The scorers: one module per component, and the tables the engine reads.

A text component is a pure function of the item and its spec, `score(item, spec) -> ComponentResult`, run in the
service process; one whose work is much cheaper for many items at once (numpy over the whole batch) also has
`score_batch(items, specs) -> list[ComponentResult]`, in `BATCHED`. A gated one (`GatedSpec`) also gets the result
of the component it reads correctness from, `score(item, spec, correctness)`, and runs after it. `math` and `code`
are not here: they need the engine's worker pool and sandbox, and are the only components the engine names.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from verifier_service.schema import ComponentResult, ScoreItem
from verifier_service.scoring import answer, choice, length, overlong, repetition, think_format

Scorer = Callable[[ScoreItem, Any], ComponentResult]
BatchScorer = Callable[[Sequence[ScoreItem], Sequence[Any]], list[ComponentResult]]
GatedScorer = Callable[[ScoreItem, Any, ComponentResult], ComponentResult]

POOLED = ("math", "code")  # scored by the engine's pools
TEXT: dict[str, Scorer] = {
    "choice": choice.score,
    "answer": answer.score,
    "format": think_format.score,
    "overlong": overlong.score,
    "repetition": repetition.score,
}
BATCHED: dict[str, BatchScorer] = {"repetition": repetition.score_batch}
GATED: dict[str, GatedScorer] = {"length": length.score}
