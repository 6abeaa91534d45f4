"""The tests' data and tiny model: the builders are `trainer_client.tiny_model`'s (one copy, which users run too);
MBPP-shaped rows are the tests' own."""

from __future__ import annotations

import random

from trainer_client.tiny_model import build_model, build_tiny_model, build_tokenizer, gsm8k_rows, write_jsonl

__all__ = ["build_model", "build_tiny_model", "build_tokenizer", "gsm8k_rows", "mbpp_rows", "write_jsonl"]


def mbpp_rows(count: int, seed: int = 0) -> list[dict[str, object]]:
    """MBPP-shaped rows: a task in `text`, a reference solution in `code`, assert strings in `test_list`."""
    rng = random.Random(seed)
    rows: list[dict[str, object]] = []
    for task_id in range(count):
        k = rng.randint(2, 9)
        tests = [f"assert add_{k}({x}) == {x + k}" for x in rng.sample(range(100), 3)]
        text = f"Write a function that returns a number plus {k}."  # as in MBPP, the text names no function
        rows.append(
            {"task_id": task_id, "text": text, "code": f"def add_{k}(x):\n    return x + {k}\n", "test_list": tests}
        )
    return rows
