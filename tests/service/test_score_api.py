"""POST /v1/score through a real uvicorn server on loopback."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from tests.conftest import Server

PATHOLOGICAL = "<think>Let me compute.</think>The answer is $\\boxed{9^{9^{9^{9}}}}$."


def score(server: Server, items: list[dict[str, Any]], **kwargs: Any) -> httpx.Response:
    return httpx.post(f"{server.url}/v1/score", json={"items": items}, timeout=120, **kwargs)


def results(server: Server, items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    response = score(server, items)
    assert response.status_code == 200, response.text
    return response.json()["results"]  # type: ignore[no-any-return]


def math_item(completion: str, gold: str, **extra: Any) -> dict[str, Any]:
    return {"completion": completion, "math": {"gold": gold}, **extra}


def test_every_component_and_the_reward(server: Server) -> None:
    [item] = results(
        server,
        [math_item("<think>1/3 of it</think>So it is $\\boxed{\\dfrac{2}{6}}$.", "\\frac13", id="x", format={})],
    )
    assert item["id"] == "x" and item["status"] == "ok" and item["reward"] == 2.0
    assert item["components"]["math"] == {
        "score": 1.0,
        "verdict": "correct",
        "detail": None,
        "extracted": "\\dfrac{2}{6}",
    }
    assert item["components"]["format"] == {"score": 1.0, "verdict": "ok", "detail": None}


def test_thousand_items_keep_order_and_ids(server: Server) -> None:
    items = []
    for i in range(1000):
        gold = str(i % 97)
        answer = gold if i % 3 else str(i % 97 + 1)
        completion = f"<think>step {i}: {i} * 2 = {2 * i}</think>The answer is \\boxed{{{answer}}}."
        items.append(math_item(completion, gold, id=f"item-{i}"))
    got = results(server, items)
    assert [r["id"] for r in got] == [f"item-{i}" for i in range(1000)]
    assert [r["reward"] for r in got] == [1.0 if i % 3 else 0.0 for i in range(1000)]
    assert {r["components"]["math"]["verdict"] for r in got} == {"correct", "wrong"}


@pytest.mark.timeout(60)
def test_pathological_item_times_out_alone(server: Server) -> None:
    items = [math_item(f"<think>x</think>\\boxed{{{i}}}", str(i)) for i in range(6)]
    items.insert(3, math_item(PATHOLOGICAL, "5", id="bomb"))
    got = results(server, items)
    assert got[3]["id"] == "bomb"
    assert got[3]["components"]["math"]["verdict"] == "timeout"
    assert got[3]["reward"] == 0.0  # the model's fault: an absurd expression
    assert [r["reward"] for r in got[:3] + got[4:]] == [1.0] * 6
    # the pool replaced the killed worker: the next request is scored normally
    assert results(server, [math_item("\\boxed{7}", "7")])[0]["reward"] == 1.0


def test_unjudgeable_gold_is_null_not_zero(server: Server) -> None:
    [item] = results(server, [math_item("\\boxed{3}", "\\frac{", format={})])
    assert item["components"]["math"]["score"] is None
    assert item["components"]["math"]["verdict"] == "gold_unparseable"
    assert item["reward"] is None and item["status"] == "error"


def test_weights(server: Server) -> None:
    completion = "<think>r</think>\\boxed{4}"
    [right, wrong_format] = results(
        server,
        [
            math_item(completion, "4", format={}, weights={"math": 0.75, "format": 0.25}),
            math_item("\\boxed{4}", "4", format={}, weights={"math": 2.0, "format": 0.5}),
        ],
    )
    assert right["reward"] == 1.0
    assert wrong_format["reward"] == 2.0
    assert wrong_format["components"]["format"]["verdict"] == "missing_open_tag"


def test_only_the_final_answer_is_graded(server: Server) -> None:
    reasoning_box = "<think>maybe \\boxed{5}?</think>The answer is \\boxed{6}."
    unclosed = "<think>it is \\boxed{5}"
    got = results(server, [math_item(reasoning_box, "5"), math_item(unclosed, "5")])
    assert [r["reward"] for r in got] == [0.0, 0.0]
    assert got[1]["components"]["math"]["verdict"] == "no_answer"


def test_identical_answers_are_scored_once(server: Server) -> None:
    def tasks() -> float:
        text = httpx.get(f"{server.url}/metrics").text
        line = next(x for x in text.splitlines() if x.startswith("verifier_math_tasks_total"))
        return float(line.split()[-1])

    before = tasks()
    group = [
        math_item(f"<think>try {i}</think>So $\\boxed{{\\frac{{{7}}}{{{9}}}}}$", "\\frac{14}{18}") for i in range(8)
    ]
    group += [math_item(f"<think>other {i}</think>So $\\boxed{{\\sqrt{{2}}}}$", "\\frac{14}{18}") for i in range(8)]
    got = results(server, group)
    assert [r["reward"] for r in got] == [1.0] * 8 + [0.0] * 8
    assert tasks() - before <= 2  # 16 completions, 2 distinct answers: at most 2 sympy comparisons


@pytest.mark.parametrize(
    ("body", "needle"),
    [
        (b"{not json", "JSON"),
        (b'{"items": [{"completion": 5, "math": {"gold": "1"}}]}', "items.0.completion"),
        (b'{"items": []}', "items"),
        (b'{"items": [{"completion": "x"}]}', "at least one of"),
        (b'{"items": [{"completion": "x", "format": {}, "weights": {"math": 1}}]}', "weights"),
        (
            b'{"items": [{"completion": "x", "math": {"gold": "1", "options": {"float_rounding": "six"}}}]}',
            "float_rounding",
        ),
        (b'{"items": [{"completion": "x", "math": {"gold": "1"}, "surprise": 1}]}', "items.0: unknown field"),
    ],
)
def test_invalid_requests_get_a_readable_422(server: Server, body: bytes, needle: str) -> None:
    response = httpx.post(
        f"{server.url}/v1/score", content=body, headers={"content-type": "application/json"}, timeout=30
    )
    assert response.status_code == 422, response.text
    detail = response.json()["detail"]
    assert isinstance(detail, str) and needle in detail
    assert "Traceback" not in response.text


def test_code_is_run_and_scored_per_test(server: Server) -> None:
    solution = "<think>add them</think>Here:\n```python\ndef add(a, b):\n    return a + b\n```\n"
    tests = [
        {"type": "call", "fn": "add", "args": [1, 2], "expected": 3},
        {"type": "assert", "code": "assert add(2, 2) == 5"},
        {"type": "stdio", "stdin": "", "stdout": ""},
    ]
    [item, missing] = results(
        server,
        [
            {"completion": solution, "code": {"tests": tests}, "format": {}},
            {"completion": "<think>I give up", "code": {"tests": tests}},
        ],
    )
    code = item["components"]["code"]
    assert (code["score"], code["verdict"], code.get("passed"), code["total"]) == (2 / 3, "failed", 2, 3), code
    assert [t["verdict"] for t in code["tests"]] == ["passed", "wrong_answer", "passed"]
    assert item["reward"] == 2 / 3 + 1.0
    assert missing["components"]["code"]["verdict"] == "no_code" and missing["reward"] == 0.0
    assert "def add" not in json.dumps(item)  # submitted code is never echoed


def test_oversize_batch_is_413(server: Server) -> None:
    response = score(server, [{"completion": "x", "format": {}}] * 2001)
    assert response.status_code == 413
    assert "2001 items" in response.json()["detail"]


def test_oversize_completion_is_413(server: Server) -> None:
    response = score(server, [{"completion": "x", "format": {}}, {"completion": "y" * 200_001, "format": {}}])
    assert response.status_code == 413
    assert "items.1.completion" in response.json()["detail"]


def test_health_readiness_docs_metrics(server: Server) -> None:
    assert httpx.get(f"{server.url}/healthz").json() == {"status": "ok"}
    ready = httpx.get(f"{server.url}/readyz").json()
    assert ready["status"] == "ready" and ready["math_workers"]["alive"] >= 1
    assert httpx.get(f"{server.url}/docs").status_code == 200
    spec = httpx.get(f"{server.url}/openapi.json").json()
    assert "/v1/score" in spec["paths"]
    assert "verifier_items_total" in httpx.get(f"{server.url}/metrics").text


def test_response_is_plain_json_with_no_unused_fields(server: Server) -> None:
    response = score(server, [{"completion": "<think>a</think>b", "format": {"prefilled": False}}])
    item = json.loads(response.text)["results"][0]
    assert item == {
        "id": None,
        "reward": 1.0,
        "status": "ok",
        "components": {"format": {"score": 1.0, "verdict": "ok", "detail": None}},
    }


ADD = "```python\ndef add(a, b):\n    return a + b\n```"
# (as a trainer holds it, the same item as text): /v1/score reads the first as the second (issue 23, point 4)
TRAINER_SHAPES = {
    "a number as the math gold": (math_item("\\boxed{72}", 72), math_item("\\boxed{72}", "72")),  # type: ignore[arg-type]
    "a float as the math gold": (math_item("\\boxed{0.5}", 0.5), math_item("\\boxed{0.5}", "0.5")),  # type: ignore[arg-type]
    "a chat completion, reasoning parsed out": (
        {"completion": [{"role": "user", "content": "6*7?"},
                        {"role": "assistant", "reasoning_content": "6*7", "content": "\\boxed{42}"}],
         "prompt": [{"role": "user", "content": "6*7?"}], "math": {"gold": "42"}, "format": {}},
        {"completion": "<think>6*7</think>\\boxed{42}", "prompt": "6*7?", "math": {"gold": "42"}, "format": {}},
    ),
    "content parts": (
        {"completion": [{"role": "assistant", "content": [{"type": "text", "text": "\\boxed{"},
                                                          {"type": "image_url"}, {"type": "text", "text": "7}"}]}],
         "math": {"gold": "7"}},
        math_item("\\boxed{7}", "7"),
    ),
    "assert strings as code tests": (
        {"completion": ADD, "code": {"tests": ["assert add(1, 2) == 3", "assert add(1, 1) == 3"]}},
        {"completion": ADD, "code": {"tests": [{"type": "assert", "code": "assert add(1, 2) == 3"},
                                               {"type": "assert", "code": "assert add(1, 1) == 3"}]}},
    ),
    "an option index as the choice gold": (
        {"completion": "\\boxed{C}", "choice": {"gold": 2, "options": ["4", "5", "6"]}},
        {"completion": "\\boxed{C}", "choice": {"gold": "C", "options": ["4", "5", "6"]}},
    ),
    "numbers among answer aliases": (
        {"completion": "Answer: 1969", "answer": {"gold": ["nineteen sixty-nine", 1969]}},
        {"completion": "Answer: 1969", "answer": {"gold": ["nineteen sixty-nine", "1969"]}},
    ),
}  # fmt: skip


@pytest.mark.parametrize("shape", TRAINER_SHAPES)
def test_the_shapes_trainers_hold_are_scored_as_their_text(server: Server, shape: str) -> None:
    """A number as a gold, assert strings as tests, a chat list as the completion or prompt: the client, the trainer
    routes and the adapters take them, and so does /v1/score, through the same schema validators."""
    held, as_text = TRAINER_SHAPES[shape]
    first, second = results(server, [held, as_text])
    assert first == second and first["status"] == "ok" and first["reward"] > 0, first


@pytest.mark.parametrize(
    ("gold", "message"),
    [
        ("true", "a gold answer must be a string or a number (not a boolean)"),
        ("NaN", "a gold given as a number must be finite"),
        ("1e999", "a gold given as a number must be finite"),
        ("1" + "0" * 4_100, "a gold given as a number has at most 4000 digits; send a longer one as text"),
    ],
)
def test_a_gold_that_is_no_number_is_refused_by_name(server: Server, gold: str, message: str) -> None:
    body = '{"items": [{"completion": "x", "math": {"gold": ' + gold + "}}]}"
    response = httpx.post(f"{server.url}/v1/score", content=body, headers={"content-type": "application/json"})
    assert response.status_code == 422, response.text
    [error] = response.json()["errors"]
    assert error["loc"] == "items.0.math.gold" and error["msg"] == f"Value error, {message}", error
