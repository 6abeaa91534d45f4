"""Task functions the pool tests run in worker processes (importable by name)."""

from __future__ import annotations

import os
import time


def echo(value: object) -> object:
    return value


def fail(message: str) -> None:
    raise ValueError(message)


def sleep(seconds: float) -> int:
    time.sleep(seconds)
    return os.getpid()


def die(code: int) -> None:
    os._exit(code)


def die_on_text(task: object) -> object:
    """The verifier's worker, except that a chunk of text components kills it."""
    from verifier_service.scoring import worker
    from verifier_service.scoring.texts import TextTask

    if isinstance(task, TextTask):
        os._exit(3)
    return worker.run(task)  # type: ignore[arg-type]


def fail_on_text(task: object) -> object:
    """The verifier's worker, except that a chunk of text components raises."""
    from verifier_service.scoring import worker
    from verifier_service.scoring.texts import TextTask

    if isinstance(task, TextTask):
        raise RuntimeError("a broken text chunk")
    return worker.run(task)  # type: ignore[arg-type]


def stall_on_text(task: object) -> object:
    """The verifier's worker, except that a chunk of text components never finishes."""
    from verifier_service.scoring import worker
    from verifier_service.scoring.texts import TextTask

    if isinstance(task, TextTask):
        time.sleep(600)
    return worker.run(task)  # type: ignore[arg-type]


def timed(task: tuple[int, float]) -> tuple[int, float, int]:
    """Sleep `task[1]` seconds; say which task it was, when it ended (the monotonic clock the pool's process shares),
    and which worker ran it."""
    index, seconds = task
    time.sleep(seconds)
    return index, time.monotonic(), os.getpid()


class ComponentJob:
    """A WorkerComponent's job (scoring/pooled.py): `run()` in the worker gives a ComponentResult, sleeps past its
    deadline, kills its worker or raises, as `action` says."""

    def __init__(self, action: str) -> None:
        self.action = action

    def __hash__(self) -> int:
        return hash(self.action)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ComponentJob) and other.action == self.action

    def run(self) -> object:
        from verifier_service.schema import ComponentResult

        if self.action == "sleep":
            time.sleep(30)
        elif self.action == "die":
            os._exit(3)
        elif self.action == "raise":
            raise ValueError("broken")
        return ComponentResult(score=1.0, verdict="valid", detail=f"ran in {os.getpid() != 0}")
