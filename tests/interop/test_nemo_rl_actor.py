"""The NeMo-RL environment as the Ray actor NeMo-RL creates from its registry entry
(`trainer_client.integrations.nemo_rl.RewardVerifierActor`), stepped through Ray. NeMo-RL itself is not installable
here (not on PyPI); its interface is covered by the contract tests in tests/client/test_adapters_live.py."""

from __future__ import annotations

import pytest

from tests.conftest import Server
from trainer_client import VerifierUnjudgedError

RIGHT = "<think>6 * 7 = 42</think>The answer is \\boxed{42}."


def log(answer: str) -> list[dict[str, str]]:
    return [{"role": "user", "content": "What is 6 * 7?"}, {"role": "assistant", "content": answer}]


def test_the_environment_steps_as_a_ray_actor(verifier: Server, ray_cluster: None) -> None:
    import ray

    from trainer_client.integrations import nemo_rl

    actor = nemo_rl.RewardVerifierActor.remote({"url": verifier.url})
    try:
        out = ray.get(actor.step.remote([log(RIGHT), log("The answer is 41.")], [{"ground_truth": "42"}] * 2))
        assert out.rewards.tolist() == [1.0, 0.0] and out.terminateds.tolist() == [1.0, 1.0]
        with pytest.raises(VerifierUnjudgedError, match="math: gold_unparseable"):
            ray.get(actor.step.remote([log(RIGHT)], [{"ground_truth": "\\frac"}]))
    finally:
        ray.kill(actor)
