"""Isolation: no network, no view of the host or its secrets, a fresh scratch directory, and after each run nothing
it started is alive and nothing it wrote is visible to the next run. A program that kills its parent, its process
group or everything it can reach costs itself the test, never the service.

Probes report what a program could see or do; the runs that must land in the same sandbox use `solo` (one sandbox).
"""

from __future__ import annotations

import socket
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from sandbox import AssertTest, CallTest, Limits, RunVerdict, StdioTest, Submission, TestVerdict
from sandbox.local import real_uid
from tests.sandbox.conftest import BACKENDS, start_executor
from tests.sandbox.live import LiveExecutor

pytestmark = pytest.mark.timeout(60, func_only=True)
ROOT = Path(__file__).resolve().parents[2]
HONEST = ("def f(x):\n    return 2 * x\n", CallTest("f", (21,), expected=42))


@pytest.fixture
def listener() -> Iterator[int]:
    """A TCP server on the host's loopback: a sandbox must not reach it."""
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        yield server.getsockname()[1]


NETWORK = """
import socket
def probe(port):
    out = {}
    for name, address in (("internet", ("1.1.1.1", 53)), ("host", ("127.0.0.1", port))):
        with socket.socket() as s:
            s.settimeout(2)
            try:
                s.connect(address)
                out[name] = "connected"
            except OSError:
                out[name] = "unreachable"
    try:
        socket.getaddrinfo("example.com", 80)
        out["dns"] = "resolved"
    except OSError:
        out["dns"] = "failed"
    out["interfaces"] = sorted(name for _, name in socket.if_nameindex())
    return out
"""


def test_there_is_no_network(executor: LiveExecutor, listener: int) -> None:
    seen = executor.probe(NETWORK, listener)
    assert seen == {"internet": "unreachable", "host": "unreachable", "dns": "failed", "interfaces": ["lo"]}


HOST_VIEW = """
import os
def readable(path):
    try:
        if os.path.isdir(path):
            return bool(os.listdir(path))
        with open(path, "rb") as f:
            return bool(f.read(1))
    except OSError:
        return False
def writable(path):
    try:
        with open(os.path.join(path, ".probe"), "w"):
            return True
    except OSError:
        return False
def probe(secrets, system):
    return {"readable": [p for p in secrets if readable(p)], "writable": [p for p in system if writable(p)],
            "processes": sorted(int(p) for p in os.listdir("/proc") if p.isdigit())[:10]}
"""


def test_the_host_and_its_secrets_are_out_of_sight(executor: LiveExecutor) -> None:
    secrets = [str(ROOT), str(ROOT / "pyproject.toml"), sys.prefix, "/root", "/home", "/etc/shadow", "/work",
               "/var/run/docker.sock", "/run/docker.sock", "/proc/1/environ", "/proc/1/mem", "/proc/1/fd"]  # fmt: skip
    system = ["/", "/usr", "/etc", "/opt/sandbox", "/usr/local/lib", "/var/tmp", "/dev", "/proc/1"]
    seen = executor.probe(HOST_VIEW, secrets, system)
    assert seen["readable"] == [] and seen["writable"] == [], seen
    assert len(seen["processes"]) == 3, seen  # the runner, its zygote and the probe itself: no host processes


@pytest.mark.parametrize("backend", BACKENDS)
def test_the_environment_is_scrubbed(
    backend: str, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> None:
    canary = "canary-7f3a9c-do-not-leak"
    monkeypatch.setenv("VERIFIER_API_KEY", canary)  # the service's own secrets, set before the executor starts
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", canary)
    program = (
        "import os\ndef probe(canary):\n    found = []\n"
        "    for pid in (p for p in os.listdir('/proc') if p.isdigit()):\n"
        "        for part in ('environ', 'cmdline'):\n            try:\n"
        "                with open(f'/proc/{pid}/{part}', 'rb') as f:\n"
        "                    if canary.encode() in f.read():\n                        found.append(f'{pid}/{part}')\n"
        "            except OSError:\n                pass\n    return [sorted(os.environ), found]\n"
    )
    live = start_executor(backend, request, pool_size=1)
    try:
        names, found = live.probe(program, canary)
    finally:
        live.close()
    assert set(names) <= {"PATH", "LANG", "HOME", "TMPDIR", "PYTHONDONTWRITEBYTECODE"}, names
    assert found == [], found


SCRATCH = """
import os
def probe():
    cwd = os.getcwd()
    fresh = os.listdir(".") == ["main.py"] and os.listdir("/tmp") == [os.path.basename(cwd)]
    with open("scratch-file", "w") as f:
        f.write("x" * 100)
    return [cwd.startswith("/tmp/"), fresh, os.environ["HOME"] == cwd, sorted(os.listdir("."))]
"""


def test_each_run_gets_a_fresh_writable_scratch_directory(solo: LiveExecutor) -> None:
    """Holding only the program, main.py, as a directory where one runs `python main.py`."""
    for _ in range(2):
        assert solo.probe(SCRATCH) == [True, True, True, ["main.py", "scratch-file"]]


LEAVE_TRACES = r"""
import ctypes, os, signal, threading, time
libc = ctypes.CDLL(None, use_errno=True)
def daemon():
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
            signal.signal(signal.SIGHUP, signal.SIG_IGN)
            while True:
                with open("/tmp/daemon-was-here", "a") as f:
                    f.write("x")
                time.sleep(0.01)
        os._exit(0)
def probe():
    made = []
    for path in ("traces-in-cwd", "/tmp/trace", "/dev/shm/trace"):
        try:
            with open(path, "w") as f:
                f.write("secret from the last run")
            made.append(path)
        except OSError:
            pass
    made.append(("shm", libc.shmget(0x5EC2E7, 4096, 0o1666)))   # IPC_CREAT | 0666
    made.append(("msg", libc.msgget(0x5EC2E7, 0o1666)))
    daemon()
    child = os.fork()
    if child == 0:
        os.setpgid(0, 0)
        time.sleep(3600)
    os.kill(child, signal.SIGSTOP)
    if os.fork() == 0:
        os._exit(0)                     # a zombie: never waited for
    threading.Thread(target=time.sleep, args=(3600,), daemon=True).start()
    time.sleep(0.1)
    return made
"""
FIND_TRACES = r"""
import os
def listing(path):
    try:
        return [os.path.join(path, name) for name in os.listdir(path)]
    except OSError:
        return []
def ipc(kind):
    try:
        with open(f"/proc/sysvipc/{kind}") as f:
            return f.read().splitlines()[1:]
    except OSError:
        return []
def probe():
    mine = os.path.join("/tmp", os.path.basename(os.getcwd()))
    files = [p for p in listing("/tmp") + listing("/dev/shm") + listing("/dev/mqueue") if p != mine]
    others = [p for p in os.listdir("/proc") if p.isdigit() and int(p) not in (1, os.getpid(), os.getppid())]
    return {"files": files, "ipc": ipc("shm") + ipc("msg") + ipc("sem"), "processes": others}
"""


def test_nothing_a_run_starts_or_writes_outlives_it(solo: LiveExecutor) -> None:
    replaced = solo.status()["replaced"]
    made = solo.probe(LEAVE_TRACES)
    assert made[:3] == ["traces-in-cwd", "/tmp/trace", "/dev/shm/trace"], made
    assert all(ident >= 0 for _, ident in made[3:]), made  # the IPC objects were created
    assert solo.probe(FIND_TRACES) == {"files": [], "ipc": [], "processes": []}
    assert solo.status()["replaced"] == replaced  # the same sandbox, cleaned, not a fresh one


def test_processes_forked_ahead_for_another_kind_of_test_leave_nothing(solo: LiveExecutor) -> None:
    """The runner forks each test's processes ahead, guessing the next test is of the last one's kind; when it is
    not, they go, scratch dir and all, before the test's own come."""
    clean = {"files": [], "ipc": [], "processes": []}
    kinds = [AssertTest("assert f(21) == 42"), StdioTest("", ""), AssertTest("assert f(1) == 2"), HONEST[1]]
    for test in kinds:
        assert solo.run(HONEST[0], test).score == 1.0
        assert solo.probe(FIND_TRACES) == clean  # a call test: the kind changes whenever the last was not
    assert solo.run(HONEST[0], *kinds).score == 1.0  # the kind changes inside one submission
    assert solo.probe(FIND_TRACES) == clean


# A directory chain too deep to remove within the runner's clean-up deadline (5 s): the clean-up fails after the
# answer has left the sandbox. The wipe takes a level a pass, about 20 us here: 250,000 levels took 4.9 s, so the
# chain has three times that (about 4 s to make).
TOO_DEEP_TO_WIPE = """
import os
def f(x):
    os.chdir("/dev/shm")
    for _ in range(750_000):
        os.mkdir("d")
        os.chdir("d")
    return 2 * x
"""


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.timeout(180, func_only=True)
def test_a_clean_up_that_fails_after_the_answer_costs_the_next_submission_nothing(
    request: pytest.FixtureRequest, backend: str
) -> None:
    """Both sandboxes break cleaning up; the next submission waits for fresh ones instead of being charged with
    their deaths (two deaths in a row would make it sandbox_unavailable)."""
    live = start_executor(backend, request, pool_size=2)
    try:
        replaced = live.status()["replaced"]
        hostile = [Submission(TOO_DEEP_TO_WIPE, (HONEST[1],), Limits(wall_s=30, cpu_s=30))] * 2
        assert [r.verdict for r in live.run_all(hostile)] == [RunVerdict.OK, RunVerdict.OK]
        honest = live.run(*HONEST)
        assert (honest.verdict, honest.score) == (RunVerdict.OK, 1.0), honest
        assert live.status()["replaced"] >= replaced + 2, (
            "the clean-ups did not fail: this machine wiped the chain within the runner's deadline; make it deeper"
        )
        deadline = time.monotonic() + 60  # both replacements up before closing: none is cut off half started
        while ((status := live.status())["up"] < 2 or status["starting"]) and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        live.close()


KILLERS = {
    "kill its parent": ("os.kill(os.getppid(), signal.SIGKILL)", TestVerdict.RUNTIME_ERROR),
    "kill its process group": ("os.killpg(0, signal.SIGKILL)", TestVerdict.RUNTIME_ERROR),
    "kill everything": ("os.kill(-1, signal.SIGKILL)", TestVerdict.RUNTIME_ERROR),
    "kill the runner's group": ("os.killpg(os.getpgid(1), signal.SIGKILL)", TestVerdict.RUNTIME_ERROR),
    "stop its parent": ("os.kill(os.getppid(), signal.SIGSTOP)", TestVerdict.RUNTIME_ERROR),
    "kill and stop PID 1": ("os.kill(1, signal.SIGKILL)\nos.kill(1, signal.SIGSTOP)", TestVerdict.WRONG_ANSWER),
}


@pytest.mark.parametrize("name", KILLERS)
def test_a_program_that_kills_its_surroundings_fails_and_the_service_goes_on(solo: LiveExecutor, name: str) -> None:
    kill, verdict = KILLERS[name]
    program = f"import os, signal\ndef f(x):\n    {kill.replace(chr(10), chr(10) + '    ')}\n    return x + 1\n"
    for _ in range(2):
        result = solo.run(program, HONEST[1])
        assert (result.score, [t.verdict for t in result.tests]) == (0.0, [verdict]), result
        assert solo.run(*HONEST).score == 1.0
    assert solo.status()["ready"]


def test_no_process_of_a_local_jail_runs_as_root_on_the_host(local_executor: LiveExecutor) -> None:
    """Docker containers run as their own user: test_docker checks that."""
    assert local_executor.run(*HONEST).score == 1.0  # the jails are up
    jails = [int(p.name) for p in Path("/proc").iterdir() if p.name.isdigit() and _program(p) == "bwrap"]
    inside = [pid for jail in jails for pid in _descendants(jail)]
    uids = {pid: real_uid(pid) for pid in jails + inside}
    alive = [uid for uid in uids.values() if uid is not None]  # the last test's processes may be exiting
    assert jails and inside and len(alive) >= len(jails) and 0 not in alive, uids


def _program(path: Path) -> str:
    try:
        return Path((path / "cmdline").read_bytes().split(b"\0")[0].decode()).name
    except OSError:
        return ""


def _descendants(pid: int) -> list[int]:
    try:
        children = [int(c) for c in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return []
    return children + [d for c in children for d in _descendants(c)]
