"""The worker function for tests of the `procedural` component with stand-in datasets: it registers, in the worker
process, reasoning-gym datasets whose scorers misbehave on purpose (no real dataset is known to loop), then runs the
task as the service's worker does."""

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

    class StandIn(ProceduralDataset):
        def __init__(self, config: _Config) -> None:
            super().__init__(config=config, seed=config.seed, size=config.size)

        def __getitem__(self, idx: int) -> dict[str, Any]:
            return {"question": "say ok", "answer": "ok", "metadata": {}}

        def score_answer(self, answer: str | None, entry: dict[str, Any]) -> float:
            if answer == "loop":  # Python bytecode: the worker's own timer interrupts it
                while True:
                    pass
            if answer == "stubborn":  # a bare except swallows the worker's timer: only the pool's kill stops it
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
            return 1.0 if answer == entry["answer"] else 0.0

    if "stand_in" not in DATASETS:
        register_dataset("stand_in", StandIn, _Config)


def run(task: Any) -> Any:
    _register()
    return worker.run(task)
