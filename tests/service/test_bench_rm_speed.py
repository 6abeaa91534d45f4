"""bench/rm_speed.py, the reward-model benchmark (issue 25), as a smoke run on CPU: a live verifier serving a tiny
random reward model against GRPOTrainer's in-process path on the same checkpoint. This asserts that both sides run
at every size, and in the long phase, and report what they say (times, throughput, every item scored), not any
speed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch", reason="the `models` extra (torch, transformers) is not installed")
pytest.importorskip("trl", reason="the benchmark's in-process side is TRL's GRPOTrainer path")

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_the_rm_bench_times_both_sides_at_every_size(tmp_path: Path) -> None:
    out = tmp_path / "rm.json"
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    result = subprocess.run(
        [
            sys.executable,
            str(ROOT / "bench" / "rm_speed.py"),
            "--smoke",
            "--phases",
            "sizes",
            "long",
            "--out",
            str(out),
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-6000:]
    report = json.loads(out.read_text())
    assert (report["device"], report["model_shape"], report["dtype"]) == ("cpu", "tiny", "float32")
    assert [row["size"] for row in report["sizes"]] == [4, 8]
    for row in report["sizes"]:
        assert row["service_s"] > 0 and row["trl_s"] > 0, row
        assert row["service_over_trl"] == pytest.approx(row["service_s"] / row["trl_s"])
        assert row["service_items_per_s"] == pytest.approx(row["size"] / row["service_s"])
        assert row["scores"] == {"service": row["size"], "trl": row["size"]}  # every item scored on both sides
        assert row["tokens_mean"] > 100  # realistic completions, not one-liners
        assert "trl_peak_allocated_mib" not in row  # GPU memory only with --device cuda
    assert f"{report['sizes'][-1]['size']:>5} items" in result.stdout  # printed as it went
    [long] = report["long"]  # the memory phase, at the smoke's size: 4 completions of about 1,200 tokens
    assert long["size"] == 4 and long["service_scored"] == 4 and long["service_unscored"] == {}, long
    assert long["trl_scored"] == 4 and "trl_error" not in long, long
    assert 600 < long["tokens_mean_first_64"] <= 1200 and long["tokens_max_first_64"] <= 1200, long
    assert long["service_peak_gpu_mib"] is None  # nvidia-smi is asked only for what runs on a GPU
    assert "long:     4 items" in result.stdout
