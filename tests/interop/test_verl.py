"""The verl adapter inside verl 0.9.1: its reward loop (`RewardLoopManager.compute_rm_score`, a Ray actor per
worker) calls `compute_score` once per sample, as in training; in-process `RewardLoopWorker`s cover the failure
paths and the sync twin (verl runs a sync function on its executor threads)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import Server, free_port
from tests.interop.verl_batch import data_proto, reward_config
from trainer_client import VerifierConnectionError, VerifierUnjudgedError

RIGHT = "<think>6 * 7 = 42</think>The answer is \\boxed{42}."
WRONG = "<think>6 * 7 = 41</think>The answer is 41."
CODE = "<think>add them</think>```python\ndef add(a, b):\n    return a + b\n```"
APPS_TESTS = '{"fn_name": "add", "inputs": [[1, 2], [3, 4]], "outputs": [[3], [7]]}'
UNPARSEABLE = "\\frac"  # the verifier cannot judge against this gold: reward null, verdict gold_unparseable

# verl's own imports warn (not ours to fix): the warnings-as-errors setting would fail every test on them
pytestmark = pytest.mark.filterwarnings("ignore:Ray state API is no longer experimental:DeprecationWarning")


@contextmanager
def reward_loop_manager(config: Any) -> Iterator[Any]:
    """verl's `RewardLoopManager`; its (named) worker actors are killed afterwards, so the next one can be made."""
    import ray
    from verl.experimental.reward_loop.reward_loop import RewardLoopManager

    manager = RewardLoopManager(config)
    try:
        yield manager
    finally:
        for worker in manager.reward_loop_workers:
            ray.kill(worker)


def scores(output: Any) -> list[float]:
    """Each sample's reward: verl puts it on the last response token of `rm_scores`."""
    return [round(value, 6) for value in output.batch["rm_scores"].sum(dim=-1).tolist()]


def test_reward_loop_manager_scores_through_the_verifier(
    verifier: Server, tokenizer_dir: Path, tokenizer: Any, ray_cluster: None
) -> None:
    rows = [
        ("openai/gsm8k", RIGHT, "42", {}),
        ("openai/gsm8k", WRONG, "42", {}),
        ("apps", CODE, APPS_TESTS, {}),
        ("openai/gsm8k", RIGHT, "7", {"verifier": {"math": {"gold": "42"}, "format": {}}}),  # the spec wins
    ]
    with reward_loop_manager(reward_config(tokenizer_dir, {"url": verifier.url})) as manager:
        output = manager.compute_rm_score(data_proto(tokenizer, rows))
        assert scores(output) == [1.0, 0.0, 1.0, 2.0]
        assert output.meta_info["reward_extra_keys"] == ["score", "acc", "verifier_judged"]
        assert output.non_tensor_batch["acc"].tolist() == [1.0, 0.0, 1.0, 1.0]

        # a sample the verifier cannot judge stops the step, and says why (Ray re-raises the worker's error)
        with pytest.raises(VerifierUnjudgedError, match="math: gold_unparseable") as raised:
            manager.compute_rm_score(data_proto(tokenizer, [("openai/gsm8k", RIGHT, UNPARSEABLE, {})] * 2))
        assert raised.value.verdicts == {"math": "gold_unparseable"}


def test_an_opt_in_fallback_is_flagged_in_verls_columns(
    verifier: Server, tokenizer_dir: Path, tokenizer: Any, ray_cluster: None
) -> None:
    # the unjudged sample first: verl takes the columns from the first sample, so the keys must not differ
    rows = [("openai/gsm8k", RIGHT, UNPARSEABLE, {}), ("openai/gsm8k", RIGHT, "42", {})]
    with reward_loop_manager(reward_config(tokenizer_dir, {"url": verifier.url, "on_unjudged": 0.0})) as manager:
        output = manager.compute_rm_score(data_proto(tokenizer, rows))
    assert scores(output) == [0.0, 1.0]
    assert output.non_tensor_batch["verifier_judged"].tolist() == [0.0, 1.0]


def run_worker(tokenizer_dir: Path, tokenizer: Any, rows: list[Any], kwargs: dict[str, Any], name: str) -> list[Any]:
    """verl's `RewardLoopWorker` in this process: the same code as in the Ray actor, without the actor."""
    from verl.experimental.reward_loop.reward_loop import RewardLoopWorker

    async def main() -> list[Any]:
        worker = RewardLoopWorker(reward_config(tokenizer_dir, kwargs, name=name))
        return await worker.compute_score_batch(data_proto(tokenizer, rows))

    return asyncio.run(main())


def test_the_sync_twin_in_verls_worker(verifier: Server, tokenizer_dir: Path, tokenizer: Any) -> None:
    rows = [("openai/gsm8k", RIGHT, "42", {}), ("openai/gsm8k", WRONG, "42", {})]
    out = run_worker(tokenizer_dir, tokenizer, rows, {"url": verifier.url}, name="compute_score_sync")
    assert [o["reward_score"] for o in out] == [1.0, 0.0]
    assert [o["reward_extra_info"]["verifier_judged"] for o in out] == [1.0, 1.0]


def test_with_the_verifier_down_verls_worker_fails_clearly(tokenizer_dir: Path, tokenizer: Any) -> None:
    url = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    rows = [("openai/gsm8k", RIGHT, "42", {})]
    with pytest.raises(VerifierConnectionError, match=f"POST {url}/v1/score failed: ConnectError"):
        run_worker(tokenizer_dir, tokenizer, rows, {"url": url, "max_retries": 0}, name="compute_score")
