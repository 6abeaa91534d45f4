"""The verifier on a real two-node Ray cluster on this machine: bench/scale_ray.py --quick, which checks as it goes.

Two `ray start` nodes (127.0.0.2, 127.0.0.3), the shipped Serve application with one replica per node (bubblewrap
sandboxes), 40 batches of math, format and code 8 at a time through Serve's proxy: every reward right and both nodes
serving a share; each replica's own address; then it stops what it started. About a minute."""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from tests.conftest import ROOT

BENCH = ROOT / "bench" / "scale_ray.py"
BUDGET_S = 480


def missing_capability() -> str | None:
    """Why this machine cannot run two Ray nodes with bubblewrap sandboxes, or None."""
    for address in ("127.0.0.2", "127.0.0.3"):
        with socket.socket() as sock:
            try:
                sock.bind((address, 0))
            except OSError as exc:
                return f"cannot bind {address} ({exc}): two Ray nodes on one machine need the loopback range"
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        return "bubblewrap is not installed (apt-get install bubblewrap)"
    probe = [
        bwrap,
        "--ro-bind",
        "/",
        "/",
        "--unshare-user",
        "--unshare-net",
        "--unshare-pid",
        "--proc",
        "/proc",
        "true",
    ]
    if subprocess.run(probe, capture_output=True, timeout=30).returncode != 0:
        return "bubblewrap cannot create namespaces here (no unprivileged user namespaces?)"
    return None


def processes_holding(marker: str) -> list[int]:
    """Live processes with `marker` in their command line or environment (Ray's daemons and what they started)."""
    found = []
    for name in filter(str.isdigit, os.listdir("/proc")):
        try:
            cmdline = Path(f"/proc/{name}/cmdline").read_bytes().decode(errors="replace")
            environ = Path(f"/proc/{name}/environ").read_bytes().decode(errors="replace")
            state = Path(f"/proc/{name}/stat").read_text().rsplit(")", 1)[-1].split()[0]
        except OSError:
            continue
        if (marker in cmdline or marker in environ) and state != "Z" and int(name) != os.getpid():
            found.append(int(name))
    return found


@pytest.mark.ray
@pytest.mark.slow
@pytest.mark.timeout(BUDGET_S + 120)
def test_two_ray_nodes_score_right_and_share_the_work() -> None:
    reason = missing_capability()
    if reason is not None:
        pytest.skip(reason)
    temp_dir = Path(tempfile.mkdtemp(prefix="vray-test-", dir="/tmp"))  # Ray's socket paths must stay short
    bench = subprocess.Popen(
        [sys.executable, str(BENCH), "--quick", "--temp-dir", str(temp_dir)],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        output, _ = bench.communicate(timeout=BUDGET_S)
    except subprocess.TimeoutExpired:
        bench.send_signal(signal.SIGINT)  # its clean-up runs on the way out
        output, _ = bench.communicate(timeout=90)
    finally:
        left = processes_holding(str(temp_dir))
        for pid in left:
            os.kill(pid, signal.SIGKILL)
        shutil.rmtree(temp_dir, ignore_errors=True)
    assert bench.returncode == 0, output[-6000:]
    assert not left, f"the bench left processes of its Ray cluster running: {left}"
    shares = re.search(r"every reward right; batches served per node: 127\.0\.0\.2: (\d+), 127\.0\.0\.3: (\d+)", output)
    assert shares is not None, output[-6000:]
    assert int(shares[1]) > 0 and int(shares[2]) > 0 and int(shares[1]) + int(shares[2]) == 40
    assert output.count("sandbox isolation bubblewrap") == 2
    assert "no sandbox process left" in output
