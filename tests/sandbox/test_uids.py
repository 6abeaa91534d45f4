"""Each executor holds a range of sandbox uids of its own: a range another executor holds (in this process or
another), or that a process runs as, is skipped for the next block; none free is a clear error."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from sandbox.uids import BLOCK, UidsInUse, claim

# Far above the ranges the rest of the suite uses, and apart per test process.
BASE = 1_500_000_000 + (os.getpid() % 1000) * 64 * BLOCK


def test_a_range_another_executor_holds_is_skipped_and_free_again_once_released(tmp_path: Path) -> None:
    lock = tmp_path / "uids.lock"
    first = claim(BASE, 4, lock_path=lock)
    second = claim(BASE, 4, lock_path=lock)  # another executor of this process: its own lock, its own range
    overlapping = claim(BASE + 2, 4, lock_path=lock)  # overlaps the first's range, then the second's
    try:
        assert [first.first, second.first, overlapping.first] == [BASE, BASE + BLOCK, BASE + 2 + 2 * BLOCK]
        assert [str(first), first.uid(3)] == [f"{BASE}-{BASE + 3}", BASE + 3]
        first.release()
        again = claim(BASE, 4, lock_path=lock)
        assert again.first == BASE
        again.release()
    finally:
        for held in (first, second, overlapping):
            held.release()


HOLD = """
import sys, time
from pathlib import Path
from sandbox.uids import claim
held = claim(int(sys.argv[1]), 2, lock_path=Path(sys.argv[2]))
print(held, flush=True)
time.sleep(60)
"""


def test_a_range_another_process_holds_is_skipped_until_that_process_is_gone(tmp_path: Path) -> None:
    lock = tmp_path / "uids.lock"
    holder = [sys.executable, "-c", HOLD, str(BASE), str(lock)]
    with subprocess.Popen(holder, stdout=subprocess.PIPE, text=True) as other:
        try:
            assert other.stdout is not None and other.stdout.readline().strip() == f"{BASE}-{BASE + 1}"
            moved = claim(BASE, 2, lock_path=lock)
            assert moved.first == BASE + BLOCK
            moved.release()
        finally:
            other.kill()
    back = claim(BASE, 2, lock_path=lock)  # its lock went with it
    assert back.first == BASE
    back.release()


@pytest.mark.skipif(os.geteuid() != 0, reason="only root can start a process as another uid")
def test_a_range_a_process_runs_as_is_skipped(tmp_path: Path) -> None:
    """No lock says so (a service of an older version, one whose /tmp is not ours): a process running as a uid."""
    squatter = subprocess.Popen(["sleep", "60"], user=BASE + 1, group=BASE + 1, extra_groups=[])
    try:
        deadline = time.monotonic() + 10
        while Path(f"/proc/{squatter.pid}/status").read_text().find(f"Uid:\t{BASE + 1}") < 0:
            assert time.monotonic() < deadline, "the squatter never ran as its uid"
            time.sleep(0.01)
        held = claim(BASE, 4, lock_path=tmp_path / "uids.lock")
        assert held.first == BASE + BLOCK
        held.release()
    finally:
        squatter.kill()
        squatter.wait()


def test_no_free_range_is_a_clear_error(tmp_path: Path) -> None:
    lock = tmp_path / "uids.lock"
    held = claim(BASE, 2, lock_path=lock)
    try:
        with pytest.raises(UidsInUse) as refused:
            claim(BASE, 2, lock_path=lock, tries=1)
        message = str(refused.value)
        assert f"no free range of 2 sandbox uids from {BASE}" in message and "another verifier" in message
        assert "VERIFIER_SANDBOX__UID_BASE" in message
    finally:
        held.release()


def test_a_backend_that_sees_a_uid_in_use_moves_the_range(tmp_path: Path) -> None:
    seen = {BASE + 1: "sandbox container other-sandbox-0 (pool other)"}

    def in_use(uids: range) -> str | None:
        return next((f"{seen[uid]} runs as uid {uid}" for uid in uids if uid in seen), None)

    held = claim(BASE, 2, in_use, lock_path=tmp_path / "uids.lock")
    assert held.first == BASE + BLOCK
    held.release()
