"""The local backend's own promises: bubblewrap where it can run; without it, rlimits only, said loudly at startup and
in status(); and with `require_isolation`, no sandbox at all rather than a weak one."""

from __future__ import annotations

import logging
import os
import shutil
import time
from collections.abc import Iterator

import pytest

from sandbox import CallTest, RunVerdict, SandboxConfig, StdioTest
from sandbox.local import LocalExecutor
from sandbox.runner import proc_pids
from tests.sandbox.live import LiveExecutor

pytestmark = pytest.mark.timeout(120, func_only=True)
HONEST = ("def f(x):\n    return 2 * x\n", CallTest("f", (21,), expected=42))


@pytest.fixture
def weak(caplog: pytest.LogCaptureFixture) -> Iterator[LiveExecutor]:
    """A local executor told not to use bubblewrap, as on a host without it."""
    with caplog.at_level(logging.WARNING, logger="sandbox.local"):
        live = LiveExecutor(LocalExecutor(SandboxConfig(pool_size=2), use_bwrap=False))
    yield live
    live.close()


def test_without_bubblewrap_it_says_so_loudly(weak: LiveExecutor, caplog: pytest.LogCaptureFixture) -> None:
    status = weak.status()
    assert status["ready"] and status["isolation"] == "rlimits"
    assert any("WITHOUT ISOLATION" in w for w in status["warnings"])
    assert any(
        "WITHOUT ISOLATION" in r.getMessage() and r.levelno == logging.WARNING for r in caplog.get_records("setup")
    )


def test_without_bubblewrap_it_still_scores_and_enforces_limits(weak: LiveExecutor) -> None:
    assert weak.run(*HONEST).score == 1.0
    assert weak.run("def f(x):\n    return x\n", HONEST[1]).score == 0.0
    assert weak.run("print(sum(map(int, input().split())))", StdioTest("1 2\n", "3")).score == 1.0
    timeout = weak.run("while True:\n    pass\n", StdioTest("", ""), wall_s=1)
    assert [t.verdict.value for t in timeout.tests] == ["timeout"]


DAEMON = """
import os, time
def probe():
    r, w = os.pipe()
    if os.fork() == 0:
        os.setsid()
        pid = os.fork()
        if pid == 0:
            time.sleep(3600)
        os.write(w, str(pid).encode())
        os._exit(0)
    return [os.getuid(), os.getgid(), os.getpid(), int(os.read(r, 32))]
"""


@pytest.mark.skipif(os.geteuid() != 0, reason="a service that is not root cannot change the program's uid")
def test_without_bubblewrap_a_root_service_still_runs_programs_unprivileged_and_cleans_up(weak: LiveExecutor) -> None:
    uid, gid, program, daemon = weak.probe(DAEMON)
    assert uid >= 10001 and gid >= 10001  # no PID namespace: `program` and `daemon` are host pids
    # The answer leaves the sandbox once its processes have a SIGKILL pending; the runner reaps them right after,
    # before it takes the next job.
    deadline = time.monotonic() + 10
    while (alive := [pid for pid in (program, daemon) if pid in proc_pids()]) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert not alive  # its daemon is gone too


def test_bubblewrap_that_cannot_run_is_detected(monkeypatch: pytest.MonkeyPatch) -> None:
    """bubblewrap installed but unusable (e.g. no user namespaces in this container): rlimits, with the warning."""
    monkeypatch.setattr(shutil, "which", lambda name: "/bin/false" if name == "bwrap" else None)
    live = LiveExecutor(LocalExecutor(SandboxConfig(pool_size=1)))
    try:
        assert live.status()["isolation"] == "rlimits" and live.status()["warnings"]
        assert live.run(*HONEST).score == 1.0
    finally:
        live.close()


def test_require_isolation_refuses_to_run_without_it() -> None:
    config = SandboxConfig(pool_size=1, require_isolation=True)
    live = LiveExecutor(LocalExecutor(config, use_bwrap=False))
    try:
        assert live.status()["ready"] is False
        result = live.run(*HONEST)
        assert (result.verdict, result.score) == (RunVerdict.SANDBOX_UNAVAILABLE, None)
    finally:
        live.close()
