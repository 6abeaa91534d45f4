"""Reading TRL's reward-function inputs: completion text (plain or chat) and per-row dataset columns."""

from __future__ import annotations

import json
import math
import numbers
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from pydantic import ValidationError

# How a chat completion becomes the text graded, and a number the text of a gold, are the schema's: the one definition
# that /v1/score, the trainer routes and the adapters use too.
from verifier_service.schema import (
    CodeSpec,
    completion_text,
    number_text,
    option_letter,
    valid_unicode,
)

__all__ = [
    "GOLD_FIELDS", "GOLD_READERS", "LETTERS", "answer_gold", "choice_gold", "code_spec", "code_tests", "column",
    "completion_text", "gold_text", "json_schema_gold", "not_json_tests", "option_texts", "valid_unicode",
]  # fmt: skip


def column(kwargs: Mapping[str, Any], name: str, rows: int) -> list[Any]:
    """Dataset column `name` as TRL passes it (one value per completion); a clear error when it is missing."""
    if name not in kwargs:
        available = sorted(key for key in kwargs if key not in ("trainer_state", "log_extra", "log_metric"))
        raise ValueError(
            f"the reward needs dataset column {name!r}, which is not in this batch; columns: {available}. "
            "Pass the column name to the reward (gold_column= / tests_column= / options_column= / spec_column=) or "
            "rename the column."
        )
    values = list(kwargs[name])
    if len(values) != rows:
        raise ValueError(f"column {name!r} has {len(values)} values for {rows} completions")
    return values


def gold_text(value: Any) -> str | None:
    """A gold answer as text (a number as `schema.number_text` writes it); None (the row is not a math row) when the
    column is empty: None, blank, or NaN (how pandas, and so a dataset made from a CSV file, marks a missing
    number). A value that is no gold (a boolean, an infinity) raises ValueError.

    >>> gold_text(" 72 "), gold_text(72), gold_text(0.5), gold_text(""), gold_text(None), gold_text(float("nan"))
    ('72', '72', '0.5', None, None, None)
    """
    if value is None or (isinstance(value, numbers.Real) and not isinstance(value, numbers.Integral)
                         and math.isnan(value)):  # fmt: skip
        return None
    text = (value if isinstance(value, str) else number_text(value)).strip()
    return text or None


LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"


def choice_gold(value: Any) -> str | list[str] | None:
    """A multiple-choice gold as `ChoiceSpec.gold` takes it: a letter, or a list of letters (multi-select). An int
    is a 0-based option index (MMLU's `answer`), read as the schema reads one (`schema.option_letter`), so that a
    dataset's column holds letters; None (the row is not a choice row) when the column is empty.

    >>> choice_gold(" B"), choice_gold(2), choice_gold(["A", 3]), choice_gold(" "), choice_gold([])
    ('B', 'C', ['A', 'D'], None, None)
    """
    if isinstance(value, (list, tuple)):
        letters = [letter for letter in (choice_gold(v) for v in value) if isinstance(letter, str)]
        return letters or None
    if isinstance(value, numbers.Integral) and not isinstance(value, bool):  # numpy's ints too
        return option_letter(int(value), LETTERS)
    return gold_text(value)


def answer_gold(value: Any) -> str | list[str] | None:
    """A short-answer gold as `AnswerSpec.gold` takes it: the answer, or a list of accepted aliases (TriviaQA,
    Natural Questions); None when the column is empty.

    >>> answer_gold(" Paris "), answer_gold(["Paris", "", "City of Light"]), answer_gold(42), answer_gold([])
    ('Paris', ['Paris', 'City of Light'], '42', None)
    """
    if isinstance(value, (list, tuple)):
        aliases = [alias for alias in (gold_text(v) for v in value) if alias is not None]
        return aliases or None
    return gold_text(value)


def option_texts(value: Any, column: str = "options") -> list[str] | None:
    """A row's option texts, in letter order (a list, or its JSON string); None when the row has none.

    >>> option_texts(["Paris", "Lyon"]), option_texts('["1", 2]'), option_texts(None)
    (['Paris', 'Lyon'], ['1', '2'], None)
    """
    if isinstance(value, str):
        try:
            value = json.loads(value) if value.strip() else None
        except (json.JSONDecodeError, RecursionError):
            raise ValueError(f"dataset column {column!r} holds a string that is not a JSON list of options") from None
    if value is None or (isinstance(value, Sequence) and not value):
        return None
    if not isinstance(value, Sequence) or isinstance(value, str):
        raise ValueError(f"dataset column {column!r} must hold a list of option texts, got {type(value).__name__}")
    return [str(option) for option in value]


def code_spec(
    value: Any, *, options: Mapping[str, Any] | None = None, column: str = "tests", entry_point: str | None = None
) -> CodeSpec | None:
    """A row's code tests as a `CodeSpec` with the reward's code `options` (timeout_s, memory_mb, ...); None when
    the row has none. `value` is read by `code_tests`; a `CodeSpec`-shaped dict in the row wins over `options`.

    A malformed value raises ValueError: it is a bug in the dataset, and would fail the same way every time.

    >>> spec = code_spec('[{"type": "assert", "code": "assert f() == 1"}]', options={"timeout_s": 2})
    >>> spec.tests[0].type, spec.timeout_s
    ('assert', 2.0)
    """
    tests = code_tests(value, column=column, entry_point=entry_point)
    if tests is None:
        return None
    fields = dict(tests) if isinstance(tests, Mapping) else {"tests": tests}
    try:
        return CodeSpec.model_validate({**(options or {}), **fields})
    except ValidationError as exc:  # described by field and rule, never with the row's values
        problems = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'tests'}: {e['msg']}" for e in exc.errors())
        raise ValueError(f"malformed code tests in dataset column {column!r}: {problems}") from None


def code_tests(value: Any, *, column: str = "tests", entry_point: str | None = None) -> Any:
    """A row's code tests as plain data: a list of tests or a `CodeSpec`-shaped dict; None when the row has none.

    Accepts either as is or as a JSON string (as datasets often store them); a plain string in the list is an assert
    test (MBPP's `test_list`), as `CodeSpec` reads it; a HumanEval test (a `def check(candidate): ...` string, not
    JSON) becomes one assert test that calls `check(<entry_point>)` when the row's `entry_point` is given, and a
    clear error otherwise. The tests themselves are checked by `code_spec`.

    >>> code_tests('["assert f(1) == 2", "assert f(2) == 3"]')[1]
    'assert f(2) == 3'
    >>> code_tests("def check(candidate):\\n    assert candidate(1) == 2\\n", entry_point="f")[0]["code"].split()[-1]
    'check(f)'
    """
    if isinstance(value, str):
        if not value.strip():
            return None
        try:
            value = json.loads(value)
        except (json.JSONDecodeError, RecursionError):
            if entry_point:
                return [{"type": "assert", "code": f"{value.rstrip()}\n\ncheck({entry_point})\n"}]
            raise ValueError(not_json_tests(column, value)) from None
    if not value:
        return None
    return value


def not_json_tests(column: str, value: str) -> str:
    return (
        f"dataset column {column!r} holds a string that is not JSON ({value.strip()[:60]!r}...). Expected a list of "
        'tests ([{"type": "assert", "code": "assert f(1) == 2"}], see the README\'s code tests), a list of assert '
        "strings (as MBPP's test_list), or either as a JSON string. A HumanEval test (def check(candidate): ...) "
        'converts as [{"type": "assert", "code": test + "\\ncheck(<entry_point>)"}]; with an entry_point column '
        "in the dataset this happens by itself."
    )


def json_schema_gold(value: Any) -> dict[str, Any] | None:
    """A json_schema row's schema, from the gold column: an object, or its JSON string (as a dataset keeps a schema
    whose shape varies by row, and as NeMo-Gym's `schema_str`); None when empty.

    >>> json_schema_gold('{"type": "integer"}'), json_schema_gold({"type": "string"}), json_schema_gold(" ")
    ({'type': 'integer'}, {'type': 'string'}, None)
    """
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except (ValueError, RecursionError):
            raise ValueError("a JSON Schema must be an object or a JSON string of one; this is not JSON") from None
    if not isinstance(value, Mapping):
        raise ValueError("a JSON Schema must be an object or a JSON string of one")
    return dict(value)


# How each gold-bearing component reads its gold from a dataset row (the dataset's preparation, `data.py`, reads
# math golds out of whole GSM8K solutions first), and the spec field it fills (default `gold`).
GOLD_READERS: dict[str, Callable[[Any], Any]] = {
    "math": gold_text, "choice": choice_gold, "answer": answer_gold, "json_schema": json_schema_gold
}  # fmt: skip
GOLD_FIELDS = {"json_schema": "schema"}
