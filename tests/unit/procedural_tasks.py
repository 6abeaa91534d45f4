"""The worker function for tests of the `procedural` component with stand-in datasets: it registers, in the worker
process, reasoning-gym datasets whose scorers misbehave on purpose (no real dataset is known to loop), then runs the
task as the service's worker does. The stand-in evals any other answer as string_insertion's scorer does, and its
guard lets everything through: what a hostile answer that got past a guard could do (it runs forked, as the nine
guarded datasets' scorers do). `Probe` reads the worker's state."""

from __future__ import annotations

import contextlib
import os
import time
from dataclasses import dataclass
from typing import Any

from verifier_service.scoring import worker


@dataclass
class _Config:
    size: int = 1
    seed: int = 0

    def validate(self) -> None:
        pass


def _register() -> None:
    from reasoning_gym.dataset import ProceduralDataset
    from reasoning_gym.factory import DATASETS, register_dataset

    from verifier_service.scoring.procedural_guard import GUARDS

    class StandIn(ProceduralDataset):
        def __init__(self, config: _Config) -> None:
            super().__init__(config=config, seed=config.seed, size=config.size)

        def __getitem__(self, idx: int) -> dict[str, Any]:
            return {"question": "say ok", "answer": "ok", "metadata": {}}

        def score_answer(self, answer: str | None, entry: dict[str, Any]) -> float:
            if answer == "loop":  # Python bytecode: the fork's own timer interrupts it
                while True:
                    pass
            if answer == "stubborn":  # a bare except swallows the timer: only a kill stops it
                while True:
                    with contextlib.suppress(BaseException):
                        time.sleep(0.01)
            if answer == "raise":
                raise ValueError("a message quoting the answer: raise")
            if answer == "exit":
                raise SystemExit(3)
            if answer == "die":
                os._exit(9)
            if answer == "nan":
                return float("nan")
            if answer == entry["answer"]:
                return 1.0
            try:  # a list of letters written for the answer, read as string_insertion.py:88 reads it
                return 1.0 if answer and "".join(eval(answer)) == entry["answer"] else 0.0
            except Exception:
                return 0.0

    if "stand_in" not in DATASETS:
        register_dataset("stand_in", StandIn, _Config)
        GUARDS["stand_in"] = lambda answer, entry: None  # a scorer that evals the answer, whose guard let it through


@dataclass(frozen=True)
class Probe:
    """A task that reports what later tasks in this worker depend on: the module that math's `verify` and the
    procedural guard's `refusal` come from (a patched one comes from the code that patched it)."""

    def run(self) -> tuple[str, str]:
        import math_verify

        from verifier_service.scoring import procedural

        return math_verify.verify.__module__, procedural.refusal.__module__


def run(task: Any) -> Any:
    _register()
    return worker.run(task)
