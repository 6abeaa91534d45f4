"""/docs works with no internet, and the OpenAPI document describes the whole contract: requests with their rules,
responses with every field, verdicts per component, examples that are valid, and the bearer auth."""

from __future__ import annotations

import json
import re
from typing import Any
from urllib.parse import urljoin

import httpx
import jsonschema
import pytest
from prometheus_client import CONTENT_TYPE_LATEST

from tests.conftest import Server
from verifier_service.schema import COMPONENTS, TEST_VERDICTS, VERDICTS


@pytest.fixture(scope="module")
def spec(server: Server) -> dict[str, Any]:
    return httpx.get(f"{server.url}/openapi.json").json()  # type: ignore[no-any-return]


def validator(spec: dict[str, Any], name: str) -> jsonschema.protocols.Validator:
    """A JSON Schema validator for one of the document's schemas, its references resolved within the document."""
    schema = {"$ref": f"#/components/schemas/{name}", "components": spec["components"]}
    return jsonschema.Draft202012Validator(schema)


@pytest.mark.parametrize("page", ["/docs", "/redoc"])
def test_the_docs_pages_load_everything_from_the_server_itself(server: Server, page: str) -> None:
    html = httpx.get(f"{server.url}{page}").text
    assets = re.findall(r"""(?:src|href)=["']([^"']+)["']""", html) + re.findall(r"""url: ?["']([^"']+)""", html)
    assert assets, html
    for asset in assets:
        assert not re.match(r"(https?:)?//", asset), f"{page} loads {asset} from elsewhere"
        response = httpx.get(urljoin(f"{server.url}{page}", asset))
        assert response.status_code == 200 and len(response.content) > 100, asset


def test_the_item_rules_are_in_the_published_schema(spec: dict[str, Any]) -> None:
    item = validator(spec, "ScoreItem")
    assert not item.is_valid({"completion": "x"})  # no component: the server says 422, and so does the schema
    assert not item.is_valid({"completion": "x", "math": None})
    assert not item.is_valid({"completion": "x", "format": {}, "weights": {"bogus": 1.0}})
    assert not item.is_valid({"completion": "x", "format": {"require_answer": 0}})
    assert item.is_valid({"completion": "x", "format": {}, "weights": {"format": 0.5}})
    assert not item.is_valid({"completion": "x", "code": {"tests": [{"stdout": "1"}]}})  # a test needs its type
    assert item.is_valid(
        {"completion": "x", "math": {"gold": "1"}, "code": {"tests": [{"type": "stdio", "stdout": ""}]}}
    )
    # A weight for a component the item does not request: said in the description, refused by the server. As an
    # if/then rule it stopped schemathesis from generating any request (tests/service/test_schemathesis.py).
    weights = spec["components"]["schemas"]["ScoreItem"]["properties"]["weights"]
    assert "only for components the item requests" in weights["description"]
    published = json.dumps(spec["components"]["schemas"]["ScoreItem"])
    assert '"if":' not in published and '"then":' not in published


def test_the_shapes_trainers_hold_are_published(spec: dict[str, Any]) -> None:
    """What the schema's validators read (issue 23, point 4) is what the document says a client may send."""
    item = validator(spec, "ScoreItem")
    chat = [{"role": "user", "content": "2+2?"}, {"role": "assistant", "content": [{"type": "text", "text": "4"}]}]
    for shape in (
        {"completion": chat, "prompt": chat[:1], "math": {"gold": 4}},
        {"completion": "x", "math": {"gold": 0.5}},
        {"completion": "x", "code": {"tests": ["assert f() == 1", {"type": "assert", "code": "assert 1"}]}},
        {"completion": "x", "choice": {"gold": 2}},
        {"completion": "x", "answer": {"gold": ["Paris", 75]}},
    ):
        assert item.is_valid(shape), shape
    for refused in (
        {"completion": "x", "math": {"gold": True}},
        {"completion": "x", "format": {}, "completion_tokens": "12"},
        {"completion": "x", "format": {}, "completion_tokens": True},
        {"completion": "x", "overlong": {"max_tokens": 10, "penalty": "1"}},
    ):
        assert not item.is_valid(refused), refused


def test_the_response_schema_lists_every_field_and_verdict(spec: dict[str, Any]) -> None:
    schemas = spec["components"]["schemas"]
    result = schemas["ComponentResult"]["properties"]
    assert set(result) == {
        "score",
        "verdict",
        "detail",
        "extracted",
        "passed",
        "total",
        "tests",
        "steps",
        "model_version",
    }
    components = schemas["ItemResult"]["properties"]["components"]["properties"]
    assert set(components) == set(COMPONENTS)
    for name in COMPONENTS:
        assert components[name]["properties"]["verdict"]["enum"] == [v.value for v in VERDICTS[name]]
    assert schemas["TestVerdict"]["properties"]["verdict"]["enum"] == list(TEST_VERDICTS)
    response = validator(spec, "ItemResult")
    wrong_verdict = {"id": None, "reward": 0.0, "status": "ok", "components": {"math": {"score": 0, "verdict": "ok"}}}
    assert not response.is_valid(wrong_verdict)  # "ok" is a format verdict, never a math one


def test_the_examples_are_valid_and_what_the_server_answers(server: Server, spec: dict[str, Any]) -> None:
    [request] = spec["components"]["schemas"]["ScoreRequest"]["examples"]
    [response] = spec["components"]["schemas"]["ScoreResponse"]["examples"]
    validator(spec, "ScoreRequest").validate(request)
    validator(spec, "ScoreResponse").validate(response)
    answer = httpx.post(f"{server.url}/v1/score", json=request, timeout=60)
    assert answer.status_code == 200 and answer.json() == response


def test_errors_auth_and_metrics_are_described(spec: dict[str, Any]) -> None:
    score = spec["paths"]["/v1/score"]["post"]
    assert score["security"] == [{"HTTPBearer": []}]
    assert spec["components"]["securitySchemes"]["HTTPBearer"]["scheme"] == "bearer"
    for status in ("401", "413", "422"):
        ref = score["responses"][status]["content"]["application/json"]["schema"]["$ref"]
        assert ref.endswith("/ErrorResponse")
    assert "ScoreRequest" in score["requestBody"]["content"]["application/json"]["schema"]["$ref"]
    metrics = spec["paths"]["/metrics"]["get"]["responses"]["200"]["content"]
    assert list(metrics) == [CONTENT_TYPE_LATEST] and CONTENT_TYPE_LATEST.startswith("text/plain")
