"""Datasets of other domains: a row, in the shape its dataset keeps it, as the component specs that grade it
(`{component: spec}`, the fields of `verifier_service.schema`'s spec classes). Pure functions; the training data
(`data.to_row`) keeps the result as a row's `spec` column, which the reward functions read (`spec_column=`).

Shapes (`--dataset_shape`; `auto` picks one by the columns, `detect_shape`):
- `ifeval`: Google IFEval / lm-eval rows (`instruction_id_list`, `kwargs`, `prompt`) and NeMo-Gym's
  instruction-following rows (the same under `verifier_metadata`, with `grading_mode`) -> `instructions`;
- `open_instruct`: open-instruct / Tulu 3 RLVR rows (`messages`, `ground_truth`, `dataset`): an IFEval-style ground
  truth (a Python-literal string) -> `instructions`; a math row's (`dataset` gsm8k, math, ...) -> `math`'s gold;
  other rows (old `func_name` constraints, code) map to nothing;
- `bird`: BIRD (`question`, `SQL`, `db_id`), Spider (`question`, `query`, `db_id`) and NeMo-Gym bird_sql
  (`gt_sql`, `db_id`, `sql_context`) rows -> `sql`, the database by name (`db`: a file the verifier's settings
  name), or by its schema (`schema_sql`) when the row carries CREATE TABLE statements (`schema_sql`,
  `sql_context`, ...);
- `reasoning_gym`: reasoning-gym entries (`question`, `answer`, `metadata` with `source_dataset`) -> `procedural`;
- `json_schema`: rows with a JSON Schema (`schema`, or NeMo-Gym structured outputs' `schema_str`) -> `json_schema`;
- `codeforces`: open-r1's Codeforces rows (`official_tests`, `generated_checker`, ...) -> a C++ `code` spec;
- `code_contests`: DeepMind's CodeContests rows (`public_tests`, `private_tests`, `generated_tests`) -> a C++ `code`
  spec. Both: `trainer_client.contests` (limits, checkers, the test sets `--tests_column` picks, rows skipped).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from trainer_client.contests import contest_specs, statement
from verifier_service.domain_labels import (
    LabelError,
    is_open_instruct_label,
    nemo_gym_instructions,
    open_instruct_instructions,
    structured_outputs_spec,
)

Specs = dict[str, Any]  # component -> its spec's fields
SPEC_COLUMN = "spec"  # the prepared rows' column of per-row specs (a JSON string), read by the reward functions
MATH_SOURCES = ("gsm8k", "math")  # open-instruct `dataset` values (and their prefixes) whose ground truth is math's
SCHEMA_SQL_COLUMNS = ("schema_sql", "sql_context", "create_statements", "context", "schema")  # CREATE TABLE ...
GOLD_SQL_COLUMNS = ("SQL", "query", "gt_sql")  # BIRD's, Spider's, NeMo-Gym bird_sql's
# Where a shape's rows keep the prompt, when the column named by --prompt_column is absent: a chat or a text.
PROMPT_COLUMNS = ("responses_create_params", "messages", "prompt", "question", "problem")


def ifeval_specs(row: Mapping[str, Any]) -> Specs:
    """Google IFEval / NeMo-Gym instruction-following rows.

    >>> ifeval_specs({"key": 1000, "prompt": "...", "instruction_id_list": ["punctuation:no_comma"],
    ...               "kwargs": [{"num_words": None}]})
    {'instructions': {'instruction_ids': ['punctuation:no_comma'], 'kwargs': [{}]}}
    """
    spec = nemo_gym_instructions(row)
    return {"instructions": spec} if spec is not None else {}


def open_instruct_specs(row: Mapping[str, Any]) -> Specs:
    """open-instruct / Tulu RLVR rows: the ground truth feeds instructions or math, by its shape and `dataset`.

    >>> open_instruct_specs({"ground_truth": "[{'instruction_id': ['change_case:english_lowercase'], "
    ...                      "'kwargs': [None]}]", "dataset": "ifeval"})
    {'instructions': {'instruction_ids': ['change_case:english_lowercase'], 'kwargs': [None], 'grading': 'fraction'}}
    >>> open_instruct_specs({"ground_truth": "18", "dataset": "gsm8k"})
    {'math': {'gold': '18'}}
    """
    truth, source = _one(row.get("ground_truth")), _one(row.get("dataset"))
    if is_open_instruct_label(truth):
        return {"instructions": open_instruct_instructions(truth)}
    name = str(source or "").strip().lower().rsplit("/", 1)[-1]
    if name.startswith(MATH_SOURCES) and isinstance(truth, str | int | float) and str(truth).strip():
        return {"math": {"gold": str(truth).strip()}}
    return {}


def bird_specs(row: Mapping[str, Any]) -> Specs:
    """BIRD / Spider text-to-SQL rows: the gold query and the database (its name, or its schema when the row has it).

    >>> bird_specs({"question_id": 0, "db_id": "california_schools", "question": "...", "evidence": "...",
    ...             "SQL": "SELECT COUNT(*) FROM schools", "difficulty": "simple"})
    {'sql': {'gold_sql': 'SELECT COUNT(*) FROM schools', 'db': 'california_schools'}}
    """
    gold = next((row[name] for name in GOLD_SQL_COLUMNS if row.get(name) is not None), None)
    if not isinstance(gold, str) or not gold.strip():
        return {}
    schema = next((row[name] for name in SCHEMA_SQL_COLUMNS if _is_schema_sql(row.get(name))), None)
    if schema is not None:
        return {"sql": {"gold_sql": gold, "schema_sql": schema}}
    db = row.get("db_id")
    return {"sql": {"gold_sql": gold, "db": str(db)}} if db else {}


def reasoning_gym_specs(row: Mapping[str, Any]) -> Specs:
    """A reasoning-gym entry, scored by its dataset's own scorer (`metadata.source_dataset` names it).

    >>> reasoning_gym_specs({"question": "Make 24", "answer": "4*6",
    ...                      "metadata": '{"source_dataset": "countdown", "numbers": [4, 6], "target": 24}'})
    ... # doctest: +NORMALIZE_WHITESPACE
    {'procedural': {'dataset': 'countdown', 'entry': {'question': 'Make 24', 'answer': '4*6',
     'metadata': {'source_dataset': 'countdown', 'numbers': [4, 6], 'target': 24}}}}
    """
    metadata = _json_value(row.get("metadata"))
    if not isinstance(metadata, Mapping) or not isinstance(metadata.get("source_dataset"), str):
        return {}
    entry = {"question": row.get("question"), "answer": row.get("answer"), "metadata": dict(metadata)}
    return {"procedural": {"dataset": metadata["source_dataset"], "entry": entry}}


def json_schema_specs(row: Mapping[str, Any]) -> Specs:
    """A structured-outputs row's `json_schema` spec, read as the service's NeMo-Gym route reads it
    (`domain_labels.structured_outputs_spec`: `schema_str` strict, a `schema` column as given). A row json_schema
    cannot score (`schema_type` yaml, xml, ..., `response_mode` tool_call, a schema that is not an object) maps to
    nothing.

    >>> json_schema_specs({"schema_str": '{"type": "object", "required": ["a"]}', "schema_type": "json"})
    {'json_schema': {'schema': {'type': 'object', 'required': ['a']}, 'strict': True}}
    """
    try:
        spec = structured_outputs_spec(row)
    except LabelError:
        return {}
    return {"json_schema": spec} if spec is not None else {}


SHAPES: dict[str, Callable[[Mapping[str, Any]], Specs]] = {
    "ifeval": ifeval_specs,
    "open_instruct": open_instruct_specs,
    "bird": bird_specs,
    "reasoning_gym": reasoning_gym_specs,
    "json_schema": json_schema_specs,
    "codeforces": lambda row: contest_specs("codeforces", row),
    "code_contests": lambda row: contest_specs("code_contests", row),
}
CONTEST_SHAPES = ("codeforces", "code_contests")  # C++ problems: their own prompts, test sets and skipped rows
DATASET_SHAPES = ("auto", "none", *SHAPES)  # --dataset_shape's values
# The component a shape's rows are graded by, for the default system prompt (open-instruct's rows are mixed).
SHAPE_COMPONENTS = {
    "ifeval": "instructions",
    "bird": "sql",
    "reasoning_gym": "procedural",
    "json_schema": "json_schema",
    "codeforces": "code",
    "code_contests": "code",
}


def detect_shape(columns: Sequence[str]) -> str | None:
    """The shape a dataset's columns say it has; None for none of them (GSM8K, MATH, MBPP, ... read as before).

    >>> detect_shape(["key", "prompt", "instruction_id_list", "kwargs"]), detect_shape(["question", "answer"])
    ('ifeval', None)
    >>> detect_shape(["messages", "ground_truth", "dataset"]), detect_shape(["db_id", "question", "query"])
    ('open_instruct', 'bird')
    """
    present = set(columns)
    if "verifier_metadata" in present or {"instruction_id_list", "kwargs"} <= present:
        return "ifeval"
    if "ground_truth" in present:
        return "open_instruct"
    if "db_id" in present and present & set(GOLD_SQL_COLUMNS):
        return "bird"
    if {"question", "answer", "metadata"} <= present:
        return "reasoning_gym"
    if present & {"schema", "schema_str"}:
        return "json_schema"
    if "official_tests" in present:
        return "codeforces"
    if {"public_tests", "private_tests"} <= present:
        return "code_contests"
    return None


def resolve_shape(shape: str, columns: Sequence[str]) -> str | None:
    """--dataset_shape as used: `auto` detects it, `none` is none; a named one must be known."""
    if shape not in DATASET_SHAPES:
        raise ValueError(f"unknown dataset shape {shape!r}; shapes: {', '.join(DATASET_SHAPES)}")
    if shape == "auto":
        return detect_shape(columns)
    return None if shape == "none" else shape


def shape_specs(shape: str, row: Mapping[str, Any], index: int = 0, tests_column: str | None = None) -> Specs:
    """The specs a row of `shape` maps to ({} for none); a malformed row raises ValueError naming the row.
    `tests_column` (--tests_column): the test sets a contest shape's rows use (`contests.test_sets`)."""
    try:
        if shape in CONTEST_SHAPES:
            return contest_specs(shape, row, tests_column)
        return SHAPES[shape](row)
    except LabelError as exc:
        raise ValueError(f"row {index} of a {shape} dataset: {exc}") from None
    except ValueError as exc:
        if shape not in CONTEST_SHAPES:
            raise
        raise ValueError(f"row {index} of a {shape} dataset: {exc}") from None


def parse_specs(value: Any, column: str = SPEC_COLUMN) -> Specs:
    """A spec column's value: `{component: spec}` as a dict or its JSON string; {} for an empty cell.

    >>> parse_specs('{"answer": {"gold": "Paris"}}'), parse_specs(None), parse_specs("")
    ({'answer': {'gold': 'Paris'}}, {}, {})
    """
    value = _json_value(value, column)
    if value is None:
        return {}
    if not isinstance(value, Mapping) or not all(isinstance(spec, Mapping) for spec in value.values()):
        raise ValueError(f"dataset column {column!r} must hold {{component: spec}} objects (or their JSON strings)")
    return {str(name): dict(spec) for name, spec in value.items()}


def shape_prompt(row: Mapping[str, Any], shape: str | None = None) -> Any:
    """A row's prompt where its shape keeps it (NeMo-Gym: `responses_create_params.input`; a contest problem: its
    statement, `contests.statement`); None when it has none."""
    if shape in CONTEST_SHAPES:
        return statement(str(shape), row)
    for name in PROMPT_COLUMNS:
        value = row.get(name)
        if name == "responses_create_params":
            value = value.get("input") if isinstance(value, Mapping) else None
        if value is not None:
            return value
    return None


def _one(value: Any) -> Any:
    """A list of one value as that value (some open-instruct exports keep ground_truth and dataset in lists)."""
    return value[0] if isinstance(value, list | tuple) and len(value) == 1 else value


def _is_schema_sql(value: Any) -> bool:
    return isinstance(value, str) and "create table" in value[:10_000].lower()


def _json_value(value: Any, column: str | None = None) -> Any:
    """A JSON string parsed (an empty one is None); anything else as it is."""
    if not isinstance(value, str):
        return value
    if not value.strip():
        return None
    try:
        return json.loads(value)
    except (ValueError, RecursionError):
        if column is None:
            return value
        raise ValueError(f"dataset column {column!r} holds a string that is not JSON") from None
