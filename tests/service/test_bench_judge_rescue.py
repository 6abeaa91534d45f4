"""bench/judge_rescue.py, the judge's plumbing measurement (issue 26), as a smoke run: a live verifier and the judge
stand-in scripted as an oracle of the true labels. This asserts what the run must show whatever the machine: the
rescue raises exactly the rule misses that are truly right and lowers no rule-correct item, `rule_miss` asks no more
than `always`, and a GRPO batch sent again is answered from the cache; not any speed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_the_judge_bench_rescues_rule_misses_and_reports_latency_and_cache(tmp_path: Path) -> None:
    out = tmp_path / "judge.json"
    result = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "judge_rescue.py"), "--smoke", "--out", str(out)],
        cwd=ROOT,
        env={**os.environ, "TMPDIR": str(tmp_path)},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-6000:]
    report = json.loads(out.read_text())
    conformance, gsm8k = report["rescue"]["conformance"], report["rescue"]["gsm8k"]
    assert conformance["items"] == 384 and gsm8k["items"] == 32
    for row in (conformance, gsm8k):
        assert row["rule_correct_lowered"] == 0 and row["false_rescues"] == 0 and row["unscripted"] == 0, row
        assert row["judge_null"] == {}, row  # every question the verifier asked was answered
        assert sum(row["rescued"].values()) == row["rule_misses_truly_right"], row  # the oracle's: every one
        assert sum(row["judge_verdicts_on_misses"].values()) == row["rule_misses"], row
    assert conformance["rescued"]["wrong"] > 0  # the conformance rows hold right answers the rule misses
    [latency] = report["latency"]
    assert latency["math"]["requests_per_batch"] == [0, 0]
    asked = zip(latency["rule_miss"]["requests_per_batch"], latency["always"]["requests_per_batch"], strict=True)
    for miss, always in asked:
        assert 0 < miss < always <= latency["items_per_batch"]  # each distinct question once: fewer than items
    assert all(latency[mode]["null_rewards"] == 0 for mode in ("math", "rule_miss", "always"))
    first, again = report["cache"]["sends"]
    assert 0 < first["requests"] < first["decided_by_judge"]  # GRPO's duplicate answers asked once
    assert again["requests"] == 0 and again["hit_rate"] == 1.0
    assert again["decided_by_judge"] == first["decided_by_judge"]
    assert "rescue conformance  384 items" in result.stdout and "cache overall hit rate" in result.stdout
