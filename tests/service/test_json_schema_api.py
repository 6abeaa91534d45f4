"""The json_schema component through a real server: a GRPO group sharing one schema, each item its own verdict in
order; a schema breaking a rule is a 422 naming the field and quoting nothing; the catalogue lists it."""

from __future__ import annotations

import json
import threading
import time
from typing import Any

import httpx
import pytest

from tests.conftest import Server
from trainer_client import VerifierReward
from trainer_client.data import JSON_SYSTEM_PROMPT, Columns, system_prompt_for, to_row

SCHEMA = {
    "type": "object",
    "properties": {
        "city": {"type": "string"},
        "population": {"type": "integer", "minimum": 0},
        "tags": {"type": "array", "items": {"type": "string"}, "uniqueItems": True},
    },
    "required": ["city", "population"],
    "additionalProperties": False,
}
GOOD = {"city": "Lyon", "population": 522_250, "tags": ["rhone", "silk"]}


def post(server: Server, items: list[dict[str, Any]]) -> httpx.Response:
    return httpx.post(f"{server.url}/v1/score", json={"items": items}, timeout=60)


def test_a_group_sharing_one_schema_gets_a_verdict_per_item_in_order(server: Server) -> None:
    completions = {
        "bare": (json.dumps(GOOD), "valid"),
        "fenced": (f"<think>Lyon, about half a million.</think>\n```json\n{json.dumps(GOOD, indent=2)}\n```", "valid"),
        "missing": ('{"city": "Lyon"}', "invalid"),
        "extra": (json.dumps({**GOOD, "mayor": "x"}), "invalid"),
        "negative": (json.dumps({**GOOD, "population": -1}), "invalid"),
        "repeated tag": (json.dumps({**GOOD, "tags": ["a", "a"]}), "invalid"),
        "prose": ("Lyon has about 522,250 people.", "no_json"),
        "unfinished": ('```json\n{"city": "Lyon",\n```', "no_json"),
    }
    items = [
        {"id": name, "completion": text, "json_schema": {"schema": SCHEMA}} for name, (text, _) in completions.items()
    ]
    response = post(server, items)
    assert response.status_code == 200, response.text
    results = response.json()["results"]
    assert [r["id"] for r in results] == list(completions)
    for result, (_, verdict) in zip(results, completions.values(), strict=True):
        component = result["components"]["json_schema"]
        assert component["verdict"] == verdict, (result["id"], component)
        assert result["reward"] == component["score"] == (1.0 if verdict == "valid" else 0.0)
    assert results[4]["components"]["json_schema"]["detail"] == "at $.population: breaks minimum 0"


def test_a_pattern_that_runs_away_is_null_not_a_stall(server: Server) -> None:
    schema = {"type": "string", "pattern": "^(a|aa)+$"}
    items = [
        {"completion": json.dumps("a" * 5000 + "!"), "json_schema": {"schema": schema}},
        {"completion": json.dumps("aaaa"), "json_schema": {"schema": schema}},
    ]
    response = post(server, items)
    assert response.status_code == 200, response.text
    [bomb, fine] = response.json()["results"]
    assert (bomb["reward"], bomb["components"]["json_schema"]["verdict"]) == (None, "timeout")
    assert fine["components"]["json_schema"]["verdict"] == "valid"


def test_a_schema_breaking_a_rule_is_a_422_that_names_the_field(server: Server) -> None:
    for schema in (
        {"$ref": "https://schemas.example.com/city.json"},
        {"type": "citty"},
        {"pattern": "(x"},
        {"$schema": 57},
    ):
        items = [
            {"completion": "{}", "json_schema": {"schema": SCHEMA}},
            {"completion": "{}", "json_schema": {"schema": schema}},
        ]
        response = post(server, items)
        assert response.status_code == 422, response.text
        [error] = response.json()["errors"]
        assert error["loc"] == "items.1.json_schema.schema"
        assert "schema" in error["msg"]
        assert "example.com" not in response.text and "citty" not in response.text and "(x" not in response.text
        assert "57" not in response.text


def test_strict_and_weights_and_the_catalogue(server: Server) -> None:
    loose = {"type": "object", "properties": {"a": {"type": "integer"}}}
    items = [
        {"completion": "{}", "json_schema": {"schema": loose}},
        {"completion": "{}", "json_schema": {"schema": loose, "strict": True}},
        {
            "completion": '{"a": 1}',
            "json_schema": {"schema": loose, "strict": True},
            "format": {},
            "weights": {"json_schema": 2.0},
        },
    ]
    response = post(server, items)
    assert response.status_code == 200, response.text
    verdicts = [r["components"]["json_schema"]["verdict"] for r in response.json()["results"]]
    assert verdicts == ["valid", "invalid", "valid"]
    catalogue = httpx.get(f"{server.url}/v1/components", timeout=10).json()["components"]["json_schema"]
    assert catalogue["role"] == "primary"
    assert set(catalogue["options"]) == {"schema", "strict", "think_tag"} and catalogue["options"]["schema"]["required"]
    assert catalogue["null_verdicts"][0] == "timeout"


# The trainers' routes


def test_an_openrlhf_label_of_json_schema_specs_is_scored(server: Server) -> None:
    prompt = "<|im_start|>user\nLyon as JSON<|im_end|>\n<|im_start|>assistant\n"
    label = {"json_schema": {"schema": SCHEMA}}
    for response, reward in ((json.dumps(GOOD), 1.0), ('{"city": 1}', 0.0)):
        for sent in (label, json.dumps(label)):
            body = {"query": [prompt + response + "<|im_end|>"], "prompts": [prompt], "labels": [sent]}
            answer = httpx.post(f"{server.url}/v1/compat/openrlhf", json=body, timeout=60)
            assert answer.status_code == 200, answer.text
            assert answer.json()["rewards"] == [reward]


def gym_row(text: str, **row: Any) -> dict[str, Any]:
    message = {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": text}]}
    return {"responses_create_params": {"input": []}, "response": {"output": [message]}, **row}


def test_a_nemo_gym_structured_outputs_row_is_scored_as_nemo_gym_reads_it(server: Server) -> None:
    """Its `schema_str`, strictified: a property the schema lists but does not require is still required."""
    loose = json.dumps(
        {"type": "object", "properties": {"city": {"type": "string"}, "population": {"type": "integer"}}}
    )
    url = f"{server.url}/v1/compat/nemo-gym/verify"
    for text, reward in (('{"city": "Lyon", "population": 1}', 1.0), ('{"city": "Lyon"}', 0.0), ("Lyon", 0.0)):
        body = gym_row(text, schema_str=loose, schema_type="json", problem_type="direct")
        answer = httpx.post(url, json=body, timeout=60)
        assert answer.status_code == 200, answer.text
        assert answer.json()["reward"] == reward and answer.json()["schema_str"] == loose  # the row is echoed
    for row, loc in (
        ({"schema_str": loose, "schema_type": "yaml"}, "schema_type"),
        ({"schema_str": loose, "response_mode": "tool_call"}, "response_mode"),
        ({"schema_str": "{not json"}, "schema_str"),
        ({"schema_str": json.dumps({"$ref": "https://example.com/s.json"})}, "schema_str.json_schema.schema"),
    ):
        answer = httpx.post(url, json=gym_row("{}", **row), timeout=60)
        assert answer.status_code == 422, answer.text
        assert [error["loc"] for error in answer.json()["errors"]] == [loc]
        assert "example.com" not in answer.text


# The trainer side


def test_the_trl_reward_reads_the_schema_from_the_gold_column(server: Server) -> None:
    """A dataset keeps the schema in its gold column, as an object or a JSON string (`to_row` makes it text, since
    Arrow keeps one type per column); the reward sends it as json_schema's schema."""
    rows = [{"question": "Lyon as JSON", "answer": SCHEMA}, {"question": "Lyon again", "answer": json.dumps(SCHEMA)}]
    prepared = [to_row(row, columns=Columns(), components=["json_schema"], system_prompt="") for row in rows]
    assert [json.loads(row["solution"]) for row in prepared] == [SCHEMA, SCHEMA]
    assert system_prompt_for(["json_schema", "format"]) == JSON_SYSTEM_PROMPT
    reward = VerifierReward("json_schema", base_url=server.url)
    completions = [f"<think>ok</think>```json\n{json.dumps(GOOD)}\n```", '{"city": 5}', "no JSON", "{}"]
    solutions = [prepared[0]["solution"], prepared[1]["solution"], SCHEMA, None]  # no schema: not sent
    assert reward(prompts=["Q"] * 4, completions=completions, solution=solutions) == [1.0, 0.0, 0.0, None]
    with pytest.raises(ValueError, match="dataset column 'solution'"):
        reward(prompts=["Q"], completions=["{}"], solution=["[1, 2]"])
    loose = {"type": "object", "properties": {"a": {"type": "integer"}}}
    strict = VerifierReward("json_schema", base_url=server.url, strict=True)  # an option, checked when made
    assert strict(prompts=["Q"] * 2, completions=["{}", '{"a": 1}'], solution=[loose, loose]) == [0.0, 1.0]
    with pytest.raises(ValueError, match="stritc"):
        VerifierReward("json_schema", base_url=server.url, stritc=True)


def test_a_large_batch_is_scored_in_the_workers_alike(server: Server) -> None:
    """64 items or more go to the worker pool in chunks (scoring/texts.TextTask): the specs travel pickled, and each
    worker checks the schema and builds its validator once."""
    texts = [json.dumps({**GOOD, "population": n}) if n % 3 else '{"city": 1}' for n in range(96)]
    response = post(server, [{"completion": text, "json_schema": {"schema": SCHEMA}} for text in texts])
    assert response.status_code == 200, response.text
    rewards = [result["reward"] for result in response.json()["results"]]
    assert rewards == [1.0 if n % 3 else 0.0 for n in range(96)]


def test_the_loop_answers_health_checks_while_runaway_patterns_are_checked(server: Server) -> None:
    """Each of these items takes its whole 1 s deadline; a small batch of them is still scored off the event loop
    (scoring/texts.SLOW_ITEM_CHARS), so /healthz keeps answering while it runs."""
    schema = {"type": "string", "pattern": "^(a|a)*$"}
    items = [{"completion": json.dumps("a" * 30 + "b"), "json_schema": {"schema": schema}} for _ in range(4)]
    done = threading.Event()
    answers: list[int] = []

    def score() -> None:
        try:
            scored.append(post(server, items))
        finally:
            done.set()

    scored: list[httpx.Response] = []
    thread = threading.Thread(target=score)
    thread.start()
    with httpx.Client(timeout=60) as client:
        while not done.is_set():
            status = client.get(f"{server.url}/healthz").status_code
            if not done.is_set():  # answered before the batch's answer came back
                answers.append(status)
            time.sleep(0.05)
    thread.join()
    assert [result["components"]["json_schema"]["verdict"] for result in scored[0].json()["results"]] == ["timeout"] * 4
    assert len(answers) >= 5 and set(answers) == {200}, answers
