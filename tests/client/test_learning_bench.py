"""bench/learning.py: its task and control data, and a smoke run of the whole pipeline (a few steps of each stage,
against a live verifier, through the real training script). Learning itself is stochastic and takes half an hour:
BENCHMARKS.md holds the full runs; this asserts the pipeline, not a gain."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path
from types import ModuleType

import pytest

from trainer_client.gsm8k import gold_answer

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "bench"


@pytest.fixture
def task(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    monkeypatch.syspath_prepend(str(BENCH))
    import learning_task

    return learning_task


def test_problems_are_gsm8k_rows_whose_gold_is_the_result(task: ModuleType) -> None:
    items = task.problems(400, seed=3)
    assert Counter(item.level for item in items) == dict.fromkeys(task.LEVELS, 100)
    for item in items:
        row = item.row()
        assert gold_answer(row["answer"]) == str(item.result)
        # the work is right: the last equation's value is the result, every equation holds
        for left, right in re.findall(r"(\d+ [-+*] \d+) = (\d+)", item.work):
            assert eval(left) == int(right)  # the bench's own arithmetic strings
        assert item.work.endswith(f"= {item.result}")
        assert all(str(n) in item.question for n in item.numbers)


def test_the_warm_start_gives_the_result_a_third_of_the_time_else_a_number_of_the_question(task: ModuleType) -> None:
    items = task.problems(3000, seed=4)
    rows = task.warm_start_rows(items, seed=5)
    right = 0
    for item, row in zip(items, rows, strict=True):
        text = row["completion"][0]["content"]
        match = re.fullmatch(r"<think>(.*)</think>The answer is (\d+)\.", text)
        assert match and match[1] == item.work
        answer = int(match[2])
        right += answer == item.result
        assert answer == item.result or answer in item.numbers
        assert row["prompt"][1] == {"role": "user", "content": item.question}
    assert 0.30 < right / len(items) < 0.37


def test_the_control_deals_every_gold_to_another_question(task: ModuleType) -> None:
    rows = [item.row() for item in task.problems(200, seed=6)]
    before = [dict(row) for row in rows]
    shuffled = task.shuffled_golds(rows, seed=7)
    assert rows == before  # the input is not modified
    assert [row["question"] for row in shuffled] == [row["question"] for row in rows]
    assert sorted(row["answer"] for row in shuffled) == sorted(row["answer"] for row in rows)
    positions = {id(row["answer"]): i for i, row in enumerate(rows)}
    assert all(positions[id(row["answer"])] != i for i, row in enumerate(shuffled))
    assert shuffled != task.shuffled_golds(rows, seed=8)


@pytest.mark.slow
def test_the_learning_bench_runs_end_to_end(tmp_path: Path) -> None:
    out = tmp_path / "learning"
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    result = subprocess.run(
        # the control trained beside the run, as bench/gpu.py does on a GPU
        [sys.executable, str(BENCH / "learning.py"), "--smoke", "--parallel-control", "--out", str(out)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-6000:]
    # two GRPO steps say nothing of learning: the smoke run says so rather than judge the target ("NOT met")
    assert "it makes no claim about learning" in result.stdout
    assert "NOT met" not in result.stdout and "): met" not in result.stdout
    summary = json.loads((out / "summary.json").read_text())
    assert summary["steps"] == 2 and summary["seconds"] > 0
    for key in ("before", "after", "control_before", "control_after"):
        assert 0 <= summary[key] <= 100, key
    details = summary["details"]
    for run in ("run", "control"):
        # every GRPO step logged the verifier's rewards, none of them null
        log = details[run]["log"]
        assert [entry["step"] for entry in log] == [1, 2]
        for entry in log:
            for component in ("math", "format", "overlong"):
                assert f"rewards/verifier_{component}/mean" in entry
                assert entry[f"verifier_{component}/null_rate"] == 0.0
        assert [point["step"] for point in details[run]["curve"]] == [2]
    # the control trained on other questions' golds
    control_rows = [json.loads(line) for line in (out / "train-shuffled.jsonl").read_text().splitlines()]
    rows = [json.loads(line) for line in (out / "train.jsonl").read_text().splitlines()]
    assert all(a["question"] == b["question"] for a, b in zip(rows, control_rows, strict=True))
    assert sum(a["answer"] != b["answer"] for a, b in zip(rows, control_rows, strict=True)) > len(rows) // 2
    assert (out / "learning.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.slow
@pytest.mark.timeout(900)  # three GRPO runs and the verifier's model reloads: about 3 minutes alone on 2 cores
def test_the_online_reward_model_bench_runs_end_to_end(tmp_path: Path) -> None:
    """bench/learning_rm.py's pipeline: the verifier serving the stand-in reward models, the warm start's model
    reloaded in their place (a refused reload stops the bench), the rule run, the rule + online model run and its
    control, each logging the model's rewards (never null)."""
    out = tmp_path / "learning-rm"
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    result = subprocess.run(
        [sys.executable, str(BENCH / "learning_rm.py"), "--smoke", "--parallel-control", "--out", str(out)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-6000:]
    assert "it makes no claim about learning" in result.stdout and "NOT met" not in result.stdout
    details = json.loads((out / "summary.json").read_text())["details"]
    assert set(details["labels"]) == {"run", "rm", "control"}
    for run in ("rm", "control"):
        for entry in details[run]["log"]:
            assert entry["verifier_rm/rm/scored"] == 1.0 and entry["verifier_rm/null_rate"] == 0.0
    assert all("rewards/verifier_rm/mean" not in entry for entry in details["run"]["log"])  # the rule alone
    assert (out / "rm-start" / "config.json").is_file()  # the warm start's reward model, reloaded (or the run fails)
