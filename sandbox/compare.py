"""Verdicts, decided on the host from the facts a sandbox reports. Expected values never leave this process.

What a sandbox reports is data (an exit status, stdout, a value encoded as plain JSON types, the tester's outcome);
nothing the program prints or returns can be read as a verdict.
"""

from __future__ import annotations

import math
import signal
from typing import Any

from sandbox.api import AssertTest, CallTest, Limits, StdioTest, Test, TestOutcome, TestVerdict
from sandbox.runner import Malformed, decode

Facts = dict[str, Any]


class CannotJudge(Exception):
    """The test needs something the sandbox cannot do (e.g. pass a function across the boundary)."""


def outcome(test: Test, facts: Facts, limits: Limits) -> TestOutcome:
    verdict, detail = _verdict(test, facts, limits)
    wall = facts.get("wall_s")
    return TestOutcome(verdict, detail, wall if isinstance(wall, int | float) else None)


def _verdict(test: Test, facts: Facts, limits: Limits) -> tuple[TestVerdict, str | None]:
    status = facts.get("status")
    if status == "timeout" and _oom_killed(facts):  # its children held its channel until the wall clock ran out
        return TestVerdict.MEMORY_LIMIT, "ran out of memory (the sandbox's OOM killer ended it)"
    if status == "timeout":
        return TestVerdict.TIMEOUT, f"ran past the {limits.wall_s:g} s wall-clock limit"
    if status == "output_limit":
        return TestVerdict.OUTPUT_LIMIT, f"wrote more than {limits.max_output_bytes} bytes"
    if status != "ok":
        return TestVerdict.RUNTIME_ERROR, str(facts.get("detail") or "the program broke its sandbox")[:200]
    if isinstance(test, StdioTest):
        return _stdio(test, facts, limits)
    if isinstance(test, CallTest):
        return _call(test, facts, limits)
    return _assert(test, facts, limits)


def _oom_killed(facts: Facts) -> bool:
    """The program's process was SIGKILLed, not by the sandbox, while the cgroup's OOM killer killed."""
    return facts.get("oom_killed") is True and facts.get("exited") is True and facts.get("code") == -signal.SIGKILL


def _ended_by_limit(facts: Facts, exc: object, limits: Limits) -> tuple[TestVerdict, str] | None:
    """A CPU or memory limit, read from how the program's process ended (only if it ended on its own)."""
    code, cpu = facts.get("code"), facts.get("cpu_s") or 0.0
    on_its_own = facts.get("exited") is True
    if on_its_own and (code == -signal.SIGXCPU or (code == -signal.SIGKILL and cpu >= limits.cpu_s)):
        return TestVerdict.TIMEOUT, f"used more than {limits.cpu_s:g} s of CPU"
    if exc == "MemoryError" or facts.get("oom_killed") is True:
        return TestVerdict.MEMORY_LIMIT, f"ran out of memory (limit {limits.memory_mb} MB)"
    return None


def _stdio(test: StdioTest, facts: Facts, limits: Limits) -> tuple[TestVerdict, str | None]:
    ended = _ended_by_limit(facts, facts.get("exc"), limits)
    if ended:
        return ended
    if facts.get("raised"):
        return TestVerdict.RUNTIME_ERROR, str(facts["raised"])
    code = facts.get("code")
    if code != 0:
        return TestVerdict.RUNTIME_ERROR, _exit_detail(code)
    if stdout_matches(str(facts.get("stdout", "")), test):
        return TestVerdict.PASSED, None
    return TestVerdict.WRONG_ANSWER, "output differs"


def _exit_detail(code: object) -> str:
    if isinstance(code, int) and code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            pass
    return f"exit status {code}"


def _call(test: CallTest, facts: Facts, limits: Limits) -> tuple[TestVerdict, str | None]:
    if "value" in facts:
        try:
            value = decode(facts["value"])
        except Malformed:
            return TestVerdict.WRONG_ANSWER, "returned a malformed value"
        if json_equal(value, test.expected, test.tolerance):
            return TestVerdict.PASSED, None
        return TestVerdict.WRONG_ANSWER, f"returned {_short(value)}"
    if "unserializable" in facts:
        return TestVerdict.WRONG_ANSWER, f"returned a {facts['unserializable']}, not plain data"
    ended = _ended_by_limit(facts, facts.get("exc"), limits)
    if ended:
        return ended
    reason = facts.get("raised") or facts.get("load_error") or "the program exited before returning"
    return TestVerdict.RUNTIME_ERROR, str(reason)


def _assert(test: AssertTest, facts: Facts, limits: Limits) -> tuple[TestVerdict, str | None]:
    report = facts.get("assert") or {}
    result = report.get("outcome")
    if result == "passed":
        return TestVerdict.PASSED, None
    if result == "failed":
        return TestVerdict.WRONG_ANSWER, str(report.get("detail") or "AssertionError")
    if result == "unsupported":
        raise CannotJudge(str(report.get("detail")))
    ended = _ended_by_limit(facts, report.get("exc"), limits)
    if ended:
        return ended
    if result == "error":
        return TestVerdict.RUNTIME_ERROR, str(report.get("detail"))
    return TestVerdict.RUNTIME_ERROR, "the tester was killed"


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 120 else text[:117] + "..."


def json_equal(actual: Any, expected: Any, tolerance: float = 0.0) -> bool:
    """JSON semantics, by exact type: numbers compare as numbers (240.0 == 240), a tuple equals a list, booleans
    are not numbers, dict keys must match exactly."""
    kind = type(expected)
    if kind is bool or type(actual) is bool:
        return type(actual) is kind and actual == expected
    if kind in (int, float):
        return type(actual) in (int, float) and _numbers_equal(actual, expected, tolerance)
    if expected is None or kind is str:
        return type(actual) is kind and actual == expected
    if kind in (list, tuple):
        return (
            type(actual) in (list, tuple)
            and len(actual) == len(expected)
            and all(json_equal(a, e, tolerance) for a, e in zip(actual, expected, strict=True))
        )
    if kind is dict:
        return (
            type(actual) is dict
            and actual.keys() == expected.keys()
            and all(json_equal(actual[k], expected[k], tolerance) for k in expected)
        )
    return False


def _numbers_equal(actual: float, expected: float, tolerance: float) -> bool:
    if actual == expected:
        return True
    try:
        return tolerance > 0 and math.isclose(actual, expected, rel_tol=tolerance, abs_tol=tolerance)
    except OverflowError:  # an int too large for a float
        return False


def stdout_matches(actual: str, test: StdioTest) -> bool:
    if test.mode == "exact":
        return actual == test.stdout
    got, want = actual.split(), test.stdout.split()
    if test.mode == "tokens" or len(got) != len(want):
        return got == want
    return all(g == w or _floats_close(g, w, test.tolerance) for g, w in zip(got, want, strict=True))


def _floats_close(got: str, want: str, tolerance: float) -> bool:
    try:
        return math.isclose(float(got), float(want), rel_tol=tolerance, abs_tol=tolerance)
    except (ValueError, OverflowError):
        return False
