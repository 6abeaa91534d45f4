"""bench/trainer_calls.py end to end, small: verl's real reward loop with the adapter and with a constant reward,
OpenRLHF-shaped requests and reward-file calls, one batched request; each way's requests as the verifier counted
them."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

from tests.conftest import ROOT


@pytest.mark.timeout(600)
def test_the_benchmark_runs_every_way_and_counts_their_requests() -> None:
    command = [sys.executable, "bench/trainer_calls.py", "--samples", "64", "--rounds", "1", "--verl-workers", "2"]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=540)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    medians = done.stdout.split("median of 1 rounds, 64 samples each:", 1)[1]
    ways = "batched|verl floor|verl|OpenRLHF URL|OpenRLHF file"
    requests = dict(re.findall(rf"^\s+({ways})\s.*\s(\d+) requests$", medians, re.M))
    assert requests["batched"] == "1"
    assert requests["OpenRLHF URL"] == "64"  # one request per sample
    # A call from a thread per sample, each answered (the bench exits non-zero on a missing or differing reward) by a
    # request of its own at most: how many coalesce depends on how the threads are scheduled (within 1 ms), so on a
    # loaded machine none may.
    assert 1 <= int(requests["OpenRLHF file"]) <= 64
    assert requests["verl floor"] == "0"  # the constant reward calls nothing
    assert 1 <= int(requests["verl"]) <= 8  # two reward workers' calls, coalesced
    assert re.search(r"^verl / batched: \d+\.\d\dx \(target <= 1\.5x\)$", done.stdout, re.M)
