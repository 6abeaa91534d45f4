"""The scorers: one module per component, and the tables the engine reads.

A text component is a pure function of the item and its spec, `score(item, spec) -> ComponentResult`, run in the
service process; one whose work is much cheaper for many items at once (numpy over the whole batch) also has
`score_batch(items, specs) -> list[ComponentResult]`, in `BATCHED`. A gated one (`GatedSpec`) also gets the result
of the component it reads correctness from, `score(item, spec, correctness)`, and runs after it. A pooled one
(`math`, `code`, `sql`, `procedural`, `rm`, `prm`, `judge`) needs the worker pool, the sandbox, a model or a judge: a
class the engine builds once and drives as scoring/pooled.py says, in `POOLED` (one gated on correctness, a model with
`gate: "right"` or a judge with `when: "rule_miss"`, runs in a second round, after the component it reads). The engine
names no component.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from verifier_service.schema import ComponentResult, ScoreItem
from verifier_service.scoring import (
    answer,
    choice,
    instructions,
    json_schema,
    language,
    length,
    overlong,
    repetition,
    steps,
    think_format,
)
from verifier_service.scoring.pooled import PooledComponent, Resources

Scorer = Callable[[ScoreItem, Any], ComponentResult]
BatchScorer = Callable[[Sequence[ScoreItem], Sequence[Any]], list[ComponentResult]]
GatedScorer = Callable[[ScoreItem, Any, ComponentResult], ComponentResult]

TEXT: dict[str, Scorer] = {
    "choice": choice.score,
    "answer": answer.score,
    "instructions": instructions.score,
    "json_schema": json_schema.score,
    "format": think_format.score,
    "overlong": overlong.score,
    "repetition": repetition.score,
    "language": language.score,
    "steps": steps.score,
}
BATCHED: dict[str, BatchScorer] = {"repetition": repetition.score_batch}
GATED: dict[str, GatedScorer] = {"length": length.score}

# Pooled components (scoring/pooled.py): name -> the class the engine builds once with the service's resources.
# Imported last: their modules read the tables above (through scoring.texts).
from verifier_service.scoring.code import CodeComponent  # noqa: E402
from verifier_service.scoring.judge import JudgeComponent  # noqa: E402
from verifier_service.scoring.math import MathComponent  # noqa: E402
from verifier_service.scoring.prm import PrmComponent  # noqa: E402
from verifier_service.scoring.procedural import ProceduralComponent  # noqa: E402
from verifier_service.scoring.rm import RmComponent  # noqa: E402
from verifier_service.scoring.sql import SqlComponent  # noqa: E402

POOLED: dict[str, Callable[[Resources], PooledComponent]] = {
    "math": MathComponent,
    "code": CodeComponent,
    "sql": SqlComponent,
    "procedural": ProceduralComponent,
    "rm": RmComponent,
    "prm": PrmComponent,
    "judge": JudgeComponent,
}
