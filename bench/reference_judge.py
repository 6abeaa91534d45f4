"""A plain reference judge for C++ code items, to check the service against: compile with g++, run each test under
coreutils' `timeout`, compare the output or run the checker, score as the service does. No sandbox at all: it runs
the program on this host as this user, so it is a reference for TRUSTED inputs only (the agreement set in
tests/data/cpp_agreement/), never for model output.

The rules it mirrors, each from where the service states it:

- compile: `g++ -O2 -std=gnu++17 -DONLINE_JUDGE -pipe` (sandbox/api.py CPP_FLAGS); a failure is `compile_error`, 0.
- run, per test, in a fresh directory, stdin from a file: wall limit `timeout_s` (`timeout -k 1`: TERM, then
  KILL), CPU limit `cpu_s` (default `timeout_s`; RLIMIT_CPU), address space and stack `memory_mb` (RLIMIT_AS,
  RLIMIT_STACK: a stack as large as the memory limit, as Codeforces gives), stdout capped at `max_output_bytes`
  (default 4 MiB; RLIMIT_FSIZE).
- per-test verdict, in sandbox/compare.py's order: past the wall clock `timeout`; more output than the cap
  `output_limit`; killed by SIGXCPU `timeout`; SIGABRT after the C++ runtime wrote `std::bad_alloc` `memory_limit`;
  any other signal or a non-zero exit `runtime_error`; else the comparison (`tokens`: whitespace-separated tokens
  equal, as str.split(); `exact`: byte for byte; `float`: tokens, numbers within math.isclose(rel_tol=abs_tol=
  tolerance)) or the checker: `passed` or `wrong_answer`.
- checker (`checker input output answer`, testlib's order, in a fresh directory): exit 0 accepted, 1 wrong answer,
  2 presentation error (both `wrong_answer`); any other status, a signal, a timeout, or a Python checker's uncaught
  exception is the checker's failure: the item is `invalid_test` with score None (null), never the program's fault.
- the item (verifier_service/scoring/code.py code_component): score = passed tests / all tests; verdict `passed` when
  all pass, else `failed`.

    python bench/reference_judge.py PROGRAM.cpp SPEC.json     # SPEC: the code spec ("tests", limits, "checker")
    python bench/reference_judge.py --set tests/data/cpp_agreement [--only PREFIX]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

CPP_FLAGS = ("-O2", "-std=gnu++17", "-DONLINE_JUDGE", "-pipe")
COMPILE_TIMEOUT_S = 600.0  # generous: trusted sources only, and a busy machine must not turn a compile into an error
CHECKER_TIMEOUT_S = 10.0
CHECKER_MEMORY_MB = 1024
DEFAULT_OUTPUT_BYTES = 4 * 1024 * 1024
TIMED_OUT = 124  # coreutils timeout's status when the command ran past its time


@dataclass
class Judged:
    """What the reference judge makes of one program: as the service's code component (score None: cannot judge)."""

    verdict: str  # passed, failed, compile_error, invalid_test
    score: float | None
    tests: list[str] = field(default_factory=list)  # per-test verdicts, in order
    detail: str | None = None


def _limits(memory_mb: int, cpu_s: float, output_bytes: int) -> Any:
    def apply() -> None:
        memory = memory_mb << 20
        resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
        resource.setrlimit(resource.RLIMIT_STACK, (memory, memory))
        cpu = max(1, math.ceil(cpu_s))
        resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
        resource.setrlimit(resource.RLIMIT_FSIZE, (output_bytes + 1, output_bytes + 1))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))

    return apply


def _signal(status: int) -> int | None:
    """The signal that ended a process run under `timeout` (which passes it on, or exits 128 + the signal)."""
    if status < 0:
        return -status
    if 128 < status < 128 + 65 and status != TIMED_OUT:
        return status - 128
    return None


def compile_cpp(source: str, directory: Path, files: dict[str, str] | None = None) -> tuple[Path | None, str]:
    """The binary (or None) and the compiler's messages."""
    (directory / "main.cpp").write_text(source)
    for name, text in (files or {}).items():
        (directory / name).write_text(text)
    binary = directory / "main"
    try:
        done = subprocess.run(["g++", *CPP_FLAGS, "main.cpp", "-o", "main"], cwd=directory, capture_output=True,
                              text=True, timeout=COMPILE_TIMEOUT_S)  # fmt: skip
    except subprocess.TimeoutExpired:
        return None, f"the compiler ran past {COMPILE_TIMEOUT_S:g} s"
    return (binary if done.returncode == 0 else None), done.stderr[:2000]


def run_program(binary: Path, stdin: str, spec: dict[str, Any], directory: Path) -> tuple[str, bytes]:
    """One test: its verdict before any comparison (`ran` when it ended cleanly), and its stdout."""
    wall = float(spec.get("timeout_s", 5.0))
    cpu = float(spec.get("cpu_s") or wall)
    memory = int(spec.get("memory_mb", 512))
    cap = int(spec.get("max_output_bytes") or DEFAULT_OUTPUT_BYTES)
    (directory / "input").write_text(stdin)
    command = ["timeout", "-k", "1", f"{wall:g}", str(binary)]
    with (
        (directory / "input").open("rb") as inp,
        (directory / "stdout").open("wb") as out,
        (directory / "stderr").open("wb") as err,
    ):
        limits = _limits(memory, cpu, cap)
        status = subprocess.run(command, cwd=directory, stdin=inp, stdout=out, stderr=err, preexec_fn=limits).returncode
    output = (directory / "stdout").read_bytes()
    stderr = (directory / "stderr").read_bytes()[:4096]
    sig = _signal(status)
    if status == TIMED_OUT:
        return "timeout", output
    if len(output) > cap:
        return "output_limit", output
    if sig == signal.SIGXCPU:
        return "timeout", output
    if sig == signal.SIGABRT and b"std::bad_alloc" in stderr:
        return "memory_limit", output
    if status != 0:
        return "runtime_error", output
    return "ran", output


def same_output(actual: str, test: dict[str, Any]) -> bool:
    expected, mode = test["stdout"], test.get("compare", "tokens")
    if mode == "exact":
        return actual == expected
    got, want = actual.split(), expected.split()
    if mode == "tokens":
        return got == want
    tolerance = float(test.get("tolerance", 1e-6))
    return len(got) == len(want) and all(g == w or _close(g, w, tolerance) for g, w in zip(got, want, strict=True))


def _close(got: str, want: str, tolerance: float) -> bool:
    try:
        return math.isclose(float(got), float(want), rel_tol=tolerance, abs_tol=tolerance)
    except (ValueError, OverflowError):
        return False


class CheckerFailed(Exception):
    pass


def run_checker(command: list[str], test: dict[str, Any], output: bytes, directory: Path) -> str:
    """`checker input output answer`: passed or wrong_answer; CheckerFailed for anything else."""
    (directory / "input").write_text(test["stdin"])
    (directory / "output").write_bytes(output)
    (directory / "answer").write_text(test["stdout"])
    try:
        done = subprocess.run([*command, "input", "output", "answer"], cwd=directory, capture_output=True,
                              timeout=CHECKER_TIMEOUT_S, preexec_fn=_limits(CHECKER_MEMORY_MB, CHECKER_TIMEOUT_S,
                                                                            DEFAULT_OUTPUT_BYTES))  # fmt: skip
    except subprocess.TimeoutExpired:
        raise CheckerFailed("the checker ran past its time") from None
    if done.returncode == 1 and command[0] == sys.executable and b"Traceback" in done.stderr:
        raise CheckerFailed("the checker raised")  # the service: a Python checker's exception is its failure
    if done.returncode == 0:
        return "passed"
    if done.returncode in (1, 2):
        return "wrong_answer"
    raise CheckerFailed(f"the checker exited {done.returncode}")


def judge(source: str, spec: dict[str, Any]) -> Judged:
    """One C++ program against a code spec (its dict: tests, limits, an optional checker with inline source)."""
    work = Path(tempfile.mkdtemp(prefix="reference-judge-"))
    try:
        build = work / "build"
        build.mkdir()
        binary, messages = compile_cpp(source, build)
        if binary is None:
            return Judged("compile_error", 0.0, [], messages.strip().splitlines()[0] if messages.strip() else None)
        checker = spec.get("checker")
        command: list[str] | None = None
        if checker is not None:
            cdir = work / "checker"
            cdir.mkdir()
            if checker.get("language", "python") == "cpp":
                built, messages = compile_cpp(checker["source"], cdir, checker.get("files"))
                if built is None:
                    return Judged("invalid_test", None, [], "the checker does not compile")
                command = [str(built)]
            else:
                (cdir / "checker.py").write_text(checker["source"])
                command = [sys.executable, str(cdir / "checker.py")]
        verdicts = []
        for index, test in enumerate(spec["tests"]):
            run_dir = work / f"test-{index}"
            run_dir.mkdir()
            ran, output = run_program(binary, test["stdin"], spec, run_dir)
            if ran != "ran":
                verdicts.append(ran)
            elif command is None:
                verdicts.append("passed" if same_output(output.decode("utf-8", "replace"), test) else "wrong_answer")
            else:
                check_dir = work / f"check-{index}"
                check_dir.mkdir()
                try:
                    verdicts.append(run_checker(command, test, output, check_dir))
                except CheckerFailed as failed:
                    return Judged("invalid_test", None, [], str(failed))
        passed = verdicts.count("passed")
        return Judged("passed" if passed == len(verdicts) else "failed", passed / len(verdicts), verdicts)
    finally:
        shutil.rmtree(work, ignore_errors=True)


# --- open-r1's aggregation of the same per-test outcomes (a cross-check; its executors cannot run here) -------------
#
# open-r1 (huggingface/open-r1, src/open_r1/utils/competitive_programming/) runs C++ on remote executors (a Piston
# fork with its Codeforces and IOI grader packages, or E2B / Morph sandboxes behind API keys): none is reachable here.
# What can be checked is how it turns per-test outcomes into a reward, ported here from cf_scoring.py
# (score_submission) and ioi_scoring.py (SubtaskResult):
# - Codeforces: a compile error scores no_compile_reward (-0.1); else with p passed of n, "pass_fail" 1.0 if p == n
#   else 0.0, "partial" p / n, "weighted_sum" (its default) pass_fail + 0.1 * p / n. A checker's failure is a failed
#   test there (its grader prints no "1"), where this project gives null: rows the checker cannot judge are left out.
# - IOI: a subtask scores the minimum of its tests' scores (1 passed, 0 not) times its points; a compile error 0. The
#   set's problems have no subtasks: each is one subtask worth 1 point (all tests must pass).

CF_NO_COMPILE_REWARD = -0.1


def open_r1_codeforces(verdict: str, tests: list[str], mode: str = "weighted_sum") -> float | None:
    """open-r1's Codeforces reward for these outcomes; None where it does not apply (the checker could not judge)."""
    if verdict == "compile_error":
        return CF_NO_COMPILE_REWARD
    if verdict == "invalid_test" or not tests:
        return None
    passed = tests.count("passed")
    pass_fail = 1.0 if passed == len(tests) else 0.0
    if mode == "pass_fail":
        return pass_fail
    if mode == "partial":
        return passed / len(tests)
    return pass_fail + 0.1 * passed / len(tests)


def open_r1_ioi(verdict: str, tests: list[str], points: float = 1.0) -> float | None:
    """open-r1's IOI score for one subtask holding all the tests (min of the tests' scores, times its points)."""
    if verdict == "compile_error":
        return 0.0
    if verdict == "invalid_test" or not tests:
        return None
    return round(min(1.0 if t == "passed" else 0.0 for t in tests) * points, 2)


# --- The agreement set: tests/data/cpp_agreement/ -------------------------------------------------------------------


@dataclass(frozen=True)
class Row:
    id: str  # problem/solution
    source: str
    spec: dict[str, Any]  # the code spec, checker sources inline ("language": "cpp" included)
    expected: dict[str, Any]  # {"verdict": ..., "score": ...}
    note: str


def load_set(root: Path) -> list[Row]:
    """The agreement set's rows: problems.json (tests, limits, checker file names) and solutions.json."""
    problems = json.loads((root / "problems.json").read_text())
    rows = []
    for row_id, row in json.loads((root / "solutions.json").read_text()).items():
        problem = dict(problems[row["problem"]])
        problem.pop("statement")
        spec = {"language": "cpp", **problem}
        if "checker" in problem:
            checker = problem["checker"]
            spec["checker"] = {
                "language": checker["language"],
                "source": (root / checker["source"]).read_text(),
                "files": {name: (root / path).read_text() for name, path in checker.get("files", {}).items()},
            }
        rows.append(Row(row_id, (root / row["source"]).read_text(), spec, row["expected"], row["note"]))
    return rows


def source_hash(source: str) -> str:
    return hashlib.sha256(source.encode()).hexdigest()[:12]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("program", nargs="?", type=Path)
    parser.add_argument("spec", nargs="?", type=Path)
    parser.add_argument("--set", type=Path, help="judge every row of an agreement set (tests/data/cpp_agreement)")
    parser.add_argument("--only", default="", help="with --set: rows whose id starts with this")
    args = parser.parse_args()
    if args.set is not None:
        for row in load_set(args.set):
            if row.id.startswith(args.only):
                start = time.perf_counter()
                got = judge(row.source, row.spec)
                print(json.dumps({"id": row.id, "wall_s": round(time.perf_counter() - start, 2), **got.__dict__}))
        return 0
    if args.program is None or args.spec is None:
        parser.error("give PROGRAM and SPEC, or --set")
    print(json.dumps(judge(args.program.read_text(), json.loads(args.spec.read_text())).__dict__))
    return 0


if __name__ == "__main__":
    os.environ.setdefault("LC_ALL", "C")
    sys.exit(main())
