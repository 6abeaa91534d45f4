"""The TRL reward functions over `httpx.MockTransport`: TRL's contract, inputs, the None policy, metrics."""

from __future__ import annotations

import asyncio
import inspect
import logging
import pickle
from collections.abc import Callable
from typing import Any

import httpx
import pytest
import trl.trainer.utils as trl_utils

from tests.client.fakes import UNJUDGEABLE, FakeVerifier
from trainer_client import (
    AsyncVerifierClient,
    AsyncVerifierReward,
    ClientConfig,
    VerifierClient,
    VerifierRequestError,
    VerifierReward,
    VerifierUnavailableError,
)
from trainer_client.metrics import VERDICTS
from verifier_service.schema import ComponentResult, ItemResult, ScoreItem

URL = "http://verifier.test"
# How the installed TRL names reward functions and detects async ones (TRL < 1.13: `__name__` and
# `inspect.iscoroutinefunction`, which is what these fall back to).
get_callable_name: Callable[[Any], str] = getattr(trl_utils, "get_callable_name", lambda f: f.__name__)
is_async_callable: Callable[[Any], bool] = getattr(trl_utils, "is_async_callable", inspect.iscoroutinefunction)
FAST = ClientConfig(max_retries=1, backoff_base_s=0.001, backoff_max_s=0.002)
Reward = VerifierReward | AsyncVerifierReward


def make_reward(variant: str, handler: Callable[[httpx.Request], httpx.Response], *args: Any, **kwargs: Any) -> Reward:
    """A sync or async (`variant`) reward function over a mock transport; `kwargs` may hold component options
    named like anything but `variant` (length's `mode`, say)."""
    transport = httpx.MockTransport(handler)
    if variant == "sync":
        client = VerifierClient(URL, config=FAST, http_client=httpx.Client(transport=transport))
        return VerifierReward(*args, base_url=URL, client=client, **kwargs)
    aclient = AsyncVerifierClient(URL, config=FAST, http_client=httpx.AsyncClient(transport=transport))
    return AsyncVerifierReward(*args, base_url=URL, client=aclient, **kwargs)


def call(reward: Reward, **kwargs: Any) -> list[float | None]:
    """Call as GRPOTrainer does: keywords only, dataset columns as kwargs."""
    kwargs.setdefault("prompts", ["p"] * len(kwargs["completions"]))
    kwargs.setdefault("completion_ids", [[1, 2]] * len(kwargs["completions"]))
    if isinstance(reward, AsyncVerifierReward):
        return asyncio.run(reward(**kwargs))
    return reward(**kwargs)


@pytest.fixture(params=["sync", "async"])
def mode(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def chat(text: str) -> list[dict[str, str]]:
    return [{"role": "assistant", "content": text}]


# --------------------------------------------------------------------------- TRL's contract


@pytest.mark.parametrize("kind", [VerifierReward, AsyncVerifierReward])
def test_pickle_round_trip_keeps_name_config_and_kind(kind: type[Reward]) -> None:
    reward = kind("math", base_url="http://v:1", name="acc", gold_column="gold", api_key="k")
    copy = pickle.loads(pickle.dumps(reward))
    assert type(copy) is kind
    assert copy.__name__ == "acc" and get_callable_name(copy) == "acc"
    assert copy.spec == reward.spec and copy.base_url == "http://v:1" and copy.api_key == "k"
    assert inspect.iscoroutinefunction(copy) is (kind is AsyncVerifierReward)


def test_pickle_drops_a_live_client_and_the_copy_makes_its_own(mode: str) -> None:
    reward = make_reward(mode, FakeVerifier(), "format")
    assert call(reward, completions=["<think>x</think>y"]) == [1.0]
    copy = pickle.loads(pickle.dumps(reward))
    assert copy._client is None and copy.base_url == URL


def test_trl_detects_the_async_variant_as_async_and_the_sync_one_as_sync() -> None:
    sync, aio = VerifierReward("math"), AsyncVerifierReward("math")
    # TRL 1.6-1.12 call inspect.iscoroutinefunction on the reward itself; later TRL uses is_async_callable.
    assert inspect.iscoroutinefunction(aio) and is_async_callable(aio)
    assert not inspect.iscoroutinefunction(sync) and not is_async_callable(sync)
    assert list(inspect.signature(aio).parameters) == ["prompts", "completions", "completion_ids", "kwargs"]
    assert list(inspect.signature(sync).parameters) == ["prompts", "completions", "completion_ids", "kwargs"]


def test_default_names_say_which_component_trl_logs() -> None:
    assert [VerifierReward(c).__name__ for c in ("math", "format", "code")] == [
        "verifier_math",
        "verifier_format",
        "verifier_code",
    ]
    assert VerifierReward(["math", "format"]).__name__ == "verifier"


def test_plain_and_chat_completions_give_one_reward_each_in_order(mode: str) -> None:
    fake = FakeVerifier()
    reward = make_reward(mode, fake, "math")
    completions: list[Any] = ["so 12", chat("so 13"), "so 99", chat("so 14")]
    assert call(reward, completions=completions, solution=["12", "13", "14", "14"]) == [1.0, 1.0, 0.0, 1.0]
    [body] = fake.score_bodies  # the whole batch in one request
    assert [i["completion"] for i in body["items"]] == ["so 12", "so 13", "so 99", "so 14"]
    assert [i["math"]["gold"] for i in body["items"]] == ["12", "13", "14", "14"]


def test_a_completion_with_a_lone_surrogate_is_scored_not_fatal(mode: str) -> None:
    """No UTF-8 request can carry a lone surrogate: it becomes U+FFFD, and the rest of the batch is scored."""
    fake = FakeVerifier()
    reward = make_reward(mode, fake, "math")
    completions: list[Any] = ["so 12 \ud800", chat("so \udfff13"), "so 14"]
    assert call(reward, completions=completions, solution=["12", "13", "14"]) == [1.0, 1.0, 1.0]
    [body] = fake.score_bodies
    assert [i["completion"] for i in body["items"]][:2] == ["so 12 \ufffd", "so \ufffd13"]


def test_a_large_batch_is_one_call_split_into_chunks_in_order(mode: str) -> None:
    fake = FakeVerifier()
    transport = httpx.MockTransport(fake)
    config = ClientConfig(chunk_size=64)
    client: Any = (
        VerifierClient(URL, config=config, http_client=httpx.Client(transport=transport))
        if mode == "sync"
        else AsyncVerifierClient(URL, config=config, http_client=httpx.AsyncClient(transport=transport))
    )
    reward = (VerifierReward if mode == "sync" else AsyncVerifierReward)("math", client=client)
    golds = [str(i) for i in range(300)]
    completions = [f"it is {g}" if int(g) % 5 else "no idea" for g in golds]
    assert call(reward, completions=completions, solution=golds) == [0.0 if i % 5 == 0 else 1.0 for i in range(300)]
    assert sorted(len(b["items"]) for b in fake.score_bodies) == [44, 64, 64, 64, 64]


def test_format_and_code_rewards(mode: str) -> None:
    fake = FakeVerifier()
    fmt = make_reward(mode, fake, "format")
    assert call(fmt, completions=[chat("<think>r</think>a"), "a"]) == [1.0, 0.0]
    code = make_reward(mode, fake, "code", tests_column="tests")
    tests = [
        [{"type": "assert", "code": "assert f() == 1"}],
        '[{"type": "stdio", "stdin": "", "stdout": "1"}, {"type": "call", "fn": "f", "expected": 1}]',
    ]
    assert call(code, completions=["pass", "fail"], tests=tests) == [1.0, 0.0]
    sent = fake.score_bodies[-1]["items"]
    assert [t["type"] for t in sent[1]["code"]["tests"]] == ["stdio", "call"]


def test_combined_reward_sends_every_component_with_weights(mode: str) -> None:
    fake = FakeVerifier()
    reward = make_reward(mode, fake, ["math", "format"], weights={"math": 1.0, "format": 0.5})
    assert call(reward, completions=["<think>r</think>7", "7", "<think>r</think>8"], solution=["7"] * 3) == [
        1.5,
        1.0,
        0.5,
    ]
    item = fake.score_bodies[0]["items"][0]
    assert set(item) >= {"math", "format", "weights"} and item["weights"] == {"math": 1.0, "format": 0.5}


def test_gold_column_is_configurable_and_a_missing_column_is_a_clear_error(mode: str) -> None:
    reward = make_reward(mode, FakeVerifier(), "math", gold_column="final")
    assert call(reward, completions=["5"], final=[5]) == [1.0]  # non-string golds are sent as text
    with pytest.raises(ValueError, match=r"'final'.*columns: \['solution'\]"):
        call(reward, completions=["5"], solution=["5"])


def test_rows_without_gold_are_skipped_not_sent(mode: str) -> None:
    fake = FakeVerifier()
    reward = make_reward(mode, fake, "math")
    assert call(reward, completions=["1", "2", "3"], solution=["1", None, " "]) == [1.0, None, None]
    assert [i["id"] for i in fake.score_bodies[0]["items"]] == ["0"]
    assert call(reward, completions=["1"], solution=[None]) == [None]
    assert len(fake.score_bodies) == 1  # nothing to score: no request


# --------------------------------------------------------------------------- the None policy

OUTAGES: dict[str, Callable[[], httpx.Response | Exception]] = {
    "connect": lambda: httpx.ConnectError("refused"),
    "timeout": lambda: httpx.ReadTimeout("slow"),
    "broken": lambda: httpx.RemoteProtocolError("server disconnected"),
    "503": lambda: httpx.Response(503),
    "429": lambda: httpx.Response(429),
}


def test_items_the_verifier_cannot_judge_are_none_with_a_warning(mode: str, caplog: pytest.LogCaptureFixture) -> None:
    reward = make_reward(mode, FakeVerifier(), "math")
    with caplog.at_level(logging.WARNING, logger="trainer_client"):
        rewards = call(reward, completions=["1", "2", "3"], solution=["1", UNJUDGEABLE, "4"])
    assert rewards == [1.0, None, 0.0]
    assert "could not judge 1 of 3" in caplog.text and "math=gold_unparseable: 1" in caplog.text


def test_an_unreachable_verifier_gives_none_for_every_completion(mode: str, caplog: pytest.LogCaptureFixture) -> None:
    fake = FakeVerifier([None, httpx.ConnectError("refused"), httpx.ConnectError("refused")])
    reward = make_reward(mode, fake, "format")
    assert call(reward, completions=["<think>a</think>b"]) == [1.0]  # it has answered once: an outage is rode out
    with caplog.at_level(logging.WARNING, logger="trainer_client"):
        assert call(reward, completions=["a", "b"]) == [None, None]
    assert len(fake.requests) == 3  # the retry happened first
    assert "no answer from the verifier (VerifierConnectionError" in caplog.text
    assert call(reward, completions=["<think>a</think>b"]) == [1.0]  # back: rewards again


@pytest.mark.parametrize("unreachable", [httpx.ConnectError("refused"), httpx.ConnectTimeout("no route")])
def test_a_verifier_that_never_answered_stops_the_first_call(mode: str, unreachable: Exception) -> None:
    fake = FakeVerifier([unreachable, unreachable])
    reward = make_reward(mode, fake, "math")
    assert call(reward, completions=["1"], solution=[None]) == [None]  # nothing to send: not a failure
    with pytest.raises(VerifierUnavailableError, match="has not answered this reward function once") as caught:
        call(reward, completions=["1"], solution=["1"])
    assert "base_url=" in str(caught.value) and "wait_until_ready" in str(caught.value)
    assert isinstance(caught.value.__cause__, VerifierUnavailableError)
    assert len(fake.requests) == 2  # after the client's retries, not instead of them


@pytest.mark.parametrize("outage", ["timeout", "broken", "503", "429"])
def test_a_verifier_that_answers_at_all_is_ridden_out_from_the_first_call(mode: str, outage: str) -> None:
    """Busy (503, 429), slow (a read timeout) or dropping a connection: it is there, so None, not a stopped run."""
    attempts = 2 if outage in ("503", "429") else 1  # statuses are retried once (FAST), the others never
    fake = FakeVerifier([OUTAGES[outage]() for _ in range(attempts)])
    reward = make_reward(mode, fake, "math")
    assert call(reward, completions=["1"], solution=["1"]) == [None]
    assert call(reward, completions=["1"], solution=["1"]) == [1.0]


@pytest.mark.parametrize("outage", OUTAGES)
def test_transient_failures_are_none_never_zero(mode: str, outage: str) -> None:
    reward = make_reward(mode, FakeVerifier([None, *(OUTAGES[outage]() for _ in range(2))]), "math")
    assert call(reward, completions=["1"], solution=["1"]) == [1.0]
    assert call(reward, completions=["1"], solution=["1"]) == [None]


def test_a_refused_request_raises_instead_of_hiding_as_none(mode: str) -> None:
    refusal = httpx.Response(422, json={"detail": "items.0: code scoring is not enabled on this server"})
    reward = make_reward(mode, FakeVerifier([refusal]), "code")
    with pytest.raises(VerifierRequestError, match="code scoring is not enabled"):
        call(reward, completions=["x"], tests=[[{"type": "assert", "code": "assert True"}]])


def test_malformed_code_tests_in_the_dataset_raise(mode: str) -> None:
    reward = make_reward(mode, FakeVerifier(), "code")
    with pytest.raises(ValueError, match="malformed code tests"):
        call(reward, completions=["x"], tests=[[{"type": "telepathy"}]])


def test_mbpp_assert_lists_and_humaneval_checks_are_assert_tests(mode: str) -> None:
    fake = FakeVerifier()
    mbpp = make_reward(mode, fake, "code", tests_column="test_list")
    assert call(mbpp, completions=["pass"], test_list=[["assert f(1) == 2", "assert f(2) == 3"]]) == [1.0]
    assert fake.score_bodies[-1]["items"][0]["code"]["tests"] == [
        {"type": "assert", "code": "assert f(1) == 2"},
        {"type": "assert", "code": "assert f(2) == 3"},
    ]
    humaneval = make_reward(mode, fake, "code", tests_column="test")
    check = "def check(candidate):\n    assert candidate(1) == 2\n"
    assert call(humaneval, completions=["pass"], test=[check], entry_point=["inc"]) == [1.0]
    [test] = fake.score_bodies[-1]["items"][0]["code"]["tests"]
    assert test["type"] == "assert" and test["code"].startswith(check) and test["code"].rstrip().endswith("check(inc)")


def test_a_humaneval_check_without_entry_point_is_a_clear_error(mode: str) -> None:
    reward = make_reward(mode, FakeVerifier(), "code", tests_column="test")
    with pytest.raises(ValueError) as caught:
        call(reward, completions=["x"], test=["def check(candidate):\n    assert candidate(1) == 2\n"])
    message = str(caught.value)
    assert "column 'test'" in message and "not JSON" in message and "def check(candidate)" in message
    assert "check(<entry_point>)" in message and "entry_point column" in message
    assert caught.value.__cause__ is None and caught.value.__suppress_context__  # not a bare JSONDecodeError


def test_api_key_comes_from_the_environment_unless_given(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VERIFIER_API_KEY", "from-env")
    for kind in (VerifierReward, AsyncVerifierReward):
        assert kind("format").api_key == "from-env"
        assert kind("format", api_key="given").api_key == "given"
    reward = VerifierReward("format")
    assert reward.client().core.headers["authorization"] == "Bearer from-env"
    reward.close()
    monkeypatch.delenv("VERIFIER_API_KEY")
    assert VerifierReward("format").api_key is None


@pytest.mark.parametrize("key", [None, "wrong"])
def test_a_401_says_how_to_pass_the_key(mode: str, key: str | None) -> None:
    refusal = httpx.Response(401, json={"detail": "missing or wrong API key (send 'Authorization: Bearer <key>')"})
    transport = httpx.MockTransport(FakeVerifier([refusal]))
    kind = VerifierReward if mode == "sync" else AsyncVerifierReward
    http: Any = httpx.Client(transport=transport) if mode == "sync" else httpx.AsyncClient(transport=transport)
    client: Any = (VerifierClient if mode == "sync" else AsyncVerifierClient)(URL, api_key=key, http_client=http)
    reward = kind("format", base_url=URL, client=client)
    with pytest.raises(VerifierRequestError) as caught:
        call(reward, completions=["<think>a</think>b"])
    message = str(caught.value)
    assert caught.value.status_code == 401 and "missing or wrong API key" in message
    assert f"{kind.__name__}(..., api_key=...)" in message and "VERIFIER_API_KEY" in message
    assert ("no API key was sent" in message) is (key is None)


def test_consecutive_failed_calls_raise_after_the_limit(mode: str) -> None:
    fake = FakeVerifier([None] + [httpx.ConnectError("refused")] * 100)
    reward = make_reward(mode, fake, "format", max_consecutive_failures=3)
    assert call(reward, completions=["a"]) == [0.0]  # answered once
    assert call(reward, completions=["a"]) == [None]
    assert call(reward, completions=["a"]) == [None]
    with pytest.raises(VerifierUnavailableError, match="3 reward calls in a row") as caught:
        call(reward, completions=["a"])
    assert isinstance(caught.value.__cause__, VerifierUnavailableError)


def test_a_call_with_any_reward_resets_the_failure_count(mode: str) -> None:
    refused: Exception = httpx.ConnectError("refused")
    fake = FakeVerifier([None] + [refused] * 4 + [None] + [refused] * 4)  # 2 attempts per failed call; None: answer
    reward = make_reward(mode, fake, "math", max_consecutive_failures=3)
    assert call(reward, completions=["1"], solution=["1"]) == [1.0]
    assert call(reward, completions=["1"], solution=["1"]) == [None]
    assert call(reward, completions=["1"], solution=["1"]) == [None]  # 2 in a row
    assert call(reward, completions=["1", "2"], solution=[UNJUDGEABLE, "2"]) == [None, 1.0]
    assert call(reward, completions=["1"], solution=["1"]) == [None]
    assert call(reward, completions=["1"], solution=["1"]) == [None]  # 2 in a row since the reset: no raise


def crashed(item: ScoreItem) -> ItemResult:
    """Every item null because the verifier failed on it (a worker died)."""
    failed = ComponentResult(score=None, verdict="worker_crashed")
    return ItemResult(id=item.id, reward=None, status="error", components={"math": failed})


def test_calls_where_the_verifier_failed_on_every_item_count_as_failed(mode: str) -> None:
    reward = make_reward(mode, FakeVerifier(rule=crashed), "math", max_consecutive_failures=2)
    assert call(reward, completions=["1"], solution=["1"]) == [None]
    with pytest.raises(VerifierUnavailableError, match="failed on every item"):
        call(reward, completions=["1"], solution=["1"])


def test_items_the_data_leaves_unjudgeable_do_not_count_as_failures(mode: str) -> None:
    """An unparseable gold is the dataset's problem: a run of such batches must not stop training."""
    reward = make_reward(mode, FakeVerifier(), "math", max_consecutive_failures=2)
    for _ in range(5):
        assert call(reward, completions=["1"], solution=[UNJUDGEABLE]) == [None]


def test_none_never_raises_when_the_policy_is_off(mode: str) -> None:
    reward = make_reward(
        mode, FakeVerifier([httpx.ConnectError("refused")] * 40), "format", max_consecutive_failures=None
    )
    for _ in range(20):  # not even at the first call, though the verifier never answered
        assert call(reward, completions=["a"]) == [None]


# --------------------------------------------------------------------------- metrics


class Recorder:
    def __init__(self) -> None:
        self.metrics: dict[str, list[float]] = {}
        self.extra: dict[str, list[Any]] = {}

    def log_metric(self, name: str, value: float) -> None:
        self.metrics.setdefault(name, []).append(value)

    def log_extra(self, column: str, values: list[Any]) -> None:
        self.extra.setdefault(column, []).extend(values)


def test_verdict_and_null_rates_go_to_log_metric(mode: str) -> None:
    rec = Recorder()
    reward = make_reward(mode, FakeVerifier(), "math", name="acc")
    call(
        reward,
        completions=["1", "2", "3", "4"],
        solution=["1", UNJUDGEABLE, "9", None],
        log_metric=rec.log_metric,
        log_extra=rec.log_extra,
    )
    assert rec.metrics["acc/math/correct"] == [0.25]
    assert rec.metrics["acc/math/wrong"] == [0.25]
    assert rec.metrics["acc/math/gold_unparseable"] == [0.25]
    assert rec.metrics["acc/null_rate"] == [0.25]
    assert rec.metrics["acc/unreachable_rate"] == [0.0]
    assert rec.extra == {"acc/math": ["correct", "gold_unparseable", "wrong", "skipped"]}


def test_every_verdict_of_a_component_has_its_own_rate() -> None:
    from verifier_service.schema import COMPONENTS, Verdict

    service_failures = {Verdict.INTERNAL_ERROR, Verdict.WORKER_CRASHED, Verdict.DEADLINE_EXCEEDED}
    assert set(VERDICTS) == set(COMPONENTS)  # a new component fails here until it gets rates
    listed = [verdict for verdicts in VERDICTS.values() for verdict in verdicts]
    assert set(listed) | service_failures == set(Verdict)  # a new verdict fails here until it gets a rate
    for component, verdicts in VERDICTS.items():  # a verdict may serve several components, once in each
        assert len(verdicts) == len(set(verdicts)) and not service_failures & set(verdicts), component
    code = {"passed", "failed", "no_code", "compile_error", "sandbox_unavailable", "invalid_test"}
    assert set(VERDICTS["code"]) == code


def test_code_verdicts_are_logged_by_name(mode: str) -> None:
    rec = Recorder()
    reward = make_reward(mode, FakeVerifier(), "code")
    tests = [[{"type": "assert", "code": "assert f() == 1"}]] * 3
    call(reward, completions=["pass", "fail", "pass"], tests=tests, log_metric=rec.log_metric, log_extra=rec.log_extra)
    assert rec.metrics["verifier_code/code/passed"] == [pytest.approx(2 / 3)]
    assert rec.metrics["verifier_code/code/failed"] == [pytest.approx(1 / 3)]
    assert rec.metrics["verifier_code/code/other"] == [0.0] and rec.metrics["verifier_code/code/compile_error"] == [0.0]
    assert rec.extra == {"verifier_code/code": ["passed", "failed", "passed"]}


def test_metric_names_do_not_depend_on_the_batch(mode: str) -> None:
    # TRL averages each name across processes with one collective call per name: every call must log the same set.
    rec_ok, rec_down = Recorder(), Recorder()
    ok = make_reward(mode, FakeVerifier(), ["math", "format"], name="v")
    down = make_reward(mode, FakeVerifier([None] + [httpx.ConnectError("x")] * 2), ["math", "format"], name="v")
    call(down, completions=["1"], solution=["1"])  # answered once: the next outage gives None, not an error
    call(ok, completions=["<think>1</think>1"], solution=["1"], log_metric=rec_ok.log_metric)
    call(down, completions=["1", "2"], solution=["1", "2"], log_metric=rec_down.log_metric)
    assert set(rec_ok.metrics) == set(rec_down.metrics)
    assert len(rec_ok.metrics) == 2 + len(VERDICTS["math"]) + 1 + len(VERDICTS["format"]) + 1
    assert rec_down.metrics["v/null_rate"] == [1.0] and rec_down.metrics["v/unreachable_rate"] == [1.0]


def test_async_reward_without_an_injected_client_follows_the_running_loop() -> None:
    reward = AsyncVerifierReward("format", base_url="http://127.0.0.1:9")

    async def client_id() -> int:
        return id(reward.client())

    first, again_same_loop = asyncio.run(_twice(client_id))
    assert first == again_same_loop
    assert asyncio.run(client_id()) != first  # a new loop gets a new client


async def _twice(fn: Callable[[], Any]) -> tuple[int, int]:
    return await fn(), await fn()
