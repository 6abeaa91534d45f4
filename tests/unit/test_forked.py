"""scoring/forked.py with real forks of this test process: the call's text comes back and nothing it does to its
memory; a child past its time is killed and reaped, one that dies says how; it cannot write on this process's
descriptors, nor (the pool's workers being non-dumpable) its memory; an oversized result is none."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from verifier_service.scoring.forked import MAX_RESULT_BYTES, ChildDied, ChildOverrun, run_forked

SEEN: list[str] = []  # what a call changes in the child's memory


def remember() -> str:
    SEEN.append("the child was here")
    return f"{len(SEEN)} in the child"


def test_the_call_s_text_comes_back_and_its_memory_stays_in_the_child() -> None:
    assert run_forked(remember, 5.0) == "1 in the child"
    assert run_forked(remember, 5.0) == "1 in the child"
    assert SEEN == []


def test_a_child_past_its_time_is_killed_and_reaped(tmp_path: Path) -> None:
    pid_file = tmp_path / "pid"

    def hang() -> str:
        pid_file.write_text(str(os.getpid()))
        while True:  # a scorer that swallows everything: only a kill ends it
            with contextlib.suppress(BaseException):
                time.sleep(0.01)

    with pytest.raises(ChildOverrun, match=r"no result within 1s"):
        run_forked(hang, 1.0)
    assert not Path(f"/proc/{pid_file.read_text()}").exists()


def exits() -> str:
    os._exit(3)


def kills_itself() -> str:
    os.kill(os.getpid(), signal.SIGKILL)
    return "never"


def raises() -> str:
    raise ValueError("a bug in the call")


@pytest.mark.parametrize(
    ("call", "how"), [(exits, "exit status 3"), (kills_itself, "killed by SIGKILL"), (raises, "its call raised")]
)
def test_a_child_that_ends_without_a_result_says_how(call: object, how: str) -> None:
    with pytest.raises(ChildDied) as died:
        run_forked(call, 5.0)  # type: ignore[arg-type]
    assert str(died.value) == how


def test_the_child_cannot_write_on_this_process_s_descriptors() -> None:
    read_fd, write_fd = os.pipe()
    os.set_blocking(read_fd, False)

    def write() -> str:
        try:
            os.write(write_fd, b"forged")
        except OSError as error:
            return error.strerror or "refused"
        return "written"

    try:
        assert run_forked(write, 5.0) == "Bad file descriptor"
        with pytest.raises(BlockingIOError):
            os.read(read_fd, 100)
    finally:
        os.close(read_fd)
        os.close(write_fd)


def test_a_result_over_the_bound_is_none() -> None:
    with pytest.raises(ChildDied, match=f"more than {MAX_RESULT_BYTES} bytes"):
        run_forked(lambda: "x" * MAX_RESULT_BYTES, 5.0)
    assert run_forked(lambda: "x" * (MAX_RESULT_BYTES - 1), 5.0) == "x" * (MAX_RESULT_BYTES - 1)


@pytest.mark.parametrize("dumpable", [False, True])
def test_a_fork_cannot_rewrite_its_worker_s_memory(dumpable: bool) -> None:
    """The fork is the worker's user and knows every address in it: through /proc/<worker>/mem it could rewrite the
    worker (the guard, math's verify), but the pool's workers are not dumpable, so that takes CAP_SYS_PTRACE. As
    root the test drops that capability first (the image's user has none); the dumpable case shows the write is
    otherwise possible here."""
    if os.geteuid() == 0 and shutil.which("setpriv") is None:
        pytest.skip("running as root without setpriv (util-linux): CAP_SYS_PTRACE cannot be dropped")
    drop = ["setpriv", "--bounding-set=-sys_ptrace"] if os.geteuid() == 0 else []
    script = Path(__file__).with_name("fork_writes_parent.py")
    command = [*drop, sys.executable, str(script), *(["--dumpable"] if dumpable else [])]
    root = Path(__file__).resolve().parents[2]
    done = subprocess.run(
        command, capture_output=True, text=True, timeout=60, env={**os.environ, "PYTHONPATH": str(root)}
    )
    assert done.returncode == 0, done.stderr
    if not dumpable:
        assert done.stdout.split() == ["PermissionError", "guard=on"]
        return
    yama = Path("/proc/sys/kernel/yama/ptrace_scope")
    if done.stdout.split()[0] != "wrote" and yama.exists() and yama.read_text().strip() != "0":
        pytest.skip("this kernel's Yama forbids a child to write its parent's memory in any case")
    assert done.stdout.split() == ["wrote", "guard=off"]
