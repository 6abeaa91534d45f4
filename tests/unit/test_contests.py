"""Competitive-programming rows (open-r1's Codeforces, DeepMind's CodeContests; tests/data/contests) as C++ code
specs: tests from the chosen sets, limits in the spec's units, open-r1's generated checker wrapped into the service's
checker convention (run here for real), and rows that cannot be scored skipped with a count per reason."""

from __future__ import annotations

import json
import logging
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from trainer_client.contests import checker, chosen_sets, contest_specs, limits, skip_reason
from trainer_client.data import CPP_SYSTEM_PROMPT, Columns, load_prompts
from trainer_client.domains import SPEC_COLUMN, detect_shape, shape_specs
from verifier_service.schema import CodeSpec

DATA = Path(__file__).parents[1] / "data" / "contests"


def rows(name: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (DATA / name).read_text().splitlines()]


def prepared(name: str, **kwargs: Any) -> list[dict[str, Any]]:
    return list(load_prompts(str(DATA / name), components=["code"], **kwargs)["train"])


def test_the_shapes_are_detected_by_their_test_columns() -> None:
    assert detect_shape(list(rows("codeforces.jsonl")[0])) == "codeforces"
    assert detect_shape(list(rows("codeforces_prompts.jsonl")[0])) == "codeforces"
    assert detect_shape(list(rows("code_contests.jsonl")[0])) == "code_contests"


def test_a_codeforces_row_maps_to_a_cpp_spec_with_its_tests_and_limits() -> None:
    spec = contest_specs("codeforces", rows("codeforces.jsonl")[0])["code"]
    assert spec["language"] == "cpp" and "checker" not in spec
    assert [(t["stdin"], t["stdout"]) for t in spec["tests"]] == [
        ("2 3\n", "5\n"), ("-4 4\n", "0\n"), ("1000000000 1000000000\n", "2000000000\n")
    ]  # fmt: skip
    assert (spec["cpu_s"], spec["timeout_s"], spec["memory_mb"]) == (1.0, 2.0, 256)
    CodeSpec.model_validate(spec)  # the service takes it as it is


def test_code_contests_uses_all_three_test_sets_by_default_and_tests_column_picks_them() -> None:
    row = rows("code_contests.jsonl")[0]
    everything = contest_specs("code_contests", row)["code"]
    assert [t["stdin"] for t in everything["tests"]] == ["2 3\n", "-4 4\n", "1000000000 1000000000\n", "0 0\n"]
    hidden = contest_specs("code_contests", row, "private_tests, generated_tests")["code"]
    assert [t["stdin"] for t in hidden["tests"]] == ["-4 4\n", "1000000000 1000000000\n", "0 0\n"]
    with pytest.raises(ValueError, match="--tests_column: a code_contests row's test sets are public_tests, "):
        chosen_sets("code_contests", "official_tests")
    assert chosen_sets("codeforces", "tests") == ("official_tests", "generated_tests")  # the flag's default


def test_limits_are_read_in_the_specs_units_and_missing_ones_keep_its_defaults() -> None:
    contests = rows("code_contests.jsonl")
    assert limits("code_contests", contests[0]) == {"cpu_s": 2.0, "timeout_s": 4.0, "memory_mb": 256}
    assert limits("code_contests", contests[1]) == {"cpu_s": 1.5, "timeout_s": 3.0, "memory_mb": 64}
    assert limits("code_contests", contests[2]) == {}  # time_limit null, memory_limit_bytes 0
    assert limits("codeforces", {"time_limit": 90.0, "memory_limit": 16384.0}) == {
        "cpu_s": 60.0, "timeout_s": 60.0, "memory_mb": 8192
    }  # fmt: skip
    assert limits("codeforces", {"time_limit": 0.5, "memory_limit": 4.0})["memory_mb"] == 16


def test_rows_that_cannot_be_scored_are_skipped_with_a_count_per_reason(caplog: pytest.LogCaptureFixture) -> None:
    codeforces = rows("codeforces.jsonl")
    assert [skip_reason("codeforces", row) for row in codeforces] == [
        None, None, "file input/output", "an interactive problem"
    ]  # fmt: skip
    assert contest_specs("codeforces", codeforces[2]) == {}
    assert skip_reason("codeforces", {**codeforces[0], "official_tests_complete": False}) == (
        "incomplete official tests"
    )
    with caplog.at_level(logging.WARNING, logger="trainer_client.data"):
        kept = prepared("codeforces.jsonl")
        prompts = prepared("codeforces_prompts.jsonl")
        contests = prepared("code_contests.jsonl", columns=Columns(tests="private_tests"))
    assert len(kept) == 2 and len(prompts) == 1 and len(contests) == 1
    warnings = [record.getMessage() for record in caplog.records if record.levelno == logging.WARNING]
    assert warnings == [
        f"{DATA / 'codeforces.jsonl'}: 2 of 4 codeforces rows skipped, they cannot be scored (1 file input/output, "
        "1 an interactive problem); test sets: official_tests, generated_tests",
        f"{DATA / 'codeforces_prompts.jsonl'}: 1 of 2 codeforces rows skipped, they cannot be scored (1 a prompt for "
        "another language); test sets: official_tests, generated_tests",
        f"{DATA / 'code_contests.jsonl'}: 2 of 3 code_contests rows skipped, they cannot be scored (1 file "
        "input/output, 1 no tests in the chosen sets); test sets: private_tests",
    ]


def test_prepared_rows_get_the_statement_a_cpp_system_prompt_and_specs_the_service_takes() -> None:
    for name in ("codeforces.jsonl", "codeforces_prompts.jsonl", "code_contests.jsonl"):
        for row in prepared(name):
            system, _ = row["prompt"]
            assert system == {"role": "system", "content": CPP_SYSTEM_PROMPT}
            assert set(row) == {"prompt", SPEC_COLUMN}
            CodeSpec.model_validate(json.loads(row[SPEC_COLUMN])["code"])
    codeforces = prepared("codeforces.jsonl")[0]["prompt"][1]["content"]
    assert codeforces.startswith("# Sum of Two\n\nTime limit per test: 1 second\nMemory limit per test: 256 megabytes")
    assert "## Example\nInput:\n2 3\n\nOutput:\n5\n" in codeforces
    assert prepared("codeforces_prompts.jsonl")[0]["prompt"][1]["content"].startswith("You will be given a compet")
    assert prepared("code_contests.jsonl")[0]["prompt"][1]["content"].startswith("You are given two integers a")


def test_a_malformed_test_set_is_an_error_naming_the_row_and_column_never_the_value() -> None:
    row = {**rows("code_contests.jsonl")[0], "private_tests": {"input": ["SECRET"], "output": []}}
    with pytest.raises(ValueError, match=r"row 3 of a code_contests dataset: column 'private_tests': 1 inputs") as e:
        shape_specs("code_contests", row, 3)
    assert "SECRET" not in str(e.value)


def run_checker(source: str, tmp_path: Path, program_output: str, stdin: str = "10\n", answer: str = "5 5\n") -> int:
    """The checker as the service runs it: `checker input output answer`, files in a fresh directory."""
    (tmp_path / "checker.py").write_text(source)
    for name, text in (("input", stdin), ("output", program_output), ("answer", answer)):
        (tmp_path / name).write_text(text)
    argv = [sys.executable, "checker.py", "input", "output", "answer"]
    return subprocess.run(argv, cwd=tmp_path, capture_output=True, timeout=60).returncode


def test_open_r1s_generated_checker_is_called_its_way_and_answers_the_services(tmp_path: Path) -> None:
    wrapped = checker(rows("codeforces.jsonl")[1])
    assert wrapped is not None and wrapped["language"] == "python"
    source = wrapped["source"]
    assert run_checker(source, tmp_path, "3 7\n") == 0  # another right pair: accepted
    assert run_checker(source, tmp_path, "5 6\n") == 1  # wrong sum: wrong answer
    assert run_checker(source, tmp_path, "five\n") == 1
    # open-r1's order is (input, correct output, program output): a checker that reads the wrong file would accept
    order = (
        'import sys\nprint(1 if open(sys.argv[3]).read() == "mine\\n" and open(sys.argv[2]).read() == "5 5\\n" else 0)'
    )
    assert run_checker(checker({"generated_checker": order})["source"], tmp_path, "mine\n") == 0  # type: ignore[index]
    assert run_checker(checker({"generated_checker": "print(100)"})["source"], tmp_path, "x") == 0  # type: ignore[index]
    crash = checker({"generated_checker": "raise RuntimeError('boom')"})
    assert run_checker(crash["source"], tmp_path, "5 5\n") == 0  # type: ignore[index]  # crashed: the comparison
    given = {"language": "cpp", "source": '#include "testlib.h"\n', "files": {"testlib.h": "//"}}
    assert checker({"checker": json.dumps(given), "generated_checker": "print(1)"}) == given  # a spec-form checker wins


def test_a_generated_checker_with_characters_beyond_the_bmp_runs(tmp_path: Path) -> None:
    """json.dumps wrote such a character as a \\ud83d\\ude00 pair, which Python reads as two lone surrogates: the
    checker's source did not compile, and every test of the problem was null (the checker's failure)."""
    source = "# checks the pair \U0001f600\nprint(1)  # ✓\n"
    wrapped = checker({"generated_checker": source})
    assert wrapped is not None
    assert run_checker(wrapped["source"], tmp_path, "5 5\n") == 0


def test_a_spec_form_checker_column_keeps_its_partial_credit() -> None:
    """A `checker` column in the spec's form with `"points": true` (a CMS-style checker) went out without it: every
    accepted test scored 1 whatever score the checker printed."""
    given = {"language": "cpp", "source": "int main() {}\n", "points": True}
    assert checker({"checker": json.dumps(given)}) == given
    row = {"official_tests": [{"input": "1\n", "output": "1\n"}], "checker": given}
    spec = contest_specs("codeforces", row)["code"]
    assert CodeSpec.model_validate(spec).checker.points is True  # type: ignore[union-attr]


def test_a_generated_checker_that_crashes_on_an_output_falls_back_to_the_comparison(tmp_path: Path) -> None:
    """An LLM-written checker often crashes on a malformed output (int() of a word): that was the checker's failure,
    null, so a wrong program that printed garbage escaped its 0 (a null gets no advantage in the group). It is now
    compared token by token with the expected answer, as with no checker; open-r1 counts any crash as a failed test."""
    fragile = checker({"generated_checker": GENERATED_FRAGILE})
    assert fragile is not None
    assert run_checker(fragile["source"], tmp_path, "3 7\n") == 0  # the checker itself accepts another right pair
    assert run_checker(fragile["source"], tmp_path, "garbage\n") == 1  # it crashes: not the answer, wrong
    assert run_checker(fragile["source"], tmp_path, "") == 1
    assert run_checker(fragile["source"], tmp_path, "5  5") == 0  # no crash: the checker's own verdict


GENERATED_FRAGILE = """import sys
n = int(open(sys.argv[1]).read())
a, b = map(int, open(sys.argv[3]).read().split())
print(1 if a + b == n else 0)
"""
