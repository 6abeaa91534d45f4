"""scoring/forked.py with real forks of this test process: the call's text comes back and nothing it does to its
memory; a child past its time is killed and reaped, one that dies says how; it cannot write on this process's
descriptors; an oversized result is none."""

from __future__ import annotations

import contextlib
import os
import signal
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
