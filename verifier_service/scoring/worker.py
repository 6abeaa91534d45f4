"""What a worker process runs: a math comparison (`MathTask`) or the text components of a chunk of items
(`TextTask`). The pool (`verifier_service.pool`) knows neither; it runs `run` on whatever it is sent."""

from __future__ import annotations

from typing import Any

from verifier_service.scoring.math import MathTask, verify_math
from verifier_service.scoring.texts import TextTask, run_text_task


def run(task: MathTask | TextTask) -> Any:
    if isinstance(task, TextTask):
        return run_text_task(task)
    return verify_math(task)
