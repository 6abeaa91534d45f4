"""`VerifierRewards`: one TRL reward function per component, every component of a batch scored in one request."""

from __future__ import annotations

import asyncio
import inspect
import pickle
from typing import Any

import httpx
import pytest

from tests.client.fakes import UNJUDGEABLE, FakeVerifier, judge
from tests.client.test_rewards import FAST, URL, Recorder, is_async_callable
from trainer_client import AsyncVerifierClient, VerifierClient, VerifierRewards
from trainer_client.reward_group import AsyncComponentReward, ComponentReward
from verifier_service.schema import ComponentResult, ItemResult, ScoreItem


def null_when_truncated(item: ScoreItem) -> ItemResult:
    """The fake's rules, and overlong's on_truncated "null" (which the fake does not know)."""
    result = judge(item)
    if item.truncated and item.overlong is not None and item.overlong.on_truncated == "null":
        components = {**result.components, "overlong": ComponentResult(score=None, verdict="truncated")}
        return ItemResult(id=item.id, reward=None, status="error", components=components)
    return result


def make_group(mode: str, fake: FakeVerifier, components: list[str], **kwargs: Any) -> VerifierRewards:
    if mode == "sync":
        client: Any = VerifierClient(URL, config=FAST, http_client=httpx.Client(transport=fake.transport()))
    else:
        client = AsyncVerifierClient(URL, config=FAST, http_client=httpx.AsyncClient(transport=fake.transport()))
    return VerifierRewards(components, base_url=URL, client=client, asynchronous=mode == "async", **kwargs)


def step(group: VerifierRewards, **batch: Any) -> list[list[float | None]]:
    """One TRL step: every function called with the same batch objects (async ones together, as TRL gathers them)."""
    batch.setdefault("prompts", ["p"] * len(batch["completions"]))
    batch.setdefault("completion_ids", [[1, 2]] * len(batch["completions"]))
    if isinstance(group.functions[0], AsyncComponentReward):

        async def together() -> list[list[float | None]]:
            return list(await asyncio.gather(*(function(**batch) for function in group.functions)))

        return asyncio.run(together())
    return [function(**batch) for function in group.functions]


@pytest.fixture(params=["sync", "async"])
def mode(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def test_each_function_returns_its_component_from_one_request(mode: str) -> None:
    fake = FakeVerifier()
    group = make_group(mode, fake, ["math", "format", "repetition"])
    completions = ["<think>so</think> 42", "41", "<think>again again again</think> 42"]
    found = step(group, completions=completions, solution=["42", "42", "42"])
    assert found == [[1.0, 0.0, 1.0], [1.0, 0.0, 1.0], [0.0, 0.0, -1.0]]
    assert len(fake.score_bodies) == 1
    assert [f.__name__ for f in group.functions] == ["verifier_math", "verifier_format", "verifier_repetition"]
    # the next step is a new batch: a new request
    step(group, completions=["<think>a</think> 1"], solution=["1"])
    assert len(fake.score_bodies) == 2


def test_length_reads_the_math_the_accuracy_function_returns(mode: str) -> None:
    """Correctness judged once: math and length in one item, weights as TRL gives them."""
    fake = FakeVerifier()
    options = {"length": {"max_tokens": 100, "mode": "target", "target_tokens": 50}}
    group = make_group(mode, fake, ["math", "length"], options=options, reward_weights=[1.0, 0.5])
    assert step(group, completions=["it is 7", "it is 8"], solution=["7", "7"]) == [[1.0, 0.0], [1.0, -1.0]]
    [body] = fake.score_bodies
    item = body["items"][0]
    assert set(item) >= {"math", "length"} and item["weights"] == {"math": 1.0, "length": 0.5}


def test_the_order_guard_sees_the_weights_trl_applies() -> None:
    """Target length with a wrong answer at 0 is fine beside math of weight 1, refused when math weighs nothing."""
    options = {"length": {"max_tokens": 100, "mode": "target", "target_tokens": 50}}
    VerifierRewards(["math", "length"], options=options)
    with pytest.raises(ValueError, match="wrong answer scores at least as much"):
        VerifierRewards(["math", "length"], options=options, reward_weights=[0.0, 1.0])
    VerifierRewards(["math", "length"], options=options, reward_weights=[0.0, 1.0], allow_order_inversion=True)


def test_code_runs_once_for_the_code_and_length_functions(mode: str) -> None:
    fake = FakeVerifier()
    group = make_group(mode, fake, ["code", "length"], options={"length": {"max_tokens": 10, "correct_from": "code"}})
    tests = [[{"type": "assert", "code": "assert True"}]]
    assert step(group, completions=["pass"], tests=tests) == [[1.0], [1.0]]
    assert len(fake.score_bodies) == 1 and "code" in fake.score_bodies[0]["items"][0]


def test_an_item_that_cannot_be_judged_is_none_for_every_function(mode: str) -> None:
    """TRL leaves a completion out of its group's baseline, with no advantage, only when every reward function
    returns None for it; a None from one function would count as 0 in the sum of the others."""
    group = make_group(mode, FakeVerifier(), ["math", "format"])
    found = step(group, completions=["<think>a</think>1", "<think>a</think>2"], solution=[UNJUDGEABLE, "2"])
    assert found == [[None, 1.0], [None, 1.0]]


def test_on_truncated_null_leaves_a_cut_off_completion_out_of_every_function(mode: str) -> None:
    options = {"overlong": {"max_tokens": 4, "on_truncated": "null"}}
    group = make_group(mode, FakeVerifier(rule=null_when_truncated), ["math", "overlong"], options=options,
                       eos_token_id=2)  # fmt: skip
    found = step(group, completions=["1", "1"], solution=["1", "1"], completion_ids=[[5, 2], [5, 5, 5, 5]])
    assert found == [[1.0, None], [0.0, None]]


def test_each_function_logs_its_own_verdicts(mode: str) -> None:
    rec = Recorder()
    group = make_group(mode, FakeVerifier(), ["math", "format"])
    step(group, completions=["<think>a</think>1", "2"], solution=["1", "1"], log_metric=rec.log_metric)
    assert rec.metrics["verifier_math/math/correct"] == [0.5] and rec.metrics["verifier_format/format/ok"] == [0.5]
    assert "verifier_math/format/ok" not in rec.metrics and "verifier_format/math/correct" not in rec.metrics
    assert rec.metrics["verifier_math/null_rate"] == [0.0]


def test_a_failed_request_reaches_every_function(mode: str) -> None:
    fake = FakeVerifier([httpx.ConnectError("refused")] * 4)
    group = make_group(mode, fake, ["math", "format"], max_consecutive_failures=None)
    assert step(group, completions=["1"], solution=["1"]) == [[None], [None]]


def test_trl_sees_functions_of_the_right_kind_and_they_pickle_together() -> None:
    sync, asynchronous = VerifierRewards(["math", "format"]), VerifierRewards(["math"], asynchronous=True)
    assert all(isinstance(f, ComponentReward) and not is_async_callable(f) for f in sync.functions)
    assert is_async_callable(asynchronous.functions[0]) and inspect.iscoroutinefunction(asynchronous.functions[0])
    copies = pickle.loads(pickle.dumps(sync.functions))
    assert copies[0].group is copies[1].group and copies[0].spec == sync.functions[0].spec


def test_duplicates_and_mismatched_weights_are_refused() -> None:
    with pytest.raises(ValueError, match="distinct"):
        VerifierRewards(["math", "math"])
    with pytest.raises(ValueError, match="2 weights for 1 components"):
        VerifierRewards(["math"], reward_weights=[1.0, 2.0])
