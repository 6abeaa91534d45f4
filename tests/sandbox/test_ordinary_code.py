"""Ordinary programs run as they would under `python main.py`: a real module, whose functions and classes pickle, so
that multiprocessing works in every test form."""

from __future__ import annotations

import pytest

from sandbox import AssertTest, CallTest, StdioTest, Test, TestVerdict
from tests.sandbox.live import LiveExecutor

pytestmark = pytest.mark.timeout(120, func_only=True)
P, RE = TestVerdict.PASSED, TestVerdict.RUNTIME_ERROR

# The problem throughout: f(n) is the sum of the squares below n (f(10) == 285); stdio reads n, prints f(n).
STDIO_MAIN = "\nif __name__ == '__main__':\n    print(f(int(input())))\n"
FORMS: dict[str, Test] = {
    "stdio": StdioTest("10\n", "285\n"),
    "call": CallTest("f", (10,), expected=285),
    "assert": AssertTest("assert f(10) == 285"),
}


def verdicts(result: object) -> list[TestVerdict]:
    return [t.verdict for t in getattr(result, "tests", ())]


POOL = """
import multiprocessing
def square(x):
    return x * x
def f(n):
    with multiprocessing.Pool(4) as pool:
        return sum(pool.map(square, range(n)))
"""


@pytest.mark.parametrize("form", FORMS)
def test_a_pool_over_the_programs_own_function_works_in_every_form(executor: LiveExecutor, form: str) -> None:
    result = executor.run(POOL + STDIO_MAIN, FORMS[form])
    assert (result.score, verdicts(result)) == (1.0, [P]), result


START_METHODS = """
import multiprocessing
def square(x):
    return x * x
def f(n):
    with multiprocessing.get_context({method!r}).Pool(2) as pool:
        return sum(pool.map(square, range(n)))
"""


@pytest.mark.parametrize("method", ["fork", "spawn", "forkserver"])
@pytest.mark.parametrize("form", ["stdio", "call"])
def test_a_pool_works_with_every_start_method(executor: LiveExecutor, form: str, method: str) -> None:
    """fork is the default up to Python 3.13, forkserver from 3.14; spawn and forkserver start fresh interpreters,
    which find the program again by its file (stdio: main.py run as __mp_main__) or by its module name (main)."""
    result = executor.run(START_METHODS.format(method=method) + STDIO_MAIN, FORMS[form], wall_s=20, cpu_s=20)
    assert (result.score, verdicts(result)) == (1.0, [P]), result


PICKLE = """
import dataclasses, pickle
@dataclasses.dataclass(frozen=True)
class Square:
    side: int
    def area(self):
        return self.side * self.side
def f(n):
    shapes = pickle.loads(pickle.dumps([Square(k) for k in range(n)]))
    assert all(type(s) is Square for s in shapes)
    return sum(s.area() for s in shapes)
"""


@pytest.mark.parametrize("form", FORMS)
def test_an_instance_of_a_program_defined_class_pickles_and_comes_back(executor: LiveExecutor, form: str) -> None:
    result = executor.run(PICKLE + STDIO_MAIN, FORMS[form])
    assert (result.score, verdicts(result)) == (1.0, [P]), result


MODULE = """
import os, sys
def f(n):
    me = sys.modules[__name__]
    return [__name__, me.f is f, __file__ == os.path.join(os.getcwd(), "main.py"), sys.path[0] == os.getcwd(),
            open(__file__).read() == SOURCE]
SOURCE = open(__file__).read()
if __name__ == "__main__":
    print(*f(0))
    sys.exit(3)
"""


def test_a_stdio_program_runs_as_main_from_main_py(executor: LiveExecutor) -> None:
    """As `python main.py`: __main__, in sys.modules, from a real file in its directory, that directory first on
    sys.path; its `if __name__ == "__main__":` block runs (here: exits 3)."""
    result = executor.run(MODULE, StdioTest("", "__main__ True True True True\n"))
    assert verdicts(result) == [RE] and result.tests[0].detail == "exit status 3", result
    assert executor.run(MODULE.replace("sys.exit(3)", ""), StdioTest("", "__main__ True True True True")).score == 1.0


def test_call_and_assert_tests_import_the_program_as_main(executor: LiveExecutor) -> None:
    """As `import main` would load it: its functions live in sys.modules["main"], and its
    `if __name__ == "__main__":` block (a demo, or code reading stdin) does not run."""
    expected = ["main", True, True, True, True]
    tests = (CallTest("f", (0,), expected=expected), AssertTest(f"assert f(0) == {expected!r}"))
    result = executor.run(MODULE, *tests)
    assert (result.score, verdicts(result)) == (1.0, [P, P]), result


def test_processes_a_pool_leaves_behind_are_gone_after_the_test(solo: LiveExecutor) -> None:
    """A pool never closed, its workers still running when the program ends: the clean-up kills them."""
    program = "import multiprocessing, time\ndef f(n):\n    pool = multiprocessing.Pool(4)\n"
    program += "    pool.map_async(time.sleep, [3600] * 4)\n    time.sleep(0.2)\n    return 285\n"
    assert solo.run(program, FORMS["call"]).score == 1.0
    others = "import os\ndef probe():\n    mine = (1, os.getpid(), os.getppid())  # the runner, the probe, the zygote\n"
    others += "    return [p for p in os.listdir('/proc') if p.isdigit() and int(p) not in mine]\n"
    assert solo.probe(others) == []
