"""An empty separator cannot split a completion into steps: the verifier's schema refuses it (min_length 1), and the
trainer's side, which splits the completions it trains a process reward model on, refuses it too instead of looping
for ever (`step_spans` would find "" at every position)."""

from __future__ import annotations

import pytest

from reward_models.layout import step_spans


def test_step_spans_refuses_an_empty_separator() -> None:
    with pytest.raises(ValueError, match="separator is empty"):
        step_spans("a = 1\nb = 2", "")
    assert step_spans("a = 1\nb = 2", "\n") == [(0, 5), (6, 11)]


def test_the_online_update_refuses_an_empty_separator() -> None:
    pytest.importorskip("transformers", reason="the `train` extra is not installed")
    from trainer_client.online_rm import OnlineRewardModel

    with pytest.raises(ValueError, match="separator must not be empty"):
        OnlineRewardModel("prm", checkpoint="/ckpt", output_dir="/tmp/out", method="prm_outcome", separator="")
