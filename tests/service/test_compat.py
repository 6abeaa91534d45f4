"""The trainer routes (/v1/compat/...) through a real uvicorn server: the exact shapes OpenRLHF, slime and NeMo-Gym
send and read (docs/trainers.md), their failure paths, and the API key in the URL."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.conftest import Server, running_server

KEY = "k3y-Only_In-The-URL"
SECRET = "SeCrEt-VaLuE-9137"  # sent in bad requests; must never come back
TEMPLATE = "<|im_start|>user\nWhat is 6*7? Put the answer in \\boxed{{}}.<|im_end|>\n<|im_start|>assistant\n{}"
PROMPT = TEMPLATE.format("")
RIGHT = "<think>6*7=42</think>The answer is \\boxed{42}."
WRONG = "<think>6*7=48</think>The answer is \\boxed{48}."
UNPARSEABLE_GOLD = "\\frac"  # the verifier cannot judge against it: math is null (gold_unparseable)


def post(server: Server, path: str, body: Any, **kwargs: Any) -> httpx.Response:
    return httpx.post(f"{server.url}{path}", json=body, timeout=60, **kwargs)


def openrlhf(server: Server, response: str, label: Any, query: str = "", path: str = "/v1/compat/openrlhf") -> Any:
    body = {"query": [PROMPT + response + "<|im_end|>"], "prompts": [PROMPT], "labels": [label]}
    answer = post(server, path + query, body)
    assert answer.status_code == 200, answer.text
    return answer.json()


def slime(server: Server, body: dict[str, Any], query: str = "") -> Any:
    answer = post(server, "/v1/compat/slime" + query, body)
    assert answer.status_code == 200, answer.text
    return answer.json()


def responses_object(*texts: str, reasoning: str | None = "Multiply.") -> dict[str, Any]:
    """An OpenAI Responses object as Gym's agents pass it on: a reasoning item, then one assistant message."""
    output: list[dict[str, Any]] = []
    if reasoning is not None:
        output.append({"id": "rs_1", "type": "reasoning", "summary": [{"type": "summary_text", "text": reasoning}]})
    content = [{"type": "output_text", "text": text, "annotations": []} for text in texts]
    message = {"id": "msg_1", "type": "message", "role": "assistant", "status": "completed", "content": content}
    return {"id": "resp_1", "object": "response", "created_at": 0, "model": "policy", "output": [*output, message]}


def gym_row(*texts: str, **row: Any) -> dict[str, Any]:
    """A Gym /verify body: the dataset row (here `expected_answer` and a field of its own), the create params, the
    response."""
    params = {"input": [{"role": "user", "content": "What is 6*7?"}], "temperature": 1.0}
    return {"responses_create_params": params, "response": responses_object(*texts), "row_id": 7, **row}


def verify(server: Server, body: dict[str, Any], query: str = "") -> Any:
    answer = post(server, "/v1/compat/nemo-gym/verify" + query, body)
    assert answer.status_code == 200, answer.text
    return answer.json()


# OpenRLHF


def test_openrlhf_right_and_wrong_answers(server: Server) -> None:
    judged = {"verifier_judged": [1.0], "verifier_math": [1.0]}
    assert openrlhf(server, RIGHT, "42") == {"rewards": [1.0], "scores": [1.0], "extra_logs": judged}
    judged = {"verifier_judged": [1.0], "verifier_math": [0.0]}
    assert openrlhf(server, WRONG, "42") == {"rewards": [0.0], "scores": [0.0], "extra_logs": judged}


def test_openrlhf_a_numeric_label_is_the_gold(server: Server) -> None:
    assert openrlhf(server, RIGHT, 42)["rewards"] == [1.0]


@pytest.mark.parametrize("query", ["?components=math+format", "?components=math&components=format"])
def test_openrlhf_components_and_weights_from_the_url(server: Server, query: str) -> None:
    """Without a comma, which OpenRLHF's --reward.remote_url would split the URL on."""
    answer = openrlhf(server, RIGHT, "42", query + "&weights=math:1+format:0.5")
    assert answer == {
        "rewards": [1.5],
        "scores": [1.0],
        "extra_logs": {"verifier_judged": [1.0], "verifier_math": [1.0], "verifier_format": [1.0]},
    }
    wrong_unformatted = openrlhf(server, "It is \\boxed{48}.", "42", query + "&weights=math:1+format:0.5")
    assert wrong_unformatted["rewards"] == [0.0] and wrong_unformatted["extra_logs"]["verifier_format"] == [0.0]
    wrong = openrlhf(server, WRONG, "42", query + "&weights=math:1+format:0.5")
    assert wrong["rewards"] == [0.5] and wrong["scores"] == [pytest.approx(1 / 3)]


def test_openrlhf_the_prompt_is_not_scored(server: Server) -> None:
    """The template's text before <think> would make the format wrong; the prompt's \\boxed{} would be an answer."""
    answer = openrlhf(server, "<think>6*7</think>So it is 42.", "42", "?components=math,format")
    assert answer["extra_logs"]["verifier_format"] == [1.0] and answer["rewards"] == [2.0]


def test_openrlhf_trailing_special_tokens_are_stripped(server: Server) -> None:
    completion = "<think>The capital.</think>Answer: Paris"
    raw = post(
        server,
        "/v1/score",
        {"items": [{"completion": completion + "<|im_end|>\n<|endoftext|>", "answer": {"gold": "Paris"}}]},
    )
    assert raw.json()["results"][0]["reward"] == 0.0  # what the tokens would cost if they were scored
    body = {"query": [PROMPT + completion + "<|im_end|>\n<|endoftext|>"], "prompts": [PROMPT], "labels": ["Paris"]}
    answer = post(server, "/v1/compat/openrlhf?components=answer", body).json()
    assert answer["rewards"] == [1.0] and answer["extra_logs"]["verifier_answer"] == [1.0]


def test_openrlhf_a_query_without_its_prompt_is_a_422_and_one_sent_without_prompts_is_scored_whole(
    server: Server,
) -> None:
    body = {"query": ["<think>6*7</think>42<|eot_id|>"], "prompts": ["another prompt"], "labels": ["42"]}
    answer = post(server, "/v1/compat/openrlhf?components=math+format", body)
    assert answer.status_code == 422
    assert answer.json()["errors"][0]["loc"] == "query.0" and "does not hold its prompt" in answer.text
    no_prompts = post(server, "/v1/compat/openrlhf", {"query": ["<think>6*7</think>42</s>"], "labels": ["42"]})
    assert no_prompts.json()["rewards"] == [1.0]


@pytest.mark.parametrize("as_json", [False, True])
def test_openrlhf_a_label_can_be_the_item_specs(server: Server, as_json: bool) -> None:
    spec = {"math": {"gold": "42"}, "format": {}, "weights": {"format": 0.25}}
    answer = openrlhf(server, RIGHT, json.dumps(spec) if as_json else spec)
    assert answer["rewards"] == [1.25] and answer["scores"] == [1.0]
    assert answer["extra_logs"] == {"verifier_judged": [1.0], "verifier_math": [1.0]}  # the URL's keys, always


def test_openrlhf_a_code_label(server: Server) -> None:
    tests = [
        {"type": "call", "fn": "add", "args": [2, 3], "expected": 5},
        {"type": "assert", "code": "assert add(1, 1) == 2"},
    ]
    program = "<think>Add.</think>```python\ndef add(a, b):\n    return a + b\n```"
    assert openrlhf(server, program, {"code": {"tests": tests}})["rewards"] == [1.0]
    broken = "<think>Add.</think>```python\ndef add(a, b):\n    return a - b\n```"
    assert openrlhf(server, broken, {"code": {"tests": tests}})["rewards"] == [0.0]


def test_openrlhf_several_queries_in_one_request(server: Server) -> None:
    body = {"query": [PROMPT + RIGHT, PROMPT + WRONG], "prompts": [PROMPT, PROMPT], "labels": ["42", "42"]}
    answer = post(server, "/v1/compat/openrlhf", body).json()
    assert answer["rewards"] == [1.0, 0.0] and answer["extra_logs"]["verifier_math"] == [1.0, 0.0]


def test_openrlhf_an_unjudged_sample_is_a_503_with_the_verdicts(server: Server) -> None:
    body = {"query": [PROMPT + RIGHT], "prompts": [PROMPT], "labels": [UNPARSEABLE_GOLD]}
    answer = post(server, "/v1/compat/openrlhf", body)
    assert answer.status_code == 503
    assert "math: gold_unparseable" in answer.json()["detail"] and "on_unjudged" in answer.json()["detail"]


def test_openrlhf_a_fallback_is_explicit_and_flagged(server: Server) -> None:
    answer = openrlhf(server, RIGHT, UNPARSEABLE_GOLD, "?on_unjudged=-0.5&components=math+format")
    assert answer == {
        "rewards": [-0.5],
        "scores": [0.0],
        "extra_logs": {"verifier_judged": [0.0], "verifier_math": [0.0], "verifier_format": [1.0]},
    }


@pytest.mark.parametrize(
    ("query", "body", "loc"),
    [
        ("?weights=math:" + SECRET, None, "?weights"),
        ("?weights=" + SECRET + ":1", None, "?weights"),
        ("?components=" + SECRET, None, "?components"),
        ("?components=overlong", None, "?components"),
        ("?on_unjudged=" + SECRET, None, "?on_unjudged"),
        ("?weights=format:1", None, "?weights"),  # format is not requested
        ("?weights=math:0", None, "?weights"),  # a wrong answer would score as much as a right one
        ("", {"labels": [None]}, "labels.0"),
        ("", {"labels": [[SECRET]]}, "labels.0"),
        ("", {"labels": ["x" * 10_001]}, "labels.0"),
        ("", {"labels": ['{"math": ' + SECRET]}, "labels.0"),
        ("", {"labels": [{"math": {"gold": "1", "optoins": SECRET}}]}, "labels.0.math"),  # its name is said back
        ("", {"labels": [{"math": {"gold": "1"}, "completion": SECRET}]}, "labels.0.completion"),
        ("", {"labels": [{"maths": {"gold": SECRET}}]}, "labels.0"),
        ("", {"prompts": [PROMPT, PROMPT]}, "prompts"),
        ("", {"query": [SECRET, 1]}, "query.1"),
        ("", {"query": []}, "query"),
    ],
)
def test_openrlhf_bad_requests_are_422_naming_the_field_never_the_value(
    server: Server, query: str, body: dict[str, Any] | None, loc: str
) -> None:
    sent = {"query": [PROMPT + RIGHT], "prompts": [PROMPT], "labels": ["42"], **(body or {})}
    answer = post(server, "/v1/compat/openrlhf" + query, sent)
    assert answer.status_code == 422, answer.text
    assert [error["loc"] for error in answer.json()["errors"]] == [loc]
    assert SECRET not in answer.text and "x" * 100 not in answer.text


def test_an_unknown_field_of_a_label_gets_the_closest_name(server: Server) -> None:
    body = {"query": [PROMPT + RIGHT], "prompts": [PROMPT], "labels": [{"maths": {"gold": "42"}}]}
    answer = post(server, "/v1/compat/openrlhf", body)
    assert answer.status_code == 422, answer.text
    assert answer.json()["detail"] == "invalid request: labels.0: unknown field 'maths'; did you mean 'math'?"


def test_openrlhf_invalid_json_is_a_422(server: Server) -> None:
    answer = httpx.post(f"{server.url}/v1/compat/openrlhf", content=b"{" + SECRET.encode(), timeout=10)
    assert answer.status_code == 422 and answer.json()["errors"][0]["loc"] == "body"
    assert SECRET not in answer.text


# slime


def test_slime_right_wrong_and_a_chat_prompt(server: Server) -> None:
    chat = [{"role": "system", "content": "Think first."}, {"role": "user", "content": "What is 6*7?"}]
    assert slime(server, {"prompt": chat, "response": RIGHT, "label": "42"}) == {
        "reward": 1.0,
        "verifier_judged": 1.0,
        "verifier_math": 1.0,
    }
    assert slime(server, {"prompt": PROMPT, "response": WRONG + "<|im_end|>", "label": "42"})["reward"] == 0.0


def test_slime_components_and_a_spec_label(server: Server) -> None:
    answer = slime(
        server, {"prompt": "q", "response": RIGHT + "<|endoftext|>", "label": "42"}, "?components=math+format"
    )
    assert answer == {"reward": 2.0, "verifier_judged": 1.0, "verifier_math": 1.0, "verifier_format": 1.0}
    spec = {"math": {"gold": "42"}, "format": {}, "weights": {"math": 2.0}}
    assert slime(server, {"prompt": "q", "response": RIGHT, "label": spec})["reward"] == 3.0


def test_slime_unjudged_is_a_503_unless_a_fallback_is_asked_for(server: Server) -> None:
    body = {"prompt": "q", "response": RIGHT, "label": UNPARSEABLE_GOLD}
    failed = post(server, "/v1/compat/slime", body)
    assert failed.status_code == 503 and "gold_unparseable" in failed.json()["detail"]
    assert slime(server, body, "?on_unjudged=0") == {"reward": 0.0, "verifier_judged": 0.0, "verifier_math": 0.0}


def test_slime_bad_requests(server: Server) -> None:
    missing = post(server, "/v1/compat/slime", {"prompt": "q", "label": "42"})
    assert missing.status_code == 422 and missing.json()["errors"][0]["loc"] == "response"
    no_gold = post(server, "/v1/compat/slime", {"prompt": "q", "response": RIGHT})
    assert no_gold.status_code == 422 and no_gold.json()["errors"][0]["loc"] == "label"


# NeMo-Gym


def test_nemo_gym_verify_echoes_the_body_and_adds_the_reward(server: Server) -> None:
    body = gym_row("The answer is \\boxed{42}.", expected_answer="42")
    assert verify(server, body) == {
        **body,
        "reward": 1.0,
        "mask_sample": False,
        "failure_reason": None,
        "verifier_judged": 1.0,
        "verifier_math": 1.0,
    }
    assert verify(server, gym_row("The answer is \\boxed{48}.", expected_answer="42"))["reward"] == 0.0


def test_nemo_gym_the_message_text_is_its_output_text_parts_joined(server: Server) -> None:
    """The answer is split across two parts; the reasoning item's text (another number) is not scored."""
    body = gym_row("The answer is \\boxed{4", "2}.", expected_answer="42")
    body["response"]["output"][0]["summary"][0]["text"] = "\\boxed{48}"
    assert verify(server, body)["reward"] == 1.0


def test_nemo_gym_components_from_the_url_and_a_verifier_spec_in_the_row(server: Server) -> None:
    formatted = gym_row("<think>6*7</think>\\boxed{42}", expected_answer="42")
    answer = verify(server, formatted, "?components=math,format&weights=format:0.5")
    assert (answer["reward"], answer["verifier_math"], answer["verifier_format"]) == (1.5, 1.0, 1.0)
    spec_row = gym_row("\\boxed{42}", expected_answer="41", verifier={"math": {"gold": "42"}})
    assert verify(server, spec_row)["reward"] == 1.0  # the spec wins over expected_answer


def test_nemo_gym_unjudged_is_a_masked_zero_also_in_instance_config(server: Server) -> None:
    body = gym_row("\\boxed{42}", expected_answer=UNPARSEABLE_GOLD, instance_config={"env": "math"})
    answer = verify(server, body)
    assert (answer["reward"], answer["mask_sample"], answer["verifier_judged"]) == (0.0, True, 0.0)
    assert answer["instance_config"] == {"env": "math", "mask_sample": True}
    assert "gold_unparseable" in answer["failure_reason"]


def test_nemo_gym_sessions_and_reverify_mode(server: Server) -> None:
    assert post(server, "/v1/compat/nemo-gym/seed_session", {}).json() == {}
    assert post(server, "/v1/compat/nemo-gym/seed_session", gym_row("x", expected_answer="1")).json() == {}
    seeded = {"resources_session_id": "s-1", "episode_id": "e", "task_id": "t", "task_data": {}}
    assert post(server, "/v1/compat/nemo-gym/seed_session", seeded).json() == {"resources_session_id": "s-1"}
    closed = post(server, "/v1/compat/nemo-gym/close_session", {"resources_session_id": "s-1", "episode_id": "e"})
    assert closed.json() == {"resources_session_id": "s-1"}
    assert httpx.get(f"{server.url}/v1/compat/nemo-gym/reverify_mode").json() == "stateless"


def test_nemo_gym_bad_requests(server: Server) -> None:
    no_output = gym_row("x", expected_answer="42")
    no_output["response"]["output"] = SECRET
    answer = post(server, "/v1/compat/nemo-gym/verify", no_output)
    assert answer.status_code == 422 and answer.json()["errors"][0]["loc"] == "response.output"
    assert SECRET not in answer.text
    no_params = {"response": responses_object("x"), "expected_answer": "42"}
    answer = post(server, "/v1/compat/nemo-gym/verify", no_params)
    assert answer.status_code == 422 and answer.json()["errors"][0]["loc"] == "responses_create_params"
    no_gold = post(server, "/v1/compat/nemo-gym/verify", gym_row("x"))
    assert no_gold.status_code == 422 and no_gold.json()["errors"][0]["loc"] == "expected_answer"


def raw_post(server: Server, path: str, body: str) -> httpx.Response:
    """A body as Python's json module writes it: NaN, Infinity and 1e999 included."""
    return httpx.post(f"{server.url}{path}", content=body.encode(), timeout=60,
                      headers={"content-type": "application/json"})  # fmt: skip


@pytest.mark.parametrize("number", ["NaN", "Infinity", "-Infinity", "1e999"])
def test_nemo_gym_echoes_numbers_json_cannot_carry_as_null(server: Server, number: str) -> None:
    """Issue 23: the body is echoed, and a NaN in it (a dataset row's missing value) made the answer a 500."""
    row = gym_row(RIGHT, expected_answer="42")
    body = json.dumps(row)[:-1] + f', "score_hint": {number}, "meta": {{"values": [1.5, {number}]}}}}'
    answer = raw_post(server, "/v1/compat/nemo-gym/verify", body)
    assert answer.status_code == 200, answer.text
    found = answer.json()
    assert found["score_hint"] is None and found["meta"] == {"values": [1.5, None]} and found["reward"] == 1.0


LABELED = {  # route -> a body whose label is {}, as JSON text
    "/v1/compat/openrlhf": '{{"query": ["x"], "prompts": [""], "labels": [{}]}}',
    "/v1/compat/slime": '{{"response": "x", "label": {}}}',
    "/v1/compat/nemo-gym/verify": '{{"responses_create_params": {{}}, "response": {{"output": []}}, '
    '"expected_answer": {}}}',
}
WHERE = {
    "/v1/compat/openrlhf": "labels.0",
    "/v1/compat/slime": "label",
    "/v1/compat/nemo-gym/verify": "expected_answer",
}


@pytest.mark.parametrize("path", LABELED)
@pytest.mark.parametrize("label", ["NaN", "Infinity", "-Infinity", "1e999"])
def test_a_label_json_cannot_carry_is_a_422_not_the_gold_inf(server: Server, path: str, label: str) -> None:
    """Issue 23: Infinity was judged as the gold "inf", and \\boxed{\\infty} scored 1.0."""
    answer = raw_post(server, path, LABELED[path].format(label))
    assert answer.status_code == 422, answer.text
    assert answer.json()["errors"] == [
        {"loc": WHERE[path], "msg": "Value error, a gold given as a number must be finite", "type": "value_error"}
    ]


@pytest.mark.parametrize("path", LABELED)
def test_a_label_nested_too_deep_is_a_422(server: Server, path: str) -> None:
    """Issue 23: a JSON-string label nested 100,000 deep was a 500 on every route (RecursionError)."""
    deep = '{"math": ' + "[" * 100_000 + "]" * 100_000 + "}"
    if path.endswith("verify"):
        answer = post(server, path, gym_row("x", verifier=deep))
    else:
        answer = raw_post(server, path, LABELED[path].format(json.dumps(deep)))
    assert answer.status_code == 422, answer.text
    [error] = answer.json()["errors"]
    assert error["loc"] == WHERE[path].replace("expected_answer", "verifier") and "nested too deep" in error["msg"]
    assert httpx.get(f"{server.url}/healthz", timeout=10).status_code == 200


def test_the_routes_are_in_the_openapi_document(server: Server) -> None:
    paths = httpx.get(f"{server.url}/openapi.json").json()["paths"]
    for path in ("/v1/compat/openrlhf", "/v1/compat/slime", "/v1/compat/nemo-gym/verify"):
        route = paths[path]["post"]
        assert route["security"] == [{"CompatKey": []}]
        assert set(route["responses"]) >= {"200", "401", "413", "422", "503"}
        assert "properties" in route["requestBody"]["content"]["application/json"]["schema"]


# Auth, limits, logs and metrics: a server with an API key, small limits and the access log on.


@pytest.fixture(scope="module")
def keyed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    settings = {"api_key": KEY, "log_level": "info", "math_workers": 1, "code_enabled": "false"}
    limits = {"max_completion_chars": 2000, "max_request_bytes": 20_000, "max_batch_items": 2}
    with running_server(tmp_path_factory.mktemp("keyed"), **settings, **limits) as server:
        yield server


ROUTES = [
    ("/v1/compat/openrlhf", {"query": [RIGHT], "labels": ["42"]}),
    ("/v1/compat/slime", {"prompt": "q", "response": RIGHT, "label": "42"}),
    ("/v1/compat/nemo-gym/verify", gym_row(RIGHT, expected_answer="42")),
    ("/v1/compat/nemo-gym/seed_session", {}),
]


@pytest.mark.parametrize(("path", "body"), ROUTES)
def test_the_key_in_the_url_or_the_header_and_nothing_else(keyed: Server, path: str, body: dict[str, Any]) -> None:
    assert post(keyed, path, body).status_code == 401
    assert post(keyed, path.replace("/v1/compat/", "/v1/compat/key/wrong-key/"), body).status_code == 401
    assert post(keyed, path.replace("/v1/compat/", "/v1/compat/key//"), body).status_code == 401
    assert post(keyed, path, body, headers={"Authorization": "Bearer wrong"}).status_code == 401
    assert post(keyed, path.replace("/v1/compat/", f"/v1/compat/key/{KEY}/"), body).status_code == 200
    assert post(keyed, path, body, headers={"Authorization": f"Bearer {KEY}"}).status_code == 200


def test_v1_score_keeps_header_only_auth(keyed: Server) -> None:
    item = {"completion": RIGHT, "math": {"gold": "42"}}
    assert post(keyed, "/v1/score", {"items": [item]}).status_code == 401
    assert post(keyed, f"/v1/compat/key/{KEY}/score", {"items": [item]}).status_code == 404  # only compat routes
    assert post(keyed, "/v1/score", {"items": [item]}, headers={"Authorization": f"Bearer {KEY}"}).status_code == 200


def test_the_key_is_checked_before_the_body_is_read(keyed: Server) -> None:
    assert post(keyed, "/v1/compat/openrlhf", {"query": 1}).status_code == 401


def test_limits_are_those_of_v1_score(keyed: Server) -> None:
    keyed_path = f"/v1/compat/key/{KEY}"
    long = post(keyed, f"{keyed_path}/openrlhf", {"query": ["x" * 3000], "labels": ["1"]})
    assert long.status_code == 413 and long.json()["detail"].startswith(
        "query.0 has 3000 characters; the limit is 2000"
    )
    long = post(keyed, f"{keyed_path}/slime", {"prompt": "", "response": "x" * 3000, "label": "1"})
    assert long.status_code == 413 and long.json()["detail"].startswith("response has 3000 characters")
    many = post(keyed, f"{keyed_path}/openrlhf", {"query": ["1", "2", "3"], "labels": ["1", "2", "3"]})
    assert many.status_code == 413 and "3 samples in one request; the limit is 2" in many.json()["detail"]
    big = post(keyed, f"{keyed_path}/openrlhf", {"query": ["x" * 30_000], "labels": ["1"]})
    assert big.status_code == 413 and "VERIFIER_MAX_REQUEST_BYTES" in big.json()["detail"]
    code = post(
        keyed,
        f"{keyed_path}/slime",
        {"response": RIGHT, "label": {"code": {"tests": [{"type": "assert", "code": "1"}]}}},
    )
    assert code.status_code == 422 and code.json()["errors"][0]["loc"] == "label.code"


def test_the_key_never_reaches_the_log(keyed: Server) -> None:
    with_key = f"/v1/compat/key/{KEY}"
    assert post(keyed, f"{with_key}/openrlhf", {"query": [RIGHT], "labels": ["42"]}).status_code == 200
    assert post(keyed, f"{with_key}/slime", {"response": RIGHT, "label": UNPARSEABLE_GOLD}).status_code == 503
    assert post(keyed, f"{with_key}/nowhere", {}).status_code == 404
    assert post(keyed, "/v1/compat/key/not-the-key/slime", {}).status_code == 401
    log = keyed.output()
    assert '"POST /v1/compat/openrlhf HTTP/1.1" 200' in log and '"POST /v1/compat/slime HTTP/1.1" 503' in log
    assert '"POST /v1/compat/nowhere HTTP/1.1" 404' in log and '"POST /v1/compat/slime HTTP/1.1" 401' in log
    assert KEY not in log and "not-the-key" not in log
    assert "the trainer routes take it there or in the URL" in log
    assert "Traceback" not in log and "ERROR" not in log, log[-3000:]


def test_compat_requests_are_counted_as_score_requests(keyed: Server) -> None:
    def counted(status: int) -> float:
        text = httpx.get(f"{keyed.url}/metrics").text
        found = re.search(rf'^verifier_requests_total\{{status="{status}"\}} (\S+)$', text, re.M)
        return float(found[1]) if found else 0.0

    before = {status: counted(status) for status in (200, 401, 503)}
    with_key = f"/v1/compat/key/{KEY}"
    post(keyed, f"{with_key}/nemo-gym/verify", gym_row(RIGHT, expected_answer="42"))
    post(keyed, "/v1/compat/openrlhf", {"query": [RIGHT]})
    post(keyed, f"{with_key}/openrlhf", {"query": [RIGHT], "labels": [UNPARSEABLE_GOLD]})
    post(keyed, f"{with_key}/nemo-gym/seed_session", {})  # not a score request
    assert {status: counted(status) - before[status] for status in before} == {200: 1.0, 401: 1.0, 503: 1.0}


# Instruction-following labels in the datasets' own shapes (the spec they map to is tested in
# tests/unit/test_compat_mapping.py; scoring one needs the `instructions` component).


@pytest.mark.parametrize("path", LABELED)
def test_a_malformed_open_instruct_label_is_a_422_at_the_label_never_echoed(server: Server, path: str) -> None:
    label = f"[{{'instruction_id': ['a:b'], 'kwargs': [__import__('os').getenv('{SECRET}')]}}]"  # never run
    if path.endswith("verify"):
        answer = post(server, path, gym_row("x", expected_answer=label))
    else:
        answer = raw_post(server, path, LABELED[path].format(json.dumps(label)))
    assert answer.status_code == 422, answer.text
    [error] = answer.json()["errors"]
    assert error["loc"] == WHERE[path] and "Python-literal list" in error["msg"] and SECRET not in answer.text


def test_a_malformed_nemo_gym_instruction_row_is_a_422_at_its_metadata(server: Server) -> None:
    metadata = {"instruction_id_list": ["a:b"], "kwargs": [None], "grading_mode": SECRET}
    answer = post(server, "/v1/compat/nemo-gym/verify", gym_row("x", verifier_metadata=metadata))
    assert answer.status_code == 422, answer.text
    assert answer.json()["errors"][0]["loc"] == "verifier_metadata" and SECRET not in answer.text
