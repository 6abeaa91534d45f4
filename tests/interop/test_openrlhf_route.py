"""POST /v1/compat/openrlhf against OpenRLHF 0.11.2's own code: its `SingleTurnAgentExecutor` in URL mode
(`--reward.remote_url`) posts to the live verifier, and `SamplesGenerator._process_response_into_experience` turns
the answer into an Experience, as in a training step. Only the generation engine is a stand-in (it returns fixed
token ids); vLLM, DeepSpeed and the Ray actor modules, which those code paths do not run, are stubbed out of
`sys.modules` as OpenRLHF's own tests do."""

from __future__ import annotations

import asyncio
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any
from unittest.mock import MagicMock

import httpx
import pytest

from tests.client.tiny_model import build_tokenizer
from tests.conftest import Server

# Imported by the modules under test, never run by them here (and not installable on a CPU-only machine).
STUBBED = (
    "vllm",
    "openrlhf.models",
    "openrlhf.models.utils",
    "openrlhf.trainer.ray",
    "openrlhf.trainer.ray.vllm_engine",
    "openrlhf.trainer.ray.launcher",
)
TEMPLATE = "<|im_start|>user\nWhat is 6*7? Put the answer in \\boxed{{}}.<|im_end|>\n<|im_start|>assistant\n{}"
PROMPT = TEMPLATE.format("")
RIGHT = "<think>6*7=42</think>The answer is \\boxed{42}."
WRONG = "<think>6*7=48</think>The answer is \\boxed{48}."


@pytest.fixture(scope="module")
def openrlhf() -> Iterator[SimpleNamespace]:
    """OpenRLHF's modules, imported with the stubs in place; sys.modules is restored afterwards."""
    saved = {name: sys.modules.get(name) for name in STUBBED}
    sys.modules.update({name: MagicMock() for name in STUBBED})
    try:
        from openrlhf.trainer.ppo_utils import experience_maker, samples_generator
        from openrlhf.utils.agent import SingleTurnAgentExecutor

        yield SimpleNamespace(
            executor=SingleTurnAgentExecutor,
            to_experience=samples_generator.SamplesGenerator._process_response_into_experience,
            experience_maker=experience_maker,
        )
    finally:
        for name, module in saved.items():
            if module is None:
                sys.modules.pop(name, None)
            else:
                sys.modules[name] = module


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """A small byte-level BPE tokenizer whose `<|im_start|>` and `<|im_end|>` are special tokens, as Qwen's are."""
    from transformers import AutoTokenizer

    path: Path = tmp_path_factory.mktemp("tokenizer")
    build_tokenizer(path, [PROMPT, RIGHT, WRONG, "The answer is 42.", "<think>6*7</think>"] * 20)
    return AutoTokenizer.from_pretrained(path)


class FakeEngine:
    """Stands in for the vLLM engine actor: generates `response` (ids ending in the end-of-turn token)."""

    def __init__(self, tokenizer: Any, response: str) -> None:
        self.ids = tokenizer(response, add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id]
        self.text = response

    async def generate(self, prompt_token_ids: list[int], sampling_params: Any, multi_modal_data: Any = None) -> Any:
        output = SimpleNamespace(token_ids=self.ids, text=self.text, finish_reason="stop", logprobs=None)
        return SimpleNamespace(outputs=[output])


def rollout(openrlhf: SimpleNamespace, tokenizer: Any, url: str, response: str, label: str) -> dict[str, Any]:
    """One sample through OpenRLHF: generation, then the reward request to `url`."""
    executor = openrlhf.executor(url)
    params = SimpleNamespace(max_tokens=64, logprobs=None)
    engine = FakeEngine(tokenizer, response)
    result: dict[str, Any] = asyncio.run(executor.execute(PROMPT, label, params, 256, tokenizer, engine))
    return result


def answered(verifier: Server, status: int) -> float:
    """How many score requests the verifier has answered with `status`."""
    text = httpx.get(f"{verifier.url}/metrics", timeout=10).text
    found = re.search(rf'^verifier_requests_total\{{status="{status}"\}} (\S+)$', text, re.M)
    return float(found[1]) if found else 0.0


def test_the_query_openrlhf_sends_holds_the_template_and_the_end_token(
    openrlhf: SimpleNamespace, tokenizer: Any
) -> None:
    """What the route strips: OpenRLHF decodes prompt and response together, special tokens included."""
    ids = tokenizer(PROMPT, add_special_tokens=False)["input_ids"] + FakeEngine(tokenizer, RIGHT).ids
    assert tokenizer.decode(ids, skip_special_tokens=False) == PROMPT + RIGHT + "<|im_end|>"


def test_right_and_wrong_answers_become_rewards(openrlhf: SimpleNamespace, tokenizer: Any, verifier: Server) -> None:
    url = f"{verifier.url}/v1/compat/openrlhf"
    right = rollout(openrlhf, tokenizer, url, RIGHT, "42")
    assert (right["reward"], right["scores"]) == ([1.0], [1.0])
    assert right["extra_logs"] == {"verifier_judged": [1.0], "verifier_math": [1.0]}
    experience = openrlhf.to_experience(SimpleNamespace(args=None), right, max_len=256)
    assert experience.rewards.flatten().tolist() == [1.0] and experience.scores.flatten().tolist() == [1.0]
    assert experience.info["verifier_judged"].flatten().tolist() == [1.0]
    wrong = rollout(openrlhf, tokenizer, url, WRONG, "42")
    assert (wrong["reward"], wrong["extra_logs"]["verifier_math"]) == ([0.0], [0.0])
    assert openrlhf.to_experience(SimpleNamespace(args=None), wrong, max_len=256).rewards.flatten().tolist() == [0.0]


def test_components_and_weights_from_the_url(openrlhf: SimpleNamespace, tokenizer: Any, verifier: Server) -> None:
    """The URL as a user passes it to --reward.remote_url: `+` between components, since OpenRLHF splits on commas."""
    url = f"{verifier.url}/v1/compat/openrlhf?components=math+format&weights=math:1+format:0.5"
    right = rollout(openrlhf, tokenizer, url, RIGHT, "42")
    assert (right["reward"], right["scores"]) == ([1.5], [1.0])
    unformatted = rollout(openrlhf, tokenizer, url, "It is \\boxed{42}.", "42")
    assert unformatted["reward"] == [1.0] and unformatted["extra_logs"]["verifier_format"] == [0.0]
    experience = openrlhf.to_experience(SimpleNamespace(args=None), unformatted, max_len=256)
    assert experience.scores.flatten().tolist() == [pytest.approx(2 / 3)]


def test_an_unjudged_sample_fails_the_step_after_five_tries(
    openrlhf: SimpleNamespace, tokenizer: Any, verifier: Server, monkeypatch: pytest.MonkeyPatch
) -> None:
    """503 five times (OpenRLHF waits a second between tries), then no reward: OpenRLHF's experience maker refuses
    the batch rather than train on a made-up number."""
    before = answered(verifier, 503)
    failed = rollout(openrlhf, tokenizer, f"{verifier.url}/v1/compat/openrlhf", RIGHT, "\\frac")
    assert failed["reward"] is None and failed["scores"] is None
    assert answered(verifier, 503) - before == 5
    experience = openrlhf.to_experience(SimpleNamespace(args=None), failed, max_len=256)
    assert experience.rewards is None
    maker = openrlhf.experience_maker
    monkeypatch.setattr(maker, "ray", MagicMock())  # make_experience puts a placeholder in the object store first
    strategy = SimpleNamespace(args=SimpleNamespace(ds=SimpleNamespace(ring_attn_size=1, tensor_parallel_size=1)))
    with pytest.raises(ValueError, match="reward_model_group is required when rewards are not precomputed"):
        maker.RemoteExperienceMaker.make_experience(
            SimpleNamespace(strategy=strategy, reward_model_group=None), [experience]
        )


def test_a_flagged_fallback_flows_into_the_experience(
    openrlhf: SimpleNamespace, tokenizer: Any, verifier: Server
) -> None:
    fallback = rollout(openrlhf, tokenizer, f"{verifier.url}/v1/compat/openrlhf?on_unjudged=0", RIGHT, "\\frac")
    assert (fallback["reward"], fallback["extra_logs"]["verifier_judged"]) == ([0.0], [0.0])
    experience = openrlhf.to_experience(SimpleNamespace(args=None), fallback, max_len=256)
    assert experience.rewards.flatten().tolist() == [0.0] and experience.info["verifier_judged"].tolist() == [[0.0]]
