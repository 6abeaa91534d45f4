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
