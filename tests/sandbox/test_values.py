"""The trusted side's data handling, without a sandbox: encoding by exact type, comparisons, test validation, and
how the tester binds the program's names."""

from __future__ import annotations

import collections
import json
import math
import socket

import pytest

from sandbox import AssertTest, CallTest, Limits, RunResult, RunVerdict, StdioTest, Test, TestOutcome, TestVerdict
from sandbox.compare import BRIEF_CHARS, HIDDEN_OUTPUT, brief, json_equal, outcome, stdout_difference, stdout_matches
from sandbox.executor import invalid_test
from sandbox.runner import Malformed, Unserializable, decode, encode
from sandbox.runner.tester import Conn, Remote, bind


def roundtrip(value: object) -> object:
    return decode(json.loads(json.dumps(encode(value))))


@pytest.mark.parametrize(
    "value",
    [None, True, 0, -(10**5000), 2.5, math.inf, "é\udc80", b"\x00\xff", [1, [2]], (1, (2,)), {1: "a", (2, 3): None},
     {1, 2}, frozenset({3}), 1 + 2j, {"$t": [1]}],
    ids=lambda value: type(value).__name__,
)  # fmt: skip
def test_plain_values_round_trip_with_their_exact_types(value: object) -> None:
    back = roundtrip(value)
    assert back == value and type(back) is type(value)


def test_nan_round_trips() -> None:
    assert math.isnan(roundtrip(math.nan))  # type: ignore[arg-type]


def test_subclasses_are_read_through_the_base_type_and_lose_their_methods() -> None:
    class LyingInt(int):
        def __eq__(self, other: object) -> bool:
            return True

        __hash__ = int.__hash__

    class LyingList(list[int]):
        def __iter__(self):  # type: ignore[no-untyped-def]
            return iter([7, 7, 7])

    class LyingStr(str):
        def __str__(self) -> str:
            return "expected"

    back = roundtrip([LyingInt(5), LyingList([1]), LyingStr("mine"), collections.Counter("aa"), True])
    assert back == [5, [1], "mine", {"a": 2}, True]
    assert [type(v) for v in back] == [int, list, str, dict, bool]  # type: ignore[attr-defined]


def test_objects_that_are_not_plain_data_are_refused() -> None:
    class AlwaysEqual:
        def __eq__(self, other: object) -> bool:
            return True

    class FakeInt:
        __class__ = int  # type: ignore[assignment]  # isinstance(x, int) is True: the encoder does not ask

    for value in (AlwaysEqual(), FakeInt(), object(), len, [socket]):
        with pytest.raises(Unserializable):
            encode(value)


def test_cycles_and_deep_nesting_are_refused() -> None:
    cycle: list[object] = []
    cycle.append(cycle)
    with pytest.raises(Unserializable):
        encode(cycle)


@pytest.mark.parametrize(
    "data",
    [{"$x": 1}, {"$t": 1}, {"$d": [[1]]}, {"$d": [[[1], 2]]}, {"$i": "zz"}, {"$r": 1}, {"a": 1, "b": 2}, {"$b": "!"}],
)
def test_malformed_encodings_are_rejected(data: object) -> None:
    with pytest.raises(Malformed):
        decode(data)


@pytest.mark.parametrize(
    ("actual", "expected", "equal"),
    [
        (240.0, 240, True),  # MBPP/14: numbers compare as numbers
        ((1, 2), [1, 2], True),  # JSON has no tuples
        ({"a": [1.0]}, {"a": [1]}, True),
        (True, 1, False),  # booleans are not numbers
        (1, True, False),
        (None, 0, False),
        ("1", 1, False),
        ({1: 2}, {"1": 2}, False),
        ([1, 2], [1, 2, 3], False),
        ({1, 2}, [1, 2], False),
        (10**400, 1e300, False),
    ],
)
def test_call_values_compare_with_json_semantics(actual: object, expected: object, equal: bool) -> None:
    assert json_equal(actual, expected) is equal


def test_call_tolerance() -> None:
    assert json_equal([0.1 + 0.2], [0.3], tolerance=1e-9)
    assert not json_equal([0.1 + 0.2], [0.3])


@pytest.mark.parametrize(
    ("stdout", "expected", "mode", "match"),
    [
        ("1 2 \n3\n", "1\n2\n3", "tokens", True),  # CF 1342C: one per line vs space-separated
        ("1 2 3", "1 2 4", "tokens", False),
        ("1 2\n", "1 2", "exact", False),
        ("0.3333333 1", "0.333333333 1", "float", True),
        ("0.34 1", "0.33 1", "float", False),
        ("abc 1.0", "abc 1", "float", True),
    ],
)
def test_stdout_comparison(stdout: str, expected: str, mode: str, match: bool) -> None:
    assert stdout_matches(stdout, StdioTest("", expected, mode=mode, tolerance=1e-6)) is match


@pytest.mark.parametrize(
    ("stdout", "expected", "mode", "detail"),
    [
        ("1 2 3", "1 2 4", "tokens", "differs at token 3 (line 1 of the output): expected '1 2 [4]', got '1 2 [3]'"),
        ("a\nb c\nd e f g h", "a\nb c\nd X f g h i", "tokens",
         "differs at token 5 (line 3 of the output): expected '... c d [X] f g ...', got '... c d [e] f g ...'"),
        ("1 2", "1 2 3", "tokens",
         "differs at token 3 (line 1 of the output): expected '1 2 [3]', got '1 2 [end of output]'"),
        ("0.34 1", "0.33 1", "float",
         "differs at token 1 (line 1 of the output): expected '[0.33] 1', got '[0.34] 1'"),
        ("1 2\n", "1 2", "exact",
         "differs at line 1, column 4 of the output: expected '1 2' (it ends there), got '1 2\\n'"),
        ("x" * 50 + "\nab", "x" * 50 + "\naB", "exact",
         f"differs at line 2, column 2 of the output: expected ...'{'x' * 22}\\naB', got ...'{'x' * 22}\\nab'"),
        ("y" + "x" * 10**6, "z", "tokens",
         f"differs at token 1 (line 1 of the output): expected '[z]', got '[y{'x' * 20}...]'"),
    ],
    ids=["tokens", "tokens-context", "tokens-short", "float", "exact-end", "exact-window", "tokens-huge"],
)  # fmt: skip
def test_a_wrong_output_says_where_it_first_differs(stdout: str, expected: str, mode: str, detail: str) -> None:
    test = StdioTest("", expected, mode=mode)
    assert stdout_difference(stdout, test) == detail
    ok = {"status": "ok", "exited": True, "code": 0, "stdout": stdout}
    assert outcome(test, ok, Limits()) == TestOutcome(TestVerdict.WRONG_ANSWER, detail)


def test_a_hidden_test_never_shows_what_it_expects() -> None:
    ok = {"status": "ok", "exited": True, "code": 0}
    stdio = outcome(StdioTest("", "42", hidden=True), {**ok, "stdout": "41"}, Limits())
    call = outcome(CallTest("f", expected=[7, 8], hidden=True), {**ok, "value": [7, 9]}, Limits())
    failed = {"outcome": "failed", "detail": "AssertionError: f(3) should be [7, 8]"}
    asserted = outcome(AssertTest("assert f(3) == [7, 8]", hidden=True), {**ok, "assert": failed}, Limits())
    details = [stdio.detail, call.detail, asserted.detail]
    assert details == [HIDDEN_OUTPUT, "returned [7, 9]", "AssertionError (hidden test)"]
    shown = outcome(CallTest("f", expected=[7, 8]), {**ok, "value": [7, 9]}, Limits())
    assert shown.detail == "returned [7, 9], expected [7, 8]"


def nested(depth: int) -> object:
    value: object = 1
    for _ in range(depth):
        value = [value]
    return value


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        (10**5000, "<an int of 5001 digits>"),  # repr() raises past 4300 digits
        (-(10**5000) + 1, "<an int of 5000 digits>"),
        (1 << (4 << 20), "<an int of about 1262612 digits>"),  # the largest a value may carry: counted, not computed
        ([10**4300, 1.5, None, (1,), {"k": {1, 2}}], "[<an int of 4301 digits>, 1.5, None, (1,), {'k': {1, 2}}]"),
        (list(range(10**6)), "[0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, "
         "24, 25, 26, 27, 28, 29, 30, 31..."),
        ("x" * 10**7, "'" + "x" * 116 + "..."),
        (nested(100), "[" * 100 + "1" + "]" * 16 + "..."),
        (float("inf"), "inf"),
        ((set(), frozenset(), (), b"\x00"), "(set(), frozenset(), (), b'\\x00')"),
    ],
    ids=["10**5000", "-10**5000", "4M-bits", "mixed", "million-items", "ten-million-chars", "deep", "inf", "empties"],
)  # fmt: skip
def test_a_value_in_a_detail_is_short_whatever_it_is(value: object, shown: str) -> None:
    assert brief(value) == shown and len(shown) <= BRIEF_CHARS


def test_a_call_returning_10_to_the_5000_is_a_wrong_answer_with_a_detail() -> None:
    """repr(10**5000) raises ValueError: the detail once did, and its whole batch was a 500."""
    ok = {"status": "ok", "exited": True, "code": 0, "value": encode(10**5000)}
    assert outcome(CallTest("f", expected=1), ok, Limits()) == TestOutcome(
        TestVerdict.WRONG_ANSWER, "returned <an int of 5001 digits>, expected 1"
    )
    assert outcome(CallTest("f", expected=10**5000), ok, Limits()).verdict == TestVerdict.PASSED


def test_verdicts_come_from_facts_never_from_the_programs_exit_status_alone() -> None:
    limits = Limits()
    call = CallTest("f", expected=3)
    ok = {"status": "ok", "exited": True, "code": 0}
    assert outcome(call, {**ok, "value": 3}, limits).verdict == TestVerdict.PASSED
    assert outcome(call, ok, limits).verdict == TestVerdict.RUNTIME_ERROR  # exit 0 but no value
    assert outcome(call, {**ok, "value": {"$t": "x"}}, limits).verdict == TestVerdict.WRONG_ANSWER
    assert outcome(AssertTest("assert f()"), ok, limits).verdict == TestVerdict.RUNTIME_ERROR
    stdio = StdioTest("", "3")
    assert outcome(stdio, {**ok, "stdout": "3", "code": 1}, limits).verdict == TestVerdict.RUNTIME_ERROR
    assert outcome(stdio, {**ok, "stdout": "3", "code": -24}, limits).verdict == TestVerdict.TIMEOUT  # SIGXCPU
    assert outcome(stdio, {**ok, "exc": "MemoryError", "raised": "x"}, limits).verdict == TestVerdict.MEMORY_LIMIT
    assert outcome(stdio, {"status": "timeout"}, limits).verdict == TestVerdict.TIMEOUT
    assert outcome(stdio, {"status": "output_limit"}, limits).verdict == TestVerdict.OUTPUT_LIMIT


LONE = "\ud800"  # a lone surrogate: a Python str can hold it, no UTF-8 can encode it


@pytest.mark.parametrize(
    ("test", "facts"),
    [
        (StdioTest("", "1"), {"raised": f"ValueError: {LONE}"}),
        (CallTest("f"), {"load_error": f"ValueError: {LONE}"}),
        (CallTest("f"), {"raised": f"KeyError: {LONE}"}),
        (CallTest("f"), {"unserializable": LONE}),
        (AssertTest("assert f()"), {"assert": {"outcome": "failed", "detail": f"AssertionError: {LONE}"}}),
        (AssertTest("assert f()"), {"assert": {"outcome": "error", "detail": f"ValueError: {LONE}"}}),
        (StdioTest("", "1"), {"status": "broken", "detail": f"could not empty /tmp: '{LONE}'"}),
    ],
    ids=["stdio-raised", "load-error", "call-raised", "unserializable", "assert-failed", "assert-error", "broken"],
)
def test_a_detail_never_carries_what_utf8_cannot_encode(test: Test, facts: dict[str, object]) -> None:
    detail = outcome(test, {"status": "ok", **facts}, Limits()).detail or ""
    assert "\\ud800" in detail and detail.encode("utf-8"), detail  # escaped, still telling what the program wrote
    compile_error = RunResult(RunVerdict.COMPILE_ERROR, detail=f"SyntaxError: {LONE}").detail or ""
    assert compile_error.encode("utf-8") == b"SyntaxError: \\ud800"


def test_scores_and_cannot_judge() -> None:
    passed, failed = TestOutcome(TestVerdict.PASSED), TestOutcome(TestVerdict.WRONG_ANSWER)
    assert RunResult(RunVerdict.OK, (passed, failed, passed)).score == pytest.approx(2 / 3)
    assert RunResult(RunVerdict.COMPILE_ERROR).score == 0.0
    assert RunResult(RunVerdict.NO_CODE).score == 0.0
    assert RunResult(RunVerdict.SANDBOX_UNAVAILABLE).score is None
    assert RunResult(RunVerdict.INVALID_TEST).score is None


def test_limits_are_capped_at_the_server_maxima() -> None:
    asked = Limits(wall_s=100, memory_mb=100)
    assert asked.capped(Limits(wall_s=10, memory_mb=512)) == Limits(wall_s=10, memory_mb=100)


@pytest.mark.parametrize(
    ("test", "problem"),
    [
        (AssertTest("assert f(1) == 2"), None),
        (AssertTest("assert f(1) =="), "does not compile"),
        (CallTest("not a name"), "not a function name"),
        (CallTest("f", (object(),)), "not plain data"),
        (StdioTest("", "", mode="lines"), "unknown stdio mode"),
    ],
)
def test_malformed_tests_are_caught_before_anything_runs(test: AssertTest, problem: str | None) -> None:
    found = invalid_test(test)
    assert (found is None) if problem is None else (problem in (found or ""))


def test_the_tester_never_binds_program_names_over_builtins_or_real_modules() -> None:
    conn = Conn(sock=None)
    names = {
        "abs": ["function", 0],  # a builtin: never shadowed
        "math": ["object", 1],  # `math = FakeMath()`: the test gets the real math module
        "random": ["function", 2],  # `def random(): ...`: a function proxy, which has no attributes to fake
        "heapq": ["value", 3],
        "np": ["module", "json"],  # `import json as np`: the real module, by its own name
        "f": ["function", 4],
        "Pair": ["object", 5],
        "LIMIT": ["value", {"$t": [1, 2]}],
    }
    ns = bind(names, conn)
    import heapq
    import json as real_json

    assert "abs" not in ns
    assert ns["math"] is math and ns["heapq"] is heapq and ns["np"] is real_json
    assert type(ns["random"]) is Remote and type(ns["f"]) is Remote and type(ns["Pair"]) is Remote
    with pytest.raises(AttributeError):
        ns["random"].seed  # noqa: B018
    assert ns["LIMIT"] == (1, 2)
    assert ns["f"] != 3 and ns["f"] != ns["Pair"] and ns["f"] == ns["f"]  # equal to nothing but themselves


def test_a_function_proxy_stays_attribute_free_whatever_else_the_program_claims() -> None:
    """`def math(): ...` with fake attributes, also exported under another name as an object: still no attributes."""
    ns = bind({"alias": ["object", 0], "isclose": ["function", 0]}, Conn(sock=None))
    assert ns["isclose"]._fn is True and ns["alias"]._fn is False
