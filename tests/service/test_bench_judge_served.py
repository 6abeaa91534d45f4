"""bench/judge_served.py, the served judge's throughput (issue 26's GPU check), as a smoke run on CPU: a tiny model
the bench builds and teaches, behind a real `transformers serve` process, 16 items straight to the server and through
the verifier. This asserts what the run must show whatever the machine: every item has a verdict from the served
model (none null) and both phases report a rate; not any speed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytest.importorskip("torch", reason="the `models` extra (torch, transformers) is not installed")
serving = pytest.importorskip("transformers.utils", reason="the `models` extra (transformers) is not installed")
if not serving.is_serve_available():
    pytest.skip("`transformers serve` needs fastapi, uvicorn and openai (the dev extra)", allow_module_level=True)


@pytest.mark.slow
@pytest.mark.timeout(900)  # it builds and teaches a model, then starts transformers serve: minutes when busy
def test_the_served_judge_bench_reports_both_rates_and_a_verdict_per_item(tmp_path: Path) -> None:
    out = tmp_path / "served.json"
    command = [sys.executable, str(ROOT / "bench" / "judge_served.py"), "--smoke", "--work", str(tmp_path / "work"),
               "--out", str(out)]  # fmt: skip
    env = {**os.environ, "TMPDIR": str(tmp_path), "HF_HUB_OFFLINE": "1"}
    result = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-6000:]
    report = json.loads(out.read_text())
    direct, through = report["direct"], report["verifier"]
    assert direct["requests"] == 15 and sum(direct["replies"].values()) == 15  # one item's reasoning never closes
    assert through["items"] == 16 and sum(through["verdicts"].values()) == 16
    assert through["verdicts"]["no_answer"] == 1 and through["null_details"] == {}, through
    assert direct["per_second"] > 0 and through["per_second"] > 0 and report["verifier_over_direct"] > 0
