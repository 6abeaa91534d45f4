"""The OpenRLHF reward-function file inside OpenRLHF 0.11.2: its `SingleTurnAgentExecutor` loads the file given as
`--reward.remote_url` and calls `reward_func` after generating; `_process_response_into_experience` turns the answer
into the training `Experience`. vLLM and OpenRLHF's Ray trainer are stubbed (as OpenRLHF's own tests do): the engine
returns a fixed response."""

from __future__ import annotations

import asyncio
import logging
import sys
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any
from unittest.mock import MagicMock, patch

import pytest

import trainer_client.integrations.openrlhf_reward_func as openrlhf_file
from tests.conftest import Server, free_port
from tests.interop.verl_batch import PROMPT

RIGHT = "<think>6 * 7 = 42</think>The answer is \\boxed{42}."
WRONG = "<think>6 * 7 = 41</think>The answer is 41."


class FakeEngine:
    """vLLM's engine as OpenRLHF calls it: `generate(prompt_ids, params)` -> outputs[0] with the response."""

    def __init__(self, tokenizer: Any, response: str) -> None:
        self.tokenizer, self.response = tokenizer, response

    async def generate(self, prompt_token_ids: list[int], params: Any, multi_modal_data: Any = None) -> Any:
        ids = [*self.tokenizer.encode(self.response, add_special_tokens=False), self.tokenizer.eos_token_id]
        output = SimpleNamespace(token_ids=ids, text=self.response, finish_reason="stop", logprobs=None)
        return SimpleNamespace(outputs=[output])


@pytest.fixture(scope="module")
def samples_generator() -> Iterator[Any]:
    stubs = {name: MagicMock() for name in ("vllm", "openrlhf.trainer.ray", "openrlhf.trainer.ray.vllm_engine")}
    with patch.dict(sys.modules, stubs):
        import openrlhf.trainer.ppo_utils.samples_generator as module

        yield module


@pytest.fixture
def agent_log() -> Iterator[list[str]]:
    """What OpenRLHF's agent module logs (its logger does not propagate)."""
    messages: list[str] = []
    handler = logging.Handler()
    handler.emit = lambda record: messages.append(record.getMessage())  # type: ignore[method-assign]
    logger = logging.getLogger("openrlhf.utils.agent")
    logger.addHandler(handler)
    yield messages
    logger.removeHandler(handler)


def generate_and_score(tokenizer: Any, response: str, label: Any) -> dict[str, Any]:
    from openrlhf.utils.agent import SingleTurnAgentExecutor

    executor = SingleTurnAgentExecutor(openrlhf_file.__file__)  # --reward.remote_url /path/to/the/file.py
    params = SimpleNamespace(max_tokens=64, logprobs=None)
    return asyncio.run(executor.execute(PROMPT, label, params, 256, tokenizer, FakeEngine(tokenizer, response)))


def test_rewards_flow_into_openrlhfs_experience(
    verifier: Server, tokenizer: Any, samples_generator: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("VERIFIER_URL", verifier.url)
    cases = [
        (RIGHT, "42", 1.0, 1.0),
        (WRONG, "42", 0.0, 0.0),
        (RIGHT, '{"math": {"gold": "42"}, "format": {}}', 2.0, 1.0),
    ]
    for response, label, reward, score in cases:
        output = generate_and_score(tokenizer, response, label)
        assert (output["reward"], output["scores"]) == ([reward], [score])
        experience = samples_generator.SamplesGenerator._process_response_into_experience(
            SimpleNamespace(args=None), output, max_len=256
        )
        assert experience.rewards.flatten().tolist() == [reward]
        assert experience.scores.flatten().tolist() == [score]
        assert experience.info["verifier_math"].flatten().tolist() == [score]  # math's score: 1 or 0 here
        assert experience.info["verifier_judged"].flatten().tolist() == [1.0]


def test_an_unjudged_label_leaves_the_sample_without_reward_and_says_why(
    verifier: Server, tokenizer: Any, samples_generator: Any, agent_log: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("VERIFIER_URL", verifier.url)
    output = generate_and_score(tokenizer, RIGHT, "\\frac")
    assert output["reward"] is None  # OpenRLHF's experience maker then stops the step: no reward to train on
    experience = samples_generator.SamplesGenerator._process_response_into_experience(
        SimpleNamespace(args=None), output, max_len=256
    )
    assert experience.rewards is None
    assert any("math: gold_unparseable" in message for message in agent_log), agent_log


def test_with_the_verifier_down_the_sample_gets_no_reward(
    tokenizer: Any, agent_log: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("VERIFIER_URL", f"http://127.0.0.1:{free_port()}")  # nothing listens there
    output = generate_and_score(tokenizer, RIGHT, "42")
    assert output["reward"] is None
    assert any("ConnectError" in m for m in agent_log), agent_log
