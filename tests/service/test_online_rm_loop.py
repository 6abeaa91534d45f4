"""The online update's whole loop against a real server: a TRL reward scores completions with the math rule, the
callback keeps the outcomes, fine-tunes the served reward model on right-against-wrong pairs, has the server reload
it and evaluate it on held-out prompts; the next reward call scores with the new version and logs the evaluation next
to TRL's metrics; a second update reports drift against the first."""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import httpx
import pytest

pytest.importorskip("trl", reason="the `train` extra (trl, torch, transformers) is not installed")

from tests.conftest import MODEL_SERVER_READY_S, Server, running_server
from trainer_client import VerifierReward
from trainer_client.online_rm import OnlineRewardModel
from trainer_client.tiny_model import build_reward_model, build_tokenizer, gsm8k_rows, training_text


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("online-rm").resolve()


@pytest.fixture(scope="module")
def server(root: Path) -> Iterator[Server]:
    start = root / "rm-start"
    start.mkdir()
    build_tokenizer(start, [*training_text(gsm8k_rows(50, seed=1)), "It is yes no plus What"])
    build_reward_model(start, seed=3, max_positions=128)
    models = {"rm": {"path": str(start), "max_tokens": 128, "batch_tokens": 2048}}
    settings = {"math_workers": 1, "code_enabled": "false", "models": json.dumps(models),
                "model_roots": json.dumps([str(root)])}  # fmt: skip
    (root / "server").mkdir()
    with running_server(root / "server", ready_timeout=MODEL_SERVER_READY_S, **settings) as running:
        yield running


def batch(count: int, seed: int) -> dict[str, list[Any]]:
    """A GRPO-like call: each prompt twice, once answered right (ending "yes") and once wrong ("no")."""
    rng = random.Random(seed)
    prompts, completions, golds = [], [], []
    for _ in range(count):
        a, b = rng.randrange(10, 99), rng.randrange(10, 99)
        prompt = f"What is {a} plus {b}? "
        prompts += [prompt, prompt]
        completions += [f"It is {a + b}. yes", f"It is {a + b + 1}. no"]
        golds += [str(a + b)] * 2
    return {"prompts": prompts, "completions": completions, "solution": golds}


def served(server: Server) -> dict[str, Any]:
    [model] = httpx.get(f"{server.url}/v1/models", timeout=30).json()["models"]
    return dict(model)


def test_the_callback_trains_reloads_and_evaluates_the_served_model(server: Server, root: Path) -> None:
    first = served(server)
    rule = VerifierReward("math", base_url=server.url)
    scored = VerifierReward("rm", base_url=server.url, options={"rm": {"model": "rm"}})
    online = OnlineRewardModel(
        "rm", checkpoint=first["path"], output_dir=root / "updates", every_steps=1, held_out=0.3, learning_rate=3e-3,
        epochs=3, base_url=server.url,
    )  # fmt: skip
    online.observe(rule)
    state = SimpleNamespace(global_step=1, is_world_process_zero=True)

    call = batch(60, seed=1)
    assert rule(**call, completion_ids=None) == [1.0, 0.0] * 60  # the rule's outcomes, which the callback keeps
    online.on_step_end(None, state, None)
    [update] = online.history
    now = served(server)
    assert now["version"] == update["version"] != first["version"]
    assert now["path"] == str(root / "updates" / "step-1")
    evaluation = update["eval"]
    assert evaluation["model_version"] == update["version"]
    assert evaluation["counts"]["pairs"] > 5  # held-out prompts: never trained on
    assert evaluation["ranking_accuracy"] >= 0.9 and evaluation["auroc"] >= 0.9
    assert evaluation["drift"] is None or evaluation["drift"]["items"] == 0  # nothing scored by the start version

    # the next call is scored by the new version, and TRL's log_metric gets the evaluation
    logged: dict[str, float] = {}
    results = scored.results(call["completions"][:2], None, {}, call["prompts"][:2])[1]
    assert {result.components["rm"].model_version for result in results if result} == {update["version"]}
    rule(**batch(60, seed=2), completion_ids=None, log_metric=lambda name, value: logged.setdefault(name, value))
    assert logged["online_rm/ranking_accuracy"] == evaluation["ranking_accuracy"]
    assert "online_rm/train_loss" in logged

    state.global_step = 2
    online.on_step_end(None, state, None)
    second = online.history[-1]
    assert second["version"] != update["version"] and served(server)["version"] == second["version"]
    drift = second["eval"]["drift"]
    assert drift["previous_version"] == update["version"] and drift["items"] > 0  # the probe, scored by both
    rule.close()
    scored.close()


def test_a_reload_the_verifier_refuses_leaves_training_going_on_the_version_serving(
    server: Server, tmp_path: Path
) -> None:
    """Checkpoints written outside VERIFIER_MODEL_ROOTS are refused (422): the update logs it and returns, the run
    goes on (a raised error would stop GRPO hours in), and the model serving is unchanged."""
    before = served(server)
    rule = VerifierReward("math", base_url=server.url)
    online = OnlineRewardModel("rm", checkpoint=before["path"], output_dir=tmp_path / "elsewhere", every_steps=1,
                               base_url=server.url)  # fmt: skip
    online.observe(rule)
    rule(**batch(20, seed=3), completion_ids=None)
    assert online.update(1) is None
    [entry] = online.history
    assert "HTTP 422" in entry["error"] and (tmp_path / "elsewhere" / "step-1" / "config.json").is_file()
    assert served(server)["version"] == before["version"]
    rule.close()
