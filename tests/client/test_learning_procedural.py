"""bench/learning_procedural.py: its reasoning-gym task and control data, and a smoke run of the whole pipeline (a
few steps of each stage, against a live verifier scoring with its `procedural` component, through the real training
script reading reasoning-gym rows). BENCHMARKS.md holds the full run; this asserts the pipeline, not a gain."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

from tests.conftest import Server
from trainer_client import VerifierClient
from verifier_service.schema import ScoreItem

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "bench"
COMPLETION = re.compile(r"<think>(.*)</think><answer>(-?\d+)</answer>")


@pytest.fixture
def bench(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    pytest.importorskip("reasoning_gym", reason="reasoning-gym (the procedural extra) is not installed")
    monkeypatch.syspath_prepend(str(BENCH))
    import learning_procedural

    return learning_procedural


def test_the_entries_are_reasoning_gyms_and_the_held_out_questions_are_new(bench: ModuleType) -> None:
    import reasoning_gym

    train = bench.entries(300, seed=bench.train_seed(0))
    held_out = bench.held_out_entries(train, 100, seed=bench.train_seed(0) + bench.SEED_SPAN // 2)
    library = reasoning_gym.create_dataset("chain_sum", size=300, seed=bench.train_seed(0), **bench.CONFIG)
    assert train == [json.loads(json.dumps(dict(entry))) for entry in library]
    assert len(held_out) == 100
    assert not {entry["question"] for entry in held_out} & {entry["question"] for entry in train}
    for entry in train:
        assert entry["metadata"]["source_dataset"] == "chain_sum"
        assert entry["metadata"]["num_terms"] in (3, 4)
        row = bench.row(entry)
        assert json.loads(row["metadata"]) == entry["metadata"] and row["answer"] == entry["answer"]


def test_the_warm_start_works_it_out_and_answers_it_a_third_of_the_time(bench: ModuleType) -> None:
    import reasoning_gym

    scorer = reasoning_gym.create_dataset("chain_sum", size=1, seed=0, **bench.CONFIG)
    train = bench.entries(1500, seed=5)
    rows = bench.warm_start_rows(train, seed=6)
    right = 0
    for entry, row in zip(train, rows, strict=True):
        assert row["prompt"][1] == {"role": "user", "content": entry["question"]}
        match = COMPLETION.fullmatch(row["completion"][0]["content"])
        assert match, row["completion"][0]["content"]
        steps = [re.fullmatch(r"(-?\d+) ([-+]) (\d) = (-?\d+)", step) for step in match[1].split(", ")]
        assert all(steps) and len(steps) == entry["metadata"]["num_terms"] - 1
        assert steps[-1][4] == entry["answer"]  # the reasoning ends in the result
        for step in steps:  # each step's sum is right (written by the bench, checked here by hand)
            left, sign, term, total = int(step[1]), step[2], int(step[3]), int(step[4])
            assert total == (left + term if sign == "+" else left - term)
        written = {int(n) for n in re.findall(r"-?\d+", match[1])}
        score = scorer.score_answer(match[2], entry)  # reasoning-gym's own scorer
        # 1.0 for the result; a wrong number may get partial credit (`-1` for 1: 0.5), which procedural counts as 0
        assert (score == 1.0) == (match[2] == entry["answer"])
        assert int(match[2]) in written
        right += score == 1.0
    assert 0.29 < right / len(train) < 0.38


def test_the_verifier_scores_the_warm_starts_answers_as_chain_sum_does(bench: ModuleType, server: Server) -> None:
    """The held-out items as the bench builds them, with the warm start's completions: procedural scores 1 exactly
    the completions that give the entry's answer, and every completion is well formed."""
    items = bench.entries(120, seed=9)
    rows = bench.warm_start_rows(items, seed=10)
    texts = [row["completion"][0]["content"] for row in rows]
    scored = [
        ScoreItem.model_validate({"completion": text, **bench.specs(entry), "format": {}})
        for text, entry in zip(texts, items, strict=True)
    ]
    with VerifierClient(server.url) as client:
        results = client.score(scored)
    right = [COMPLETION.fullmatch(text)[2] == entry["answer"] for text, entry in zip(texts, items, strict=True)]
    assert 0 < sum(right) < len(items)
    assert [result.components["procedural"].score == 1.0 for result in results] == right
    assert all(result.components["procedural"].score in (0.0, 1.0) for result in results)
    assert all(result.components["format"].score == 1.0 for result in results)


def test_the_control_deals_every_entry_to_another_question(bench: ModuleType) -> None:
    from learning_task import shuffled_golds

    rows = [bench.row(entry) for entry in bench.entries(200, seed=7)]
    shuffled = shuffled_golds(rows, seed=8, columns=("answer", "metadata"))
    assert [row["question"] for row in shuffled] == [row["question"] for row in rows]
    pairs = {(row["answer"], row["metadata"]) for row in rows}
    assert {(row["answer"], row["metadata"]) for row in shuffled} == pairs  # an entry's parts travel together
    assert all(a["metadata"] != b["metadata"] for a, b in zip(rows, shuffled, strict=True))


@pytest.mark.slow
def test_the_procedural_learning_bench_runs_end_to_end(bench: ModuleType, tmp_path: Path) -> None:
    out = tmp_path / "learning"
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    result = subprocess.run(
        [sys.executable, str(BENCH / "learning_procedural.py"), "--smoke", "--out", str(out)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-6000:]
    assert "it makes no claim about learning" in result.stdout
    assert "gain" not in result.stdout
    summary = json.loads((out / "summary.json").read_text())
    assert summary["steps"] == 2 and summary["seconds"] > 0
    for key in ("before", "after", "control_before", "control_after"):
        assert 0 <= summary[key] <= 100, key
    details = summary["details"]
    for run in ("run", "control"):
        # every GRPO step logged the verifier's rewards, none of them null: the training script mapped every
        # reasoning-gym row to a procedural spec the verifier could score
        log = details[run]["log"]
        assert [entry["step"] for entry in log] == [1, 2]
        for entry in log:
            for component in ("procedural", "format", "overlong"):
                assert f"rewards/verifier_{component}/mean" in entry
                assert entry[f"verifier_{component}/null_rate"] == 0.0
        assert [point["step"] for point in details[run]["curve"]] == [2]
    train_log = Path(details["run"]["train_log"]).read_text()
    assert "rows read as the reasoning_gym dataset shape" in train_log  # the script made the specs of the rows
    rows = [json.loads(line) for line in (out / "train.jsonl").read_text().splitlines()]
    control_rows = [json.loads(line) for line in (out / "train-shuffled.jsonl").read_text().splitlines()]
    assert all(set(row) == {"question", "answer", "metadata"} for row in rows)
    assert all(a["question"] == b["question"] for a, b in zip(rows, control_rows, strict=True))
    assert sum(a["answer"] != b["answer"] for a, b in zip(rows, control_rows, strict=True)) > len(rows) // 2
    assert (out / "learning.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
