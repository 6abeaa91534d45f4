"""The clients and reward functions against a real verifier (`python -m verifier_service`) on loopback."""

from __future__ import annotations

import asyncio
import logging
import os
import re
import signal
import threading
from pathlib import Path
from typing import Any

import httpx
import pytest

import tests.conftest as conftest
from tests.conftest import Server, running_server
from trainer_client import (
    AsyncVerifierClient,
    AsyncVerifierReward,
    ClientConfig,
    VerifierClient,
    VerifierNotReadyError,
    VerifierRequestError,
    VerifierReward,
)
from verifier_service.schema import CodeSpec, FormatOptions, MathSpec, ScoreItem, StdioTest

FAST_RETRY = ClientConfig(max_retries=2, backoff_base_s=0.05, backoff_max_s=0.2, connect_timeout_s=2)


def test_every_component_round_trips(server: Server) -> None:
    items = [
        ScoreItem(id="a", completion="<think>3*4</think>The answer is $\\boxed{12}$.", math=MathSpec(gold="12")),
        ScoreItem(id="b", completion="<think>hm</think>13", math=MathSpec(gold="12"), format=FormatOptions()),
        ScoreItem(id="c", completion="no tags", format=FormatOptions()),
        ScoreItem(id="d", completion="\\boxed{3}", math=MathSpec(gold="\\frac{")),
    ]
    with VerifierClient(server.url) as client:
        got = client.score(items)
    assert [r.id for r in got] == ["a", "b", "c", "d"]
    assert [r.reward for r in got] == [1.0, 1.0, 0.0, None]
    assert got[0].components["math"].verdict == "correct" and got[0].components["math"].extracted == "12"
    assert got[1].components["math"].verdict == "wrong" and got[1].components["format"].verdict == "ok"
    assert got[2].components["format"].verdict == "missing_open_tag"
    assert got[3].status == "error" and got[3].components["math"].verdict == "gold_unparseable"


def test_async_client_chunks_a_big_batch_against_the_real_server(server: Server) -> None:
    items = [
        ScoreItem(id=str(i), completion=f"<think>x</think>The answer is {i}.", math=MathSpec(gold=str(i - i % 2)))
        for i in range(700)
    ]

    async def run() -> list[float | None]:
        async with AsyncVerifierClient(server.url, config=ClientConfig(chunk_size=100)) as client:
            await client.wait_until_ready(30)
            return [r.reward for r in await client.score(items)]

    assert asyncio.run(run()) == [1.0 if i % 2 == 0 else 0.0 for i in range(700)]


@pytest.mark.parametrize("suffix", ["/v1/score", "/v1/score/", "/"])
def test_a_url_given_with_the_score_route_or_a_slash_is_its_base(server: Server, suffix: str) -> None:
    """What a user copies from the docs: the clients and rewards add the route themselves, once."""
    url = server.url + suffix
    item = ScoreItem(completion="The answer is 4.", math=MathSpec(gold="4"))
    with VerifierClient(url) as client:
        client.wait_until_ready(30)
        assert client.core.score_url == server.url + "/v1/score"
        assert [r.reward for r in client.score([item])] == [1.0]

    async def run() -> list[float | None]:
        async with AsyncVerifierClient(url) as client:
            await client.wait_until_ready(30)
            return [r.reward for r in await client.score([item])]

    assert asyncio.run(run()) == [1.0]
    for kind in (VerifierReward, AsyncVerifierReward):
        reward = kind("math", base_url=url)
        got = reward(prompts=["Q"], completions=["The answer is 4."], solution=["4"])
        assert (asyncio.run(got) if asyncio.iscoroutine(got) else got) == [1.0]


def test_reward_functions_against_the_real_server(server: Server) -> None:
    completions = [
        [{"role": "assistant", "content": "<think>6*7=42</think>The answer is 42."}],
        [{"role": "assistant", "content": "The answer is 42."}],
        [{"role": "assistant", "content": "<think>6*7=41</think>The answer is 41."}],
    ]
    columns: dict[str, Any] = {
        "prompts": ["q"] * 3,
        "completions": completions,
        "completion_ids": None,
        "solution": ["42"] * 3,
    }
    accuracy, fmt = VerifierReward("math", base_url=server.url), VerifierReward("format", base_url=server.url)
    combined = AsyncVerifierReward(["math", "format"], base_url=server.url, weights={"math": 1.0, "format": 0.5})
    try:
        assert accuracy(**columns) == [1.0, 1.0, 0.0]
        assert fmt(**columns) == [1.0, 0.0, 1.0]
        assert asyncio.run(call_and_close(combined, columns)) == [1.5, 1.0, 0.5]
    finally:
        accuracy.close()
        fmt.close()


async def call_and_close(reward: AsyncVerifierReward, columns: dict[str, Any]) -> list[float | None]:
    try:
        return await reward(**columns)
    finally:
        await reward.aclose()  # on the loop that opened its connections


class Metrics:
    def __init__(self) -> None:
        self.values: dict[str, float] = {}

    def __call__(self, name: str, value: float) -> None:
        self.values[name] = value


def test_the_overlong_reward_against_the_real_server(server: Server) -> None:
    """DAPO's penalty from TRL's completion_ids: the length and, with the EOS and pad ids, the truncation."""
    reward = AsyncVerifierReward("overlong", base_url=server.url, max_tokens=10, buffer_tokens=4, eos_token_id=[2, 7],
                                 pad_token_id=0)  # fmt: skip
    ids = [[5, 2], [5] * 7 + [2], [5] * 9 + [7], [5] * 8 + [0], [5] * 10, [5] * 3]
    metrics = Metrics()
    batch: dict[str, Any] = {"prompts": ["q"] * 6, "completions": ["text"] * 6, "completion_ids": ids}
    rewards = asyncio.run(call_and_close(reward, {**batch, "log_metric": metrics}))
    # 2 tokens: within budget; 8: halfway into the buffer; 10 ending in the second EOS id: at the cap; 9 ending in
    # padding; 10 and 3 tokens ending in neither: truncated, whatever the length
    assert rewards == [0.0, -0.5, -1.0, -0.75, -1.0, -1.0]
    assert metrics.values["verifier_overlong/overlong/truncated"] == pytest.approx(2 / 6)
    assert metrics.values["verifier_overlong/overlong/within_budget"] == pytest.approx(1 / 6)
    # without the ids the length is unknown: the verifier does not guess
    unknown = VerifierReward("overlong", base_url=server.url, max_tokens=10)
    assert unknown(prompts=["q"], completions=["text"]) == [None]
    unknown.close()


def test_the_repetition_reward_against_the_real_server(server: Server) -> None:
    reward = VerifierReward("repetition", base_url=server.url)
    fresh = "<think>Add the two numbers and check the sum twice.</think>So the total is forty-two apples in all."
    looping = "<think>Let me see.</think>" + "I will try again. " * 30
    half = " ".join(["alpha beta gamma delta"] * 2 + ["one two three four five six seven eight nine ten eleven"])
    metrics = Metrics()
    rewards = reward(prompts=["q"] * 3, completions=[fresh, looping, half], log_metric=metrics)
    reward.close()
    assert rewards[0] == 0.0 and rewards[1] == -1.0
    assert rewards[2] is not None and -1.0 < rewards[2] < 0.0
    assert metrics.values["verifier_repetition/repetition/loop"] == pytest.approx(1 / 3)
    assert metrics.values["verifier_repetition/repetition/no_repetition"] == pytest.approx(1 / 3)


def test_the_length_reward_against_the_real_server(server: Server) -> None:
    """The length reward sends math with weight 0: its reward is the cosine score alone, gated by math's verdict."""
    reward = VerifierReward("length", base_url=server.url, max_tokens=100, eos_token_id=2)
    completions = ["<think>6*7</think>The answer is 42.", "<think>6*7</think>The answer is 41."]
    ids = [[5] * 49 + [2]] * 2  # 50 tokens: halfway to max_tokens
    rewards = reward(prompts=["q"] * 2, completions=completions, completion_ids=ids, solution=["42", "42"])
    reward.close()
    assert rewards == [pytest.approx(0.75), pytest.approx(-0.75)]


def test_the_choice_and_answer_rewards_against_the_real_server(server: Server) -> None:
    choice = VerifierReward("choice", base_url=server.url, options_column="choices")
    completions = ["<think>7 is prime</think>The answer is \\boxed{B}.", "<think>hm</think>The answer is \\boxed{A}."]
    choices = [["4", "7", "9"]] * 2
    assert choice(prompts=["q"] * 2, completions=completions, solution=[1, "B"], choices=choices) == [1.0, 0.0]
    answer = VerifierReward("answer", base_url=server.url)
    completions = ["<think>France</think><answer>Paris</answer>", "<think>hm</think><answer>Lyon</answer>"]
    assert answer(prompts=["q"] * 2, completions=completions, solution=[["Paris", "City of Light"]] * 2) == [1.0, 0.0]
    choice.close()
    answer.close()


def test_code_round_trip(server: Server) -> None:
    program = "```python\ndef add(a, b):\n    return a + b\n```"
    item = ScoreItem(completion=program, code=CodeSpec(tests=[StdioTest(stdin="", stdout="")]))
    with VerifierClient(server.url) as client:
        [result] = client.score([item])
    assert result.components["code"].verdict == "passed" and result.reward == 1.0
    reward = VerifierReward("code", base_url=server.url)
    tests = [
        {"type": "call", "fn": "add", "args": [1, 2], "expected": 3},
        {"type": "assert", "code": "assert add(2, 2) == 5"},
    ]
    wrong = "<think>hm</think>```python\ndef add(a, b):\n    return a - b\n```"
    assert reward(prompts=["q", "q"], completions=[program, wrong], tests=[tests, tests]) == [0.5, 0.0]
    reward.close()


def test_api_keys_given_missing_wrong_and_from_the_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("VERIFIER_API_KEY", raising=False)
    batch = {"prompts": ["q"], "completions": ["<think>a</think>b"]}
    with running_server(tmp_path, api_key="right") as srv:
        good = VerifierReward("format", base_url=srv.url, api_key="right")
        assert good(**batch) == [1.0]
        for key, problem in (("wrong", "the API key it was given was refused"), (None, "no API key was sent")):
            bad = VerifierReward("format", base_url=srv.url, api_key=key)
            with pytest.raises(VerifierRequestError) as refused:
                bad(**batch)
            assert refused.value.status_code == 401
            assert problem in str(refused.value) and "api_key=" in str(refused.value)
            assert "VERIFIER_API_KEY" in str(refused.value)
            bad.close()
        monkeypatch.setenv("VERIFIER_API_KEY", "right")
        from_env = VerifierReward("format", base_url=srv.url)
        assert from_env(**batch) == [1.0]
        for reward in (good, from_env):
            reward.close()


def test_wait_until_ready_times_out_on_a_closed_port() -> None:
    url = f"http://127.0.0.1:{conftest.free_port()}"
    with VerifierClient(url, config=FAST_RETRY) as client, pytest.raises(VerifierNotReadyError, match="ConnectError"):
        client.wait_until_ready(0.5)


def math_tasks(server: Server) -> float:
    text = httpx.get(f"{server.url}/metrics", timeout=5).text
    return float(next(x for x in text.splitlines() if x.startswith("verifier_math_tasks_total")).split()[-1])


def kill_server_and_workers(server: Server) -> None:
    """SIGKILL the server and its math workers at once, as `docker kill` ends the container."""
    workers = httpx.get(f"{server.url}/readyz", timeout=5).json()["math_workers"]["pids"]
    for pid in [server.process.pid, *workers]:
        os.kill(pid, signal.SIGKILL)


@pytest.mark.slow
def test_server_killed_mid_run_gives_none_then_rewards_return_after_restart(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    port = conftest.free_port()  # the restarted server comes back on the same port
    reward = VerifierReward("math", base_url=f"http://127.0.0.1:{port}", client_config=FAST_RETRY)
    batch = {
        "prompts": ["q"] * 200,
        "completions": [f"<think>work {i}</think>The answer is {i % 50}." for i in range(200)],
        "solution": [str(i % 50) for i in range(200)],
    }
    # one absurd answer keeps the batch on the server until the math deadline (5 s): time to kill it mid-request
    slow_batch = {key: [*values, values[0]] for key, values in batch.items()}
    slow_batch["completions"][-1] = "<think>hm</think>The answer is $\\boxed{9^{9^{9^{9}}}}$."
    (tmp_path / "first").mkdir()
    (tmp_path / "second").mkdir()
    with running_server(tmp_path / "first", port=port, math_timeout_s=5) as srv:
        assert reward(**batch) == [1.0] * 200
        in_flight: list[list[float | None]] = []
        worker = threading.Thread(target=lambda: in_flight.append(reward(**slow_batch)))
        with caplog.at_level(logging.WARNING, logger="trainer_client"):
            before = math_tasks(srv)
            worker.start()
            for _ in range(3000):  # until the server is working on the batch (at most ~30 s)
                if math_tasks(srv) > before:
                    break
                threading.Event().wait(0.01)
            kill_server_and_workers(srv)
            worker.join(60)
            srv.process.wait(30)  # gone, with its listening socket: the next call is refused, retried, given up
            after = reward(prompts=["q"], completions=["The answer is 1."], solution=["1"])
    assert in_flight == [[None] * 201]
    assert after == [None]
    assert caplog.text.count("no answer from the verifier") == 2
    assert "ConnectError" in caplog.text

    with running_server(tmp_path / "second", port=port) as srv:
        assert srv.url == reward.base_url
        assert reward(**batch) == [1.0] * 200
    reward.close()


def answered(url: str) -> float:
    """Score requests a live verifier has answered with 200, from its /metrics."""
    text = httpx.get(f"{url}/metrics", timeout=10).text
    found = re.search(r'^verifier_requests_total\{status="200"\} (\S+)$', text, re.M)
    return float(found.group(1)) if found else 0.0


def test_several_urls_share_a_batch_and_one_going_away_costs_nothing(server: Server, tmp_path: Path) -> None:
    """Two real verifiers behind one client: the chunks of a batch are spread over both; once one is stopped, every
    chunk meant for it is retried on the other, and the batch still comes back whole and right."""
    batch = [ScoreItem(id=str(i), completion=f"The answer is {i}.", math=MathSpec(gold=str(i))) for i in range(400)]
    config = ClientConfig(chunk_size=25, max_concurrency=4, backoff_base_s=0.05, backoff_max_s=0.2)
    with running_server(tmp_path, math_workers=1) as second:
        before = answered(server.url), answered(second.url)
        with VerifierClient(f"{server.url},{second.url}", config=config) as client:
            client.wait_until_ready(30)
            assert [r.reward for r in client.score(batch)] == [1.0] * 400
            shares = answered(server.url) - before[0], answered(second.url) - before[1]
            assert sum(shares) == 16 and min(shares) >= 4, shares
            second.process.terminate()
            second.process.wait(timeout=15)
            assert [r.reward for r in client.score(batch)] == [1.0] * 400
    assert answered(server.url) - before[0] == shares[0] + 16  # all of the second batch, whichever URL came first
