"""Competitive-programming rows as C++ code specs (`{"code": {"language": "cpp", "tests": [...], ...}}`): pure
functions, the `codeforces` and `code_contests` dataset shapes of `trainer_client.domains`.

- `codeforces`: open-r1's Codeforces rows (`open-r1/codeforces`, its `verifiable` and `verifiable-prompts`
  subsets): `official_tests` (a list of `{input, output}`), `time_limit` (seconds), `memory_limit` (MB),
  `input_mode` (`stdio` | `file`), `interaction_format` (set for interactive problems), `generated_checker` (an
  LLM-written Python checker, for problems with many right answers), and the statement (`prompt` in
  `verifiable-prompts`; else `title`, `description`, `input_format`, `output_format`, `examples`, `note`). Its
  `generated_tests` column is a count (the tests are parquet files of their own); a `generated_tests` column that
  holds a list of `{input, output}` (joined by the user) is read as a test set.
- `code_contests`: DeepMind's CodeContests rows (`deepmind/code_contests`): `public_tests`, `private_tests` and
  `generated_tests` (each `{input: [...], output: [...]}`), `time_limit` (`{seconds, nanos}`), `memory_limit_bytes`,
  `input_file` / `output_file` (set for file I/O), `description` (the statement).

Limits: the problem's time limit is the spec's CPU limit (`cpu_s`, as judges count it) and twice it the wall-clock
one (`timeout_s`: slack on a busy sandbox), both capped at the spec's 60 s; the memory limit is `memory_mb` (no
limit given: the spec's default). open-r1's generated checker is called as open-r1 calls it (`checker.py input
correct_output program_output`, right when its output is `1` or `100`), through a small wrapper that speaks the
service's checker convention (`checker input output answer`, exit 0 / 1). A generated checker that crashes (most
often on a malformed output: `int()` of a word) falls back to the token comparison with the expected answer: not
null, which would let a wrong program that prints garbage escape its 0 (open-r1 counts any crash as a failed test).

Rows that cannot be scored map to nothing, and `skip_reason` says why: file I/O, an interactive problem, a prompt
that asks for another language (`verifiable-prompts`' Python rows), incomplete official tests (Codeforces cuts long
ones), no tests in the chosen sets. `data.load_prompts` drops them and logs how many for each reason.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from typing import Any

Specs = dict[str, Any]
MAX_TESTS = 1000  # the code spec's cap on tests: a row with more keeps its first MAX_TESTS
MAX_SECONDS = 60.0  # the code spec's cap on timeout_s and cpu_s
MEMORY_MB = (16, 8192)  # the code spec's bounds on memory_mb

# Each shape's test sets, and the ones used when --tests_column is left at its default.
TEST_SETS = {
    "codeforces": ("official_tests", "generated_tests"),
    "code_contests": ("public_tests", "private_tests", "generated_tests"),
}
DEFAULT_TEST_SETS = {
    "codeforces": ("official_tests", "generated_tests"),  # open-r1's: official plus generated (when in the rows)
    "code_contests": ("public_tests", "private_tests", "generated_tests"),  # all: AlphaCode's "correct"
}
# The columns skip_reason reads besides the test sets (reading only these is much faster on large datasets).
SKIP_COLUMNS = (
    "input_mode", "interaction_format", "official_tests_complete", "input_file", "output_file", "description",
    "language",
)  # fmt: skip
DEFAULT_TESTS_COLUMN = "tests"  # data.Columns' default: no test sets named

# open-r1's generated checker run as open-r1's Piston package runs it, in the service's checker convention.
_CHECKER_WRAPPER = """import contextlib, io, sys
SOURCE = {source}
inp, out, ans = sys.argv[1:4]
sys.argv = ["checker.py", inp, ans, out]
buffer = io.StringIO()
try:
    with contextlib.redirect_stdout(buffer):
        exec(compile(SOURCE, "checker.py", "exec"), {{"__name__": "__main__"}})
except SystemExit:
    pass
except BaseException as exc:  # most often int() of a malformed output: the program's fault, so not null
    print("the generated checker failed:", type(exc).__name__, "(compared with the answer instead)", file=sys.stderr)
    with open(out, "rb") as got, open(ans, "rb") as want:
        sys.exit(0 if got.read().split() == want.read().split() else 1)
words = buffer.getvalue().split()
sys.exit(0 if words and words[0] in ("1", "100") else 1)
"""


def chosen_sets(shape: str, tests_column: str | None) -> tuple[str, ...]:
    """The test sets a run uses: those `--tests_column` names (comma-separated), else the shape's default.

    >>> chosen_sets("code_contests", "private_tests,generated_tests"), chosen_sets("codeforces", "tests")
    (('private_tests', 'generated_tests'), ('official_tests', 'generated_tests'))
    """
    if tests_column is None or tests_column == DEFAULT_TESTS_COLUMN:
        return DEFAULT_TEST_SETS[shape]
    names = tuple(name.strip() for name in tests_column.split(",") if name.strip())
    unknown = [name for name in names if name not in TEST_SETS[shape]]
    if not names or unknown:
        raise ValueError(
            f"--tests_column: a {shape} row's test sets are {', '.join(TEST_SETS[shape])} (comma-separated)"
        )
    return names


def skip_reason(shape: str, row: Mapping[str, Any], sets: Sequence[str] | None = None) -> str | None:
    """Why a row cannot be scored as a C++ stdio problem; None when it can.

    >>> skip_reason("codeforces", {"input_mode": "file", "official_tests": [{"input": "1", "output": "1"}]})
    'file input/output'
    >>> skip_reason("code_contests", {"input_file": "", "public_tests": {"input": [], "output": []}})
    'no tests in the chosen sets'
    """
    sets = DEFAULT_TEST_SETS[shape] if sets is None else sets
    if shape == "codeforces":
        if str(row.get("input_mode") or "stdio").lower() != "stdio":
            return "file input/output"
        if _text(row.get("interaction_format")):
            return "an interactive problem"
        if row.get("official_tests_complete") is False and "official_tests" in sets:
            return "incomplete official tests"
    else:
        if _text(row.get("input_file")) or _text(row.get("output_file")):
            return "file input/output"
        if "interactive problem" in str(row.get("description") or "").lower():
            return "an interactive problem"
    language = row.get("language")
    if isinstance(language, str) and language.strip().lower() not in ("cpp", "c++", "cpp17", "c++17"):
        return "a prompt for another language"
    if not stdio_tests(shape, row, sets):
        return "no tests in the chosen sets"
    return None


def stdio_tests(shape: str, row: Mapping[str, Any], sets: Sequence[str]) -> list[dict[str, Any]]:
    """The row's stdio tests from the chosen sets, in order, at most MAX_TESTS.

    >>> stdio_tests("code_contests", {"public_tests": {"input": ["1 2\\n"], "output": ["3\\n"]}}, ["public_tests"])
    [{'type': 'stdio', 'stdin': '1 2\\n', 'stdout': '3\\n'}]
    """
    pairs: list[tuple[str, str]] = []
    for name in sets:
        value = _json(row.get(name))
        if isinstance(value, Mapping):  # CodeContests: {input: [...], output: [...]}
            inputs, outputs = value.get("input") or [], value.get("output") or []
            if len(inputs) != len(outputs):
                raise ValueError(f"column {name!r}: {len(inputs)} inputs for {len(outputs)} outputs")
            pairs += zip(inputs, outputs, strict=True)
        elif isinstance(value, list):  # open-r1: [{input, output}, ...]
            for test in value:
                if not isinstance(test, Mapping) or "input" not in test or "output" not in test:
                    raise ValueError(f"column {name!r}: a test is not an object with input and output")
                pairs.append((test["input"], test["output"]))
        # else: absent, or open-r1's generated_tests count (the tests are files of their own)
    return [
        {"type": "stdio", "stdin": str(stdin), "stdout": str(stdout)}
        for stdin, stdout in pairs[:MAX_TESTS]
        if isinstance(stdin, str) and isinstance(stdout, str)
    ]


def limits(shape: str, row: Mapping[str, Any]) -> dict[str, Any]:
    """The spec's limit fields from the row's: `cpu_s` the time limit, `timeout_s` twice it, `memory_mb`.

    >>> limits("codeforces", {"time_limit": 2.0, "memory_limit": 256.0})
    {'cpu_s': 2.0, 'timeout_s': 4.0, 'memory_mb': 256}
    >>> limits("code_contests", {"time_limit": {"seconds": 1, "nanos": 500000000}, "memory_limit_bytes": 256000000})
    {'cpu_s': 1.5, 'timeout_s': 3.0, 'memory_mb': 256}
    """
    if shape == "codeforces":
        seconds, megabytes = _number(row.get("time_limit")), _number(row.get("memory_limit"))
    else:
        limit = row.get("time_limit")
        seconds = None
        if isinstance(limit, Mapping):
            seconds = (_number(limit.get("seconds")) or 0.0) + (_number(limit.get("nanos")) or 0.0) / 1e9
        bytes_ = _number(row.get("memory_limit_bytes"))
        megabytes = bytes_ / 1e6 if bytes_ else None  # CodeContests writes 256 MB as 256000000
    out: dict[str, Any] = {}
    if seconds and seconds > 0:
        cpu = min(seconds, MAX_SECONDS)
        out |= {"cpu_s": cpu, "timeout_s": min(2 * cpu, MAX_SECONDS)}
    if megabytes and megabytes > 0:
        out["memory_mb"] = max(MEMORY_MB[0], min(MEMORY_MB[1], math.ceil(megabytes)))
    return out


def checker(row: Mapping[str, Any]) -> dict[str, Any] | None:
    """The row's checker as the code spec takes it: open-r1's `generated_checker` (Python, wrapped), or a `checker`
    column already in the spec's form (`{language, source, files, points}`); None for a row with neither."""
    given = _json(row.get("checker"))
    if isinstance(given, Mapping) and _text(given.get("source")):
        return {name: given[name] for name in ("language", "source", "files", "points") if given.get(name) is not None}
    source = row.get("generated_checker")
    if _text(source):
        # repr: a Python literal of the text itself (json.dumps wrote a character past U+FFFF as a surrogate pair,
        # which Python reads as two lone surrogates: the source did not compile, every test null)
        return {"language": "python", "source": _CHECKER_WRAPPER.format(source=repr(source))}
    return None


def contest_specs(shape: str, row: Mapping[str, Any], tests_column: str | None = None) -> Specs:
    """A row's `code` spec (C++, its tests, limits and checker); {} for a row that cannot be scored (`skip_reason`).

    >>> contest_specs("codeforces", {"official_tests": [{"input": "1\\n", "output": "2\\n"}], "time_limit": 1.0,
    ...                              "memory_limit": 256.0, "input_mode": "stdio", "generated_checker": None})
    ... # doctest: +NORMALIZE_WHITESPACE
    {'code': {'language': 'cpp', 'tests': [{'type': 'stdio', 'stdin': '1\\n', 'stdout': '2\\n'}], 'cpu_s': 1.0,
     'timeout_s': 2.0, 'memory_mb': 256}}
    """
    sets = chosen_sets(shape, tests_column)
    if skip_reason(shape, row, sets) is not None:
        return {}
    spec: dict[str, Any] = {"language": "cpp", "tests": stdio_tests(shape, row, sets), **limits(shape, row)}
    judge = checker(row)
    if judge is not None:
        spec["checker"] = judge
    return {"code": spec}


def statement(shape: str, row: Mapping[str, Any]) -> str | None:
    """The problem as a text prompt: open-r1's `prompt` when the row has one; else the statement's parts (a
    Codeforces row: title, limits, description, input and output formats, examples, note; CodeContests: its
    `description`, which holds them all)."""
    if _text(row.get("prompt")):
        return str(row["prompt"])
    if shape == "code_contests":
        return str(row["description"]) if _text(row.get("description")) else None
    parts = [f"# {row['title']}" if _text(row.get("title")) else ""]
    seconds, megabytes = _number(row.get("time_limit")), _number(row.get("memory_limit"))
    if seconds and megabytes:
        plural = "" if seconds == 1 else "s"
        parts.append(f"Time limit per test: {seconds:g} second{plural}\nMemory limit per test: {megabytes:g} megabytes")
    for title, name in (("", "description"), ("Input", "input_format"), ("Output", "output_format")):
        if _text(row.get(name)):
            parts.append(f"## {title}\n{row[name]}" if title else str(row[name]))
    examples = _json(row.get("examples"))
    for example in examples if isinstance(examples, list) else []:
        if isinstance(example, Mapping):
            parts.append(f"## Example\nInput:\n{example.get('input', '')}\nOutput:\n{example.get('output', '')}")
    if _text(row.get("note")):
        parts.append(f"## Note\n{row['note']}")
    text = "\n\n".join(part for part in parts if part)
    return text or None


def _text(value: Any) -> bool:
    return isinstance(value, str) and bool(value.strip())


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _json(value: Any) -> Any:
    """A JSON string's value (tests kept as JSON text in a local file); anything else as it is."""
    if isinstance(value, str) and value.strip()[:1] in ("[", "{"):
        try:
            return json.loads(value)
        except ValueError:
            raise ValueError("a test set column holds a string that is not JSON") from None
    return value
