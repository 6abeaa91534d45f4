"""bench/gpu.py, the GPU benchmark (issue 28), as a smoke run on CPU: tiny sizes, a few steps of each stage, against a
live verifier, through the real training script. The numbers it measures on a GPU are in BENCHMARKS.md; this asserts
that every stage runs and reports what it says it does (the timings the training script logs among them), not any
speed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_the_gpu_bench_runs_end_to_end_on_cpu(tmp_path: Path) -> None:
    out = tmp_path / "gpu"
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    result = subprocess.run(
        # its learning stage is learning.py, whose smoke run (with --parallel-control) test_learning_bench.py runs
        [sys.executable, str(ROOT / "bench" / "gpu.py"), "--smoke", "--phases", "throughput", "--out", str(out)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-6000:]
    report = json.loads((out / "throughput.json").read_text())
    assert report["parameters"] > 0 and report["machine"]["cpus"] == os.cpu_count()
    assert [size["completions_per_step"] for size in report["sizes"]] == [8, 16]
    for size in report["sizes"]:
        assert size["steps_measured"] == 1  # two steps, the first left out
        # the training script's own timings: generation and the wait for rewards are parts of the step
        assert 0 < size["generation_s"] < size["step_s"] and 0 < size["rewards_s"] < size["step_s"], size
        assert size["reward_share_pct"] == pytest.approx(100 * size["rewards_s"] / size["step_s"], abs=0.1)
        assert size["peak_gpu_memory_gib"] == 0  # on CPU
    realistic = report["realistic_rewards"]
    assert [(row["workload"], row["completions"]) for row in realistic] == [
        ("gsm8k", 8),
        ("gsm8k", 16),
        ("math", 8),
        ("math", 16),
    ]
    assert all(row["rewards_s"] > 0 and row["unscored"] == 0 for row in realistic)
