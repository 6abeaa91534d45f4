"""Limits: every runaway program ends in a bounded time with the verdict that names its limit; honest programs
that stay inside them pass, whatever their neighbours do. (`timeout` marks bound the latency; no timing asserts.)"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor

import pytest

from sandbox import AssertTest, CallTest, Limits, StdioTest, Submission, TestVerdict
from tests.sandbox.conftest import BACKENDS, start_executor
from tests.sandbox.live import LiveExecutor

pytestmark = pytest.mark.timeout(60, func_only=True)
HONEST = "def f(x):\n    return 2 * x\n"
FORMS = {"stdio": StdioTest("", "42"), "call": CallTest("f", (21,), expected=42), "assert": AssertTest("assert f(21)")}


def only(result: object) -> TestVerdict:
    tests = getattr(result, "tests", ())
    assert len(tests) == 1, result
    return tests[0].verdict  # type: ignore[no-any-return]


@pytest.mark.parametrize("form", FORMS)
def test_an_endless_loop_times_out_and_the_sandbox_serves_the_next_run(executor: LiveExecutor, form: str) -> None:
    result = executor.run("def f(x):\n    pass\nwhile True:\n    pass\n", FORMS[form], wall_s=1, cpu_s=30)
    assert (result.score, only(result)) == (0.0, TestVerdict.TIMEOUT), result
    assert "wall-clock" in (result.tests[0].detail or "")
    assert executor.run(HONEST, FORMS["call"]).score == 1.0


def test_sleeping_forever_times_out_on_the_wall_clock(executor: LiveExecutor) -> None:
    result = executor.run("import time\ndef f(x):\n    time.sleep(3600)\n", FORMS["call"], wall_s=1)
    assert only(result) == TestVerdict.TIMEOUT, result


def test_cpu_time_is_limited_apart_from_the_wall_clock(executor: LiveExecutor) -> None:
    spin = "import threading\ndef spin():\n    while True:\n        pass\n"
    program = spin + "for _ in range(3):\n    threading.Thread(target=spin, daemon=True).start()\nspin()\n"
    result = executor.run(program, FORMS["stdio"], wall_s=30, cpu_s=1)
    assert only(result) == TestVerdict.TIMEOUT, result
    assert "CPU" in (result.tests[0].detail or ""), result


@pytest.mark.parametrize("form", FORMS)
def test_a_memory_hog_gets_memory_limit(executor: LiveExecutor, form: str) -> None:
    program = "def f(x):\n    return len(bytearray(400 << 20))\nprint(f(0))\n"
    result = executor.run(program, FORMS[form], memory_mb=128)
    assert (result.score, only(result)) == (0.0, TestVerdict.MEMORY_LIMIT), result


# Each process stays under its RLIMIT_AS (400 MB); together they pass the container's memory limit (400 MB + the
# 64 MB scratch tmpfs + 256 MB), and the cgroup's OOM killer takes the largest, the program's main process. Its
# children still hold its channel, so no answer comes and the wall clock runs out; the verdict names the memory.
CGROUP_OOM = """
import os, time
def f(x):
    for _ in range(4):
        if os.fork() == 0:
            block = b"k" * (150 << 20)
            time.sleep(60)
    time.sleep(0.5)
    block = b"m" * (300 << 20)
    return 2 * x
"""


@pytest.mark.docker
def test_a_program_whose_processes_together_exhaust_the_containers_memory_gets_memory_limit(
    request: pytest.FixtureRequest,
) -> None:
    live = start_executor("docker", request, pool_size=1, scratch_mb=64, max_limits=Limits(memory_mb=400))
    try:
        result = live.run(CGROUP_OOM, FORMS["call"], memory_mb=400, wall_s=3)
        assert (result.score, only(result)) == (0.0, TestVerdict.MEMORY_LIMIT), result
        assert live.run(HONEST, FORMS["call"]).score == 1.0
    finally:
        live.close()


def test_a_program_inside_its_memory_limit_passes(executor: LiveExecutor) -> None:
    program = "def f(x):\n    data = bytearray(100 << 20)\n    return 2 * x + len(data) - (100 << 20)\n"
    assert executor.run(program, FORMS["call"], memory_mb=256).score == 1.0


@pytest.mark.parametrize("stream", ["stdout", "stderr"])
@pytest.mark.parametrize("form", FORMS)
def test_an_output_flood_stops_at_the_cap(executor: LiveExecutor, stream: str, form: str) -> None:
    program = f"import sys\ndef f(x):\n    while True:\n        sys.{stream}.write('x' * 4096)\nf(0)\n"
    result = executor.run(program, FORMS[form], max_output_bytes=1 << 16, wall_s=30)
    assert (result.score, only(result)) == (0.0, TestVerdict.OUTPUT_LIMIT), result


def test_a_correct_large_output_passes_with_stdout_and_stderr_drained_together(executor: LiveExecutor) -> None:
    numbers = range(200_000)  # about 1.3 MB of output, from 2 MB of input
    stdin = " ".join(str(n) for n in numbers) + " " + "x" * 700_000
    expected = "\n".join(str(2 * n) for n in numbers)
    program = (
        "import sys\nwords = sys.stdin.read().split()[:-1]\nsys.stderr.write('noise ' * 200_000)\n"
        "sys.stdout.write('\\n'.join(str(2 * int(w)) for w in words))\n"
    )
    result = executor.run(program, StdioTest(stdin, expected))
    assert len(expected) > 1_300_000 and result.score == 1.0, result


def test_writing_past_the_file_size_limit_fails(executor: LiveExecutor) -> None:
    program = "def f(x):\n    with open('big', 'wb') as out:\n        out.write(bytes(8 << 20))\n    return 42\n"
    result = executor.run(program, FORMS["call"], max_file_mb=1)
    assert only(result) == TestVerdict.RUNTIME_ERROR and "File too large" in (result.tests[0].detail or ""), result
    assert executor.run(program, FORMS["call"], max_file_mb=16).score == 1.0


def test_a_fork_bomb_is_contained(executor: LiveExecutor) -> None:
    program = "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass\n"
    result = executor.run(program, FORMS["stdio"], wall_s=2, max_processes=16)
    assert (result.score, only(result)) == (0.0, TestVerdict.TIMEOUT), result
    assert executor.run(HONEST, FORMS["call"]).score == 1.0


def test_threads_count_against_the_process_limit(executor: LiveExecutor) -> None:
    program = (
        "import threading, time\ndef f(n):\n    for _ in range(n):\n"
        "        threading.Thread(target=time.sleep, args=(5,), daemon=True).start()\n    return 2 * 21\n"
    )
    over = executor.run(program, CallTest("f", (64,), expected=42), max_processes=16)
    assert only(over) == TestVerdict.RUNTIME_ERROR and "thread" in (over.tests[0].detail or ""), over
    assert executor.run(program, CallTest("f", (8,), expected=42), max_processes=16).score == 1.0


UNREAPED_CHILDREN = """
import os
def f(x):
    for _ in range(50):
        if os.fork() == 0:
            os._exit(0)  # a zombie until its parent exits: the parent never waits for it
    return 2 * x
"""
THREAD_POOL = """
import threading
import os
from concurrent.futures import ThreadPoolExecutor
def f(x):
    everyone = threading.Barrier(64)  # all 64 threads alive at once
    with ThreadPoolExecutor(64) as pool:
        return sum(pool.map(lambda _: everyone.wait(timeout=20) * 0 + 1, range(64))) - 64 + 2 * x
"""


@pytest.mark.parametrize("program", [UNREAPED_CHILDREN, THREAD_POOL], ids=["50-unreaped-children", "64-threads"])
@pytest.mark.parametrize("form", FORMS)
def test_ordinary_parallel_code_fits_the_default_limits(executor: LiveExecutor, program: str, form: str) -> None:
    result = executor.run(program + "if __name__ == '__main__':\n    print(f(21))\n", FORMS[form], wall_s=30)
    assert (result.score, only(result)) == (1.0, TestVerdict.PASSED), result


ORPHANS = """
import os, time
def orphan():
    for _ in range(1000):  # a fork refused (EAGAIN) while the runner has not reaped the last orphans yet: again
        try:
            return os.fork()
        except BlockingIOError:
            time.sleep(0.01)
    raise BlockingIOError("orphans are never reaped")
def f(x):
    for _ in range(200):
        child = orphan()
        if child == 0:
            if orphan() == 0:
                os._exit(0)  # an orphan as soon as its parent exits: the runner's zygote (subreaper) reaps it
            os._exit(0)
        os.waitpid(child, 0)
    return 2 * x
"""


def test_orphans_are_reaped_as_they_come_and_cost_the_program_no_processes(executor: LiveExecutor) -> None:
    """200 orphans, never more than a few alive at once, under a limit of 16 processes."""
    result = executor.run(ORPHANS, FORMS["call"], max_processes=16, wall_s=30, cpu_s=30)
    assert (result.score, only(result)) == (1.0, TestVerdict.PASSED), result


THREADS = """
import threading
def f(n):
    done, started = threading.Event(), 0
    try:
        for _ in range(n):
            threading.Thread(target=done.wait).start()
            started += 1
    finally:
        done.set()
    return started
"""


@pytest.mark.parametrize("backend", BACKENDS)
def test_the_program_gets_exactly_max_processes_tasks(request: pytest.FixtureRequest, backend: str) -> None:
    """Its own process and 15 threads under max_processes=16, whatever the runner's own tasks of its uid (S and Z, and
    T in assert tests); a 16th thread is refused. (A uid of its own: tasks of other sandboxes, of either backend, that
    ran as the same uid must not count, even while they are still dying.)"""
    uid_base = (30_000 if backend == "local" else 34_000) + (os.getpid() % 1000) * 4
    live = start_executor(backend, request, pool_size=1, uid_base=uid_base)
    try:
        fits = [CallTest("f", (15,), expected=15), AssertTest("assert f(15) == 15")]
        assert live.run(THREADS, *fits, max_processes=16).score == 1.0
        over = live.run(THREADS, CallTest("f", (16,), expected=16), AssertTest("f(16)"), max_processes=16)
        assert [t.verdict for t in over.tests] == [TestVerdict.RUNTIME_ERROR] * 2, over
        assert all("thread" in (t.detail or "") for t in over.tests), over
    finally:
        live.close()


def test_time_spent_queueing_is_not_counted(executor: LiveExecutor) -> None:
    """Three times as many submissions as sandboxes, each close to its wall limit: none times out while waiting."""
    program = "import time\ndef f(x):\n    time.sleep(0.6)\n    return 2 * x\n"
    results = executor.run_all(Submission(program, (FORMS["call"],), Limits(wall_s=1.5)) for _ in range(6))
    assert [r.score for r in results] == [1.0] * 6, results


def test_cpu_hogs_cause_no_false_timeouts_for_honest_neighbours(executor: LiveExecutor) -> None:
    """A neighbour spinning 16 processes (each in its own session: its own scheduler autogroup) for its whole wall
    limit; honest programs needing 0.3 s of CPU still pass. Unconfined, the hog would take ~15/16 of every CPU."""
    hog = "import os\nfor _ in range(15):\n    if os.fork() == 0:\n        os.setsid()\n        break\n"
    hog += "while True:\n    pass\n"
    honest = (
        "import time\ndef f(x):\n    start = time.process_time()\n"
        "    while time.process_time() - start < 0.3:\n        pass\n    return 2 * x\n"
    )
    hogs = [Submission(hog, (StdioTest("", ""),), Limits(wall_s=6.0, cpu_s=60.0, max_processes=32))]
    honest_runs = [Submission(honest, (FORMS["call"],) * 3, Limits(wall_s=2.0)) for _ in range(2)]
    results = executor.run_all(hogs + honest_runs)
    assert only(results[0]) == TestVerdict.TIMEOUT
    assert [r.score for r in results[1:]] == [1.0, 1.0], results[1:]


def test_no_more_submissions_run_at_once_than_there_are_sandboxes(executor: LiveExecutor) -> None:
    program = "import time\ndef probe():\n    start = time.monotonic()\n    time.sleep(0.3)\n"
    program += "    return [start, time.monotonic()]\n"
    with ThreadPoolExecutor(6) as threads:
        intervals = list(threads.map(lambda _: executor.probe(program), range(6)))
    edges = sorted([(start, 1) for start, _ in intervals] + [(end, -1) for _, end in intervals])
    running = peak = 0
    for _, step in edges:
        running += step
        peak = max(peak, running)
    assert peak == executor.status()["pool_size"] == 2, intervals
