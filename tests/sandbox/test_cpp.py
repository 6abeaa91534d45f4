"""C++ programs on both backends: compiled once in the sandbox (g++, its own limits), then run per stdio test under
the test's limits; right, wrong, slow and crashing programs get their verdicts, and hostile ones (loops, fork bombs,
memory blow-ups, floods, compile bombs, a device file as a header) end in bounded time with the next run unaffected.
(`timeout` marks bound the latency; no timing asserts.)"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest

from sandbox import Checker, Limits, RunVerdict, StdioTest, Submission, TestVerdict
from sandbox.compiled import BinaryCache, binary_key, built
from tests.sandbox.live import LiveExecutor

pytestmark = pytest.mark.timeout(120, func_only=True)

SUM = (
    '#include <cstdio>\nint main() { long long a, b; if (scanf("%lld %lld", &a, &b) != 2) return 3;'
    ' printf("%lld\\n", a + b); }\n'
)
TESTS = (StdioTest("2 3\n", "5\n"), StdioTest("-7 7", "0"), StdioTest("1000000000000 1", "1000000000001"))
ONE = (StdioTest("2 3\n", "5\n"),)


def run(executor: LiveExecutor, source: str, tests: tuple[StdioTest, ...] = ONE, **limits: object):
    return executor.call(executor.executor.run(Submission(source, tests, Limits(**limits), language="cpp")))  # type: ignore[arg-type]


def verdicts(result: object) -> list[TestVerdict]:
    return [t.verdict for t in getattr(result, "tests", ())]


def test_a_right_program_passes_every_test(executor: LiveExecutor) -> None:
    result = run(executor, SUM, TESTS)
    assert (result.verdict, result.score, verdicts(result)) == (RunVerdict.OK, 1.0, [TestVerdict.PASSED] * 3), result


def test_bits_stdcpp_and_the_online_judge_flags(executor: LiveExecutor) -> None:
    source = (
        "#include <bits/stdc++.h>\nusing namespace std;\nint main() {\n#ifdef ONLINE_JUDGE\n  vector<int> v{3, 1, 2};\n"
        "  sort(v.begin(), v.end());\n  for (auto [i, x] : vector<pair<int,int>>{{0, v[0]}}) cout << x + i << endl;\n"
        "#endif\n}\n"
    )  # structured bindings: C++17 at least
    assert verdicts(run(executor, source, (StdioTest("", "1"),))) == [TestVerdict.PASSED]


def test_a_wrong_program_gets_wrong_answer_on_the_tests_it_fails(executor: LiveExecutor) -> None:
    wrong = SUM.replace("a + b", "a + b + (a > 100)")
    result = run(executor, wrong, TESTS)
    assert verdicts(result) == [TestVerdict.PASSED, TestVerdict.PASSED, TestVerdict.WRONG_ANSWER], result
    assert result.score == pytest.approx(2 / 3)


def test_a_compile_error_scores_0_with_the_compilers_first_lines(executor: LiveExecutor) -> None:
    result = run(executor, "int main() { return undeclared_name; }\n", TESTS)
    assert (result.verdict, result.score, result.tests) == (RunVerdict.COMPILE_ERROR, 0.0, ()), result
    assert "undeclared_name" in (result.detail or "") and "error" in (result.detail or "")
    assert len((result.detail or "").splitlines()) <= 12


def test_a_crash_is_a_runtime_error_naming_the_signal(executor: LiveExecutor) -> None:
    result = run(executor, '#include <cstdio>\nint main() { volatile int *p = nullptr; *p = 1; puts("5"); }\n')
    assert verdicts(result) == [TestVerdict.RUNTIME_ERROR] and "SIGSEGV" in (result.tests[0].detail or ""), result
    result = run(executor, '#include <cstdio>\nint main() { puts("5"); return 1; }\n')
    assert verdicts(result) == [TestVerdict.RUNTIME_ERROR] and "exit status 1" in (result.tests[0].detail or "")


def test_an_endless_loop_times_out_and_cpu_time_is_limited(executor: LiveExecutor) -> None:
    loop = "int main() { volatile unsigned long x = 0; for (;;) x++; }\n"
    result = run(executor, loop, wall_s=1, cpu_s=30)
    assert verdicts(result) == [TestVerdict.TIMEOUT] and "wall-clock" in (result.tests[0].detail or ""), result
    result = run(executor, loop, wall_s=30, cpu_s=1)
    assert verdicts(result) == [TestVerdict.TIMEOUT] and "CPU" in (result.tests[0].detail or ""), result
    assert run(executor, SUM).score == 1.0


def test_a_memory_blow_up_gets_memory_limit(executor: LiveExecutor) -> None:
    hog = "#include <vector>\nint main() { std::vector<long> v; for (;;) v.push_back(1); }\n"
    result = run(executor, hog, memory_mb=128)
    assert verdicts(result) == [TestVerdict.MEMORY_LIMIT], result
    assert run(executor, SUM).score == 1.0


def test_the_stack_is_as_large_as_the_memory_limit(executor: LiveExecutor) -> None:
    # about 200 MB of stack: far past the usual 8 MB, inside a 512 MB memory limit (Codeforces gives the same)
    deep = (
        "#include <cstdio>\nlong f(long n) { volatile char pad[200]; pad[0] = (char)n; return n ? f(n - 1) + pad[0] % 2"
        ' + 0 * pad[0] : 0; }\nint main() { printf("%ld\\n", f(1000000) >= 0 ? 5L : 0L); }\n'
    )
    assert verdicts(run(executor, deep, memory_mb=512)) == [TestVerdict.PASSED]
    endless = "int f(int n) { volatile int pad[64]; pad[0] = n; return f(n + 1) + pad[0]; }\nint main() { f(0); }\n"
    result = run(executor, endless, memory_mb=128)
    assert verdicts(result) == [TestVerdict.RUNTIME_ERROR] and "SIGSEGV" in (result.tests[0].detail or ""), result


def test_an_output_flood_gets_output_limit(executor: LiveExecutor) -> None:
    flood = '#include <cstdio>\nint main() { for (;;) puts("flood flood flood flood flood"); }\n'
    assert verdicts(run(executor, flood)) == [TestVerdict.OUTPUT_LIMIT]


def test_a_fork_bomb_ends_and_the_next_run_is_unaffected(solo: LiveExecutor) -> None:
    bomb = "#include <unistd.h>\nint main() { for (;;) fork(); }\n"
    result = run(solo, bomb, wall_s=2)
    assert result.score == 0.0 and verdicts(result)[0] != TestVerdict.PASSED, result
    assert run(solo, SUM, TESTS).score == 1.0


def test_no_network(executor: LiveExecutor) -> None:
    probe = (
        "#include <sys/socket.h>\n#include <netinet/in.h>\n#include <arpa/inet.h>\n#include <cstdio>\n"
        "int main() { int s = socket(AF_INET, SOCK_STREAM, 0); sockaddr_in a{}; a.sin_family = AF_INET;"
        ' a.sin_port = htons(53); inet_pton(AF_INET, "8.8.8.8", &a.sin_addr);'
        ' puts(connect(s, (sockaddr *)&a, sizeof a) == 0 ? "connected" : "refused"); }\n'
    )
    assert verdicts(run(executor, probe, (StdioTest("", "refused"),))) == [TestVerdict.PASSED]


def test_each_test_gets_a_fresh_directory_and_its_own_copy_of_the_binary(solo: LiveExecutor) -> None:
    """The first test replaces its binary and leaves a file; the second runs the real binary in a clean dir."""
    tamper = (
        "#include <cstdio>\n#include <unistd.h>\nint main() {\n"
        '  if (access("marker", F_OK) == 0) { puts("tampered"); return 0; }\n'
        '  FILE *m = fopen("marker", "w"); fputs("x", m); fclose(m);\n'
        '  unlink("main"); FILE *b = fopen("main", "w"); fputs("#!/bin/sh\\necho tampered\\n", b); fclose(b);\n'
        '  chmod("main", 0755); puts("5"); }\n'
    ).replace("#include <unistd.h>", "#include <unistd.h>\n#include <sys/stat.h>")
    result = run(solo, tamper, ONE * 3)
    assert verdicts(result) == [TestVerdict.PASSED] * 3, result


COMPILE_BOMBS = {
    "dev-zero": '#include "/dev/zero"\nint main() {}\n',
    "dev-random": '#include "/dev/random"\nint main() {}\n',
    "deep-templates": (
        "template <int N> struct F { enum { v = F<N - 1>::v + F<N - 2>::v }; };\n"
        "template <> struct F<0> { enum { v = 0 }; };\ntemplate <> struct F<1> { enum { v = 1 }; };\n"
        "int main() { return F<100000>::v; }\n"
    ),
    "huge-constant-array": "int a[1 << 28] = {1, 2, 3};\nint main() { return a[5]; }\n",
}


@pytest.mark.parametrize("bomb", COMPILE_BOMBS)
def test_a_compile_bomb_is_a_compile_error_and_the_next_program_runs(solo: LiveExecutor, bomb: str) -> None:
    result = run(solo, COMPILE_BOMBS[bomb])
    assert (result.verdict, result.score) == (RunVerdict.COMPILE_ERROR, 0.0), result
    assert result.detail
    assert run(solo, SUM, TESTS).score == 1.0


def test_a_source_is_compiled_once_for_many_runs(local_executor: LiveExecutor) -> None:
    source = SUM.replace("int main", "int unused_1;\nint main")  # a source no other test compiled
    before = local_executor.status()["binaries"]
    results = local_executor.run_all([Submission(source, TESTS, language="cpp")] * 6)
    assert [r.score for r in results] == [1.0] * 6
    after = local_executor.status()["binaries"]
    assert after["misses"] - before["misses"] == 1 and after["hits"] - before["hits"] == 5
    assert local_executor.status()["cpp"] is True


def test_a_cpp_program_takes_stdio_tests_only_and_an_unknown_language_is_refused(local_executor: LiveExecutor) -> None:
    from sandbox import CallTest

    result = local_executor.call(local_executor.executor.run(Submission(SUM, (CallTest("f"),), language="cpp")))
    assert (result.verdict, result.score) == (RunVerdict.INVALID_TEST, None)
    result = local_executor.call(local_executor.executor.run(Submission(SUM, ONE, language="rust")))
    assert (result.verdict, result.score) == (RunVerdict.INVALID_TEST, None)


def test_a_sandbox_without_a_compiler_cannot_judge_never_0() -> None:
    result, keep = built({"no_compiler": True, "status": "ok"}, Limits())
    assert (getattr(result, "verdict", None), getattr(result, "score", 0), keep) == (
        RunVerdict.SANDBOX_UNAVAILABLE, None, False
    )  # fmt: skip
    assert built({"status": "ok", "binary_b64": "AAAA"}, Limits()) == ("AAAA", True)
    timed_out, keep = built({"status": "timeout"}, Limits(wall_s=30))  # the runner stopped answering: no measure
    assert getattr(timed_out, "verdict", None) == RunVerdict.SANDBOX_UNAVAILABLE and not keep


# A compile past its 30 s wall clock, as S measures it (tree_cpu_s: CPU time, tree_wait_s: time waiting for a CPU).
WALL_OVERRUNS = {
    "starved on a loaded host": ({"tree_cpu_s": 2.6, "tree_wait_s": 27.1}, RunVerdict.SANDBOX_UNAVAILABLE),
    "a compile bomb": ({"tree_cpu_s": 29.8, "tree_wait_s": 0.2}, RunVerdict.COMPILE_ERROR),
    "a bomb on a loaded host": ({"tree_cpu_s": 16.0, "tree_wait_s": 14.0}, RunVerdict.COMPILE_ERROR),
    "blocked on its own pipe": ({"tree_cpu_s": 0.1, "tree_wait_s": 0.0}, RunVerdict.COMPILE_ERROR),
    "stopped": ({"tree_cpu_s": 0.3, "tree_wait_s": 1.0}, RunVerdict.COMPILE_ERROR),
}


@pytest.mark.parametrize("overrun", WALL_OVERRUNS)
def test_a_compile_past_its_wall_clock_starved_of_cpu_is_null_and_a_bomb_is_a_compile_error(overrun: str) -> None:
    """Less than half the wall limit on CPU and at least half waiting for a CPU: the machine's fault (null). CPU
    burnt, or the compiler asleep (a source can block it: `#include "/proc/self/fd/1"`), is the source's. Never
    cached either way."""
    measured, verdict = WALL_OVERRUNS[overrun]
    result, keep = built({"status": "timeout", **measured}, Limits(wall_s=30))
    assert (getattr(result, "verdict", None), keep) == (verdict, False), result
    assert getattr(result, "score", None) == (None if verdict == RunVerdict.SANDBOX_UNAVAILABLE else 0.0)
    assert "30 s wall-clock" in (getattr(result, "detail", None) or "")


KILLED = "g++: fatal error: Killed signal terminated program cc1plus\ncompilation terminated.\n"  # as g++ 12 says
NO_FORK = (
    "g++: fatal error: cannot execute 'cc1plus': vfork: Resource temporarily unavailable\ncompilation terminated.\n"
)
OVERRAN = {
    "cpu": "g++: fatal error: CPU time limit exceeded signal terminated program cc1plus\ncompilation terminated.\n",
    "memory": "virtual memory exhausted: Cannot allocate memory\n",
    "file size": "g++: fatal error: File size limit exceeded signal terminated program as\ncompilation terminated.\n",
}


@pytest.mark.parametrize(
    "facts",
    [
        {"status": "ok", "diagnostics": KILLED, "compiler_status": 1},
        {"status": "ok", "diagnostics": NO_FORK, "compiler_status": 1},
        {"status": "ok", "diagnostics": "the compiler did not start: [Errno 11] EAGAIN", "compiler_status": -1},
        {"status": "ok", "diagnostics": "main.cpp:1:1: error: x\n", "compiler_status": 1, "oom_killed": True},
    ],
    ids=["oom-killed cc1plus", "failed fork", "did not start", "oom killer"],
)
def test_a_compiler_the_sandbox_could_not_run_is_null_and_not_cached(facts: dict[str, object]) -> None:
    result, keep = built(facts, Limits())
    assert (getattr(result, "verdict", None), getattr(result, "score", 0), keep) == (
        RunVerdict.SANDBOX_UNAVAILABLE, None, False
    ), result  # fmt: skip

    async def twice() -> list[object]:  # the next identical source compiles again, and gets its own answer
        cache, answers = BinaryCache(1 << 20), iter([(result, keep), ("AAAA", True)])

        async def build() -> tuple[object, bool]:
            return next(answers)

        return [await cache.get("k", build), await cache.get("k", build)]  # type: ignore[arg-type]

    assert asyncio.run(twice()) == [result, "AAAA"]


@pytest.mark.parametrize("limit", OVERRAN)
def test_a_compiler_past_its_own_limits_is_a_compile_error_not_cached(limit: str) -> None:
    result, keep = built({"status": "ok", "diagnostics": OVERRAN[limit], "compiler_status": 1}, Limits())
    assert (getattr(result, "verdict", None), getattr(result, "score", None), keep) == (
        RunVerdict.COMPILE_ERROR, 0.0, False
    ), result  # fmt: skip


def test_a_source_cannot_forge_the_drivers_words_into_a_null() -> None:
    """static_assert's message may hold raw newlines, but the source's diagnostic has a line of its own first."""
    forged = "main.cpp:1:15: error: static assertion failed: x\n" + KILLED
    result, keep = built({"status": "ok", "diagnostics": forged, "compiler_status": 1}, Limits())
    assert getattr(result, "verdict", None) == RunVerdict.COMPILE_ERROR and not keep, result
    plain = "main.cpp:1:14: error: 'undefined' was not declared in this scope\n"
    assert built({"status": "ok", "diagnostics": plain, "compiler_status": 1}, Limits())[1] is True


def test_the_binary_cache_is_bounded_and_builds_each_key_once() -> None:
    calls: list[str] = []

    async def main() -> list[object]:
        cache = BinaryCache(max_bytes=100)

        def build(value: str):
            async def go() -> tuple[str, bool]:
                calls.append(value)
                await asyncio.sleep(0.01)
                return value, True

            return go

        same = await asyncio.gather(*(cache.get("k", build("x" * 60)) for _ in range(5)))
        await cache.get("k2", build("y" * 60))  # 120 bytes: "k" goes
        again = await cache.get("k", build("z" * 10))
        return [same, again, cache.status()]

    same, again, status = asyncio.run(main())
    assert same == ["x" * 60] * 5 and again == "z" * 10
    assert calls == ["x" * 60, "y" * 60, "z" * 10] and status["bytes"] <= 100  # type: ignore[index]
    assert binary_key("a", ("-O2",)) != binary_key("a", ("-O0",)) != binary_key("b", ("-O0",))


# ---------------------------------------------------------------- checkers (testlib's convention)

# "Print two non-negative integers that sum to n": many right answers, so only a checker can judge.
PY_CHECKER = """
import sys
n = int(open(sys.argv[1]).read())
tokens = open(sys.argv[2]).read().split()
answer = open(sys.argv[3]).read()  # the reference's pair: any pair will do
if len(tokens) != 2:
    sys.exit(2)  # presentation error
a, b = map(int, tokens)
sys.exit(0 if a >= 0 and b >= 0 and a + b == n else 1)
"""
CPP_CHECKER = """
#include "pairs.h"
#include <fstream>
int main(int argc, char **argv) {
  if (argc != 4) return 3;
  std::ifstream in(argv[1]), out(argv[2]), ans(argv[3]);
  long long n, a, b;
  in >> n;
  if (!(out >> a >> b)) return 2;
  return valid_pair(n, a, b) ? 0 : 1;
}
"""
PAIRS_H = "inline bool valid_pair(long long n, long long a, long long b) { return a >= 0 && b >= 0 && a + b == n; }\n"
PAIR_TESTS = (StdioTest("10\n", "5 5\n"), StdioTest("7\n", "3 4\n"), StdioTest("0\n", "0 0\n"))
PAIRS = {  # program -> per-test verdicts, under either checker
    '#include <cstdio>\nint main() { long long n; scanf("%lld", &n); printf("%lld 0\\n", n); }\n': ["passed"] * 3,
    '#include <cstdio>\nint main() { long long n; scanf("%lld", &n); printf("%lld 1\\n", n); }\n': ["wrong_answer"] * 3,
    '#include <cstdio>\nint main() { long long n; scanf("%lld", &n); printf("%lld\\n", n); }\n': ["wrong_answer"] * 3,
    "#include <cstdlib>\nint main() { abort(); }\n": ["runtime_error"] * 3,
}
CHECKERS = {
    "python": Checker(PY_CHECKER),
    "cpp": Checker(CPP_CHECKER, "cpp", (("pairs.h", PAIRS_H),)),
}


def checked(executor: LiveExecutor, program: str, checker: Checker, language: str = "cpp", **limits: object):
    submission = Submission(program, PAIR_TESTS, Limits(**limits), language=language, checker=checker)  # type: ignore[arg-type]
    return executor.call(executor.executor.run(submission))


@pytest.mark.parametrize("checker", CHECKERS)
def test_a_checker_judges_outputs_with_many_right_answers(executor: LiveExecutor, checker: str) -> None:
    for program, expected in PAIRS.items():
        result = checked(executor, program, CHECKERS[checker])
        assert [v.value for v in verdicts(result)] == expected, (program, result)
    wrong = checked(executor, list(PAIRS)[1], CHECKERS[checker])
    assert wrong.tests[0].detail == "the checker rejected the output"
    short = checked(executor, list(PAIRS)[2], CHECKERS[checker])
    assert short.tests[0].detail == "presentation error (the checker's verdict)"
    python = checked(executor, "n = int(input())\nprint(0, n)\n", CHECKERS[checker], language="python")
    assert python.score == 1.0, python


CHECKER_FAILURES = {
    "exits 3": "import sys\nsys.exit(3)\n",
    "raises": "raise ValueError('bad checker')\n",
    "crashes": Checker("int main() { volatile int *p = nullptr; return *p; }\n", "cpp"),
    "does not compile": Checker("int main() { return undefined; }\n", "cpp"),
    "loops": "while True:\n    pass\n",
}


@pytest.mark.parametrize("failure", CHECKER_FAILURES)
def test_a_checker_that_fails_cannot_judge_never_0(executor: LiveExecutor, failure: str) -> None:
    checker = CHECKER_FAILURES[failure]
    checker = checker if isinstance(checker, Checker) else Checker(str(checker))
    right = next(iter(PAIRS))
    result = checked(executor, right, checker)
    assert (result.verdict, result.score) == (RunVerdict.INVALID_TEST, None), result
    assert "checker" in (result.detail or "")
    assert checked(executor, right, CHECKERS["python"]).score == 1.0


def test_a_program_cannot_write_into_the_checkers_files(solo: LiveExecutor) -> None:
    """It writes what would pass as files named like the checker's, where it can; the checker still judges its own."""
    forger = (
        "import os\nfor d in ('.', '/tmp', os.path.dirname(os.getcwd())):\n"
        "    for name in ('input', 'output', 'answer'):\n"
        "        try:\n            open(os.path.join(d, name), 'w').write('1 0\\n' if name != 'input' else '1\\n')\n"
        "        except OSError:\n            pass\nprint('999 999')\n"
    )
    result = checked(solo, forger, CHECKERS["python"], language="python")
    assert verdicts(result) == [TestVerdict.WRONG_ANSWER] * 3, result


def test_an_executor_whose_sandboxes_have_no_compiler_cannot_judge_cpp(request: pytest.FixtureRequest) -> None:
    """As a runner without g++ says in its hello (runner/native.py); Python still runs there."""
    from tests.sandbox.conftest import start_executor

    live = start_executor("local", request, pool_size=1)
    try:
        live.executor.cpp = False  # type: ignore[attr-defined]
        result = run(live, SUM)
        assert (result.verdict, result.score) == (RunVerdict.SANDBOX_UNAVAILABLE, None), result
        assert "no C++ compiler" in (result.detail or "")
        assert live.run("print(5)", StdioTest("", "5")).score == 1.0
    finally:
        live.close()


def test_every_compile_of_many_comes_back(local_executor: LiveExecutor) -> None:
    """The compiler's frame may be read after its exit notice: it must never be lost (a binary lost is a spurious
    compile error)."""
    sources = [f'#include <cstdio>\nint main() {{ puts("{i}"); }}\n' for i in range(12)]
    submissions = [Submission(s, (StdioTest("", str(i)),), language="cpp") for i, s in enumerate(sources)]
    results = local_executor.run_all(submissions)
    assert [(r.verdict, r.score) for r in results] == [(RunVerdict.OK, 1.0)] * 12, results


LARGE_OUTPUT = "n = int(input())\nprint(0, n)\nprint('x' * 1_000_000)\n"  # a right pair, then a megabyte
FIRST_LINE_CHECKER = """
import sys
n = int(open(sys.argv[1]).read())
a, b = map(int, open(sys.argv[2]).readline().split())
sys.exit(0 if a >= 0 and b >= 0 and a + b == n else 1)
"""


def test_a_checker_judges_each_output_as_it_comes_never_holding_them_all(
    solo: LiveExecutor, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Verdicts, not outputs: with a checker, the host holds one program output per sandbox at a time (here one),
    not every test's output until the checker's turn; per-test verdicts keep their order."""
    import sandbox.executor as executor_module

    alive, most = [0], [0]
    to_check, spec_of = executor_module.output_to_check, executor_module.checker_spec

    def counted_output(*args: object, **kwargs: object) -> object:
        result = to_check(*args, **kwargs)  # type: ignore[arg-type]
        if isinstance(result, bytes):
            alive[0] += 1
            most[0] = max(most[0], alive[0])
        return result

    def counted_spec(*args: object, **kwargs: object) -> object:
        alive[0] -= 1
        return spec_of(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(executor_module, "output_to_check", counted_output)
    monkeypatch.setattr(executor_module, "checker_spec", counted_spec)
    tests = tuple(StdioTest(f"{n}\n", f"{n} 0\n") for n in range(12))
    tests += (StdioTest("-1\n", "no pair\n"),)  # the checker rejects (0 + -1 with a negative part)
    submission = Submission(LARGE_OUTPUT, tests, checker=Checker(FIRST_LINE_CHECKER))
    result = solo.call(solo.executor.run(submission))
    assert verdicts(result) == [TestVerdict.PASSED] * 12 + [TestVerdict.WRONG_ANSWER], result
    assert most[0] == 1 and alive[0] == 0, most


def test_a_build_stops_when_every_caller_gave_up_and_not_before() -> None:
    """A caller that gives up (its batch deadline) leaves the build to the others; the last one stops it."""
    stopped: list[bool] = []

    async def main() -> tuple[object, dict[str, int]]:
        cache, started = BinaryCache(1 << 20), asyncio.Event()

        async def slow() -> tuple[str, bool]:
            started.set()
            try:
                await asyncio.sleep(3600)
            except asyncio.CancelledError:
                stopped.append(True)
                raise
            return "never", True

        async def quick() -> tuple[str, bool]:
            return "AAAA", True

        first, second = (asyncio.ensure_future(cache.get("k", slow)) for _ in range(2))
        await started.wait()
        first.cancel()
        await asyncio.gather(first, return_exceptions=True)
        for _ in range(3):
            await asyncio.sleep(0)
        assert not stopped and cache.status()["compiling"] == 1  # the other caller still waits for it
        second.cancel()
        await asyncio.gather(second, return_exceptions=True)
        for _ in range(3):
            await asyncio.sleep(0)
        return await cache.get("k", quick), cache.status()  # nothing cached: the next caller builds anew

    again, status = asyncio.run(main())
    assert stopped == [True] and again == "AAAA" and status["compiling"] == 0, status


def test_a_caller_after_the_last_one_gave_up_gets_a_build_of_its_own() -> None:
    """The last caller gives up: the build is cancelled, and one that asks for the same key before that cancellation
    has ended (the build still cleaning up) gets a fresh build, never the cancelled one's CancelledError (it was not
    cancelled itself: its item would have failed instead of being scored)."""

    async def main() -> object:
        cache, started = BinaryCache(1 << 20), asyncio.Event()

        async def slow() -> tuple[str, bool]:
            started.set()
            try:
                await asyncio.sleep(3600)
            except asyncio.CancelledError:
                await asyncio.sleep(0.05)  # cleaning up (as a build that stops its sandbox may): still pending
                raise
            return "never", True

        async def quick() -> tuple[str, bool]:
            return "AAAA", True

        first = asyncio.ensure_future(cache.get("k", slow))
        await started.wait()
        first.cancel()
        await asyncio.gather(first, return_exceptions=True)
        return await asyncio.wait_for(cache.get("k", quick), 5)

    assert asyncio.run(main()) == "AAAA"


# Ten constant evaluations, each up to GCC's default budget of 2**33 operations (about a minute here): the compiler
# runs for many minutes, on a few MB.
SLOW_COMPILE = (
    "constexpr long f(int k) { long s = 0; for (int i = 0; i < 200000; i++) for (int j = 0; j < 200000; j++)"
    " s += i ^ j ^ k; return s; }\n"
    + "".join(f"constexpr long v{k} = f({k});\n" for k in range(10))
    + "int main() { return (int)(v0 + v9); }\n"
)


@pytest.mark.timeout(180, func_only=True)
@pytest.mark.parametrize("backend", ["local", pytest.param("docker", marks=pytest.mark.docker)])
def test_a_compile_stops_when_its_caller_gives_up(request: pytest.FixtureRequest, backend: str) -> None:
    """A run cancelled mid-compile (its batch deadline passed) stops the compiler: its sandbox is replaced at once,
    long before the compile's own limits (here 10 minutes) would end it, and the next program runs."""
    from tests.sandbox.conftest import start_executor

    long_limits = Limits(wall_s=600, cpu_s=600, memory_mb=1024, max_processes=16, max_file_mb=16)
    live = start_executor(backend, request, pool_size=1, compile_limits=long_limits)
    executor = live.executor

    async def give_up() -> dict[str, object]:
        run = asyncio.ensure_future(executor.run(Submission(SLOW_COMPILE, ONE, language="cpp")))
        while executor.status()["binaries"]["compiling"] == 0:
            await asyncio.sleep(0.05)
        await asyncio.sleep(1)  # the compiler runs
        replaced = executor.status()["replaced"]
        run.cancel()
        await asyncio.gather(run, return_exceptions=True)
        for _ in range(1800):  # the sandbox goes (killing the compiler) and a fresh one comes up: a minute or more
            # for a Docker sandbox on a loaded host (load average 16: past 60 s once)
            status = executor.status()
            if status["binaries"]["compiling"] == 0 and status["replaced"] > replaced and status["idle"] == 1:
                break
            await asyncio.sleep(0.1)
        return executor.status()

    try:
        status = live.call(give_up())
        assert status["binaries"]["compiling"] == 0 and status["idle"] == 1, status  # type: ignore[index]
        assert run(live, SUM, TESTS).score == 1.0
    finally:
        live.close()


# Partial credit (CMS style): the checker echoes the program's output, which is the score to give (or "reject").
ECHO_PROGRAM = "import sys\nsys.stdout.write(sys.stdin.read())\n"
SCORE_CHECKER = """
import sys
line = open(sys.argv[2]).read()
if line.startswith("reject"):
    sys.exit(1)
sys.stdout.write(line)
"""


def scored(executor: LiveExecutor, *outputs: str, points: bool = True):
    tests = tuple(StdioTest(text, "the checker judges") for text in outputs)
    submission = Submission(ECHO_PROGRAM, tests, checker=Checker(SCORE_CHECKER, points=points))
    return executor.call(executor.executor.run(submission))


def test_a_checker_with_points_gives_partial_credit_and_the_item_scores_their_mean(executor: LiveExecutor) -> None:
    result = scored(executor, "1\n", "0.25\n", "0", "reject\n", "1.0 \nmore lines are the checker's own\n")
    assert verdicts(result) == [TestVerdict.PASSED] + [TestVerdict.WRONG_ANSWER] * 3 + [TestVerdict.PASSED], result
    assert [t.points for t in result.tests] == [1.0, 0.25, 0.0, None, 1.0]
    assert result.score == pytest.approx((1 + 0.25 + 0 + 0 + 1) / 5) and result.passed == 2
    assert "0.25" in (result.tests[1].detail or "")
    plain = scored(executor, "0.25\n", "junk\n", points=False)  # without points, exit 0 is a pass, whatever it says
    assert (plain.score, verdicts(plain)) == (1.0, [TestVerdict.PASSED] * 2)


@pytest.mark.parametrize("first_line", ["", "\n0.5", "half", "1.5", "-0.1", "nan", "inf", "0.5 0.5", "1e999"])
def test_a_checker_whose_score_is_missing_or_out_of_range_cannot_judge_never_0(
    local_executor: LiveExecutor, first_line: str
) -> None:
    result = scored(local_executor, "1\n", first_line)
    assert (result.verdict, result.score) == (RunVerdict.INVALID_TEST, None), result
    assert "checker" in (result.detail or "")
    assert not first_line.strip() or first_line.strip() not in (result.detail or "")  # never echoes what it printed


@pytest.mark.timeout(60, func_only=True)
def test_a_long_first_line_is_read_in_linear_time() -> None:
    """The score's pattern read a run of digits two ways (`\\d+\\.?\\d*`): a first line of 200,000 digits and a
    letter (a checker echoing the program's output, as SCORE_CHECKER does) backtracked for about 20 minutes, on the
    event loop (the judge runs there as each test's facts arrive)."""
    import base64

    from sandbox.compare import CannotJudge, checker_outcome

    line = ("1" * 200_000 + "x\n").encode()
    facts = {"status": "ok", "code": 0, "exited": True, "stdout_b64": base64.b64encode(line).decode()}
    with pytest.raises(CannotJudge, match="not a score"):
        checker_outcome(facts, points=True)
    good = {**facts, "stdout_b64": base64.b64encode(b"0.5\n").decode()}
    assert checker_outcome(good, points=True).points == 0.5


# ---------------------------------------------------------------- the precompiled bits/stdc++.h

PCH_PROGRAMS = {  # each compiled with and without the .gch: the same binary, the same output
    "bits first": "#include <bits/stdc++.h>\nusing namespace std;\nint main() { vector<int> v{3, 1, 2};"
    ' sort(v.begin(), v.end()); map<int, string> m{{1, "a"}}; cout << v[0] << m[1] << endl; }\n',
    "bits after another include": "#include <cstdio>\n#include <bits/stdc++.h>\nint main() {"
    ' std::set<int> s{2, 2, 1}; printf("%zu\\n", s.size()); }\n',  # too late for a .gch: the real header
    "a macro before it": "#define _GLIBCXX_DEBUG\n#include <bits/stdc++.h>\nint main() {"
    " std::vector<int> v(2); std::cout << v.at(1) + 5 << '\\n'; }\n",  # _GLIBCXX_DEBUG: the .gch does not fit
    "no bits": "#include <iostream>\nint main() { std::cout << 42 << std::endl; }\n",
}
PCH_OUTPUTS = {"bits first": "1a", "bits after another include": "2", "a macro before it": "5", "no bits": "42"}


def compile_facts(executor: LiveExecutor, source: str, flags: tuple[str, ...] = (), pch: bool = True) -> dict:
    """The facts of one compile job in the executor's sandbox: with CPP_FLAGS and `flags`, and the .gch or not."""
    from sandbox.api import CPP_FLAGS
    from sandbox.executor import _facts

    spec = {"kind": "compile", "flags": [*CPP_FLAGS, *flags], "files": {}, "pch": pch}
    live = executor.executor
    part = live._collect_part(source, (StdioTest("", ""),), [spec], [0], live.config.compile_limits, _facts)  # type: ignore[attr-defined]
    return executor.call(part)[0]


def pch_status(executor: LiveExecutor) -> bool | None:
    """/readyz's sandbox.cpp_pch, once the executor's check has run (the local one may build the .gch first)."""
    for _ in range(600):
        status = executor.status()
        if status["cpp_pch"] is not None:
            return status["cpp_pch"]
        executor.call(asyncio.sleep(0.2))
    return None


def test_the_sandbox_compiles_bits_stdcpp_with_the_precompiled_header(executor: LiveExecutor) -> None:
    """g++'s own trace (-H) names the .gch it read; -Winvalid-pch would say why it could not. Without the .gch, or
    with one built under other flags, this fails."""
    from sandbox.runner.native import PCH_DIR, PCH_PROBE, PCH_PROBE_FLAGS, pch_used

    diagnostics = compile_facts(executor, PCH_PROBE, PCH_PROBE_FLAGS)["diagnostics"]
    assert f"! {PCH_DIR}/bits/stdc++.h.gch" in diagnostics.splitlines(), diagnostics[:2000]
    assert "not used because" not in diagnostics and pch_used(diagnostics) is True
    assert pch_status(executor) is True
    without = compile_facts(executor, PCH_PROBE, PCH_PROBE_FLAGS, pch=False)["diagnostics"]
    assert pch_used(without) is None and "bits/stdc++.h" in without  # the real header, read in full


@pytest.mark.parametrize("name", PCH_PROGRAMS)
def test_a_program_compiles_to_the_same_binary_with_and_without_the_precompiled_header(
    executor: LiveExecutor, name: str
) -> None:
    with_pch, without = (compile_facts(executor, PCH_PROGRAMS[name], pch=pch) for pch in (True, False))
    assert with_pch.get("binary_b64") and with_pch["binary_b64"] == without.get("binary_b64"), (with_pch, without)
    result = run(executor, PCH_PROGRAMS[name], (StdioTest("", PCH_OUTPUTS[name]),))
    assert verdicts(result) == [TestVerdict.PASSED], result


def test_an_unusable_precompiled_header_costs_time_only(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The local backend's .gch is junk (another compiler's, a torn file): programs still compile and pass, and the
    status says the header is not used."""
    import shutil
    import tempfile
    from pathlib import Path

    from sandbox import pch
    from tests.sandbox.conftest import start_executor

    root = Path(tempfile.mkdtemp(prefix="cpp-pch-test-", dir="/var/tmp"))  # open to the sandbox uids, as pch wants
    root.chmod(0o755)
    request.addfinalizer(lambda: shutil.rmtree(root, ignore_errors=True))
    monkeypatch.setattr(pch, "cache_root", lambda: root)
    monkeypatch.setattr(pch, "SYSTEM_ROOT", root)  # never the host's own .gch
    directory = pch.local_dir()
    if directory is None:
        pytest.skip("no g++ on this host")
    assert pch.prepare(directory) is None
    (directory / "bits" / "stdc++.h.gch").write_bytes(b"not a precompiled header\n" * 100)
    live = start_executor("local", request, pool_size=1)
    try:
        assert pch_status(live) is False
        result = run(live, PCH_PROGRAMS["bits first"], (StdioTest("", "1a"),))
        assert verdicts(result) == [TestVerdict.PASSED], result
        diagnostics = compile_facts(live, "#include <bits/stdc++.h>\nint main() {}\n", ("-Winvalid-pch",))
        assert "binary_b64" in diagnostics  # compiled all the same (g++ warned, and read the real header)
    finally:
        live.close()


def test_pch_used_reads_gccs_trace() -> None:
    from sandbox.runner.native import pch_used

    assert pch_used("! /opt/sandbox/pch/bits/stdc++.h.gch\n main.cpp\nerror: x") is True
    assert pch_used("main.cpp:1: warning: /opt/sandbox/pch/bits/stdc++.h.gch: not used because `X' is defined") is False
    assert pch_used(". /usr/include/c++/12/bits/stdc++.h\n") is None
    assert pch_used("! /elsewhere/bits/stdc++.h.gch", "/opt/sandbox/pch") is None


def test_a_pch_directory_someone_else_owns_is_refused(request: pytest.FixtureRequest) -> None:
    """A planted .gch would be read by every later compile: the local backend makes its directory private again
    when the umask left it open, and takes none that another user owns."""
    import os
    import shutil
    import tempfile
    from pathlib import Path

    from sandbox import pch

    root = Path(tempfile.mkdtemp(prefix="cpp-pch-test-", dir="/var/tmp"))
    root.chmod(0o755)
    request.addfinalizer(lambda: shutil.rmtree(root, ignore_errors=True))
    directory = root / "pch" / "key"
    assert pch.prepare(directory) is None
    directory.chmod(0o777)
    assert pch.prepare(directory) is None and directory.stat().st_mode & 0o777 == 0o755
    if os.geteuid() == 0:  # only root can give it away
        os.chown(directory, 12345, 12345)
        assert "not a directory of this user's or root's" in (pch.prepare(directory) or "")


def test_a_hung_compiler_while_precompiling_the_header_gives_up(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Building the .gch (at install, or by a local executor as it starts) with a g++ that never returns held its
    thread forever; it gives up after PCH_BUILD_TIMEOUT_S with the reason."""
    from sandbox.runner import native

    hung = tmp_path / "g++"
    hung.write_text("#!/bin/sh\nexec sleep 60\n")
    hung.chmod(0o755)
    monkeypatch.setattr(native, "PCH_BUILD_TIMEOUT_S", 0.5)
    with pytest.raises(RuntimeError, match=r"precompiling bits/stdc\+\+\.h ran past 0\.5 s"):
        native.build_pch(str(tmp_path / "pch"), gxx=str(hung))


# ---------------------------------------------------------------- a compile past its wall clock, live

SHORT_COMPILE = Limits(wall_s=2, cpu_s=20, memory_mb=1024, max_processes=16, max_file_mb=16)


def _descendants(pid: int) -> list[int]:
    from sandbox.runner.procs import children_of

    found, stack = [], [pid]
    while stack:
        for child in children_of(stack.pop()):
            found.append(child)
            stack.append(child)
    return found


def _cmdline(pid: int) -> bytes:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read()
    except OSError:
        return b""


BOMB_TRIES = 3  # a loaded host may give a compile bomb under half a CPU for 2 s: its premise, tried again
HOGS = 12  # busy loops, each in a session (an autogroup) of its own, as each test's C is: the compile gets ~1/13


@pytest.mark.timeout(120, func_only=True)
def test_a_compile_starved_of_cpu_past_its_wall_clock_is_null_live(request: pytest.FixtureRequest) -> None:
    """A correct program's compile on a machine too loaded to run it: busy loops hold the sandbox's CPU (the
    sandbox's processes but S go to SCHED_IDLE, where the kernel groups no tasks by session), and a compile of about
    a second of CPU (bits/stdc++.h without its .gch) waits for a CPU past its 2 s wall clock. S measures it so, and
    the verdict is null. Local backend only (Docker's processes are not this test's to reschedule)."""
    import subprocess
    import sys

    from tests.sandbox.conftest import start_executor

    live = start_executor("local", request, pool_size=1, compile_limits=SHORT_COMPILE)
    hogs: list[subprocess.Popen[bytes]] = []
    try:
        (sandbox,) = live.executor.pool._up.values()  # type: ignore[attr-defined]
        tree = _descendants(sandbox.proc.pid)
        supervisor = next(p for p in tree if b"--serve" in _cmdline(p))
        cpu = min(os.sched_getaffinity(supervisor))
        try:
            for pid in _descendants(supervisor):  # Z: the compile's processes are its children's
                os.sched_setscheduler(pid, os.SCHED_IDLE, os.sched_param(0))
        except PermissionError:
            pytest.skip("this user cannot reschedule the sandbox's processes (it runs them as another uid)")
        busy = f"import os\nos.sched_setaffinity(0, {{{cpu}}})\nprint(flush=True)\nwhile True: pass\n"
        for _ in range(HOGS):
            hogs.append(subprocess.Popen([sys.executable, "-c", busy], stdout=subprocess.PIPE, start_new_session=True))
        for hog in hogs:
            assert hog.stdout is not None and hog.stdout.readline() == b"\n"  # it spins on the sandbox's CPU
            hog.stdout.close()
        source = "#include <bits/stdc++.h>\nint starved;\nint main() { std::cout << 5 << std::endl; }\n"
        facts = compile_facts(live, source, pch=False)
        said = {k: v for k, v in facts.items() if k != "binary_b64"}
        # the premise: the compile ran past its wall clock waiting for a CPU, with little CPU of its own
        assert facts.get("status") == "timeout", f"premise gone: the starved compile did not time out: {said}"
        assert facts["tree_wait_s"] >= 1 > facts["tree_cpu_s"], f"premise gone: not starved as measured: {said}"
        result, keep = built(facts, SHORT_COMPILE)
        assert (getattr(result, "verdict", None), getattr(result, "score", 0), keep) == (
            RunVerdict.SANDBOX_UNAVAILABLE, None, False
        ), result  # fmt: skip
    finally:
        for hog in hogs:
            hog.kill()
            hog.wait()
        live.close()


@pytest.mark.timeout(120, func_only=True)
@pytest.mark.parametrize("backend", ["local", pytest.param("docker", marks=pytest.mark.docker)])
def test_a_compile_bomb_past_its_wall_clock_is_still_a_compile_error_live(
    request: pytest.FixtureRequest, backend: str
) -> None:
    """SLOW_COMPILE burns CPU until its 2 s wall clock ends it: S measures its CPU, and the verdict is 0. Its
    premise (the host gives it half a CPU) is checked, three tries; where it does not hold, the test fails saying so."""
    from tests.sandbox.conftest import start_executor

    live = start_executor(backend, request, pool_size=1, compile_limits=SHORT_COMPILE)
    try:
        # the premise: the bomb got at least half a CPU (on a host too loaded for that it starves: null, rightly)
        for _ in range(BOMB_TRIES):
            facts = compile_facts(live, SLOW_COMPILE)
            assert facts.get("status") == "timeout", {k: v for k, v in facts.items() if k != "binary_b64"}
            if facts["tree_cpu_s"] >= SHORT_COMPILE.wall_s / 2:
                break
        else:
            pytest.fail(f"premise gone: the host gave the bomb under half a CPU {BOMB_TRIES} times (last: {facts})")
        result, keep = built(facts, SHORT_COMPILE)
        assert (getattr(result, "verdict", None), getattr(result, "score", None), keep) == (
            RunVerdict.COMPILE_ERROR, 0.0, False
        ), result  # fmt: skip
        assert "wall-clock" in (getattr(result, "detail", None) or "")
        assert run(live, SUM, TESTS).score == 1.0
    finally:
        live.close()


@pytest.mark.timeout(120, func_only=True)
@pytest.mark.parametrize("backend", ["local", pytest.param("docker", marks=pytest.mark.docker)])
def test_a_compiler_a_source_blocks_past_its_wall_clock_is_a_compile_error_not_null(
    request: pytest.FixtureRequest, backend: str
) -> None:
    """Under -pipe, cc1plus writes to a pipe that `as` reads: a source that includes /proc/self/fd/1 reads that pipe
    and sleeps until the wall clock ends it, at no CPU. Low CPU alone would call it starved (null, a way out of a
    0); it never waited for a CPU, so it is the source's: compile_error."""
    from tests.sandbox.conftest import start_executor

    live = start_executor(backend, request, pool_size=1, compile_limits=SHORT_COMPILE)
    try:
        facts = compile_facts(live, '#include "/proc/self/fd/1"\nint main() {}\n')
        said = {k: v for k, v in facts.items() if k != "binary_b64"}
        assert facts.get("status") == "timeout", f"premise gone: the include no longer blocks g++: {said}"
        assert facts["tree_cpu_s"] < 1 and facts["tree_wait_s"] < 1, said
        result, keep = built(facts, SHORT_COMPILE)
        assert (getattr(result, "verdict", None), getattr(result, "score", None), keep) == (
            RunVerdict.COMPILE_ERROR, 0.0, False
        ), result  # fmt: skip
    finally:
        live.close()


# A binary of megabytes (an initialized static array) that tries to change what it runs: its ELF header through
# /proc/self/exe, and the file's mode. Every test must still run the real binary.
BIG_BINARY = """
#include <cstdio>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
char big[6 << 20] = {1, 2, 3, 4, 5, 6, 7, 8};
int main() {
  int fd = open("/proc/self/exe", O_RDWR);
  if (fd >= 0) { pwrite(fd, "XXXX", 4, 0); fchmod(fd, 0); ftruncate(fd, 1); }
  long long n;
  if (scanf("%lld", &n) != 1) return 3;
  printf("%lld\\n", n + big[7] + MARK);
}
"""
EQUAL_TOKENS = (
    "import sys\nsys.exit(0 if open(sys.argv[2]).read().split() == open(sys.argv[3]).read().split() else 1)\n"
)


@pytest.mark.parametrize("with_checker", [False, True], ids=["plain", "checker"])
def test_a_big_binary_is_encoded_once_off_the_event_loop_and_each_test_runs_it_unchanged(
    executor: LiveExecutor, monkeypatch: pytest.MonkeyPatch, with_checker: bool
) -> None:
    """A binary of megabytes is made into its jobs' JSON once, in a worker thread (not once per job on the event
    loop that every request shares: with a checker, a job per test), no line of megabytes is encoded or decoded on
    the loop, and a sandbox whose last job had the binary is not sent it again; the sandbox still runs the real
    binary on every test, whatever the last test did to its copy."""
    import json
    import threading
    import types

    import sandbox.executor as executor_module

    encoded: list[str] = []  # the thread of each as_json
    big_on_loop: list[str] = []  # a JSON encode or decode of megabytes on the event loop thread
    as_json = getattr(executor_module, "as_json", None)

    def counted_as_json(binary: str) -> bytes:
        encoded.append(threading.current_thread().name)
        return as_json(binary)  # type: ignore[misc]

    def on_loop(name: str, size: int) -> None:
        if size > 1 << 20 and threading.current_thread() is executor._thread:
            big_on_loop.append(name)

    def dumps(obj: object, **kwargs: object) -> str:
        text = json.dumps(obj, **kwargs)  # type: ignore[arg-type]
        on_loop("dumps", len(text))
        return text

    def loads(text: str | bytes, **kwargs: object) -> object:
        on_loop("loads", len(text))
        return json.loads(text, **kwargs)  # type: ignore[arg-type]

    jobs, sent = [0], [0]  # the binary's jobs, and those that sent it (not "the same as your last job's")
    run_job = executor_module.run_job

    async def counted_run_job(*args: object, **kwargs: object) -> object:
        if isinstance(args[2], bytes):
            jobs[0] += 1
            sent[0] += not (args[6:] or (kwargs.get("same_program"),))[0]
        return await run_job(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(executor_module, "run_job", counted_run_job)
    monkeypatch.setattr(executor_module, "as_json", counted_as_json, raising=False)
    monkeypatch.setattr(executor_module, "json", types.SimpleNamespace(dumps=dumps, loads=loads))
    mark = 100 + with_checker + (10 if executor.name == "docker" else 0)  # a source no other test compiled
    source = BIG_BINARY.replace("MARK", str(mark))
    tests = tuple(StdioTest(f"{n}\n", f"{n + 8 + mark}\n") for n in range(8))
    checker = Checker(EQUAL_TOKENS) if with_checker else None
    result = executor.call(executor.executor.run(Submission(source, tests, language="cpp", checker=checker)))
    assert verdicts(result) == [TestVerdict.PASSED] * len(tests), result
    assert not big_on_loop, big_on_loop
    assert len(encoded) == 1 and encoded[0] != executor._thread.name, encoded
    if with_checker:  # a job per test; the binary goes to each sandbox once (here 2), and its runner keeps it
        assert jobs[0] >= len(tests) and sent[0] <= 2, (jobs, sent)


def test_the_supervisor_decodes_a_binary_once_and_refuses_one_that_is_not_base64() -> None:
    """S decodes the binary of a job once, for all its tests and the next jobs that name the same one."""
    import base64
    import types

    from sandbox.runner.procs import Broken
    from sandbox.runner.supervisor import Supervisor

    s = types.SimpleNamespace(decoded=None)
    one, other = base64.b64encode(b"\x7fELF one").decode(), base64.b64encode(b"\x7fELF other").decode()
    first = Supervisor.binary(s, one)  # type: ignore[arg-type]
    assert first == b"\x7fELF one" and Supervisor.binary(s, "" + one) is first  # type: ignore[arg-type]
    assert Supervisor.binary(s, other) == b"\x7fELF other"  # type: ignore[arg-type]
    with pytest.raises(Broken, match="not base64"):
        Supervisor.binary(s, "not base64!")  # type: ignore[arg-type]
    assert s.decoded is None
