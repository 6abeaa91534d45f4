"""The trainer adapters against a real verifier on loopback, in the shapes their trainers call them: verl's functions
(per-sample async calls, the sync twin from many threads, the batch signature), slime's custom reward model with
duck-typed `Sample`s, NeMo-RL's environment with message logs, OpenRLHF's reward function. The same adapters against
the trainers' own packages: tests/interop (overlay virtualenv)."""

from __future__ import annotations

import asyncio
import re
import sys
import threading
import types
from types import SimpleNamespace
from typing import Any

import httpx
import pytest

from tests.conftest import Server, free_port
from trainer_client import VerifierConnectionError, VerifierUnjudgedError
from trainer_client.integrations import coalesce, nemo_rl, slime, verl
from trainer_client.integrations.common import AdapterConfig
from trainer_client.integrations.openrlhf_reward_func import reward_func

RIGHT, WRONG = "<think>6 * 7 = 42</think>The answer is \\boxed{42}.", "<think>6 * 7 = 41</think>The answer is 41."
UNPARSEABLE_GOLD = "\\frac"  # the verifier cannot judge against it: reward null, verdict gold_unparseable


def score_requests(server: Server) -> float:
    """How many /v1/score requests the verifier has answered with 200."""
    text = httpx.get(f"{server.url}/metrics", timeout=10).text
    found = re.search(r'^verifier_requests_total\{status="200"\} (\S+)$', text, re.M)
    return float(found[1]) if found else 0.0


# ---------------------------------------------------------------------------------------------------------- verl


def test_verl_concurrent_calls_coalesce_into_one_request_and_each_gets_its_own_outcome(server: Server) -> None:
    golds = ["42", "41", "42", UNPARSEABLE_GOLD] * 16

    async def step(**options: Any) -> list[Any]:
        calls = [verl.compute_score("openai/gsm8k", RIGHT, gold, {}, url=server.url, **options) for gold in golds]
        return await asyncio.gather(*calls, return_exceptions=True)

    before = score_requests(server)
    results = asyncio.run(step(window_ms=500, idle_ms=200))
    assert score_requests(server) - before == 1
    outcomes = [type(r).__name__ if isinstance(r, BaseException) else r["score"] for r in results]
    assert outcomes == [1.0, 0.0, 1.0, "VerifierUnjudgedError"] * 16  # only the unjudged calls raise
    fallback = asyncio.run(step(on_unjudged=-1.0))
    assert [(r["score"], r["verifier_judged"]) for r in fallback] == [
        (1.0, 1.0),
        (0.0, 1.0),
        (1.0, 1.0),
        (-1.0, 0.0),
    ] * 16


def test_verl_keeps_working_when_the_event_loop_changes_and_closes_each_loops_client(server: Server) -> None:
    config = AdapterConfig.from_kwargs({"url": server.url})
    baseline = coalesce.active_loops()

    async def one_call() -> tuple[dict[str, float], coalesce.Coalescer]:
        result = await verl.compute_score("openai/gsm8k", RIGHT, "42", url=server.url)
        return result, await coalesce.coalescer_for(config)

    first, first_coalescer = asyncio.run(one_call())
    second, second_coalescer = asyncio.run(one_call())  # a module-global client fails here: "Event loop is closed"
    assert first == second == {"score": 1.0, "acc": 1.0, "verifier_judged": 1.0}
    assert first_coalescer is not second_coalescer
    assert first_coalescer.client._http.is_closed and second_coalescer.client._http.is_closed  # closed with the loop
    assert coalesce.active_loops() == baseline


def test_verl_sync_twin_from_many_threads_coalesces(server: Server) -> None:
    threads, barrier = 32, threading.Barrier(32)
    results: list[dict[str, float] | None] = [None] * threads

    def call(index: int) -> None:
        barrier.wait()
        completion = RIGHT if index % 2 == 0 else WRONG
        results[index] = verl.compute_score_sync(
            "openai/gsm8k", completion, "42", url=server.url, window_ms=300, idle_ms=300
        )

    before = score_requests(server)
    workers = [threading.Thread(target=call, args=(i,)) for i in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(60)
    assert [r["score"] if r else None for r in results] == [1.0, 0.0] * (threads // 2)
    assert score_requests(server) - before <= 2  # one window (two if the threads straddle its end), not 32


def test_verl_batch_signature_is_one_request(server: Server) -> None:
    before = score_requests(server)
    got = verl.compute_score_batch(
        ["openai/gsm8k", "openai/gsm8k", "codecontests"],
        [RIGHT, WRONG, "```python\nprint(sum(map(int, input().split())))\n```"],
        ["42", "42", '{"inputs": ["1 2\\n", "5 5\\n"], "outputs": ["3\\n", "10\\n"]}'],
        [{}, {}, {}],
        url=server.url,
    )
    assert [r["score"] for r in got] == [1.0, 0.0, 1.0]
    assert score_requests(server) - before == 1


def test_verl_unjudged_sample_raises_naming_the_verdict(server: Server) -> None:
    with pytest.raises(VerifierUnjudgedError, match="math: gold_unparseable") as raised:
        verl.compute_score_sync("openai/gsm8k", RIGHT, UNPARSEABLE_GOLD, None, url=server.url)
    assert "The answer is" not in str(raised.value)  # never the completion
    assert "on_unjudged" in str(raised.value)  # what to do about it


def test_verl_extra_info_spec_and_component_options(server: Server) -> None:
    spec = {"verifier": {"math": {"gold": "42"}, "format": {}}}
    assert verl.compute_score_sync("x", RIGHT, "not used", spec, url=server.url)["score"] == 2.0
    no_think = "The answer is 42."
    with_format = verl.compute_score_sync("openai/gsm8k", no_think, "42", url=server.url, format={})
    assert with_format == {"score": 1.0, "acc": 1.0, "verifier_judged": 1.0}  # math 1 + format 0


def test_verl_with_the_verifier_down_raises_a_connection_error() -> None:
    url = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    with pytest.raises(VerifierConnectionError, match="ConnectError"):
        verl.compute_score_sync("openai/gsm8k", RIGHT, "42", url=url, max_retries=0)


# --------------------------------------------------------------------------------------------------------- slime


def sample(response: str, label: Any, metadata: dict[str, Any] | None = None) -> SimpleNamespace:
    """The fields of slime's `Sample` the adapter reads and writes."""
    return SimpleNamespace(prompt="q", response=response, label=label, metadata=metadata or {}, reward=None,
                           remove_sample=False)  # fmt: skip


def slime_args(server: Server | None, **kwargs: Any) -> SimpleNamespace:
    return SimpleNamespace(**{"rm_url": server.url if server else None, "reward_key": None, **kwargs})


def test_slime_one_sample_and_concurrent_samples(server: Server) -> None:
    async def rollout() -> list[Any]:
        samples = [sample(RIGHT, "42"), sample(WRONG, "42"), sample(RIGHT, {"math": {"gold": "42"}, "format": {}})]
        return await asyncio.gather(*(slime.rm(slime_args(server), s) for s in samples))

    before = score_requests(server)
    assert asyncio.run(rollout()) == [1.0, 0.0, 2.0]
    assert score_requests(server) - before == 1


def test_slime_group_removes_an_unjudged_sample_with_the_groups_mean(server: Server) -> None:
    group = [sample(RIGHT, "42"), sample(WRONG, "42"), sample(RIGHT, UNPARSEABLE_GOLD), sample(RIGHT, "42")]
    before = score_requests(server)
    rewards = asyncio.run(slime.rm(slime_args(server, group_rm=True), group))
    assert score_requests(server) - before == 1
    assert rewards == [1.0, 0.0, pytest.approx(2 / 3), 1.0]
    assert [s.remove_sample for s in group] == [False, False, True, False]
    alone = sample(RIGHT, UNPARSEABLE_GOLD)
    assert asyncio.run(slime.rm(slime_args(server), alone)) == 0.0 and alone.remove_sample


def test_slime_reward_key_gives_a_dict_and_the_url_may_come_from_the_environment(
    server: Server, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("VERIFIER_URL", server.url)
    args = slime_args(None, reward_key="reward")
    got = asyncio.run(slime.rm(args, [sample(RIGHT, "42"), sample(RIGHT, UNPARSEABLE_GOLD)]))
    assert got == [{"reward": 1.0, "acc": 1.0, "verifier_judged": 1.0},
                   {"reward": 1.0, "acc": 1.0, "verifier_judged": 0.0}]  # fmt: skip
    with pytest.raises(ValueError, match="not one of this reward's keys"):
        asyncio.run(slime.rm(slime_args(None, reward_key="score"), sample(RIGHT, "42")))


# ------------------------------------------------------------------------------------------------------- NeMo-RL


def log(answer: str) -> list[dict[str, Any]]:
    return [{"role": "user", "content": "What is 6 * 7?"}, {"role": "assistant", "content": answer, "token_ids": []}]


def test_nemo_rl_step_scores_a_batch_in_one_request(server: Server) -> None:
    import torch

    env = nemo_rl.RewardVerifierEnvironment({"url": server.url})
    metadata = [{"ground_truth": "42"}, {"ground_truth": "42"}, {"verifier": {"math": {"gold": "42"}, "format": {}}}]
    before = score_requests(server)
    out = env.step([log(RIGHT), log(WRONG), log(RIGHT)], metadata)
    assert score_requests(server) - before == 1
    assert isinstance(out, nemo_rl.EnvironmentResult)  # nemo_rl is not installed here: the same fields
    assert out.rewards.tolist() == [1.0, 0.0, 2.0] and out.rewards.dtype == torch.float32
    assert out.terminateds.tolist() == [1.0, 1.0, 1.0] and out.next_stop_strings == [None, None, None]
    assert out.answers == ["42", "41", "42"]
    assert [o["content"] for o in out.observations] == ["Environment: correct", "Environment: incorrect",
                                                        "Environment: correct"]  # fmt: skip
    assert [m["verifier_judged"] for m in out.metadata] == [1.0, 1.0, 1.0]
    _, metrics = env.global_post_process_and_metrics({"rewards": out.rewards, "is_end": torch.ones(3)})
    assert metrics == {"accuracy": 1.0, "fraction_of_samples_properly_ended": 1.0}


def test_nemo_rl_unjudged_raises_or_is_a_flagged_fallback(server: Server) -> None:
    metadata = [{"ground_truth": "42"}, {"ground_truth": UNPARSEABLE_GOLD}]
    with pytest.raises(VerifierUnjudgedError, match="gold_unparseable"):
        nemo_rl.RewardVerifierEnvironment({"url": server.url}).step([log(RIGHT), log(RIGHT)], metadata)
    env = nemo_rl.RewardVerifierEnvironment({"url": server.url, "on_unjudged": 0.0})
    out = env.step([log(RIGHT), log(RIGHT)], metadata)
    assert out.rewards.tolist() == [1.0, 0.0]
    assert [m["verifier_judged"] for m in out.metadata] == [1.0, 0.0]
    assert out.observations[1]["content"] == "Environment: not judged"


def test_nemo_rl_register_fills_both_registries(monkeypatch: pytest.MonkeyPatch) -> None:
    """NeMo-RL is not installable here: its two registries, as modules of the same names."""
    actors: dict[str, str] = {}
    envs: dict[str, str] = {}

    def register_env(name: str, fqn: str) -> None:
        if name in envs:
            raise ValueError(f"Env name {name} already registered")
        envs[name] = fqn

    modules = {
        "nemo_rl": types.ModuleType("nemo_rl"),
        "nemo_rl.distributed.ray_actor_environment_registry": SimpleNamespace(ACTOR_ENVIRONMENT_REGISTRY=actors),
        "nemo_rl.distributed.virtual_cluster": SimpleNamespace(PY_EXECUTABLES=SimpleNamespace(SYSTEM="python")),
        "nemo_rl.environments.utils": SimpleNamespace(register_env=register_env),
    }
    for name, module in modules.items():
        monkeypatch.setitem(sys.modules, name, module)
    nemo_rl.register()
    fqn = "trainer_client.integrations.nemo_rl.RewardVerifierActor"
    assert envs == {"reward_verifier": fqn} and actors == {fqn: "python"}


# ------------------------------------------------------------------------------------------------------ OpenRLHF


def test_openrlhf_reward_func_against_the_verifier(server: Server, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VERIFIER_URL", server.url)
    prompt = "<|im_start|>user\nWhat is 6 * 7?<|im_end|>\n<|im_start|>assistant\n"
    queries = [prompt + RIGHT + "<|im_end|>", prompt + WRONG + "<|im_end|><|endoftext|>"]
    got = reward_func(queries, [prompt, prompt], ["42", '{"math": {"gold": "42"}, "format": {}}'])
    assert got == {  # the second: math 0 + format 1, over the two weights
        "rewards": [1.0, 1.0],
        "scores": [1.0, 0.5],
        "extra_logs": {"verifier_judged": [1.0, 1.0], "verifier_math": [1.0, 0.0]},
    }
    with pytest.raises(VerifierUnjudgedError, match="gold_unparseable"):
        reward_func([queries[0]], [prompt], [UNPARSEABLE_GOLD])


CHAT = "<|im_start|>user\nWhat is 6 * 7?<|im_end|>\n<|im_start|>assistant\n"
CJK = "<|im_start|>user\n六乘以七等于多少？请一步一步地思考，把答案放在方框里。<|im_end|>\n<|im_start|>assistant\n"
LONG = "Some context. " * 40 + "What is 6 * 7? Answer after thinking, in a box:\n"
# (query, prompt, label): OpenRLHF's shapes, with the end tokens of several chat templates, a prompt OpenRLHF cut on
# the left, weights, and labels as gold answers and as specs
SAME_INPUTS = [
    (CHAT + RIGHT + "<|im_end|>", CHAT, "42"),
    (CHAT + WRONG + "<|im_end|><|endoftext|>", CHAT, '{"math": {"gold": "42"}, "format": {}}'),
    (CHAT + "<think>6*7</think>\\boxed{42}<｜end▁of▁sentence｜>", CHAT, '{"math": {"gold": "42"}, "format": {}}'),
    ("[INST] 6*7? [/INST]" + RIGHT + " </s>", "[INST] 6*7? [/INST]", '{"format": {}, "repetition": {}}'),
    (LONG[-120:] + RIGHT + "<|eot_id|><|end_of_text|>", LONG, "42"),
    (
        CHAT + "<think>6*7</think>42" + "<|eom_id|>" + "<|pad|>" * 3,
        CHAT,
        '{"math": {"gold": "42"}, "format": {}, "weights": {"format": 0.5}}',
    ),
    (CHAT + WRONG, CHAT, '{"answer": {"gold": "42"}, "format": {}, "weights": {"answer": 2, "format": -1}}'),
    # cut on the left with less than 32 characters of the prompt left, and inside a character (a byte-level
    # tokenizer's ids cut mid-character decode to U+FFFD): the prompt's end is found, so the format passes
    (CHAT[-10:] + RIGHT + "<|im_end|>", CHAT, '{"math": {"gold": "42"}, "format": {}}'),
    ("\ufffd\ufffd" + CJK[-30:] + RIGHT + "<|im_end|>", CJK, '{"math": {"gold": "42"}, "format": {}}'),
]
# OpenRLHF's query always holds its prompt: one that does not has no response to tell apart from it
NOT_HELD = ("<|im_start|>user\nWhat is 6*7?<|im_end|>\n" + RIGHT, CHAT, '{"math": {"gold": "42"}, "format": {}}')


def test_openrlhfs_file_and_url_modes_answer_the_same_for_the_same_samples(
    server: Server, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One definition of what OpenRLHF reads (`scores`, the metric keys of `extra_logs`, the end tokens stripped),
    whichever way it calls the verifier: the reward-function file, or the route at the URL's defaults."""
    monkeypatch.setenv("VERIFIER_URL", server.url)
    queries, prompts, labels = (list(column) for column in zip(*SAME_INPUTS, strict=True))
    from_file = reward_func(queries, prompts, labels)
    body = {"query": queries, "prompts": prompts, "labels": labels}
    from_url = httpx.post(server.url + "/v1/compat/openrlhf", json=body, timeout=60).json()
    assert from_file == from_url
    assert from_file["rewards"] == [1.0, 1.0, 2.0, 1.0, 1.0, 1.5, -1.0, 2.0, 2.0]  # end tokens gone: format ok
    assert set(from_file["extra_logs"]) == {"verifier_judged", "verifier_math"}
    for one in SAME_INPUTS:  # and one sample at a time, as OpenRLHF calls both
        single = {"query": [one[0]], "prompts": [one[1]], "labels": [one[2]]}
        assert reward_func(*zip(one, strict=True)) == httpx.post(server.url + "/v1/compat/openrlhf", json=single).json()
    # a query without its prompt: refused both ways (not the prompt's text scored as the response), the same words
    with pytest.raises(ValueError, match=r"^the query does not hold its prompt") as refused:
        reward_func(*zip(NOT_HELD, strict=True))
    body = {"query": [queries[0], NOT_HELD[0]], "prompts": [CHAT, NOT_HELD[1]], "labels": ["42", NOT_HELD[2]]}
    answer = httpx.post(server.url + "/v1/compat/openrlhf", json=body)
    assert answer.status_code == 422
    assert answer.json()["errors"] == [
        {"loc": "query.1", "msg": str(refused.value).removeprefix("the query "), "type": "value_error"}
    ]
