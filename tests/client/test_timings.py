"""trainer_client/timings.py: TRL's own timed blocks reach the training script's logged metrics (the end-to-end run
in test_train.py reads them from trainer_state.json); here, which blocks count, for which trainer, and that a TRL
without them changes nothing."""

from __future__ import annotations

from collections import defaultdict
from types import SimpleNamespace
from typing import Any

import pytest
from trl.extras import profiling
from trl.trainer import grpo_trainer

from trainer_client.timings import log_timings


def fake_trainer() -> Any:
    """What TRL's profiling_context and the wrapper read of a GRPOTrainer."""
    trainer = SimpleNamespace(
        _metrics={"train": defaultdict(list), "eval": defaultdict(list)},
        model=SimpleNamespace(training=True),
        state=SimpleNamespace(global_step=3),
        args=SimpleNamespace(report_to=[]),
        accelerator=SimpleNamespace(is_main_process=True),
        logged=[],
    )
    trainer.log = lambda logs, *args, **kwargs: trainer.logged.append(logs)
    return trainer


@pytest.fixture
def restore_trl(monkeypatch: pytest.MonkeyPatch) -> None:
    # log_timings replaces TRL's module functions: put them back after the test
    monkeypatch.setattr(grpo_trainer, "profiling_context", grpo_trainer.profiling_context)
    monkeypatch.setattr(profiling, "profiling_context", profiling.profiling_context)


@pytest.mark.usefixtures("restore_trl")
def test_the_generation_and_reward_blocks_of_this_trainer_are_logged_as_timings() -> None:
    trainer, other = fake_trainer(), fake_trainer()
    assert log_timings(trainer)
    for name in ("transformers.generate", "_calculate_rewards", "verifier_math", "sync_weights"):
        with grpo_trainer.profiling_context(trainer, name):
            pass
    with profiling.profiling_context(trainer, "_calculate_rewards"):  # the decorator's path
        pass
    with grpo_trainer.profiling_context(other, "_calculate_rewards"):  # another trainer's block
        pass
    with pytest.raises(RuntimeError), grpo_trainer.profiling_context(trainer, "transformers.generate"):
        raise RuntimeError("a failed generation is not a timing")
    metrics = trainer._metrics["train"]
    assert sorted(metrics) == ["timing/generation", "timing/rewards", "timing/weight_sync"]
    assert [len(metrics[key]) for key in sorted(metrics)] == [1, 2, 1]
    assert all(seconds >= 0 for values in metrics.values() for seconds in values)
    assert not other._metrics["train"]
    trainer.model.training = False  # evaluation's generations go to eval's metrics
    with grpo_trainer.profiling_context(trainer, "transformers.generate"):
        pass
    assert list(trainer._metrics["eval"]) == ["timing/generation"]
    trainer.log({"loss": 1.0})
    assert trainer.logged == [{"loss": 1.0}]  # no GPU here: no memory entry


@pytest.mark.usefixtures("restore_trl")
def test_a_trainer_without_trls_metrics_is_left_alone() -> None:
    before = grpo_trainer.profiling_context
    assert not log_timings(SimpleNamespace())
    assert grpo_trainer.profiling_context is before
