"""Bad input through a real server: a 422 that names the field and what is allowed, never the value (an unknown
field's name is said back, with the closest real one), and stays small; weights that could not make a finite reward
are refused; booleans are booleans and numbers numbers; the key is checked first."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from tests.conftest import Server, running_server
from verifier_service.schema import ScoreItem

ITEM_FIELDS = list(ScoreItem.model_fields)

SECRET = "s3cr3t-input-value"


def post(url: str, body: Any, **kwargs: Any) -> httpx.Response:
    content = body if isinstance(body, bytes) else json.dumps(body).encode()
    headers = {"content-type": "application/json", **kwargs.pop("headers", {})}
    return httpx.post(f"{url}/v1/score", content=content, headers=headers, timeout=60, **kwargs)


def item(**extra: Any) -> dict[str, Any]:
    return {"completion": "<think>a</think>4", "math": {"gold": "4"}, **extra}


CODE = {"tests": [{"type": "call", "fn": "f", "expected": 1}]}
ECHOES = {
    "an unknown field": ([item(maths={"gold": SECRET})], "items.0", "unknown field 'maths'; did you mean 'math'?"),
    "an unknown field, nothing close": (
        [item(zzz=SECRET)],
        "items.0",
        "unknown field 'zzz'; allowed: completion, id, prompt, completion_tokens",
    ),
    "an unknown option": (
        [item(math={"gold": "4", "options": {"strikt": SECRET}})],
        "items.0.math.options",
        "unknown field 'strikt'; did you mean 'strict'?",
    ),
    "an unknown test type": (
        [item(code={"tests": [{"type": SECRET, "stdout": ""}]})],
        "items.0.code.tests.0",
        "unknown 'type'; allowed: 'stdio', 'call', 'assert'",
    ),
    "an unknown code language": (
        [item(code={"language": SECRET, "tests": [{"type": "stdio", "stdout": ""}]})],
        "items.0.code.language",
        "'python' or 'cpp'",
    ),
    "a cpp program with a call test": (
        [item(code={"language": "cpp", "tests": [{"type": "call", "fn": "f"}]})],
        "items.0.code",
        "a cpp program takes stdio tests only",
    ),
    "a checker file with a path": (
        [
            item(
                code={
                    "checker": {"source": "x", "files": {"../" + SECRET: ""}},
                    "tests": [{"type": "stdio", "stdout": ""}],
                }
            )
        ],
        "items.0.code.checker.files",
        "a file name is a plain name",
    ),
    "an unknown weight key": (
        [item(weights={"maht": 1.0})],
        "items.0.weights",
        "unknown key 'maht'; did you mean 'math'?",
    ),
    "a weight for an unrequested component": ([item(weights={"code": 1.0})], "items.0", "does not request: code"),
    "an sql bonus of 1": (
        [{"completion": "x", "sql": {"schema_sql": "", "gold_sql": "SELECT 1", "executable_bonus": 1}}],
        "items.0.sql.executable_bonus",
        "less than 1",
    ),
    "a bad value": (
        [item(math={"gold": "4", "options": {"language": SECRET}})],
        "items.0.math.options.language",
        "'en'",
    ),
}


@pytest.mark.parametrize("case", list(ECHOES), ids=list(ECHOES))
def test_a_422_names_the_field_and_what_is_allowed_never_the_value(server: Server, case: str) -> None:
    items, where, allowed = ECHOES[case]
    response = post(server.url, {"items": items})
    assert response.status_code == 422, response.text
    assert SECRET not in response.text
    body = response.json()
    assert where in body["detail"] and allowed in body["detail"], body["detail"]
    assert any(error["loc"] == where for error in body["errors"]), body["errors"]


def test_an_error_body_stays_small_whatever_the_request(server: Server) -> None:
    """A megabyte-long unknown key, and ten thousand bad items, answer in a few kB."""
    huge_key = "k" * 1_000_000
    response = post(server.url, {"items": [item(**{huge_key: 1})]})
    assert response.status_code == 422 and len(response.content) < 4096, len(response.content)
    assert response.json()["errors"][0]["msg"] == f"unknown field '{'k' * 40}...'; allowed: " + ", ".join(ITEM_FIELDS)
    many = post(server.url, {"items": [{"completion": 1, "format": {}}] * 10_000})
    assert many.status_code == 422 and len(many.content) < 8192, len(many.content)
    assert "(and 9995 more)" in many.json()["detail"] and len(many.json()["errors"]) == 20


@pytest.mark.parametrize("weight", ["NaN", "Infinity", "-Infinity", "1e308", "-1e308", "1e7"])
def test_weights_that_cannot_make_a_finite_reward_are_refused(server: Server, weight: str) -> None:
    body = '{"items": [{"completion": "<think>a</think>4", "math": {"gold": "4"}, "format": {}, '
    body += f'"weights": {{"math": {weight}, "format": {weight}}}}}]}}'
    response = post(server.url, body.encode())
    assert response.status_code == 422, response.text
    assert "items.0.weights.math" in response.json()["detail"]


def test_the_largest_weights_still_make_a_finite_reward(server: Server) -> None:
    inverted = item(format={}, weights={"math": -1e6}, allow_order_inversion=True)  # a right answer costs reward
    items = [item(format={}, weights={"math": 1e6, "format": 1e6}), inverted]
    response = post(server.url, {"items": items})
    assert response.status_code == 200, response.text
    rewards = [(r["reward"], r["status"]) for r in response.json()["results"]]
    assert rewards == [(2e6, "ok"), (-1e6 + 1.0, "ok")]


@pytest.mark.parametrize(
    "options", [{"require_answer": 0}, {"prefilled": "true"}, {"prefilled": 1}, {"require_answer": "no"}]
)
def test_booleans_are_json_booleans(server: Server, options: dict[str, Any]) -> None:
    response = post(server.url, {"items": [{"completion": "x", "format": options}]})
    assert response.status_code == 422, response.text
    assert "Input should be a valid boolean" in response.json()["detail"]
    strict = post(server.url, {"items": [item(math={"gold": "4", "options": {"strict": 1}})]})
    assert strict.status_code == 422


def test_the_api_key_is_checked_before_the_body(tmp_path: Any) -> None:
    with running_server(tmp_path, api_key="k3y", math_workers=1) as server:
        assert post(server.url, b"{not json").status_code == 401
        assert post(server.url, {"items": []}).status_code == 401
        authed = post(server.url, b"{not json", headers={"Authorization": "Bearer k3y"})
        assert authed.status_code == 422
        refused = post(server.url, {"items": [item()]}, headers={"Authorization": "Basic k3y"})
        assert refused.status_code == 401 and refused.headers["www-authenticate"] == "Bearer"


@pytest.mark.parametrize(
    ("name", "said"),
    [
        ("mat\nh\x00s", "mat?h?s"),  # control characters
        ("m\\ath", "m?ath"),
        ("ma\u200bth", "ma?th"),  # a zero-width space, unprintable
        ("\u6570\u5b66", "\u6570\u5b66"),  # printable in any script
    ],
)
def test_an_unknown_name_is_said_back_printable(server: Server, name: str, said: str) -> None:
    response = post(server.url, {"items": [item(**{name: 1})]})
    assert response.status_code == 422, response.text
    [error] = response.json()["errors"]
    assert error["msg"].startswith(f"unknown field '{said}'; "), error


@pytest.mark.parametrize(
    ("where", "value"),
    [
        ("items.0.completion_tokens", {"completion_tokens": "12"}),
        ("items.0.completion_tokens", {"completion_tokens": True}),
        ("items.0.completion_tokens", {"completion_tokens": 12.5}),
        ("items.0.math.options.float_rounding", {"math": {"gold": "4", "options": {"float_rounding": "6"}}}),
        ("items.0.overlong.max_tokens", {"overlong": {"max_tokens": True}}),
        ("items.0.overlong.penalty", {"overlong": {"max_tokens": 10, "penalty": "0.5"}}),
        ("items.0.overlong.penalty", {"overlong": {"max_tokens": 10, "penalty": True}}),
        ("items.0.weights.math", {"weights": {"math": "2"}}),
        ("items.0.weights.math", {"weights": {"math": False}}),
        ("items.0.code.timeout_s", {"code": {"tests": ["assert True"], "timeout_s": "5"}}),
    ],
)
def test_numbers_are_json_numbers(server: Server, where: str, value: dict[str, Any]) -> None:
    """Issue 23: "12" and true are not 12. An integer option takes an integer (12.0 is one, as in JSON Schema), a
    float option any number."""
    response = post(server.url, {"items": [item(**value)]})
    assert response.status_code == 422, response.text
    [error] = response.json()["errors"]
    assert error["loc"] == where and error["msg"].startswith("Input should be a valid"), error
    accepted = post(server.url, {"items": [item(completion_tokens=12.0, overlong={"max_tokens": 10, "penalty": 1})]})
    assert accepted.status_code == 200, accepted.text
    assert accepted.json()["results"][0]["components"]["overlong"]["detail"].startswith("12 tokens")
