"""Models an engine serves (backend vllm, sglang), through a real verifier server and a real engine process on
loopback: tests/engine_standin.py, which speaks vLLM's /classify and /pooling and SGLang's native /classify over a
tiny checkpoint built here (vLLM and SGLang themselves need a GPU and cannot be installed here). Through the engine,
every score equals the local backend's on the same checkpoint (rm raw and chat, prm, overflow by the same rules); the
service sends token ids with use_activation false; an engine that is down, answers 500, garbage, JSON of another
shape, the wrong number of rows, or too late gives null model_error, never 0; the batch deadline holds; /v1/models
and /readyz show the engine's URL without credentials and whether it is reachable (an engine still loading is not,
until it is, with no request sent to it); an engine that requires a key scores with the one api_key_env names and
gives null model_error without it, and the key is in no log line nor answer; a reload of it is a 422."""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

pytest.importorskip("torch", reason="the `models` extra (torch, transformers) is not installed")
pytest.importorskip("trl", reason="the checkpoints are built as the rm and prm tests build them")

from tests.conftest import MODEL_SERVER_READY_S, Server, free_port, running_process, running_server
from tests.service import test_prm_api, test_rm_api

MAX_TOKENS = 96
PRM_MAX_TOKENS = 256
BATCH_TIMEOUT_S = 12.0
TIMEOUT_S = 4.0
PROMPT = test_rm_api.PROMPT
ENGINE_KEY = "sk-engine-hunter2"  # what the engine requires (the stand-in's --api-key, switched on by `fault`)
WRONG_KEY = "sk-wrong-swordfish"


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("remote")
    return {
        "rm": test_rm_api.build(root / "rm", pad_is_eos=False, seed=0),
        "prm": test_prm_api.build(root / "prm", kind="prm", bos=True, seed=0),
    }


@contextmanager
def engine(tmp_path: Path, checkpoint: Path, kind: str) -> Iterator[str]:
    """The stand-in engine serving `checkpoint` as model "served", on a free loopback port; its URL."""
    port = free_port()
    log = tmp_path / f"engine-{kind}.log"
    command = [sys.executable, "-m", "tests.engine_standin", "--port", str(port), "--checkpoint", str(checkpoint)]
    command += ["--kind", kind, "--served-model", "served"]
    with running_process(command, log, f"http://127.0.0.1:{port}", "/health", MODEL_SERVER_READY_S) as url:
        yield url


@pytest.fixture(scope="module")
def engines(tmp_path_factory: pytest.TempPathFactory, checkpoints: dict[str, Path]) -> Iterator[dict[str, str]]:
    root = tmp_path_factory.mktemp("engines")
    with engine(root, checkpoints["rm"], "rm") as rm, engine(root, checkpoints["prm"], "prm") as prm:
        yield {"rm": rm, "prm": prm}


def with_credentials(url: str) -> str:
    return url.replace("http://", "http://user:secret@")


@pytest.fixture(scope="module")
def remote_server(
    tmp_path_factory: pytest.TempPathFactory, checkpoints: dict[str, Path], engines: dict[str, str]
) -> Iterator[Server]:
    rm, prm = str(checkpoints["rm"]), str(checkpoints["prm"])
    sizes = {"max_tokens": MAX_TOKENS, "batch_tokens": 4 * MAX_TOKENS}
    remote = {"served_model": "served", "timeout_s": TIMEOUT_S}
    models = {
        "local_rm": {"path": rm, **sizes},
        "vllm_rm": {"path": rm, "backend": "vllm", "url": with_credentials(engines["rm"]), **remote, **sizes},
        "sglang_rm": {"path": rm, "backend": "sglang", "url": engines["rm"], **remote, **sizes},
        # one request in flight, one input of up to max_tokens each: the batches queue behind a slow engine
        "queued_rm": {
            "path": rm,
            "backend": "vllm",
            "url": engines["rm"],
            **remote,
            "max_concurrency": 1,
            "max_tokens": MAX_TOKENS,
            "batch_tokens": MAX_TOKENS,
        },
        "down_rm": {"path": rm, "backend": "vllm", "url": f"http://127.0.0.1:{free_port()}", **remote, **sizes},
        "keyed_rm": {
            "path": rm,
            "backend": "vllm",
            "url": engines["rm"],
            "api_key_env": "ENGINE_KEY",
            **remote,
            **sizes,
        },
        "wrong_key_rm": {
            "path": rm,
            "backend": "sglang",
            "url": engines["rm"],
            "api_key_env": "WRONG_KEY",
            **remote,
            **sizes,
        },
        "local_prm": {"path": prm, "kind": "prm", "max_tokens": PRM_MAX_TOKENS, "batch_tokens": 2 * PRM_MAX_TOKENS},
        "vllm_prm": {
            "path": prm,
            "kind": "prm",
            "backend": "vllm",
            "url": engines["prm"],
            **remote,
            "max_tokens": PRM_MAX_TOKENS,
            "batch_tokens": 2 * PRM_MAX_TOKENS,
        },
    }
    settings: dict[str, Any] = {
        "math_workers": 1,
        "code_enabled": "false",
        "models": json.dumps(models),
        "batch_timeout_s": BATCH_TIMEOUT_S,
        "math_timeout_s": 2,
        "log_level": "info",  # httpx's request lines too: the key must be in none of them
    }
    with pytest.MonkeyPatch.context() as env:
        env.setenv("ENGINE_KEY", ENGINE_KEY)
        env.setenv("WRONG_KEY", WRONG_KEY)
        with running_server(
            tmp_path_factory.mktemp("remote-server"), ready_timeout=MODEL_SERVER_READY_S, **settings
        ) as server:
            yield server


@contextmanager
def fault(
    url: str,
    mode: str,
    delay_s: float = 0.0,
    max_model_len: int | None = None,
    *,
    api_key: str | None = None,
    loading: bool = False,
) -> Iterator[None]:
    body = {"mode": mode, "delay_s": delay_s, "max_model_len": max_model_len, "api_key": api_key, "loading": loading}
    httpx.post(f"{url}/_fault", json=body, timeout=5).raise_for_status()
    try:
        yield
    finally:
        reset = {"mode": "none", "max_model_len": None, "api_key": None, "loading": False}
        httpx.post(f"{url}/_fault", json=reset, timeout=5).raise_for_status()


def score(server: Server, items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    response = httpx.post(f"{server.url}/v1/score", json={"items": items}, timeout=120)
    assert response.status_code == 200, response.text
    return [next(iter(result["components"].values())) for result in response.json()["results"]]


def rm_items(model: str, **options: Any) -> list[dict[str, Any]]:
    long = "Tom has 3 + 4 = 7 apples. " * 20  # over max_tokens: kept at its end, or null
    completions = [*test_rm_api.COMPLETIONS, long]
    return [
        {"prompt": PROMPT, "completion": c, "rm": {"model": model, "template": t, **options}}
        for t in ("raw", "chat")
        for c in completions
    ]


@pytest.mark.parametrize("backend", ["vllm_rm", "sglang_rm"])
@pytest.mark.parametrize("overflow", ["keep_end", "null"])
def test_an_engines_rm_scores_equal_the_local_backends(remote_server: Server, backend: str, overflow: str) -> None:
    local = score(remote_server, rm_items("local_rm", on_overflow=overflow))
    remote = score(remote_server, rm_items(backend, on_overflow=overflow))
    assert [r["verdict"] for r in remote] == [r["verdict"] for r in local]
    assert ("too_long" in {r["verdict"] for r in local}) == (overflow == "null")
    assert [r["score"] for r in remote] == pytest.approx([r["score"] for r in local], abs=1e-4)
    scored = [r["score"] for r in local if r["score"] is not None]
    assert max(scored) - min(scored) > 0.1 and min(scored) < 0  # raw logits, not a sigmoid's (0, 1)
    assert {r["model_version"] for r in remote} == {f"{backend.split('_')[0]}:served"}


def test_the_service_sends_token_ids_and_asks_vllm_for_raw_logits(
    remote_server: Server, engines: dict[str, str]
) -> None:
    before = len(httpx.get(f"{engines['rm']}/_requests", timeout=5).json())
    score(remote_server, rm_items("vllm_rm")[:2] + rm_items("sglang_rm")[:1])
    sent = httpx.get(f"{engines['rm']}/_requests", timeout=5).json()[before:]
    vllm = [body for body in sent if "input" in body]
    sglang = [body for body in sent if "input_ids" in body]
    assert vllm and sglang
    assert all(body["use_activation"] is False and body["model"] == "served" for body in vllm)
    rows = [row for body in vllm for row in body["input"]] + [row for body in sglang for row in body["input_ids"]]
    assert rows and all(isinstance(row, list) and all(isinstance(i, int) for i in row) for row in rows)


def prm_items(model: str) -> list[dict[str, Any]]:
    long = "\n".join(["Tom has 3 apples and buys 4 more, so 7."] * 40)  # a layout over max_tokens: null, never cut
    completions = [*test_prm_api.COMPLETIONS, long, "\n \n"]  # the last: no steps
    return [{"prompt": PROMPT, "completion": c, "prm": {"model": model, "layout": "trl"}} for c in completions]


def test_an_engines_prm_step_scores_equal_the_local_backends(remote_server: Server) -> None:
    local = score(remote_server, prm_items("local_prm"))
    remote = score(remote_server, prm_items("vllm_prm"))
    assert [r["verdict"] for r in remote] == [r["verdict"] for r in local]
    assert {"scored", "too_long", "no_steps"} <= {r["verdict"] for r in local}
    assert [r["score"] for r in remote] == pytest.approx([r["score"] for r in local], abs=1e-4)
    for got, want in zip(remote, local, strict=True):
        got_steps = [(s["start"], s["end"], s["score"]) for s in got.get("steps") or []]
        want_steps = [(s["start"], s["end"], pytest.approx(s["score"], abs=1e-4)) for s in want.get("steps") or []]
        assert got_steps == want_steps
    steps = [s["score"] for r in local for s in r.get("steps") or []]
    assert max(steps) - min(steps) > 0.01  # the steps differ: a score read at the wrong position would not match


def assert_all_model_error(results: list[dict[str, Any]]) -> None:
    assert [(r["score"], r["verdict"]) for r in results] == [(None, "model_error")] * len(results)


@pytest.mark.parametrize("mode", ["500", "malformed", "shape", "rows"])
@pytest.mark.parametrize("model", ["vllm_rm", "sglang_rm"])
def test_an_engine_that_fails_gives_null_model_error(
    remote_server: Server, engines: dict[str, str], mode: str, model: str
) -> None:
    with fault(engines["rm"], mode):
        assert_all_model_error(score(remote_server, rm_items(model)[:3]))
    assert {r["verdict"] for r in score(remote_server, rm_items(model)[:3])} == {"scored"}  # and it recovers


@pytest.mark.parametrize("mode", ["500", "malformed", "rows"])
def test_an_engine_that_fails_a_prm_gives_null_model_error(
    remote_server: Server, engines: dict[str, str], mode: str
) -> None:
    with fault(engines["prm"], mode):
        assert_all_model_error(score(remote_server, prm_items("vllm_prm")[:1]))


def test_an_input_the_engine_refuses_costs_only_itself(
    remote_server: Server, engines: dict[str, str], checkpoints: dict[str, Path]
) -> None:
    """vLLM refuses a whole request (400) when one of its inputs is over its max_model_len: the service then sends
    the batch's inputs one by one, so only that input is null (model_error) and the others are scored."""
    from transformers import AutoTokenizer

    from reward_models.layout import token_ids

    items = rm_items("vllm_rm")[: len(test_rm_api.COMPLETIONS)]  # raw, all within max_tokens
    tokenizer = AutoTokenizer.from_pretrained(checkpoints["rm"])
    lengths = [len(ids) for ids in token_ids(tokenizer, "raw", [(PROMPT, item["completion"]) for item in items])]
    limit = max(lengths) - 1
    local = score(remote_server, [item | {"rm": {"model": "local_rm"}} for item in items])
    with fault(engines["rm"], "none", max_model_len=limit):
        remote = score(remote_server, items)
    for length, got, want in zip(lengths, remote, local, strict=True):
        if length > limit:
            assert (got["score"], got["verdict"]) == (None, "model_error")
        else:
            assert got["score"] == pytest.approx(want["score"], abs=1e-4)
    assert sum(length > limit for length in lengths) == 1


def test_an_engine_that_is_down_gives_null_model_error(remote_server: Server) -> None:
    assert_all_model_error(score(remote_server, rm_items("down_rm")[:3]))


def test_an_engine_slower_than_timeout_s_gives_null_model_error(remote_server: Server, engines: dict[str, str]) -> None:
    with fault(engines["rm"], "slow", delay_s=TIMEOUT_S + 3):
        started = time.monotonic()
        assert_all_model_error(score(remote_server, rm_items("vllm_rm")[:3]))
        assert time.monotonic() - started < TIMEOUT_S + 2.5  # the request's timeout, not the engine's delay


def test_the_batch_deadline_holds_behind_a_slow_engine(remote_server: Server, engines: dict[str, str]) -> None:
    """One request in flight, a few inputs in each (batch_tokens = max_tokens), each answered after 2 s: the
    batches past the deadline are deadline_exceeded (null), and the answer comes at the deadline, not when the
    engine would have finished."""
    items = [{"prompt": PROMPT, "completion": f"{n} apples", "rm": {"model": "queued_rm"}} for n in range(40)]
    with fault(engines["rm"], "slow", delay_s=2.0):
        started = time.monotonic()
        results = score(remote_server, items)
        took = time.monotonic() - started
    verdicts = [r["verdict"] for r in results]
    assert set(verdicts) == {"scored", "deadline_exceeded"}, verdicts
    assert all(r["score"] is None for r in results if r["verdict"] != "scored")
    assert took < BATCH_TIMEOUT_S + 3


def test_models_and_readyz_show_the_engine_without_credentials(remote_server: Server, engines: dict[str, str]) -> None:
    listed = {m["name"]: m for m in httpx.get(f"{remote_server.url}/v1/models", timeout=10).json()["models"]}
    vllm = listed["vllm_rm"]
    assert (vllm["backend"], vllm["device"], vllm["url"], vllm["loaded"]) == ("vllm", "remote", engines["rm"], True)
    assert listed["sglang_rm"]["backend"] == "sglang" and listed["vllm_prm"]["url"] == engines["prm"]
    assert (listed["local_rm"]["backend"], listed["local_rm"]["url"], listed["local_rm"]["reachable"]) == (
        "local", None, None
    )  # fmt: skip
    score(remote_server, rm_items("down_rm")[:1] + rm_items("vllm_rm")[:1])
    ready = httpx.get(f"{remote_server.url}/readyz", timeout=10)
    assert ready.status_code == 200  # an engine that is down makes its inputs null, not the service unready
    shown = ready.json()["models"]
    assert shown["down_rm"]["reachable"] is False and shown["vllm_rm"]["reachable"] is True
    assert "secret" not in ready.text and "secret" not in json.dumps(listed)


def test_an_engine_that_requires_a_key_scores_with_it_and_gives_null_without_it(
    remote_server: Server, engines: dict[str, str]
) -> None:
    """The engine requires ENGINE_KEY (as `--api-key`): keyed_rm sends it and scores as the local backend;
    wrong_key_rm (another key) and sglang_rm (none) are null model_error, never 0. The key is in no log line (the
    server logs at INFO: httpx's request lines included) nor in /readyz or GET /v1/models, which say a key is sent."""
    items = rm_items("local_rm")[:3]
    local = score(remote_server, items)
    with fault(engines["rm"], "none", api_key=ENGINE_KEY):
        keyed = score(remote_server, [item | {"rm": {"model": "keyed_rm"}} for item in items])
        assert_all_model_error(score(remote_server, [item | {"rm": {"model": "wrong_key_rm"}} for item in items]))
        assert_all_model_error(score(remote_server, [item | {"rm": {"model": "sglang_rm"}} for item in items]))
    assert [r["verdict"] for r in keyed] == ["scored"] * 3
    assert [r["score"] for r in keyed] == pytest.approx([r["score"] for r in local], abs=1e-4)
    listed = httpx.get(f"{remote_server.url}/v1/models", timeout=10)
    shown = {m["name"]: m for m in listed.json()["models"]}
    assert (shown["keyed_rm"]["api_key"], shown["vllm_rm"]["api_key"], shown["local_rm"]["api_key"]) == (
        True, False, False
    )  # fmt: skip
    ready = httpx.get(f"{remote_server.url}/readyz", timeout=10)
    assert ready.json()["models"]["wrong_key_rm"]["api_key"] is True
    output = remote_server.output()
    assert "HTTP Request: POST" in output  # httpx's request lines are in the log the check below reads
    for said in (output, listed.text, ready.text):
        assert "hunter2" not in said and "swordfish" not in said


def reachable(server: Server, name: str) -> bool | None:
    shown: bool | None = httpx.get(f"{server.url}/readyz", timeout=10).json()["models"][name]["reachable"]
    return shown


def test_an_engine_still_loading_is_unreachable_until_it_is_up_with_no_request_sent(
    remote_server: Server, engines: dict[str, str]
) -> None:
    """An engine still loading its model answers 503 (its /health too): a batch sent then is null model_error, and
    /readyz says unreachable. Once the engine is up, /readyz says reachable within a few seconds, with no request to
    score sent to it: its re-probe of /health, in the background, found it up."""
    with fault(engines["prm"], "none", loading=True):
        assert_all_model_error(score(remote_server, prm_items("vllm_prm")[:1]))
        assert reachable(remote_server, "vllm_prm") is False
        sent = len(httpx.get(f"{engines['prm']}/_requests", timeout=5).json())
    deadline = time.monotonic() + 15
    while reachable(remote_server, "vllm_prm") is not True:
        assert time.monotonic() < deadline, "the engine is up, and /readyz still says it is not"
        time.sleep(0.2)
    assert len(httpx.get(f"{engines['prm']}/_requests", timeout=5).json()) == sent  # no scoring request sent
    assert reachable(remote_server, "down_rm") is False  # and one that is down stays so


def test_a_reload_of_an_engines_model_is_a_422_naming_it(remote_server: Server) -> None:
    response = httpx.post(f"{remote_server.url}/v1/models/vllm_rm/reload", json={}, timeout=30)
    assert response.status_code == 422, response.text
    assert "engine" in response.text and "name" in json.dumps(response.json())


def test_train_py_refuses_to_train_online_a_model_an_engine_serves(remote_server: Server, tmp_path: Path) -> None:
    """`--online_rm` on a model an engine serves would train it every N steps and have each reload refused (422):
    the script stops at once with the reason instead."""
    pytest.importorskip("trl", reason="the `train` extra is not installed")
    from trainer_client import VerifierReward
    from trainer_client.train import VerifierScriptArguments, online_reward_model

    rule = VerifierReward("math", base_url=remote_server.url)
    try:
        args = VerifierScriptArguments(online_rm="vllm_rm", verifier_url=remote_server.url)
        with pytest.raises(SystemExit, match="served by an engine \\(vllm\\)"):
            online_reward_model(args, [rule], str(tmp_path))
    finally:
        rule.close()


def test_train_py_refuses_step_labels_for_an_rm(remote_server: Server, tmp_path: Path) -> None:
    """`--online_rm_method prm_outcome` on an rm would load it as a token classifier (a new random head), train that,
    and have the verifier reload it as an rm: the script stops at once with the reason instead."""
    pytest.importorskip("trl", reason="the `train` extra is not installed")
    from trainer_client import VerifierReward
    from trainer_client.train import VerifierScriptArguments, online_reward_model

    rule = VerifierReward("math", base_url=remote_server.url)
    try:
        args = VerifierScriptArguments(
            online_rm="local_rm", online_rm_method="prm_outcome", verifier_url=remote_server.url
        )
        with pytest.raises(SystemExit, match="kind rm; train it with pairs or outcome"):
            online_reward_model(args, [rule], str(tmp_path))
        args = VerifierScriptArguments(online_rm="local_rm", online_rm_method="outcome", verifier_url=remote_server.url)
        assert online_reward_model(args, [rule], str(tmp_path)).method == "outcome"
    finally:
        rule.close()


def test_an_engines_rm_evaluates_as_the_local_one(remote_server: Server) -> None:
    """POST /v1/models/{name}/eval scores through the engine too: the same metrics as the local backend's."""
    body = {"groups": [{"prompt": PROMPT, "completions": test_rm_api.COMPLETIONS, "outcomes": [1.0, 1.0, 0.0, 0.0]}]}
    answers = {
        name: httpx.post(f"{remote_server.url}/v1/models/{name}/eval", json=body, timeout=60)
        for name in ("local_rm", "vllm_rm")
    }
    assert {name: answer.status_code for name, answer in answers.items()} == {"local_rm": 200, "vllm_rm": 200}
    local, remote = (answers[name].json() for name in ("local_rm", "vllm_rm"))
    assert remote["model_version"] == "vllm:served" and remote["counts"] == local["counts"]
    assert (remote["ranking_accuracy"], remote["auroc"]) == (local["ranking_accuracy"], local["auroc"])
    assert remote["scores"] == pytest.approx(local["scores"], abs=1e-4)
