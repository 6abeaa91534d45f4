"""Instruction-following ground truths, in the shapes the trainers' datasets keep them, as an `instructions` spec
(`{"instruction_ids": [...], "kwargs": [...], "grading": ...}`). Pure functions: the compat routes
(`compat_mapping`) and the training client's dataset mappings (`trainer_client.domains`) both read labels with them.

Three shapes are in use (research/domains.md, section 1):
- open-instruct / Tulu (`IF_multi_constraints_upto5`): `ground_truth` is a *Python-literal* string of a one-element
  list, `[{'instruction_id': [...], 'kwargs': [...]}]`, read as open-instruct reads it (`ast.literal_eval`, then
  `json.loads` if the element is still a string). `ast.literal_eval` builds literals only: nothing is evaluated;
- Google IFEval / lm-eval: `instruction_id_list` and a parallel `kwargs` list;
- NeMo-Gym's instruction-following rows: the same two under `verifier_metadata` (or, in older rows, at the top
  level), with `grading_mode` `binary` (all must pass) or `fraction`.

A kwargs dict's null values are dropped, as both open-instruct and NeMo-Gym drop them: a dataset stored as Arrow
fills every kwargs dict with the union of all keys, the absent ones null. (lm-eval drops every falsy value; a 0 can
be a real argument, so only null is dropped here.)

Also NeMo-Gym's structured-outputs rows, as a `json_schema` spec (`structured_outputs_spec`).
"""

from __future__ import annotations

import ast
import json
from collections.abc import Mapping
from typing import Any

MAX_LABEL_CHARS = 100_000  # a ground-truth string past this is no instruction list; literal_eval's work stays bounded
GRADING_MODES = {"binary": "all", "all": "all", "fraction": "fraction"}  # NeMo-Gym's names -> the spec's


class LabelError(ValueError):
    """A label in one of these shapes that cannot be read. The message names what is wrong, never the value; `field`
    is the row's column at fault, where one is."""

    def __init__(self, message: str, field: str | None = None) -> None:
        super().__init__(message)
        self.field = field


def structured_outputs_spec(row: Mapping[str, Any]) -> dict[str, Any] | None:
    """The `json_schema` spec of a structured-outputs row: NeMo-Gym's `schema_str` (the schema's JSON text) strict, as
    NeMo-Gym's structured_outputs server scores it (`strictify_schema`); else a plain `schema` column (an object or
    its JSON) as given. None for a row with neither. LabelError (with the column) for a row json_schema cannot score:
    a `schema_type` other than json, a `response_mode` other than text (tool-call arguments are not read), a schema
    that is not a JSON object.

    >>> structured_outputs_spec({"schema_str": '{"type": "object"}', "schema_type": "json", "response_mode": "text"})
    {'schema': {'type': 'object'}, 'strict': True}
    """
    from_gym = row.get("schema_str") is not None
    raw = row.get("schema_str") if from_gym else row.get("schema")
    if raw is None:
        return None
    if str(row.get("schema_type") or "json").lower() != "json":
        raise LabelError("json: the only structured output json_schema reads", "schema_type")
    if (row.get("response_mode") or "text") != "text":
        raise LabelError("text: json_schema reads the response's message text, not tool calls", "response_mode")
    try:
        schema = json.loads(raw) if isinstance(raw, str) else raw
    except (ValueError, RecursionError):  # RecursionError: nested past the interpreter's depth
        schema = None
    column = "schema_str" if from_gym else "schema"
    if not isinstance(schema, dict):
        raise LabelError("a JSON Schema: an object, or its JSON text", column)
    return {"schema": schema, "strict": True} if from_gym else {"schema": schema}


def is_open_instruct_label(value: Any) -> bool:
    """Whether `value` looks like open-instruct's instruction ground truth: a string holding a list of one dict with
    `instruction_id` (a math gold such as `[1, 2]` or `{1, 2}` does not).

    >>> is_open_instruct_label("[{'instruction_id': ['punctuation:no_comma'], 'kwargs': [None]}]")
    True
    >>> is_open_instruct_label("[1, 2]"), is_open_instruct_label("{1, 2}")
    (False, False)
    """
    if not isinstance(value, str):
        return False
    head = value.lstrip()[:200]
    return head.startswith("[") and head[1:].lstrip().startswith("{") and "instruction_id" in head


def open_instruct_instructions(label: str) -> dict[str, Any]:
    """open-instruct's ground-truth string as an `instructions` spec (open-instruct's own `IFEvalVerifier` reading),
    graded as open-instruct rewards it: the share of the instructions followed.

    >>> open_instruct_instructions("[{'instruction_id': ['detectable_format:title'], 'kwargs': [None]}]")
    {'instruction_ids': ['detectable_format:title'], 'kwargs': [None], 'grading': 'fraction'}
    """
    if len(label) > MAX_LABEL_CHARS:
        raise LabelError(f"an instruction ground truth of more than {MAX_LABEL_CHARS} characters")
    try:
        parsed = ast.literal_eval(label.strip())
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        raise LabelError("not a Python-literal list of instruction constraints (open-instruct's format)") from None
    if not isinstance(parsed, list | tuple) or not parsed:
        raise LabelError("open-instruct's ground truth is a list of one dict with instruction_id and kwargs")
    entry = parsed[0]
    if isinstance(entry, str):
        try:
            entry = json.loads(entry)
        except (ValueError, RecursionError):
            raise LabelError("its first element is a string that is not a JSON object") from None
    if not isinstance(entry, Mapping) or "instruction_id" not in entry:
        raise LabelError("open-instruct's ground truth is a list of one dict with instruction_id and kwargs")
    return instructions_spec(entry["instruction_id"], entry.get("kwargs"), "fraction")


def instructions_spec(ids: Any, kwargs: Any, grading_mode: Any = None) -> dict[str, Any]:
    """An `instructions` spec from a list of ids and its parallel kwargs (dicts or nulls; missing: all null). A
    kwargs list of another length is passed on as it is: the schema refuses it, naming the field.

    >>> instructions_spec(["a:b", "c:d"], [{"n": 3, "unused": None}, {}], "fraction")
    {'instruction_ids': ['a:b', 'c:d'], 'kwargs': [{'n': 3}, {}], 'grading': 'fraction'}
    """
    ids = _listed(ids)
    if ids is None or not ids or not all(isinstance(name, str) for name in ids):
        raise LabelError("instruction ids must be a non-empty list of strings")
    given = _listed(kwargs)
    if kwargs is not None and given is None:
        raise LabelError("kwargs must be a list with a dict or null per instruction id")
    entries = given if given is not None else [None] * len(ids)
    spec: dict[str, Any] = {"instruction_ids": list(ids), "kwargs": [_kwargs(entry) for entry in entries]}
    if grading_mode is not None:
        if grading_mode not in GRADING_MODES:
            raise LabelError(f"grading_mode must be one of {', '.join(GRADING_MODES)}")
        spec["grading"] = GRADING_MODES[grading_mode]
    return spec


def nemo_gym_instructions(row: Mapping[str, Any]) -> dict[str, Any] | None:
    """A NeMo-Gym instruction-following row (or `/verify` body) as an `instructions` spec: `verifier_metadata`'s
    `instruction_id_list`, `kwargs` and `grading_mode`, or the same at the top level (NeMo-Gym's older rows, and
    Google's IFEval rows, which have no grading mode); None when the row holds no instruction list.

    >>> nemo_gym_instructions({"verifier_metadata": {"instruction_id_list": ["x:y"], "kwargs": [None],
    ...                                              "grading_mode": "binary"}})
    {'instruction_ids': ['x:y'], 'kwargs': [None], 'grading': 'all'}
    """
    metadata = row.get("verifier_metadata")
    source = metadata if isinstance(metadata, Mapping) and "instruction_id_list" in metadata else row
    if "instruction_id_list" not in source:
        return None
    return instructions_spec(source["instruction_id_list"], source.get("kwargs"), source.get("grading_mode"))


def _listed(value: Any) -> list[Any] | None:
    """A list as datasets hand one over (a list, a tuple, a numpy array), or its JSON string; None otherwise."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except (ValueError, RecursionError):
            return None
    tolist = getattr(value, "tolist", None)
    if callable(tolist):
        value = tolist()
    return list(value) if isinstance(value, list | tuple) else None


def _kwargs(entry: Any) -> dict[str, Any] | None:
    if entry is None:
        return None
    if isinstance(entry, str):  # a JSON object per instruction, as some exports keep them
        try:
            entry = json.loads(entry) if entry.strip() else None
        except (ValueError, RecursionError):
            raise LabelError("each kwargs entry must be a dict, null, or a JSON object") from None
        if entry is None:
            return None
    if not isinstance(entry, Mapping):
        raise LabelError("each kwargs entry must be a dict, null, or a JSON object")
    return {str(key): value for key, value in entry.items() if value is not None}
