"""The `judge` component against a real model behind a real OpenAI-compatible server: `transformers serve` (a
process on loopback, offline) serving two tiny models the test builds with trainer_client/tiny_model.py and teaches
in a few SFT steps to give one reply to any judge prompt: `says_a` answers CompassVerifier's "A" (correct), `babbles`
answers garbage. The verifier then scores items through them: the verdict is what the model's greedy reply says, and
a reply with no label is null (judge_unparseable), never 0. tests/service/test_judge_api.py covers the protocol's
every case with a scripted stand-in; this shows the same client works with a real server and a real model."""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import Server, free_port, running_process, running_server

pytest.importorskip("torch", reason="the `models` extra (torch, transformers) is not installed")
serving = pytest.importorskip("transformers.utils", reason="the `models` extra (transformers) is not installed")
if not serving.is_serve_available() or not Path(sys.executable).with_name("transformers").exists():
    pytest.skip("`transformers serve` needs fastapi, uvicorn and openai (the dev extra)", allow_module_level=True)

from verifier_service.scoring.judge_prompts import COMPASS, fill, parse_label  # noqa: E402

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]  # its module fixtures build, teach and serve two models

SERVE_READY_S = 180.0  # it imports torch and transformers first: a minute on a busy 2-core machine
QUESTIONS = [("What is 6 * 7?", "42", "forty-two"), ("What is 4 + 5?", "9", "nine"), ("What is 10 - 3?", "7", "8"),
             ("What is 2 * 2?", "4", "four"), ("Name the capital of France.", "Paris", "Lyon")]  # fmt: skip
REPLIES = {"says_a": "A", "babbles": "zq zq"}


def judge_prompts() -> list[str]:
    return [fill(COMPASS, question, gold, answer) for question, gold, answer in QUESTIONS]


def teach(path: Path, reply: str, prompts: list[str], steps: int = 40) -> None:
    """A few SFT steps so that the model's greedy reply to a judge prompt is `reply` (then end of turn); greedy by
    default in its generation config."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(path)
    model = AutoModelForCausalLM.from_pretrained(path)
    target = tokenizer(reply, add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id]
    rows = []
    for prompt in prompts:
        turn = [{"role": "user", "content": prompt}]
        text = tokenizer.apply_chat_template(turn, add_generation_prompt=True, tokenize=False)
        ids = tokenizer(text, add_special_tokens=False)["input_ids"]
        rows.append((torch.tensor([ids + target]), torch.tensor([[-100] * len(ids) + target])))
    torch.manual_seed(0)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    for _ in range(steps):
        optimizer.zero_grad()
        for inputs, labels in rows:
            (model(input_ids=inputs, labels=labels).loss / len(rows)).backward()
        optimizer.step()
    model.generation_config.do_sample = False
    model.save_pretrained(path)


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    from trainer_client.tiny_model import build_model, build_tokenizer

    root, prompts = tmp_path_factory.mktemp("judge-models"), judge_prompts()
    paths = {}
    for name, reply in REPLIES.items():
        path = root / name
        build_tokenizer(path, [*prompts, *REPLIES.values()], vocab_size=400)
        build_model(path)
        teach(path, reply, prompts)
        paths[name] = path
    return paths


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """`transformers serve` on loopback, offline, loading each model by its local path when a request names it."""
    port = free_port()
    log = tmp_path_factory.mktemp("serve") / "serve.log"
    serve = Path(sys.executable).with_name("transformers")  # the console script of the interpreter's environment
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    command = [str(serve), "serve", "--host", "127.0.0.1", "--port", str(port), "--device", "cpu"]
    with running_process(command, log, f"http://127.0.0.1:{port}/v1", "/models", SERVE_READY_S, env) as url:
        yield url


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, models: dict[str, Path], served: str) -> Iterator[Server]:
    judges = {
        "says_a": {"base_url": served, "model": str(models["says_a"]), "max_tokens": 8, "timeout_s": 60},
        "babbles": {"base_url": served, "model": str(models["babbles"]), "max_tokens": 8, "timeout_s": 60},
    }
    settings = {"judges": json.dumps(judges), "batch_timeout_s": 120, "code_enabled": "false"}
    with running_server(tmp_path_factory.mktemp("judge-served"), ready_timeout=120, **settings) as srv:
        yield srv


def reply(served: str, model: Path, prompt: str) -> str:
    """What the served model answers a prompt, asked as the verifier asks (temperature 0)."""
    body = {"model": str(model), "messages": [{"role": "user", "content": prompt}], "temperature": 0, "max_tokens": 8}
    response = httpx.post(f"{served}/chat/completions", json=body, timeout=60)
    assert response.status_code == 200, response.text
    return response.json()["choices"][0]["message"]["content"]  # type: ignore[no-any-return]


def score(server: Server, items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    response = httpx.post(f"{server.url}/v1/score", json={"items": items}, timeout=120)
    assert response.status_code == 200, response.text
    return response.json()["results"]  # type: ignore[no-any-return]


def item(answer: str, judge: str, when: str = "rule_miss") -> dict[str, Any]:
    return {"completion": f"<think>6 times 7</think>The answer is \\boxed{{{answer}}}.", "prompt": "What is 6 * 7?",
            "math": {"gold": "42"}, "judge": {"judge": judge, "gold": "42", "when": when}}  # fmt: skip


def test_the_served_models_give_their_taught_replies(served: str, models: dict[str, Path]) -> None:
    prompt = fill(COMPASS, "What is 6 * 7?", "42", "forty-two")
    assert parse_label("compass", reply(served, models["says_a"], prompt), (None, None, None)) == "correct"
    assert parse_label("compass", reply(served, models["babbles"], prompt), (None, None, None)) is None


def test_a_served_models_label_decides_a_rule_miss(server: Server) -> None:
    right, rescued = score(server, [item("42", "says_a"), item("forty-two", "says_a")])
    assert right["components"]["math"]["verdict"] == "correct" and right["reward"] == 2.0
    assert "decided by the rule" in right["components"]["judge"]["detail"]
    assert rescued["components"]["math"]["score"] == 0.0
    judged = rescued["components"]["judge"]
    assert (judged["verdict"], judged["score"]) == ("correct", 1.0)
    assert "decided by the judge (says_a)" in judged["detail"]
    assert rescued["reward"] == 1.0
    always = {key: value for key, value in item("six sevens", "says_a", "always").items() if key != "math"}
    [always] = score(server, [always])
    assert (always["components"]["judge"]["verdict"], always["reward"]) == ("correct", 1.0)


def test_a_served_model_that_babbles_is_null_never_0(server: Server) -> None:
    [babbled] = score(server, [item("forty-two", "babbles")])
    judged = babbled["components"]["judge"]
    assert (judged["verdict"], judged["score"]) == ("judge_unparseable", None)
    assert babbled["reward"] is None and babbled["status"] == "error"


def test_readyz_shows_the_served_judges_reachable(server: Server) -> None:
    deadline = time.monotonic() + 30
    while True:
        judges = httpx.get(f"{server.url}/readyz", timeout=5).json()["judges"]
        if all(judge["reachable"] is True for judge in judges.values()) or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert {name: judge["reachable"] for name, judge in judges.items()} == {"says_a": True, "babbles": True}
