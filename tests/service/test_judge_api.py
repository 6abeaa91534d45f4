"""The `judge` component through a real verifier server and a real OpenAI-compatible server process on loopback:
tests/judge_standin.py, which speaks the chat-completions protocol and answers what each test scripts, chosen by the
prompt's content (a same-protocol stand-in, so that every reply the protocol allows can be chosen; a real model
behind `transformers serve` is in test_judge_served.py). Each test uses answers of its own, so the verifier's verdict
cache never carries one test's verdicts into another."""

from __future__ import annotations

import base64
import json
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import Server, free_port, running_process, running_server

KEY = "judge-test-key-" + uuid.uuid4().hex
KEY_ENV = "JUDGE_TEST_API_KEY"
REFUSED_KEY, REFUSED_KEY_ENV = "refused-" + uuid.uuid4().hex, "JUDGE_TEST_REFUSED_KEY"  # the stand-in answers 401
PASSWORD, QUERY_KEY = "pw-" + uuid.uuid4().hex, "qk-" + uuid.uuid4().hex  # in the "vault" judge's base_url
CONTEXT_CHARS = 3000


@pytest.fixture(scope="module")
def standin(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    port = free_port()
    log = tmp_path_factory.mktemp("standin") / "standin.log"
    command = [sys.executable, "-m", "tests.judge_standin", "--port", str(port)]
    with running_process(command, log, f"http://127.0.0.1:{port}", "/_probes", 30) as url:
        yield url


@pytest.fixture(scope="module")
def server(
    tmp_path_factory: pytest.TempPathFactory, standin: str, monkeypatch_module: pytest.MonkeyPatch
) -> Iterator[Server]:
    base = f"{standin}/v1"
    judges = {
        "grader": {"base_url": base, "model": "grader-model", "api_key_env": KEY_ENV, "timeout_s": 3.0,
                   "max_tokens": 17, "context_chars": CONTEXT_CHARS},
        "serial": {"base_url": base, "model": "serial-model", "max_concurrency": 1, "timeout_s": 3.0},
        "down": {"base_url": f"http://127.0.0.1:{free_port()}/v1", "model": "m", "timeout_s": 1.0},
        "vault": {"base_url": base.replace("//", f"//judge-user:{PASSWORD}@") + f"?key={QUERY_KEY}&v=2",
                  "model": "vault-model", "timeout_s": 3.0},
        "refusing": {"base_url": base, "model": "m", "api_key_env": REFUSED_KEY_ENV, "timeout_s": 3.0},
    }  # fmt: skip
    monkeypatch_module.setenv(KEY_ENV, KEY)
    monkeypatch_module.setenv(REFUSED_KEY_ENV, REFUSED_KEY)
    settings = {
        "judges": json.dumps(judges),
        "batch_timeout_s": 6,
        "math_timeout_s": 2,
        "code_enabled": "false",
        "log_level": "info",
    }  # httpx logs each request at INFO: the tests read those lines for secrets
    with running_server(tmp_path_factory.mktemp("judge-server"), **settings) as srv:
        yield srv


@pytest.fixture(scope="module")
def monkeypatch_module() -> Iterator[pytest.MonkeyPatch]:
    with pytest.MonkeyPatch.context() as patch:
        yield patch


def script(standin: str, rules: list[dict[str, Any]], default: dict[str, Any] | None = None) -> None:
    body = {"rules": rules, "default": default or {"reply": "no label here"}}
    assert httpx.post(f"{standin}/_script", json=body, timeout=5).status_code == 200


def received(standin: str) -> list[dict[str, Any]]:
    return httpx.get(f"{standin}/_requests", timeout=5).json()  # type: ignore[no-any-return]


def score(server: Server, items: list[dict[str, Any]], timeout: float = 30) -> list[dict[str, Any]]:
    response = httpx.post(f"{server.url}/v1/score", json={"items": items}, timeout=timeout)
    assert response.status_code == 200, response.text
    return response.json()["results"]  # type: ignore[no-any-return]


def tag() -> str:
    return uuid.uuid4().hex[:10]


def judged(answer: str, judge: dict[str, Any], prompt: str = "What is asked?") -> dict[str, Any]:
    return {"completion": f"<think>work</think>The answer is \\boxed{{{answer}}}.", "prompt": prompt,
            "judge": {"judge": "grader", "gold": "GOLD", **judge}}  # fmt: skip


MATRIX: dict[str, list[tuple[str, str, float | None]]] = {
    "compass": [
        ("A", "correct", 1.0), ("B", "incorrect", 0.0), ("C", "invalid", 0.0), ("CORRECT", "correct", 1.0),
        ("incorrect.", "incorrect", 0.0), ("INVALID", "invalid", 0.0), ("A: CORRECT", "correct", 1.0),
        ("**B**", "incorrect", 0.0), ("Final Judgment: \\boxed{A} - CORRECT", "correct", 1.0),
        ("Analysis ... \\boxed{C} - REPETITIVE", "invalid", 0.0),
        ("A: INCORRECT", "judge_unparseable", None), ("A or B", "judge_unparseable", None),
        ("\\boxed{A} then \\boxed{B}", "judge_unparseable", None), ("The answer is correct", "judge_unparseable", None),
        ("", "judge_unparseable", None),
        # a boxed letter next to a word that contradicts it is two labels
        ("Final Judgment: \\boxed{A} - INCORRECT", "judge_unparseable", None),
        ("INCORRECT: \\boxed{A}", "judge_unparseable", None), ("\\boxed{b} **correct**", "judge_unparseable", None),
        # a boxed letter quoted or escaped in the reasoning is not a verdict
        ("The candidate wrote `\\boxed{B}`, as the standard answer. A", "judge_unparseable", None),
        ("It wrote \"\\boxed{B}\"; it matches.\nFinal Judgment: \\boxed{A} - CORRECT", "correct", 1.0),
        ("It wrote \\\\boxed{B}, equal to the standard answer. Final Judgment: \\boxed{A}", "correct", 1.0),
    ],
    "general_verifier": [
        ("Final Decision: Yes", "correct", 1.0), ("It differs.\nFinal Decision: No", "incorrect", 0.0),
        ("Final Decision: \\boxed{Yes}", "correct", 1.0), ("\\boxed{No}", "incorrect", 0.0),
        ("Final Decision: Yes\nFinal Decision: No", "judge_unparseable", None), ("Yes", "judge_unparseable", None),
        ("Final Decision: maybe", "judge_unparseable", None),
        ("Not `\\boxed{No}`: they agree.\nFinal Decision: Yes", "correct", 1.0),
        ("Final Decision: Yesterday", "judge_unparseable", None),
    ],
    "equivalence": [
        ("They match. [[A=B]]", "correct", 1.0), ("[[A!=B]]", "incorrect", 0.0),
        ("[[A=B]] or [[A!=B]]", "judge_unparseable", None), ("A=B", "judge_unparseable", None),
    ],
    "custom": [
        ("VERDICT: correct", "correct", 1.0), ("VERDICT: incorrect", "incorrect", 0.0),
        ("correct, no, incorrect", "judge_unparseable", None), ("unsure", "judge_unparseable", None),
        ("incorrectly put, but correct", "correct", 1.0),
    ],
    "custom_yes_no": [  # labels are whole words: "No" is not in "Nonetheless", nor "Yes" in "Yesterday"
        ("Nonetheless the answer matches.", "judge_unparseable", None), ("Nonetheless, Yes", "correct", 1.0),
        ("Yesterday's reference: No", "incorrect", 0.0), ("Yes. No.", "judge_unparseable", None),
    ],
}  # fmt: skip
CUSTOM = {"prompt_template": "Q: {question}\nRef: {gold}\nAns: {answer}\nSay correct or incorrect.",
          "correct_label": "correct", "incorrect_label": "incorrect"}  # fmt: skip
OPTIONS = {"custom": CUSTOM, "custom_yes_no": {**CUSTOM, "preset": "custom", "correct_label": "Yes",
                                               "incorrect_label": "No"}}  # fmt: skip


@pytest.mark.parametrize("preset", list(MATRIX))
def test_each_preset_reads_exactly_one_label(server: Server, standin: str, preset: str) -> None:
    cases = MATRIX[preset]
    answers = [f"x{tag()}" for _ in cases]
    replies = [reply for reply, _, _ in cases]
    script(standin, [{"contains": [answer], "reply": reply} for answer, reply in zip(answers, replies, strict=True)])
    options = {"preset": preset, **OPTIONS.get(preset, {})}
    results = score(server, [judged(answer, options) for answer in answers])
    got = [(r["components"]["judge"]["verdict"], r["components"]["judge"]["score"]) for r in results]
    assert got == [(verdict, value) for _, verdict, value in cases]
    nulls = [r["reward"] for r, (_, _, value) in zip(results, cases, strict=True) if value is None]
    assert nulls == [None] * len(nulls)  # never a silent 0


def test_master_keys_never_reach_the_judge(server: Server, standin: str) -> None:
    script(standin, [], default={"reply": "A"})  # a judge that accepts anything
    before = len(received(standin))
    keys = ["", ":", ".", "Thought process:", "Let me think...", "  ", "**", "解", "\\boxed{}",
            "\\boxed{\\text{Thought process:}}", "Thought process:\n\nStep 1:", "思路", "解题思路：\n\n第一步：",
            "$\\text{Final Answer:}$", "<think>\n</think>"]  # fmt: skip
    items = [{"completion": key, "prompt": "Q?", "judge": {"judge": "grader", "gold": "7"}} for key in keys]
    # `full` sends the end of the completion that fits the judge's context: that is what is checked, not the whole
    cut = "The answer is 7." + " ." * CONTEXT_CHARS
    items += [{"completion": key, "prompt": "Q?", "judge": {"judge": "grader", "gold": "7", "input": "full"}}
              for key in [*keys, cut]]  # fmt: skip
    items.append({"completion": "<think>7</think>", "prompt": "Q?", "judge": {"judge": "grader", "gold": "7"}})
    results = score(server, items)
    assert [r["components"]["judge"]["verdict"] for r in results] == ["no_answer"] * len(items)
    assert all(r["reward"] == 0.0 for r in results)
    assert len(received(standin)) == before


def test_the_judge_is_asked_at_temperature_0_with_the_extracted_answer_and_the_key(
    server: Server, standin: str
) -> None:
    answer, question = f"x{tag()}", f"What is {tag()}?"
    script(standin, [{"contains": [answer], "reply": "A"}])
    item = judged(answer, {}, prompt=question)
    item["completion"] = f"<think>SECRET-REASONING</think>So \\boxed{{{answer}}}"
    [result] = score(server, [item])
    assert result["components"]["judge"]["verdict"] == "correct"
    [sent] = [r for r in received(standin) if answer in r["prompt"]]
    assert sent["temperature"] == 0 and sent["max_tokens"] == 17 and sent["model"] == "grader-model"
    assert sent["authorization"] == f"Bearer {KEY}"
    assert question in sent["prompt"] and "GOLD" in sent["prompt"] and "SECRET-REASONING" not in sent["prompt"]


def test_a_full_completion_keeps_its_end_within_the_context(server: Server, standin: str) -> None:
    end = f"x{tag()}"
    script(standin, [{"contains": [end], "reply": "[[A=B]]"}])
    item = {"completion": "START" + "step " * 5000 + end, "prompt": "Q?",
            "judge": {"judge": "grader", "gold": "G", "input": "full", "preset": "equivalence"}}  # fmt: skip
    [result] = score(server, [item])
    assert result["components"]["judge"]["verdict"] == "correct"
    [sent] = [r for r in received(standin) if end in r["prompt"]]
    assert len(sent["prompt"]) <= CONTEXT_CHARS + 10 and "START" not in sent["prompt"]


def test_swap_asks_both_orders_and_a_disagreement_is_not_correct(server: Server, standin: str) -> None:
    agree, disagree = f"x{tag()}", f"x{tag()}"
    swapped = "<Standard Answer Begin>:\n\\boxed{"  # the answer in the reference's place
    script(standin, [
        {"contains": [swapped + disagree], "reply": "B"},
        {"contains": [disagree], "reply": "A"},
        {"contains": [agree], "reply": "A"},
    ])  # fmt: skip
    before = len(received(standin))
    results = score(server, [
        judged(agree, {"swap": True}), judged(disagree, {"swap": True}),
        judged(disagree, {"swap": True, "on_disagree": "null"}, prompt="Another question?"),
    ])  # fmt: skip
    got = [(r["components"]["judge"]["verdict"], r["components"]["judge"]["score"]) for r in results]
    assert got == [("correct", 1.0), ("judge_disagree", 0.0), ("judge_disagree", None)]
    assert len(received(standin)) - before == 6


def test_failures_are_null_never_0(server: Server, standin: str) -> None:
    cases = {
        "error500": {"status": 500}, "error429": {"status": 429}, "garbage": {"raw": "not json"},
        "nochoices": {"raw": '{"choices": []}'}, "nontext": {"raw": '{"choices": [{"message": {"content": 3}}]}'},
        "slow": {"reply": "A", "delay_s": 4.0},
    }  # fmt: skip
    names = {name: f"x{tag()}" for name in cases}
    script(standin, [{"contains": [names[name]], **rule} for name, rule in cases.items()])
    items = [judged(names[name], {}) for name in cases]
    items.append({**judged(f"x{tag()}", {}), "judge": {"judge": "down", "gold": "G"}})
    results = score(server, items)
    got = [(r["components"]["judge"]["verdict"], r["components"]["judge"]["score"], r["reward"]) for r in results]
    expected = ["judge_error"] * 5 + ["judge_timeout", "judge_error"]
    assert got == [(verdict, None, None) for verdict in expected]


def test_the_judge_s_timeout_is_the_whole_call_s_and_its_body_is_capped(server: Server, standin: str) -> None:
    """A judge that sends its answer a piece a second (each read well within timeout_s 3, the whole in 8 s) is
    judge_timeout, not a verdict the batch waits for; a body over 4 MiB is judge_error, read no further."""
    drip, huge = f"x{tag()}", f"x{tag()}"
    script(standin, [{"contains": [drip], "reply": "A", "drip_s": 1.0},
                     {"contains": [huge], "reply": "A" + " " * (5 * 2**20)}])  # fmt: skip
    results = score(server, [judged(drip, {}), judged(huge, {})])
    got = [(r["components"]["judge"]["verdict"], r["components"]["judge"]["detail"]) for r in results]
    assert got == [("judge_timeout", "the judge did not answer within 3s"),
                   ("judge_error", "the judge's answer is over 4 MiB")]  # fmt: skip


def test_the_same_question_is_asked_once_in_a_batch_and_across_requests(server: Server, standin: str) -> None:
    answer = f"x{tag()}"
    script(standin, [{"contains": [answer], "reply": "A"}])
    before = len(received(standin))
    group = [judged(answer, {}) for _ in range(8)]  # a GRPO group of 8 with the same answer
    first, again = score(server, group), score(server, group)
    assert [r["components"]["judge"]["verdict"] for r in first + again] == ["correct"] * 16
    assert len(received(standin)) - before == 1


def test_rule_miss_asks_only_about_rule_misses_and_never_lowers_a_right_answer(server: Server, standin: str) -> None:
    question = f"What is 6 * 7? {tag()}"
    script(standin, [{"contains": ["forty-two"], "reply": "A"}], default={"reply": "B"})  # B: it would lower
    before = len(received(standin))

    def item(answer: str) -> dict[str, Any]:
        return {"completion": f"The answer is \\boxed{{{answer}}}.", "prompt": question, "math": {"gold": "42"},
                "judge": {"judge": "grader", "gold": "42", "when": "rule_miss"}}  # fmt: skip

    right, rescued, wrong = score(server, [item("42"), item("forty-two"), item("41")])
    assert (right["components"]["math"]["verdict"], right["components"]["judge"]["score"]) == ("correct", 1.0)
    assert "decided by the rule" in right["components"]["judge"]["detail"] and right["reward"] == 2.0
    assert rescued["components"]["math"]["score"] == 0.0 and rescued["components"]["judge"]["score"] == 1.0
    assert "decided by the judge" in rescued["components"]["judge"]["detail"] and rescued["reward"] == 1.0
    assert wrong["components"]["judge"]["verdict"] == "incorrect" and wrong["reward"] == 0.0
    sent = [r["prompt"] for r in received(standin)[before:]]
    assert len(sent) == 2 and not any("\\boxed{42}" in prompt for prompt in sent)


def test_the_batch_deadline_holds(server: Server, standin: str) -> None:
    answers = [f"x{tag()}" for _ in range(6)]
    script(standin, [{"contains": [answer], "reply": "A", "delay_s": 2.0} for answer in answers])
    items = [{**judged(answer, {}), "judge": {"judge": "serial", "gold": "G"}} for answer in answers]
    items.append({"completion": "\\boxed{3}", "math": {"gold": "3"}})
    started = time.monotonic()
    results = score(server, items)
    assert time.monotonic() - started < 9
    verdicts = [r["components"]["judge"]["verdict"] for r in results[:-1]]
    assert "correct" in verdicts and "deadline_exceeded" in verdicts
    assert set(verdicts) == {"correct", "deadline_exceeded"}
    assert all(r["components"]["judge"]["score"] is None for r in results[:-1] if "deadline" in str(r))
    assert results[-1]["components"]["math"]["verdict"] == "correct"


def test_judges_are_listed_and_probed_without_secrets(server: Server, standin: str) -> None:
    deadline = time.monotonic() + 20
    while True:
        ready = httpx.get(f"{server.url}/readyz", timeout=5)
        assert ready.status_code == 200  # a judge that is down does not hold readiness
        if ready.json()["judges"]["grader"]["reachable"] is True or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    judges = ready.json()["judges"]
    assert judges["grader"]["reachable"] is True and judges["down"]["reachable"] is False
    listed = httpx.get(f"{server.url}/v1/judges", timeout=5)
    assert listed.status_code == 200
    by_name = {judge["name"]: judge for judge in listed.json()["judges"]}
    assert set(by_name) == {"grader", "serial", "down", "vault", "refusing"}
    assert by_name["grader"]["api_key"] is True and by_name["serial"]["api_key"] is False
    assert by_name["grader"]["model"] == "grader-model" and by_name["grader"]["max_tokens"] == 17
    assert httpx.get(f"{standin}/_probes", timeout=5).json() >= 1  # GET /models, no prompt
    for text in (ready.text, listed.text, server.output()):
        assert KEY not in text


def test_credentials_in_the_base_url_are_sent_as_basic_auth_and_query_never_shown(server: Server, standin: str) -> None:
    """`user:password@` goes as basic auth and the query (`?key=`) with each request; neither is in a log line (httpx
    logs each request's URL at INFO), /readyz or GET /v1/judges, which show the URL without them."""
    answer = f"x{tag()}"
    script(standin, [{"contains": [answer], "reply": "A"}])
    [result] = score(server, [{**judged(answer, {}), "judge": {"judge": "vault", "gold": "G"}}])
    assert result["components"]["judge"]["verdict"] == "correct"
    [sent] = [r for r in received(standin) if answer in r["prompt"]]
    assert sent["authorization"] == "Basic " + base64.b64encode(f"judge-user:{PASSWORD}".encode()).decode()
    assert sent["query"] == f"key={QUERY_KEY}&v=2"
    ready = httpx.get(f"{server.url}/readyz", timeout=5).json()["judges"]["vault"]
    listed = httpx.get(f"{server.url}/v1/judges", timeout=5).json()["judges"]
    [shown] = [judge["base_url"] for judge in listed if judge["name"] == "vault"]
    assert ready["base_url"] == shown == f"{standin}/v1"
    assert "HTTP Request: POST" in server.output()  # the lines that would carry them are there
    for secret in (PASSWORD, QUERY_KEY, "judge-user"):
        assert secret not in server.output() and secret not in json.dumps([ready, listed])


def test_a_judge_that_refuses_the_key_is_not_reachable_and_says_why(server: Server) -> None:
    """A judge answering 401 (or 403) is up but every call to it fails: /readyz says it is not reachable, and why,
    without the key."""
    [result] = score(server, [{**judged(f"x{tag()}", {}), "judge": {"judge": "refusing", "gold": "G"}}])
    judge = result["components"]["judge"]
    assert (judge["verdict"], judge["score"], judge["detail"]) == ("judge_error", None, "the judge answered HTTP 401")
    ready = httpx.get(f"{server.url}/readyz", timeout=5)
    shown = ready.json()["judges"]["refusing"]
    assert shown["reachable"] is False and "401" in shown["why"] and "refused" in shown["why"]
    assert ready.json()["judges"]["grader"]["why"] is None
    for text in (ready.text, httpx.get(f"{server.url}/v1/judges", timeout=5).text, server.output()):
        assert REFUSED_KEY not in text


def test_a_judge_this_server_lacks_is_a_422(server: Server) -> None:
    item = {"completion": "\\boxed{1}", "judge": {"judge": "nobody", "gold": "1"}}
    response = httpx.post(f"{server.url}/v1/score", json={"items": [item]}, timeout=10)
    assert response.status_code == 422
    [error] = response.json()["errors"]
    assert error["loc"] == "items.0.judge.judge" and "GET /v1/judges" in error["msg"]


def test_a_missing_key_stops_the_start(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("JUDGE_TEST_ABSENT_KEY", raising=False)
    judges = {"j": {"base_url": "http://127.0.0.1:9/v1", "model": "m", "api_key_env": "JUDGE_TEST_ABSENT_KEY"}}
    starting = running_server(tmp_path, ready_timeout=30, judges=json.dumps(judges), code_enabled="false")
    with pytest.raises(RuntimeError, match="JUDGE_TEST_ABSENT_KEY is not set"), starting:
        pass


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"preset": "custom"}, "preset custom needs prompt_template, correct_label and incorrect_label"),
        ({"correct_label": "ok"}, "apply only to preset custom"),
        ({"prompt_template": "no placeholder here"}, "prompt_template must hold {answer}"),
        ({"correct_from": "math"}, 'apply only with when "rule_miss"'),
        ({"when": "sometimes"}, "'always' or 'rule_miss'"),
    ],
)
def test_bad_judge_options_are_a_422_naming_the_field(server: Server, options: dict[str, Any], message: str) -> None:
    item = {"completion": "\\boxed{1}", "math": {"gold": "1"}, "weights": {"math": 2.0},
            "judge": {"judge": "grader", "gold": "SECRET-GOLD", **options}}  # fmt: skip
    response = httpx.post(f"{server.url}/v1/score", json={"items": [item]}, timeout=10)
    assert response.status_code == 422
    [error] = response.json()["errors"]
    assert error["loc"].startswith("items.0.judge") and message in error["msg"]
    assert "SECRET-GOLD" not in response.text


def test_judge_settings_are_checked_at_start() -> None:
    from pydantic import ValidationError

    from verifier_service.settings import VerifierSettings

    judge = {"base_url": "http://127.0.0.1:1/v1", "model": "m"}
    with pytest.raises(ValidationError, match="timeout_s must be shorter than VERIFIER_BATCH_TIMEOUT_S"):
        VerifierSettings(judges={"j": {**judge, "timeout_s": 10}}, batch_timeout_s=10)
    with pytest.raises(ValidationError, match="judge name"):
        VerifierSettings(judges={"no spaces": judge})
    with pytest.raises(ValidationError, match="base_url"):
        VerifierSettings(judges={"j": {**judge, "base_url": "ftp://x"}})
    with pytest.raises(ValidationError, match="extra"):
        VerifierSettings(judges={"j": {**judge, "api_key": "inline keys are refused"}})
    with pytest.raises(ValidationError, match="api_key_env: the base_url holds credentials too") as raised:
        VerifierSettings(judges={"j": {**judge, "base_url": "http://u:SECRET-PW@h/v1", "api_key_env": "K"}})
    assert "SECRET-PW" not in str(raised.value)


def test_a_settings_error_shows_no_credentials_of_a_base_url() -> None:
    """A ValidationError's text (the traceback of an app made without the CLI: create_app, Ray Serve, in process)
    showed the start and the end of the judge's settings: a password at the start of base_url, or a base_url written
    last, was printed."""
    from pydantic import ValidationError

    from verifier_service.settings import VerifierSettings

    last = {"model": "m", "api_key_env": "K", "base_url": "http://u:hunter2@h/v1"}
    first = {"base_url": "http://:hunter2@h/v1", "model": "m", "api_key_env": "K"}
    late = {"model": "m", "timeout_s": 10, "base_url": "http://u:hunter2@h/v1"}
    for judge, limit in ((last, 60), (first, 60), (late, 10)):
        with pytest.raises(ValidationError) as raised:
            VerifierSettings(judges={"j": judge}, batch_timeout_s=limit)
        assert "hunter" not in str(raised.value) and "hunter" not in repr(raised.value)
    from reward_models.spec import ModelSpec

    engine = {"path": "/m", "backend": "vllm", "url": "http://u:hunter2@h:1", "max_tokens": 9, "batch_tokens": 8}
    with pytest.raises(ValidationError) as raised:
        ModelSpec(**engine)
    assert "hunter" not in str(raised.value)
