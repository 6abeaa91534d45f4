"""Training data for GRPO from datasets of several shapes: a chat `prompt` per row, plus the columns the reward
functions read (`solution`: the gold answer; `tests`: code tests as a JSON string; `options`: the option texts of
a multiple-choice question).

Which columns hold what is configurable (`Columns`), so GSM8K (`question`/`answer`), MATH (`problem`/`solution`),
MBPP (`text`/`test_list`), HumanEval (`prompt`/`test`/`entry_point`), MMLU (`question`/`answer`/`choices`) and
MMLU-Pro (`question`/`answer`/`options`) files load without renaming:
- prompt: a string gets the system prompt and becomes a chat prompt; a chat (a list of messages) is kept as is;
- solution: for math, a GSM8K solution becomes the number on its `#### N` line; anything else (a MATH solution
  with its `\\boxed{}` answer, a bare answer) is sent as is: the verifier reads the boxed answer of a gold solution
  itself. For choice, a letter, a list of letters, or a 0-based option index (MMLU's), which becomes its letter.
  For answer, the answer or a list of aliases. For json_schema, the schema (an object, or its JSON string), kept as
  JSON text;
- options: for choice, a list of option texts in letter order; listed under a text prompt (`A. ...`), since the
  question itself does not name them;
- reasoning-gym rows (`question`, `answer`, `metadata`: what the library generates, saved to JSONL), when procedural
  is rewarded: the `reasoning_gym` shape makes each row a procedural spec (`spec`, below);
- tests: a list of tests, or its JSON string, as `inputs.code_tests` reads them (MBPP's list of assert strings
  included); a HumanEval `check(candidate)` string becomes an assert test when the row has an `entry_point`. MBPP's
  asserts are also appended to its text prompt, as MBPP's own prompt does: its task text names no function;
- spec: per-row component specs, `{component: spec}` (a dict or its JSON string), for any component: a column the
  dataset has (`Columns(spec=...)`), and/or what its shape maps each row to (`dataset_shape`: IFEval,
  open-instruct, BIRD/Spider, reasoning-gym, JSON-schema rows; `trainer_client.domains`). Kept as the prepared
  rows' `spec` column (a JSON string, or None for a row that maps to nothing), which the reward functions read
  (`spec_column="spec"`). With specs, the gold and tests columns are read when the dataset has them, and a row's
  spec for a component wins over them.
"""

from __future__ import annotations

import json
import logging
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from trainer_client.contests import SKIP_COLUMNS, chosen_sets, skip_reason
from trainer_client.domains import (
    CONTEST_SHAPES,
    PROMPT_COLUMNS,
    SCHEMA_SQL_COLUMNS,
    SHAPE_COMPONENTS,
    SHAPES,
    SPEC_COLUMN,
    parse_specs,
    resolve_shape,
    shape_prompt,
    shape_specs,
)
from trainer_client.gsm8k import HUB_ID, SYSTEM_PROMPT, gold_answer
from trainer_client.inputs import GOLD_READERS, LETTERS, code_tests, gold_text, json_schema_gold, option_texts
from trainer_client.options import ROW_FIELDS, row_fields

if TYPE_CHECKING:
    from datasets import Dataset, DatasetDict

logger = logging.getLogger("trainer_client.data")

MATH_SYSTEM_PROMPT = SYSTEM_PROMPT
CODE_SYSTEM_PROMPT = (
    "You are a careful Python programmer. First think through the problem step by step inside <think> </think> "
    "tags. After the closing </think> tag, write your complete solution as one fenced Python code block "
    "(```python ... ```), defining every function the task names."
)
CPP_SYSTEM_PROMPT = (
    "You are a careful competitive programmer. First think through the problem step by step inside <think> </think> "
    "tags. After the closing </think> tag, write your complete solution as one fenced C++17 code block (```cpp ... "
    "```) that reads the input from standard input and writes the answer to standard output."
)
CHOICE_SYSTEM_PROMPT = (
    "You are a careful expert. First think through the question step by step inside <think> </think> tags. After "
    "the closing </think> tag, give the letter of the correct option in \\boxed{}, for example: The answer is "
    "\\boxed{B}."
)
ANSWER_SYSTEM_PROMPT = (
    "You are a careful expert. First think through the question step by step inside <think> </think> tags. After "
    "the closing </think> tag, give the final answer, as short as possible, inside <answer> </answer> tags, for "
    "example: <answer>Paris</answer>."
)
TASK_SYSTEM_PROMPT = (
    "First think through the task step by step inside <think> </think> tags. After the closing </think> tag, write "
    "your response."
)
SQL_SYSTEM_PROMPT = (
    "You are a careful SQL expert. First think through the question step by step inside <think> </think> tags. "
    "After the closing </think> tag, write the SQL query in one fenced code block (```sql ... ```)."
)
JSON_SYSTEM_PROMPT = (
    "You are a careful assistant. First think step by step inside <think> </think> tags. After the closing </think> "
    "tag, give your answer as one JSON value, valid under the schema the request gives, in one ```json block."
)
# The default system prompt of each task, the first rewarded one deciding (math: none of these, or math itself).
TASK_PROMPTS = {
    "code": CODE_SYSTEM_PROMPT, "choice": CHOICE_SYSTEM_PROMPT, "answer": ANSWER_SYSTEM_PROMPT,
    "sql": SQL_SYSTEM_PROMPT, "json_schema": JSON_SYSTEM_PROMPT, "instructions": TASK_SYSTEM_PROMPT,
    "procedural": ANSWER_SYSTEM_PROMPT,  # reasoning-gym's answers are read from <answer> tags first
}  # fmt: skip


@dataclass(frozen=True)
class Columns:
    """Which dataset column holds the prompt, the gold answer, the code tests and the option texts. The defaults are
    GSM8K's.

    `solution` is read only when math, choice or answer is rewarded, `tests` only when code is, `options` (when
    named) only when choice is. `spec` (when named) holds per-row specs, `{component: spec}`, for any component.
    """

    prompt: str = "question"
    solution: str = "answer"
    tests: str = "tests"
    options: str | None = None
    spec: str | None = None


def system_prompt_for(components: Sequence[str]) -> str:
    """The default system prompt, after the task the rewards check: math (also with no correctness component at
    all), else code, multiple choice, a short answer, SQL, JSON, instructions, a procedural task (`TASK_PROMPTS`).

    >>> system_prompt_for(["code", "format"]) == CODE_SYSTEM_PROMPT, system_prompt_for(["math"]) == SYSTEM_PROMPT
    (True, True)
    >>> system_prompt_for(["choice", "length"]) == CHOICE_SYSTEM_PROMPT
    True
    """
    if "math" in components:
        return MATH_SYSTEM_PROMPT
    return next((TASK_PROMPTS[name] for name in TASK_PROMPTS if name in components), MATH_SYSTEM_PROMPT)


def chat_prompt(value: Any, system_prompt: str) -> list[dict[str, Any]]:
    """A prompt as chat messages: a string gets the system prompt (when not empty); a chat is kept as is.

    >>> chat_prompt("What is 6*7?", "Be brief.")
    [{'role': 'system', 'content': 'Be brief.'}, {'role': 'user', 'content': 'What is 6*7?'}]
    """
    if isinstance(value, str):
        system = [{"role": "system", "content": system_prompt}] if system_prompt else []
        return [*system, {"role": "user", "content": value}]
    if isinstance(value, Sequence) and value and all(isinstance(m, Mapping) and "role" in m for m in value):
        return [dict(message) for message in value]
    raise ValueError(f"a prompt must be a string or a list of chat messages, got {str(value)[:80]!r}")


def gold(value: Any) -> str | None:
    """The gold answer to send: a GSM8K solution's `#### N` number, else the text as is; None when empty.

    >>> gold("2 + 2 = 4\\n#### 4"), gold("so it is $\\\\boxed{4}$."), gold(7), gold("  ")
    ('4', 'so it is $\\\\boxed{4}$.', '7', None)
    """
    if not isinstance(value, str):  # a number, or none (None, NaN)
        return gold_text(value)
    text = value.strip()
    if "####" in text:
        return gold_answer(text)
    return text or None


def assert_strings(value: Any) -> list[str] | None:
    """MBPP's tests, a list of assert strings (or its JSON string); None for tests of any other shape.

    >>> assert_strings('["assert f(1) == 2"]'), assert_strings([{"type": "assert", "code": "..."}])
    (['assert f(1) == 2'], None)
    """
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError:
            return None
    if isinstance(value, list) and value and all(isinstance(test, str) for test in value):
        return list(value)
    return None


def with_tests(prompt: str, asserts: Sequence[str]) -> str:
    """MBPP's task text names no function ("Write a function to find the shared elements..."), while its asserts
    call one by name: as MBPP's own prompt does, the task is followed by the tests the code must pass.

    >>> print(with_tests("Write a function to add one.", ["assert add_one(1) == 2"]))
    Write a function to add one. Your code should pass these tests:
    assert add_one(1) == 2
    """
    return f"{prompt.rstrip()} Your code should pass these tests:\n" + "\n".join(asserts)


def schema_text(value: Any) -> str | None:
    """A json_schema row's schema as JSON text: Arrow keeps one column type for all rows, and schemas differ in shape.

    >>> schema_text({"type": "integer"}), schema_text('{"type": "integer"}'), schema_text(None)
    ('{"type": "integer"}', '{"type": "integer"}', None)
    """
    schema = json_schema_gold(value)
    return None if schema is None else json.dumps(schema)


# How each correctness component's gold is kept; the first rewarded one decides (a run rewards one of them). A GSM8K
# solution's '#### N' is math's gold; json_schema's schema is kept as JSON text.
GOLDS: dict[str, Callable[[Any], Any]] = {**GOLD_READERS, "math": gold, "json_schema": schema_text}


def with_sql_context(prompt: str, example: Mapping[str, Any], schemas: Mapping[str, str] | None = None) -> str:
    """A text question followed by BIRD's evidence (its hint) and the row's schema, when it has them; a row with no
    schema of its own gets its database's (`schemas`, by its `db_id`: `database_schemas`), as BIRD's prompts give it.

    >>> print(with_sql_context("How many?", {"evidence": "t holds the orders", "schema": "CREATE TABLE t (a);"}))
    How many?
    <BLANKLINE>
    Evidence: t holds the orders
    <BLANKLINE>
    Schema:
    CREATE TABLE t (a);
    """
    evidence = example.get("evidence")
    schema = next((example[c] for c in SCHEMA_SQL_COLUMNS if isinstance(example.get(c), str) and example[c]), None)
    if schema is None and schemas and isinstance(example.get("db_id"), str):
        schema = schemas.get(example["db_id"])
    parts = [prompt.rstrip()]
    parts += [f"Evidence: {evidence}"] if isinstance(evidence, str) and evidence.strip() else []
    parts += [f"Schema:\n{schema}"] if schema else []
    return "\n\n".join(parts)


def database_schemas(directory: str | Path) -> dict[str, str]:
    """The schema of each SQLite database in `directory`, by name: the CREATE statements of its tables, views and
    indexes, in the order they were made. A database is `NAME.sqlite` (or `.db`) in the directory, or
    `NAME/NAME.sqlite` (BIRD's `dev_databases/` and Spider's `database/` as they ship); each is opened read-only and
    immutable, so nothing is written to it. For the prompts of rows that name their database by `db_id` and carry no
    schema: the verifier runs their queries on the same files, listed in its VERIFIER_SQL_DATABASES."""
    import sqlite3

    root = Path(directory)
    if not root.is_dir():
        raise ValueError(f"--sql_databases: {directory} is not a directory")
    files = [
        *root.glob("*.sqlite"),
        *root.glob("*.db"),
        *(d / f"{d.name}.sqlite" for d in root.iterdir() if d.is_dir()),
    ]
    schemas: dict[str, str] = {}
    for path in sorted(file for file in files if file.is_file()):
        connection = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro&immutable=1", uri=True)
        try:
            rows = connection.execute(
                "SELECT sql FROM sqlite_master WHERE sql IS NOT NULL AND type IN ('table', 'view', 'index') "
                "AND substr(name, 1, 7) <> 'sqlite_' ORDER BY rowid"  # not LIKE: its _ is any character
            ).fetchall()
        except sqlite3.DatabaseError as exc:
            raise ValueError(f"--sql_databases: {path.name} is not a readable SQLite database ({exc})") from None
        finally:
            connection.close()
        schemas.setdefault(path.stem, "\n".join(f"{sql};" for (sql,) in rows))
    return schemas


def with_options(prompt: str, options: Sequence[str]) -> str:
    """A multiple-choice question followed by its options, one lettered line each, as MMLU's prompts list them.

    >>> print(with_options("Which is a prime?", ["4", "7"]))
    Which is a prime?
    <BLANKLINE>
    A. 4
    B. 7
    """
    return f"{prompt.rstrip()}\n\n" + "\n".join(
        f"{letter}. {text}" for letter, text in zip(LETTERS[: len(options)], options, strict=True)
    )


def to_row(
    example: Mapping[str, Any],
    index: int = 0,
    *,
    columns: Columns,
    components: Sequence[str],
    system_prompt: str,
    tests_in_prompt: bool = True,
    options_in_prompt: bool = True,
    shape: str | None = None,
    schemas: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """One dataset row as GRPO input: `prompt`, plus `solution` when math, choice or answer is rewarded, `tests`
    when code is and `options` when choice is and `columns.options` names them. With `tests_in_prompt`, a text
    prompt whose tests are MBPP's assert strings lists them (`with_tests`); with `options_in_prompt`, a text prompt
    lists the options (`with_options`).

    With a `shape` (`trainer_client.domains.SHAPES`) or a `columns.spec`, the row also gets `spec`: the JSON of its
    component specs, None when it maps to none. The gold, tests and options columns are then read only when the
    dataset has them, and the prompt comes from where the shape keeps it when `columns.prompt` is not a column.
    `schemas` (`database_schemas`): the schemas an sql row without its own is shown, by its `db_id`."""
    specs = shape_specs(shape, example, index, columns.tests) if shape else {}
    with_specs = shape is not None or columns.spec is not None
    if columns.spec is not None:
        specs |= parse_specs(example[columns.spec], columns.spec)

    def has(name: str) -> bool:  # with specs, a gold or tests column is read when the dataset has it
        if name == columns.tests and shape in CONTEST_SHAPES:  # --tests_column names the shape's test sets
            return False
        return name in example or not with_specs

    in_column = columns.prompt in example or not with_specs
    prompt = example[columns.prompt] if in_column else shape_prompt(example, shape)
    if isinstance(prompt, Mapping) and "input" in prompt:  # NeMo-Gym's responses_create_params: its input
        prompt = prompt["input"]
    if "code" in components and tests_in_prompt and isinstance(prompt, str) and has(columns.tests):
        asserts = assert_strings(example[columns.tests])
        prompt = with_tests(prompt, asserts) if asserts else prompt
    options = None
    choice_options = "choice" in components and columns.options is not None and has(columns.options)
    if choice_options:
        options = option_texts(example[str(columns.options)], str(columns.options))
        prompt = with_options(prompt, options) if options and options_in_prompt and isinstance(prompt, str) else prompt
    if "sql" in components and isinstance(prompt, str):
        prompt = with_sql_context(prompt, example, schemas)
    row: dict[str, Any] = {"prompt": chat_prompt(prompt, system_prompt)}
    reader = next((read for name, read in GOLDS.items() if name in components), None)
    if reader is not None and has(columns.solution):
        try:
            row["solution"] = reader(example[columns.solution])
        except ValueError as exc:  # no gold at all (a boolean, an infinity): said with where, never the value
            raise ValueError(f"dataset column {columns.solution!r}, row {index}: {exc}") from None
    if "code" in components and has(columns.tests):
        tests = code_tests(example[columns.tests], column=columns.tests, entry_point=example.get("entry_point"))
        row["tests"] = json.dumps(tests) if tests is not None else None
    if choice_options:
        row["options"] = options
    if with_specs:
        row[SPEC_COLUMN] = json.dumps(specs) if specs else None
    return row


def is_local_file(name: str) -> bool:
    return Path(name).suffix in (".json", ".jsonl") and Path(name).is_file()


def load_prompts(
    name: str,
    config: str | None = None,
    *,
    columns: Columns | None = None,
    components: Sequence[str] = ("math", "format"),
    system_prompt: str | None = None,
    tests_in_prompt: bool = True,
    options_in_prompt: bool = True,
    dataset_shape: str = "auto",
    options: Mapping[str, Mapping[str, Any]] | None = None,
    sql_databases: str | None = None,
) -> DatasetDict:
    """Load a hub dataset (`datasets.load_dataset(name, config)`; GSM8K gets its config `main`) or a local
    .json/.jsonl file (its one split is `train`), and turn every row into GRPO input (`to_row`). Only `prompt`,
    `solution`, `tests`, `options` and `spec` are kept. `system_prompt` defaults to `system_prompt_for(components)`,
    the shape's component (`SHAPE_COMPONENTS`) counted among them.
    `dataset_shape` maps the rows of another domain to specs (`trainer_client.domains`: `auto` detects the shape by
    the columns, `none` maps nothing). `options` (the rewards' component options), when given, let it check that
    a component that needs each row's spec gets one. `sql_databases`: a directory of the SQLite databases rows name
    by `db_id` (`database_schemas`), whose schemas go into the prompts of rows that have none; a row naming a database
    it does not hold is an error.
    """
    from datasets import DatasetDict, load_dataset

    if is_local_file(name):
        raw = load_dataset("json", data_files={"train": name})
    else:
        raw = load_dataset(name, config or ("main" if name == HUB_ID else None))
    if not isinstance(raw, DatasetDict):
        raise ValueError(f"expected a dataset with splits from {name!r}, got {type(raw).__name__}")
    columns = columns or Columns()
    present = raw[next(iter(raw))].column_names
    shape = resolve_shape(dataset_shape, present)
    if shape is not None:
        logger.info("%s: rows read as the %s dataset shape (--dataset_shape %s)", name, shape, dataset_shape)
    check_columns(present, columns, components, shape, options)
    if shape in CONTEST_SHAPES:
        raw = DatasetDict({split: scorable(part, str(shape), columns.tests, name) for split, part in raw.items()})
    task = [*components, *([SHAPE_COMPONENTS[shape]] if shape in SHAPE_COMPONENTS else [])]  # the prompt's task
    schemas = database_schemas(sql_databases) if sql_databases else None
    if schemas is not None and "db_id" in present:
        named = {str(db) for part in raw.values() for db in part["db_id"] if db is not None}
        if missing := sorted(named - set(schemas)):
            more = f" (and {len(missing) - 1} more)" if len(missing) > 1 else ""
            raise ValueError(f"--sql_databases {sql_databases} has no database {missing[0]!r}{more} that rows name")
    default_prompt = CPP_SYSTEM_PROMPT if shape in CONTEST_SHAPES else system_prompt_for(task)
    row_options = {
        "columns": columns,
        "components": tuple(components),
        "system_prompt": default_prompt if system_prompt is None else system_prompt,
        "tests_in_prompt": tests_in_prompt,
        "options_in_prompt": options_in_prompt,
        "shape": shape,
        "schemas": schemas,
    }
    return DatasetDict(
        {
            split: part.map(to_row, with_indices=True, fn_kwargs=row_options, remove_columns=part.column_names)
            for split, part in raw.items()
        }
    )


def scorable(part: Dataset, shape: str, tests_column: str, name: str = "the dataset") -> Dataset:
    """A split's rows of a contest shape that can be scored (`contests.skip_reason`); the others are dropped, and
    how many for each reason is logged (a row with no reward would cost its generations for nothing)."""
    sets = chosen_sets(shape, tests_column)
    try:
        read = [column for column in (*SKIP_COLUMNS, *sets) if column in part.column_names]
        reasons = [skip_reason(shape, row, sets) for row in part.select_columns(read)]  # not the statements
    except ValueError as exc:
        raise ValueError(f"a {shape} row: {exc}") from None
    skipped = Counter(reason for reason in reasons if reason is not None)
    if skipped:
        counts = ", ".join(f"{count} {reason}" for reason, count in skipped.most_common())
        logger.warning(
            "%s: %d of %d %s rows skipped, they cannot be scored (%s); test sets: %s",
            name, sum(skipped.values()), len(reasons), shape, counts, ", ".join(sets),
        )  # fmt: skip
    return part.select([index for index, reason in enumerate(reasons) if reason is None])


def check_columns(
    present: Sequence[str],
    columns: Columns,
    components: Sequence[str],
    shape: str | None = None,
    options: Mapping[str, Mapping[str, Any]] | None = None,
) -> None:
    """A clear error, naming the flag that fixes it, for a column the run needs and the dataset lacks. With per-row
    specs (a shape, a spec column), the gold and tests columns are optional; without them, a component that takes
    its spec from the row (given its `options`) has none to take."""
    with_specs = shape is not None or columns.spec is not None
    needed = [("spec", columns.spec)] if columns.spec is not None else []
    if not with_specs or shape is None or not (set(PROMPT_COLUMNS) & set(present) or shape in CONTEST_SHAPES):
        needed += [("prompt", columns.prompt)]  # a shape's rows may keep their prompt elsewhere (shape_prompt)
    if not with_specs:
        needed += [("solution", columns.solution)] if set(GOLDS) & set(components) else []
        needed += [("tests", columns.tests)] if "code" in components else []
        needed += [("options", columns.options)] if "choice" in components and columns.options else []
    for role, name in needed:
        if name not in present:
            raise ValueError(
                f"the dataset has no column {name!r} for the {role.removesuffix('s')}s; its columns: {list(present)}. "
                f"Name the column with --{role}_column (Columns({role}=...))"
            )
    given = options or {}
    from_rows = [name for name in components if name not in ROW_FIELDS and row_fields(name, given.get(name, {}))]
    if options is not None and from_rows and not with_specs:
        raise ValueError(
            f"{', '.join(from_rows)} take{'s' if len(from_rows) == 1 else ''} each row's spec from the dataset, and "
            f"its columns ({', '.join(list(present)[:12])}) fit no dataset shape: name a column of per-row specs "
            f"with --spec_column, or the shape with --dataset_shape ({', '.join(SHAPES)})"
        )
