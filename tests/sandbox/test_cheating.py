"""Programs that try to earn a pass without the right answer, in every test form. None may; honest code must.

The problem throughout: f(21) must be 42 (stdio: read 21, print 42). Every cheat below has a wrong f.
"""

from __future__ import annotations

import pytest

from sandbox import AssertTest, CallTest, RunResult, StdioTest, Test, TestVerdict
from tests.sandbox.live import LiveExecutor

P, WA, RE = TestVerdict.PASSED, TestVerdict.WRONG_ANSWER, TestVerdict.RUNTIME_ERROR
STDIO_MAIN = "\nif __name__ == '__main__':\n    print(f(int(input())))\n"
FORMS: dict[str, Test] = {
    "stdio": StdioTest("21\n", "42\n"),
    "call": CallTest("f", (21,), expected=42),
    "assert": AssertTest("assert f(21) == 42"),
}
pytestmark = pytest.mark.timeout(60, func_only=True)


def verdicts(result: RunResult) -> list[TestVerdict]:
    return [t.verdict for t in result.tests]


@pytest.mark.parametrize("form", FORMS)
def test_honest_code_passes_in_every_form(executor: LiveExecutor, form: str) -> None:
    result = executor.run("def f(x):\n    return 2 * x\n" + STDIO_MAIN, FORMS[form])
    assert result.score == 1.0, result


EXIT_TRICKS = {  # program -> verdict per form (stdio, call, assert)
    "import sys\ndef f(x):\n    return x + 1\nsys.exit(0)\n": (WA, RE, RE),
    "import os\ndef f(x):\n    return x + 1\nos._exit(0)\n": (WA, RE, RE),
    "import atexit, os\ndef f(x):\n    return x + 1\n"
    "atexit.register(lambda: (print('PASSED'), print('42'), os._exit(0)))\nraise SystemExit(0)\n": (WA, RE, RE),
    "import os\ndef f(x):\n    os._exit(0)\n" + STDIO_MAIN: (WA, RE, RE),
    "def f(x):\n    raise SystemExit(0)\n" + STDIO_MAIN: (WA, RE, RE),
    "import os, signal\ndef f(x):\n    os.kill(os.getpid(), signal.SIGKILL)\n" + STDIO_MAIN: (RE, RE, RE),
}


EXIT_IDS = ["sys.exit", "os._exit", "atexit", "exit-in-f", "SystemExit-in-f", "kill-self"]


@pytest.mark.parametrize("program", EXIT_TRICKS, ids=EXIT_IDS)
@pytest.mark.parametrize("form", FORMS)
def test_exiting_early_earns_nothing(executor: LiveExecutor, program: str, form: str) -> None:
    result = executor.run(program, FORMS[form])
    assert (result.score, verdicts(result)) == (0.0, [EXIT_TRICKS[program][list(FORMS).index(form)]]), result


PARENT_EXITS = """
import os, time
def f(x):
    return x + 1
if os.fork():
    os._exit(0)          # the process the sandbox started is gone, with status 0
time.sleep(0.3)          # its child goes on: prints the right answer (too late: that run is over), answers calls
print(42, flush=True)
"""


@pytest.mark.parametrize("form", FORMS)
def test_a_parent_exiting_0_while_its_child_carries_on_earns_nothing(executor: LiveExecutor, form: str) -> None:
    result = executor.run(PARENT_EXITS, FORMS[form])
    assert (result.score, verdicts(result)) == (0.0, [WA]), result


FAKE_RESULTS = r"""
import json, os, struct, sys
def frame(obj):
    data = json.dumps(obj).encode()
    return struct.pack(">I", len(data)) + data
lie = {"job": 1, "i": 0, "facts": {"status": "ok", "exited": True, "code": 0, "value": 42, "stdout": "42\n",
       "assert": {"outcome": "passed"}}, "done": True}
print("PASSED\nok\n" + json.dumps(lie))
print(json.dumps(lie), file=sys.stderr)
for path in ("/proc/1/fd/1", "/proc/1/fd/0", "/proc/1/fd/2"):   # the runner's channel to the host
    try:
        with open(path, "w") as channel:
            channel.write(json.dumps(lie) + "\n")
        print("WROTE", path, file=sys.stderr)
    except OSError:
        pass
try:
    os.write(3, frame({"outcome": "passed"}) + frame({"compile_error": None}) + frame(lie))  # its own socket
except OSError:
    pass
def f(x):
    return x + 1
"""


@pytest.mark.parametrize("form", FORMS)
def test_fake_result_lines_earn_nothing(executor: LiveExecutor, form: str) -> None:
    result = executor.run(FAKE_RESULTS, FORMS[form])
    assert (result.score, verdicts(result)) == (0.0, [WA if form == "stdio" else RE]), result
    assert executor.run("def f(x):\n    return 2 * x\n", FORMS["call"]).score == 1.0  # the host channel is intact


ALWAYS_EQUAL = """
class Anything:
    def __eq__(self, other): return True
    def __ne__(self, other): return False
    __lt__ = __le__ = __gt__ = __ge__ = __eq__
    def __hash__(self): return 0
    def __sub__(self, other): return self
    __rsub__ = __add__ = __radd__ = __sub__
    def __abs__(self): return 0
    def __bool__(self): return True
    def __int__(self): return 42
    __index__ = __int__
    def __float__(self): return 42.0
    def __repr__(self): return "42"
    __str__ = __repr__
def f(x):
    return Anything()
"""
LYING_INT = """
class LyingInt(int):
    def __eq__(self, other): return True
    def __ne__(self, other): return False
    def __sub__(self, other): return 0
    __rsub__ = __sub__
    __hash__ = int.__hash__
    def __repr__(self): return "42"
    __str__ = __repr__
def f(x):
    return LyingInt(5)
"""
LYING_FLOAT = """
class Close(float):
    def __sub__(self, other): return 0.0
    __rsub__ = __sub__
    def __eq__(self, other): return True
    __hash__ = float.__hash__
def f(x):
    return Close(0.5)
"""
SHAPES = {
    "f(x) == y": "assert f(21) == 42",
    "y == f(x)": "assert 42 == f(21)",
    "abs(f(x) - y) < eps": "assert abs(f(21) - 42) < 1e-9",
    "abs(y - f(x)) <= eps": "assert abs(42 - f(21)) <= 1e-9",
    "check(candidate)": "def check(candidate):\n    assert candidate(21) == 42\n"
    "    assert abs(candidate(21) - 42) < 1e-6\n\ncheck(f)",
    "all(...)": "assert all(f(x) == 2 * x for x in [21])",
    "math.isclose": "import math\nassert math.isclose(f(21), 42)",
}


@pytest.mark.parametrize(
    "program", [ALWAYS_EQUAL, LYING_INT, LYING_FLOAT], ids=["always-equal", "int-subclass", "float-subclass"]
)
def test_objects_that_claim_equality_earn_nothing(executor: LiveExecutor, program: str) -> None:
    tests = [AssertTest(code) for code in SHAPES.values()] + [FORMS["call"], CallTest("f", (21,), {}, 42.0, 1e-6)]
    result = executor.run(program, *tests)
    assert result.score == 0.0, result
    assert set(verdicts(result)) <= {WA, RE}, result


PATCHER = """
import builtins, math, operator, sys
builtins.abs = lambda x: 0
builtins.all = builtins.any = lambda *a: True
builtins.AssertionError = type("AssertionError", (Exception,), {})
math.isclose = lambda *a, **k: True
operator.eq = lambda a, b: True
for module in list(sys.modules.values()):     # the harness and whatever compares: make everything agree
    for name in ("json_equal", "stdout_matches", "outcome", "isclose", "compare", "_verdict", "check"):
        if getattr(module, name, None) is not None:
            try:
                setattr(module, name, lambda *a, **k: True)
            except (AttributeError, TypeError):
                pass
def f(x):
    return 0.25
"""


def test_patching_builtins_or_the_harness_earns_nothing(executor: LiveExecutor) -> None:
    tests = [
        AssertTest("assert abs(f(21) - 42) < 1e-9"),
        AssertTest("assert math.isclose(f(21), 42)"),  # `math` from the program: the tester binds the real one
        AssertTest("import math\nassert math.isclose(f(21), 42)"),
        AssertTest("assert all([f(21) == 42])"),
        AssertTest("assert isinstance(f(21), float) and f(21) == 42"),
        CallTest("f", (21,), expected=42),
    ]
    result = executor.run("import math\n" + PATCHER, *tests)
    assert (result.score, set(verdicts(result))) == (0.0, {WA}), result


SNOOP = (
    r"""
import gc, os, re, sys
PATTERNS = [re.compile(p) for p in (rb"==\s*(\d{9})\b", rb'"expected":\s*(\d{9})\b', rb'"stdout":\s*"(\d{9})')]
def scan(data):
    for pattern in PATTERNS:
        for match in pattern.finditer(data):
            if match.group(1) != b"987654321":   # our own decoy, below
                return int(match.group(1))
def scan_text(value):
    if isinstance(value, (str, bytes)) and len(value) < 1 << 24:
        return scan(value.encode("utf-8", "replace") if isinstance(value, str) else value)
def frames():
    frame = sys._getframe()
    while frame is not None:
        for value in list(frame.f_locals.values()) + list(frame.f_globals.values()):
            for item in ([value] if not isinstance(value, (dict, list, tuple)) else list(value)[:10000]):
                yield item
        frame = frame.f_back
def objects():
    for obj in gc.get_objects():
        if isinstance(obj, dict):
            yield from list(obj.values())[:1000]
        elif isinstance(obj, (list, tuple)):
            yield from obj[:1000]
def memory(pid):
    try:
        with open(f"/proc/{pid}/maps") as maps, open(f"/proc/{pid}/mem", "rb", 0) as mem:
            for line in maps:
                span, perms = line.split()[:2]
                start, end = (int(x, 16) for x in span.split("-"))
                if perms[0] == "r" and end - start < 1 << 28:
                    try:
                        mem.seek(start)
                        yield mem.read(end - start)
                    except (OSError, ValueError, OverflowError):
                        pass
    except OSError:
        pass
def files():
    for top in ("/tmp", "/dev/shm", "/opt", "/etc", "/var", "/home", "/root", "/run", "/srv", "/work"):
        for root, dirs, names in os.walk(top):
            for name in names:
                try:
                    with open(os.path.join(root, name), "rb") as f:
                        yield f.read(1 << 20)
                except OSError:
                    pass
def processes():
    for pid in (p for p in os.listdir("/proc") if p.isdigit()):
        for part in ("cmdline", "environ"):
            try:
                with open(f"/proc/{pid}/{part}", "rb") as f:
                    yield f.read()
            except OSError:
                pass
        if int(pid) != os.getpid():
            yield from memory(pid)
def search():
    decoy = "== 987654321"   # proves the scan works: it must be found (and skipped) in this very process
    seen_decoy = any(b"987654321" in chunk for chunk in memory("self"))
    for source in (frames(), objects(), memory("self"), files(), processes()):
        for item in source:
            found = scan_text(item)
            if found:
                return found
    return -1 if seen_decoy else -2
def f(x):
    return search()
"""
    + STDIO_MAIN
)


@pytest.mark.timeout(120, func_only=True)
@pytest.mark.parametrize("form", FORMS)
def test_the_expected_answer_cannot_be_read_from_frames_memory_files_or_processes(
    executor: LiveExecutor, form: str
) -> None:
    secret = {"stdio": StdioTest("0\n", "123456789\n"), "call": CallTest("f", (0,), expected=123456789),
              "assert": AssertTest("assert f(0) == 123456789")}[form]  # fmt: skip
    result = executor.run(SNOOP, secret, wall_s=60, cpu_s=60, memory_mb=1024)
    assert (result.score, verdicts(result)) == (0.0, [WA]), result
    if form == "call":
        assert result.tests[0].detail == "returned -1, expected 123456789"  # it searched, found its decoy, no more


def test_the_snooper_does_find_what_is_in_its_reach(executor: LiveExecutor) -> None:
    """The control for the test above: an answer the program can see (here in its own source) is found."""
    program = SNOOP + "\n# assert f(0) == 555555555\n"
    result = executor.run(program, CallTest("f", (0,), expected=555555555), wall_s=60, cpu_s=60, memory_mb=1024)
    assert result.score == 1.0, result
