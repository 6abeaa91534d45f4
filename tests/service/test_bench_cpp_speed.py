"""bench/cpp_speed.py (issue 27) as a smoke run on the local backend: 8 submissions through a live service and the
reference judge, then a small GRPO-shaped batch sent twice. This asserts what the run must show whatever the machine:
the two agree on every score, and the batch sent again compiles nothing (every binary from the cache); not any speed.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("g++") is None, reason="no g++ on this machine (the local backend compiles with it)")
def test_the_cpp_bench_agrees_with_the_reference_and_reports_the_cache(tmp_path: Path) -> None:
    out = tmp_path / "cpp.json"
    result = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "cpp_speed.py"), "--smoke", "--json", str(out)],
        cwd=ROOT,
        env={**os.environ, "TMPDIR": str(tmp_path)},
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-6000:]
    report = json.loads(out.read_text())
    [round_] = report["rounds"]
    assert round_["submissions"] == 8 and round_["disagreements"] == []
    assert round_["service_wall_s"] > 0 and round_["reference_wall_s"] > 0
    grpo = report["grpo"]
    assert grpo["items"] == 16 and 1 <= grpo["distinct_programs"] <= 16
    first, again = grpo["sends"]
    assert 1 <= first["misses"] <= grpo["distinct_programs"] + 2  # each program once (a checker each problem at most)
    assert again["misses"] == 0 and again["hits"] > 0 and again["hit_rate"] == 1.0
    assert "(a) round 0: 8 submissions" in result.stdout and "(b) GRPO batch: 16 items" in result.stdout
