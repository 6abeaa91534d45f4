"""The online reward-model update's parts that run in the trainer: the outcome log (window, held-out prompts, unjudged
completions left out), the pairs it trains on, and both training methods on a tiny reward model built here: each
moves the served model's scores the way the rule outcomes say, on the layout the rm component serves it."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("trl", reason="the `train` extra (trl, torch, transformers) is not installed")

import torch
from transformers import AutoModelForSequenceClassification, AutoTokenizer

from reward_models.layout import token_ids
from trainer_client.online_rm import OnlineRewardModel, Outcome, OutcomeLog, numbers, pairs
from trainer_client.tiny_model import build_reward_model, build_tokenizer, gsm8k_rows, training_text
from verifier_service.schema import ComponentResult, ItemResult


def test_the_log_keeps_the_last_steps_and_leaves_unjudged_completions_out() -> None:
    log = OutcomeLog(keep_steps=2, held_out=0.0)
    log.add(1, ["a", "a"], ["x", "y"], [1.0, None])
    log.add(2, ["b"], ["z"], [0.0])
    assert [(o.step, o.completion) for o in log.outcomes] == [(1, "x"), (2, "z")]
    log.add(3, ["c"], ["w"], [float("nan")])
    assert [(o.step, o.completion) for o in log.outcomes] == [(2, "z")]  # step 1 is out of the window


def test_held_out_prompts_are_never_trained_on() -> None:
    log = OutcomeLog(keep_steps=10, held_out=0.3)
    prompts = [f"question {i}" for i in range(200)]
    log.add(0, prompts, ["x"] * 200, [1.0] * 200)
    held = {prompt for prompt, _ in log.groups(held_out=True)}
    train = {prompt for prompt, _ in log.groups(held_out=False)}
    assert held.isdisjoint(train) and held | train == set(prompts)
    assert 40 <= len(held) <= 80  # about 30%
    assert held == {prompt for prompt in prompts if OutcomeLog(1, held_out=0.3).is_held_out(prompt)}  # by the text


def test_pairs_are_right_against_wrong_within_a_prompt() -> None:
    outcomes = [
        Outcome(0, "Q", "4", 1.0),
        Outcome(0, "Q", "5", 0.0),
        Outcome(0, "Q", "6", 0.5),
        Outcome(0, "Q", "4", 1.0),
    ]
    rows = pairs([("Q", outcomes), ("R", [Outcome(0, "R", "1", 1.0)])], 1.0, 8, random.Random(0))
    assert sorted((row["chosen"], row["rejected"]) for row in rows) == [("4", "5"), ("4", "6")]
    assert len(pairs([("Q", outcomes)], 0.5, 8, random.Random(0))) == 2  # 4 and 6 right, 5 wrong
    assert len(pairs([("Q", outcomes)], 1.0, 1, random.Random(0))) == 1  # capped per prompt


def test_numbers_flatten_the_evaluation() -> None:
    evaluation = {"ranking_accuracy": 0.75, "scores": {"mean": 1.0}, "drift": None, "previous_version": "v0"}
    assert numbers(evaluation) == {"ranking_accuracy": 0.75, "scores/mean": 1.0}


def rows_of(count: int, seed: int) -> list[tuple[str, str, float]]:
    """Prompts with a right completion (it ends "yes") and a wrong one ("no"): a signal a tiny model learns at once."""
    rng = random.Random(seed)
    found = []
    for _ in range(count):
        a, b = rng.randrange(10, 99), rng.randrange(10, 99)
        prompt = f"What is {a} plus {b}? "
        found += [(prompt, f"It is {a + b}. yes", 1.0), (prompt, f"It is {a + b + 1}. no", 0.0)]
    return found


@pytest.fixture()
def checkpoint(tmp_path: Path) -> Path:
    path = tmp_path / "rm"
    path.mkdir()
    build_tokenizer(path, [*training_text(gsm8k_rows(50, seed=1)), "It is yes no plus What"])
    build_reward_model(path, seed=3, max_positions=128)
    return path


def ranking(path: Path, rows: list[tuple[str, str, float]], template: str = "raw") -> float:
    """The share of (right, wrong) pairs the checkpoint scores right above wrong, on the rm component's layout."""
    tokenizer = AutoTokenizer.from_pretrained(path)
    model = AutoModelForSequenceClassification.from_pretrained(path).eval()
    ids = token_ids(tokenizer, template, [(prompt, completion) for prompt, completion, _ in rows])  # type: ignore[arg-type]
    with torch.inference_mode():
        scores = [float(model(input_ids=torch.tensor([row])).logits[0, 0]) for row in ids]
    return sum(scores[i] > scores[i + 1] for i in range(0, len(scores), 2)) / (len(scores) // 2)


@pytest.mark.parametrize("method", ["pairs", "outcome"])
def test_training_moves_held_out_scores_the_way_the_outcomes_say(checkpoint: Path, tmp_path: Path, method: Any) -> None:
    online = OnlineRewardModel(
        "rm", checkpoint=checkpoint, output_dir=tmp_path / "out", method=method, learning_rate=3e-3, epochs=3,
        base_url="http://127.0.0.1:9",  # never called here
    )  # fmt: skip
    held_out = rows_of(40, seed=2)
    before = ranking(checkpoint, held_out)
    train = rows_of(120, seed=1)
    path = tmp_path / "out" / "step-1"
    if method == "pairs":
        trained = online._train_pairs([{"prompt": p, "chosen": c, "rejected": r} for (p, c, _), (_, r, _) in
                                       zip(train[::2], train[1::2], strict=True)], path)  # fmt: skip
    else:
        trained = online._train_outcomes(train, path)
    after = ranking(path, held_out)
    assert after >= 0.9 and after > before, (before, after, trained)
    assert (path / "config.json").is_file() and (path / "tokenizer.json").is_file()  # a checkpoint the service loads


def test_record_keeps_the_rule_outcome_and_logs_the_last_evaluation(tmp_path: Path) -> None:
    online = OnlineRewardModel("rm", checkpoint=tmp_path, output_dir=tmp_path, base_url="http://127.0.0.1:9")
    online.metrics = {"ranking_accuracy": 0.5}
    logged: list[tuple[str, float]] = []

    def result(score: float | None) -> ItemResult:
        verdict = "correct" if score else "wrong"
        components = {"math": ComponentResult(score=score, verdict=verdict)}
        return ItemResult(id="0", reward=score, status="ok", components=components)

    chat = [{"role": "user", "content": "Q?"}]
    kwargs = {"log_metric": lambda name, value: logged.append((name, value))}
    online.record(
        [chat, "R?", "S?"],
        ["4", [{"role": "assistant", "content": "5"}], "6"],
        [result(1.0), result(0.0), None],
        kwargs,
    )
    assert [(o.prompt, o.completion, o.outcome) for o in online.outcomes.outcomes] == [
        ("Q?", "4", 1.0),
        ("R?", "5", 0.0),
    ]
    assert logged == [("online_rm/ranking_accuracy", 0.5)]
