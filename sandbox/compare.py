"""Verdicts, decided on the host from the facts a sandbox reports. Expected values never leave this process.

What a sandbox reports is data (an exit status, stdout, a value encoded as plain JSON types, the tester's outcome);
nothing the program prints or returns can be read as a verdict.
"""

from __future__ import annotations

import base64
import binascii
import itertools
import math
import re
import signal
from collections import deque
from collections.abc import Callable, Iterator
from typing import Any

from sandbox.api import AssertTest, CallTest, Limits, StdioTest, Test, TestOutcome, TestVerdict
from sandbox.runner import Malformed, decode

Facts = dict[str, Any]
BRIEF_CHARS = 120  # the most a detail shows of a value
BIG_INT_BITS = 13_000  # about 3,900 digits: below the 4,300 that str(int) allows
EXACT_DIGITS_BITS = 100_000  # up to here, a big int's digits are counted exactly (a power of 10 takes milliseconds)


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
    ended = _ended_by_limit(facts, facts.get("exc") or _native_exc(facts), limits)
    if ended:
        return ended
    if facts.get("raised"):
        return TestVerdict.RUNTIME_ERROR, str(facts["raised"])
    code = facts.get("code")
    if code != 0:
        return TestVerdict.RUNTIME_ERROR, _exit_detail(code)
    difference = stdout_difference(stdout_of(facts), test)
    if difference is None:
        return TestVerdict.PASSED, None
    return TestVerdict.WRONG_ANSWER, HIDDEN_OUTPUT if test.hidden else difference


def _native_exc(facts: Facts) -> str | None:
    """A C++ program's allocation failure, from what the C++ runtime wrote to stderr as it aborted (a program that
    writes this itself and aborts fails either way)."""
    head = facts.get("stderr_head")
    if isinstance(head, str) and "std::bad_alloc" in head and facts.get("code") == -signal.SIGABRT:
        return "MemoryError"
    return None


def stdout_of(facts: Facts) -> str:
    """The program's stdout as text: the runner sends its bytes in base64 (JSON would escape a control byte into six
    bytes, and a job's facts must stay near the size of its output)."""
    encoded = facts.get("stdout_b64")
    if not isinstance(encoded, str):
        return str(facts.get("stdout", ""))
    try:
        return base64.b64decode(encoded, validate=True).decode("utf-8", "replace")
    except (binascii.Error, ValueError):
        return ""


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
        expected = "" if test.hidden else f", expected {brief(test.expected)}"
        return TestVerdict.WRONG_ANSWER, f"returned {brief(value)}{expected}"
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
        return TestVerdict.WRONG_ANSWER, _test_side(test, str(report.get("detail") or "AssertionError"))
    if result == "unsupported":
        raise CannotJudge(str(report.get("detail")))
    ended = _ended_by_limit(facts, report.get("exc"), limits)
    if ended:
        return ended
    if result == "error":
        detail = str(report.get("detail"))
        return TestVerdict.RUNTIME_ERROR, detail if report.get("origin") == "program" else _test_side(test, detail)
    return TestVerdict.RUNTIME_ERROR, "the tester was killed"


def _test_side(test: AssertTest, detail: str) -> str:
    """What the test's own code raised: its message may quote the test's values, so a hidden test says the type."""
    return detail.split(":", 1)[0] + " (hidden test)" if test.hidden else detail


class _Full(Exception):
    pass


def brief(value: Any, limit: int = BRIEF_CHARS) -> str:
    """`repr(value)` cut to `limit` characters, at a cost bounded by `limit` too: whatever a program returns (a list
    of a million items, 10**5000, whose repr Python refuses) or a test expects, this answers in a few characters.

    >>> brief([10**5000, "ok"]), brief(list(range(100)), 20)
    ("[<an int of 5001 digits>, 'ok']", '[0, 1, 2, 3, 4, 5...')
    """
    parts: list[str] = []
    room = limit

    def put(text: str) -> None:
        nonlocal room
        parts.append(text[: room + 1])
        room -= len(text)
        if room < 0:
            raise _Full

    try:
        _write(value, put, limit)
    except _Full:
        return "".join(parts)[: max(0, limit - 3)] + "..."
    return "".join(parts)


def _write(value: Any, put: Callable[[str], None], limit: int) -> None:  # each level writes first: depth <= limit
    kind = type(value)
    if kind is int and value.bit_length() > BIG_INT_BITS:
        put(f"<an int of {_digits(value)} digits>")
    elif kind in (str, bytes):
        put(repr(value[: limit + 1]))  # longer than the limit: put cuts it, and nothing copies it whole
    elif kind in (list, tuple, set, frozenset):
        opening, closing = _BRACKETS[kind] if value else _EMPTY[kind]
        put(opening)
        for i, item in enumerate(value):
            put(", " if i else "")
            _write(item, put, limit)
        put("," + closing if kind is tuple and len(value) == 1 else closing)
    elif kind is dict:
        put("{")
        for i, (key, item) in enumerate(value.items()):
            put(", " if i else "")
            _write(key, put, limit)
            put(": ")
            _write(item, put, limit)
        put("}")
    elif value is None or kind in (bool, int, float, complex):
        put(repr(value))
    else:
        put(f"<{kind.__name__}>")


_BRACKETS: dict[type, tuple[str, str]] = {
    list: ("[", "]"), tuple: ("(", ")"), set: ("{", "}"), frozenset: ("frozenset({", "})")
}  # fmt: skip
_EMPTY: dict[type, tuple[str, str]] = {**_BRACKETS, set: ("set(", ")"), frozenset: ("frozenset(", ")")}


def _digits(n: int) -> str:
    """How many decimal digits |n| has, without str(n) (which Python refuses past 4300 digits); past EXACT_DIGITS_BITS,
    only about (10**estimate would take seconds for the 4-million-bit ints a program may return)."""
    n = abs(n)
    estimate = int((n.bit_length() - 1) * math.log10(2)) + 1  # exact or one short
    if n.bit_length() > EXACT_DIGITS_BITS:
        return f"about {estimate}"
    return str(estimate + (n >= 10**estimate))


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
    return stdout_difference(actual, test) is None


def stdout_difference(actual: str, test: StdioTest) -> str | None:
    """None when the output matches; else where it first differs, with the expected and the program's text around
    that place, each cut short. Linear in the output, holding no list of its tokens (a 64 MB output of one-letter
    tokens would be a list of 32 million strings)."""
    if test.mode == "exact":
        return None if actual == test.stdout else _exact_difference(actual, test.stdout)
    same: Callable[[str, str], bool] = (
        str.__eq__ if test.mode == "tokens" else lambda g, w: g == w or _floats_close(g, w, test.tolerance)
    )
    got, want = _TOKEN.finditer(actual), _TOKEN.finditer(test.stdout)
    before: deque[str] = deque(maxlen=CONTEXT_TOKENS)
    for index, (g, w) in enumerate(itertools.zip_longest(got, want)):
        if g is not None and w is not None and same(g[0], w[0]):
            before.append(g[0])
            continue
        line = actual.count("\n", 0, g.start() if g is not None else len(actual)) + 1
        shown = (index > CONTEXT_TOKENS, list(before))
        expected, output = _tokens_around(shown, w, want), _tokens_around(shown, g, got)
        return f"differs at token {index + 1} (line {line} of the output): expected {expected}, got {output}"
    return None


_TOKEN = re.compile(r"\S+")  # \s is str.isspace, as str.split() splits
CONTEXT_TOKENS = 2  # tokens shown on each side of the first difference
TOKEN_CHARS = 24  # each token shown is cut to this many characters
CONTEXT_CHARS = 24  # exact mode: characters shown on each side of the first difference
HIDDEN_OUTPUT = "output differs (hidden test: where is not said)"


def _tokens_around(shown: tuple[bool, list[str]], first: re.Match[str] | None, rest: Iterator[re.Match[str]]) -> str:
    """`... 3 4 [5] 6 7`: the tokens before the first difference, the differing one in brackets, the next ones."""
    elided, before = shown
    after = [m[0] for m in itertools.islice(rest, CONTEXT_TOKENS)] if first is not None else []
    more = first is not None and len(after) == CONTEXT_TOKENS and next(rest, None) is not None
    middle = f"[{_cut(first[0])}]" if first is not None else "[end of output]"
    words = ["..."] * elided + [_cut(t) for t in before] + [middle] + [_cut(t) for t in after] + ["..."] * more
    return repr(" ".join(words))


def _cut(token: str) -> str:
    return token if len(token) <= TOKEN_CHARS else token[: TOKEN_CHARS - 3] + "..."


def _exact_difference(actual: str, expected: str) -> str:
    at = _common_prefix(actual, expected)
    line = actual.count("\n", 0, at) + 1
    column = at - actual.rfind("\n", 0, at)
    return (
        f"differs at line {line}, column {column} of the output: "
        f"expected {_chars_around(expected, at)}, got {_chars_around(actual, at)}"
    )


def _common_prefix(a: str, b: str) -> int:
    """The length of the longest common prefix, comparing in blocks (a loop per character would be slow)."""
    at, step = 0, 4096
    while at < min(len(a), len(b)) and a[at : at + step] == b[at : at + step]:
        at += step
    at = min(at, len(a), len(b))
    while at < min(len(a), len(b)) and a[at] == b[at]:
        at += 1
    return at


def _chars_around(text: str, at: int) -> str:
    start = max(0, at - CONTEXT_CHARS)
    piece = repr(text[start : at + CONTEXT_CHARS])
    return (
        ("..." if start else "")
        + piece
        + ("..." if at + CONTEXT_CHARS < len(text) else "")
        + (" (it ends there)" if at >= len(text) else "")
    )


def _floats_close(got: str, want: str, tolerance: float) -> bool:
    try:
        return math.isclose(float(got), float(want), rel_tol=tolerance, abs_tol=tolerance)
    except (ValueError, OverflowError):
        return False


# --- Checkers: the program's output goes to a checker instead of the comparison -----------------------------------

CHECKER_VERDICTS = {1: "the checker rejected the output", 2: "presentation error (the checker's verdict)"}


def output_to_check(test: Test, facts: Facts, limits: Limits) -> TestOutcome | bytes:
    """The program's stdout when it ran to a clean end (a checker judges it), else its final outcome."""
    ran = facts.get("status") == "ok" and facts.get("code") == 0 and not facts.get("raised")
    if ran and isinstance(test, StdioTest) and _ended_by_limit(facts, facts.get("exc"), limits) is None:
        try:
            return base64.b64decode(str(facts.get("stdout_b64", "")), validate=True)
        except (binascii.Error, ValueError):
            return b""
    return outcome(test, facts, limits)


def checker_outcome(facts: Facts, points: bool = False) -> TestOutcome:
    """A checker's run: exit 0 passes, 1 and 2 are the program's wrong answer; anything else is the checker's own
    failure, never the program's: CannotJudge (null). With `points` (CMS style), an accepting checker's first line
    of stdout is the test's score in [0, 1]: 1 passes, less is a wrong answer earning that share; a first line that
    is missing, not a number, or out of [0, 1] is the checker's failure too."""
    if facts.get("raised"):  # a Python checker's uncaught exception (it would exit 1: not a wrong answer)
        raise CannotJudge(f"the checker failed: {str(facts['raised'])[:200]}")
    code = facts.get("code") if facts.get("status") == "ok" and facts.get("exited") is not False else None
    if code == 0 and points:
        return _points(facts)
    if code == 0:
        return TestOutcome(TestVerdict.PASSED)
    if code in CHECKER_VERDICTS:
        return TestOutcome(TestVerdict.WRONG_ANSWER, CHECKER_VERDICTS[code])
    why = f"ran past its limits ({facts.get('status')})" if facts.get("status") != "ok" else _exit_detail(code)
    raise CannotJudge(f"the checker failed: {why}")


def _points(facts: Facts) -> TestOutcome:
    """An accepting checker's score: the first line of its stdout, a number in [0, 1] (nothing else on that line)."""
    first = stdout_of(facts).split("\n", 1)[0].strip()
    try:
        score = float(first) if len(first) <= _SCORE_CHARS and _NUMBER.fullmatch(first) else math.nan
    except (ValueError, OverflowError):
        score = math.nan
    if not 0.0 <= score <= 1.0:  # NaN too
        why = "no score on its first line" if not first else "a first line that is not a score in [0, 1]"
        raise CannotJudge(f"the checker accepted with points, but printed {why}")
    if score == 1.0:
        return TestOutcome(TestVerdict.PASSED, points=1.0)
    return TestOutcome(
        TestVerdict.WRONG_ANSWER, f"partial credit: {score:.6g} of the test (the checker's score)", points=score
    )


# One way to read each number (`\d+\.?\d*` split a run of digits n ways: a long line that fails backtracked in
# quadratic time, on the event loop); and a score is short: a longer first line is no score, unread.
_NUMBER = re.compile(r"[+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?")
_SCORE_CHARS = 1000
