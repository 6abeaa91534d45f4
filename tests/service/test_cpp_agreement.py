"""Agreement with a trusted judge (issue 27): the C++ agreement set (tests/data/cpp_agreement/: 13 problems written in
the style of classic public ones, 67 solutions that are right, wrong, slow, crashing, memory-hungry, flooding, not
compiling or differently formatted, with Python and C++ checkers for the problems with many right answers) graded by
a real service on each sandbox backend and by bench/reference_judge.py (g++ and coreutils' `timeout` on the host, no
sandbox) must agree on every row: the score, the verdict, and each test's verdict. Each side must also give the
verdict class (and score, where the set states one) that the set expects of the row."""

from __future__ import annotations

import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import Server

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))
from reference_judge import Judged, Row, judge, load_set, open_r1_codeforces, open_r1_ioi  # noqa: E402

sys.path.remove(str(ROOT / "bench"))

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1800, func_only=True)]

ROWS = load_set(ROOT / "tests" / "data" / "cpp_agreement")
CHUNK = 12  # items per request: each well inside the service's batch deadline on a busy 2-core machine


def completion(source: str) -> str:
    return f"<think>Plan the solution.</think>\nHere is my program:\n\n```cpp\n{source.rstrip()}\n```\n"


def service_results(server: Server, rows: list[Row]) -> dict[str, dict[str, Any]]:
    got: dict[str, dict[str, Any]] = {}
    for start in range(0, len(rows), CHUNK):
        chunk = rows[start : start + CHUNK]
        items = [{"id": row.id, "completion": completion(row.source), "code": row.spec} for row in chunk]
        response = httpx.post(f"{server.url}/v1/score", json={"items": items}, timeout=600)
        assert response.status_code == 200, response.text[:2000]
        got.update((r["id"], r["components"]["code"]) for r in response.json()["results"])
    return got


@pytest.fixture(scope="module")
def reference() -> dict[str, Judged]:
    """Every row through the reference judge, two at a time (the machine's two cores)."""
    with ThreadPoolExecutor(2) as pool:
        return dict(zip((row.id for row in ROWS), pool.map(lambda row: judge(row.source, row.spec), ROWS), strict=True))


def disagreements(service: dict[str, dict[str, Any]], reference: dict[str, Judged]) -> list[str]:
    """Every row where the service and the reference judge differ (score, verdict, or a test's verdict)."""
    found = []
    for row in ROWS:
        code, ref = service[row.id], reference[row.id]
        tests = [t["verdict"] for t in code.get("tests") or []]
        same_score = (code["score"] is None) == (ref.score is None) and (
            ref.score is None or abs(code["score"] - ref.score) < 1e-9
        )
        if not same_score or code["verdict"] != ref.verdict or (ref.tests and tests != ref.tests):
            found.append(f"{row.id}: service {code['verdict']} {code['score']} {tests}, reference {ref}")
    return found


def open_r1_disagreements(service: dict[str, dict[str, Any]], reference: dict[str, Judged]) -> tuple[int, list[str]]:
    """open-r1's Codeforces (each mode) and IOI rewards computed from each side's per-test outcomes, on the rows where
    they apply: how many rows, and those where the two sides' rewards differ."""
    applies, found = 0, []
    for row in ROWS:
        code, ref = service[row.id], reference[row.id]
        tests = [t["verdict"] for t in code.get("tests") or []]
        for name, rule in [(f"codeforces {m}", lambda v, t, m=m: open_r1_codeforces(v, t, m))
                           for m in ("pass_fail", "partial", "weighted_sum")] + [("ioi", open_r1_ioi)]:  # fmt: skip
            mine, theirs = rule(code["verdict"], tests), rule(ref.verdict, ref.tests)
            if theirs is None:
                continue
            applies += name == "ioi"
            if mine != theirs:
                found.append(f"{row.id}: open-r1 {name}: service {mine}, reference {theirs}")
    return applies, found


def unexpected(row: Row, verdict: str, score: float | None) -> str | None:
    want = row.expected
    if verdict != want["verdict"] or (want["score"] is not None and abs((score or 0.0) - want["score"]) > 1e-9):
        return f"{row.id} ({row.note}): got {verdict} {score}, the set expects {want['verdict']} {want['score']}"
    if want["verdict"] == "invalid_test" and score is not None:
        return f"{row.id}: invalid_test must score null"
    return None


def test_the_set_is_large_and_varied() -> None:
    assert len(ROWS) >= 50 and len({row.source for row in ROWS}) == len(ROWS)
    classes = {row.expected["verdict"] for row in ROWS}
    assert classes == {"passed", "failed", "compile_error", "invalid_test"}
    checkers = {row.spec["checker"]["language"] for row in ROWS if "checker" in row.spec}
    assert checkers == {"python", "cpp"}


def test_the_reference_judge_gives_what_the_set_expects(reference: dict[str, Judged]) -> None:
    wrong = [unexpected(row, reference[row.id].verdict, reference[row.id].score) for row in ROWS]
    assert [w for w in wrong if w] == []
    per_test = {v for judged in reference.values() for v in judged.tests}
    assert per_test == {"passed", "wrong_answer", "runtime_error", "timeout", "memory_limit", "output_limit"}


def test_the_service_agrees_with_the_reference_judge_on_every_row(
    service: Server, reference: dict[str, Judged]
) -> None:
    got = service_results(service, ROWS)
    assert disagreements(got, reference) == []
    applies, open_r1 = open_r1_disagreements(got, reference)
    assert applies == len(ROWS) - 1 and open_r1 == []  # all but the row whose checker cannot judge
    wrong = [unexpected(row, got[row.id]["verdict"], got[row.id]["score"]) for row in ROWS]
    assert [w for w in wrong if w] == []
