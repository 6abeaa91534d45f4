"""Reading TRL's reward-function inputs: completion text (plain or chat) and per-row dataset columns."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import TypeAdapter, ValidationError

from verifier_service.schema import CodeSpec, CodeTest

_TESTS = TypeAdapter(list[CodeTest])


def completion_text(completion: str | Sequence[Mapping[str, Any]]) -> str:
    """The text to grade: a plain completion as is; for a chat completion, the last assistant message.

    >>> completion_text("The answer is 4.")
    'The answer is 4.'
    >>> completion_text([{"role": "assistant", "content": "<think>2+2</think>4"}])
    '<think>2+2</think>4'
    >>> completion_text([{"role": "assistant", "content": [{"type": "text", "text": "4"}]}])
    '4'
    """
    if isinstance(completion, str):
        return completion
    for message in reversed(completion):
        if message.get("role", "assistant") == "assistant":
            return _content_text(message.get("content"))
    return ""


def _content_text(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    # content blocks: [{"type": "text", "text": ...}, {"type": "image", ...}]
    return "".join(block.get("text", "") for block in content if isinstance(block, Mapping))


def column(kwargs: Mapping[str, Any], name: str, rows: int) -> list[Any]:
    """Dataset column `name` as TRL passes it (one value per completion); a clear error when it is missing."""
    if name not in kwargs:
        available = sorted(key for key in kwargs if key not in ("trainer_state", "log_extra", "log_metric"))
        raise ValueError(
            f"the reward needs dataset column {name!r}, which is not in this batch; columns: {available}. "
            "Pass the column name to the reward (gold_column= / tests_column=) or rename the column."
        )
    values = list(kwargs[name])
    if len(values) != rows:
        raise ValueError(f"column {name!r} has {len(values)} values for {rows} completions")
    return values


def gold_text(value: Any) -> str | None:
    """A gold answer as text; None (the row is not a math row) when the column is empty."""
    if value is None:
        return None
    text = str(value).strip()
    return text or None


def code_spec(value: Any, *, timeout_s: float, memory_mb: int) -> CodeSpec | None:
    """A row's code tests as a `CodeSpec`; None when the row has none.

    Accepts a list of tests, a `CodeSpec`-shaped dict, or either as a JSON string (as datasets often store them).
    A malformed value raises ValueError: it is a bug in the dataset, and would fail the same way every time.

    >>> code_spec('[{"type": "assert", "code": "assert f() == 1"}]', timeout_s=5, memory_mb=512).tests[0].type
    'assert'
    """
    if isinstance(value, str):
        value = json.loads(value) if value.strip() else None
    if not value:
        return None
    try:
        if isinstance(value, Mapping):
            return CodeSpec.model_validate({"timeout_s": timeout_s, "memory_mb": memory_mb, **value})
        return CodeSpec(tests=_TESTS.validate_python(value), timeout_s=timeout_s, memory_mb=memory_mb)
    except ValidationError as exc:
        raise ValueError(f"malformed code tests in the dataset: {exc}") from exc
