"""What a worker process runs: a math comparison (`MathTask`), the text components of a chunk of items (`TextTask`),
or a pooled component's own task (anything with a `run()` method: scoring/pooled.WorkerComponent). The pool
(`verifier_service.pool`) knows none of them; it runs `run` on whatever it is sent."""

from __future__ import annotations

from typing import Any

from verifier_service.scoring.math import MathTask, verify_math
from verifier_service.scoring.texts import TextTask, run_text_task


def run(task: Any) -> Any:
    if isinstance(task, TextTask):
        return run_text_task(task)
    if isinstance(task, MathTask):
        return verify_math(task)
    return task.run()
