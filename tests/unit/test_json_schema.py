"""The `json_schema` component: which text is the answer, the verdicts, the detail's path, the schema rules (each a
422 naming `schema`), nothing fetched, and answers built to hang or crash the validator."""

from __future__ import annotations

import json
import socket
from typing import Any

import pytest
import referencing.exceptions
from pydantic import ValidationError

from verifier_service import json_schemas
from verifier_service.schema import JsonSchemaSpec, ScoreItem
from verifier_service.scoring import json_schema, json_validation

ITEM_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "minLength": 1},
        "items": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {"sku": {"type": "string", "pattern": "^[A-Z]{3}-\\d{3}$"}, "price": {"type": "number"}},
                "required": ["sku", "price"],
            },
        },
    },
    "required": ["name", "items"],
}
GOOD = {"name": "order", "items": [{"sku": "ABC-123", "price": 1.5}, {"sku": "XYZ-999", "price": 2}]}


def judged(completion: str, schema: dict[str, Any] | None = None, **options: Any) -> tuple[float | None, str, str]:
    spec = JsonSchemaSpec(schema=ITEM_SCHEMA if schema is None else schema, **options)
    found = json_schema.score(ScoreItem(completion=completion, json_schema=spec), spec)
    return found.score, found.verdict, found.detail or ""


@pytest.mark.parametrize(
    ("completion", "verdict"),
    [
        (json.dumps(GOOD), "valid"),  # the bare answer
        (f"<think>draft {{}}</think>\n  {json.dumps(GOOD)}  \n", "valid"),  # after the reasoning, stripped
        (f"Here it is:\n```json\n{json.dumps(GOOD, indent=2)}\n```\nDone.", "valid"),  # one ```json block
        (f"Here it is:\n```JSON\n{json.dumps(GOOD)}\n```", "valid"),
        (f"```\n{json.dumps(GOOD)}\n```", "valid"),  # one block with no language
        (f"```json\n{json.dumps(GOOD)}\n```\n```json\n{json.dumps(GOOD)}\n```", "no_json"),  # two answers
        (f"```python\nx = 1\n```\n```\n{json.dumps(GOOD)}\n```", "no_json"),  # the bare text, with its fences
        ('{"name": "order", "items": []', "no_json"),  # cut short
        ('{"name": NaN, "items": []}', "no_json"),  # not JSON
        ("", "no_json"),
        (f"<think>{json.dumps(GOOD)}", "no_json"),  # the reasoning never ends
        ('{"name": "order"}', "invalid"),
        ("[]", "invalid"),
    ],
)
def test_the_answer_and_its_verdict(completion: str, verdict: str) -> None:
    score, found, _ = judged(completion)
    assert found == verdict
    assert score == (1.0 if verdict == "valid" else 0.0)


@pytest.mark.parametrize(
    ("answer", "detail"),
    [
        (
            {**GOOD, "items": [*GOOD["items"], {"sku": "ABC-124", "price": "cheap"}]},
            'at $.items[2].price: is not of type "number"',
        ),
        ({**GOOD, "items": [{"sku": "abc", "price": 1}]}, "at $.items[0].sku: does not match the schema's pattern"),
        ({"items": []}, 'at $: lacks the required property "name"'),
        ({**GOOD, "name": ""}, "at $.name: breaks minLength 1"),
    ],
)
def test_the_detail_names_the_first_errors_path_and_quotes_no_value(answer: dict[str, Any], detail: str) -> None:
    score, verdict, found = judged(json.dumps(answer))
    assert (score, verdict, found) == (0.0, "invalid", detail)
    assert "cheap" not in found


def test_formats_are_annotations() -> None:
    assert judged('"not a date"', {"type": "string", "format": "date"})[1] == "valid"


def test_strict_requires_every_property_and_no_other() -> None:
    schema = {"type": "object", "properties": {"a": {"type": "object", "properties": {"b": {"type": "integer"}}}}}
    assert judged('{"a": {}}', schema)[1] == "valid"
    assert judged('{"a": {}}', schema, strict=True)[2] == 'at $.a: lacks the required property "b"'
    assert judged('{"a": {"b": 1, "c": 2}}', schema, strict=True)[2] == "at $.a: 1 property the schema does not allow"
    assert judged('{"a": {"b": 1}}', schema, strict=True)[1] == "valid"


@pytest.mark.parametrize(
    ("schema", "verdict"),
    [
        (
            {
                "$schema": "http://json-schema.org/draft-04/schema#",
                "type": "integer",
                "maximum": 3,
                "exclusiveMaximum": True,
            },
            "invalid",
        ),
        ({"$schema": "http://json-schema.org/draft-07/schema#", "type": "integer", "exclusiveMaximum": 3}, "invalid"),
        (
            {"$schema": "https://json-schema.org/draft/2019-09/schema", "type": "integer", "exclusiveMaximum": 4},
            "valid",
        ),
        ({"type": "integer", "exclusiveMaximum": 4}, "valid"),
    ],
)
def test_the_draft_named_by_schema_is_the_one_applied(schema: dict[str, Any], verdict: str) -> None:
    assert judged("3", schema)[1] == verdict


def test_local_references_resolve() -> None:
    schema = {
        "$defs": {
            "node": {"type": "object", "properties": {"kids": {"type": "array", "items": {"$ref": "#/$defs/node"}}}}
        },
        "$ref": "#/$defs/node",
    }
    assert judged('{"kids": [{"kids": []}]}', schema)[1] == "valid"
    assert judged('{"kids": [{"kids": 1}]}', schema)[2] == 'at $.kids[0].kids: is not of type "array"'


def test_unique_items_compares_values_as_json_does() -> None:
    schema = {"type": "array", "uniqueItems": True}
    assert judged("[1, 1.0]", schema)[1] == "invalid"
    assert judged('[{"a": 1, "b": 2}, {"b": 2, "a": 1}]', schema)[1] == "invalid"
    assert judged('[1, true, "1", [1], {"1": 1}]', schema)[1] == "valid"
    assert judged(json.dumps([{"i": i} for i in range(20_000)]), schema)[1] == "valid"  # linear: quadratic is minutes


@pytest.mark.parametrize(
    ("schema", "words"),
    [
        ({"$ref": "https://example.com/schema.json"}, "refers outside itself"),
        ({"properties": {"a": {"$ref": "other.json#/x"}}}, "refers outside itself"),
        ({"$dynamicRef": "https://example.com/s#meta"}, "refers outside itself"),
        ({"$schema": "https://json-schema.org/draft/2019-09/schema", "$recursiveRef": "s.json"}, "refers outside"),
        ({"properties": {"default": {"$ref": "http://x/y"}}}, "refers outside itself"),  # a property named default
        ({"$defs": {"a": {"$id": "https://example.com/a"}}}, "an $id"),
        ({"$ref": "#/$defs/missing"}, "does not have"),
        ({"$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"allOf": [{"$ref": "#/$defs/a"}]}}, "$ref": "#/$defs/a"}, "loop"),
        ({"properties": {"a": {"$ref": "#/properties/a"}}}, "loop"),
        ({"$ref": "#"}, "loop"),
        ({"dependentSchemas": {"a": {"$ref": "#"}}}, "loop"),
        ({"$dynamicRef": "#"}, "loop"),
        ({"$schema": "https://json-schema.org/draft/2019-09/schema", "$recursiveRef": "#"}, "loop"),
        ({"$schema": "http://json-schema.org/draft-07/schema#", "dependencies": {"a": {"$ref": "#"}}}, "loop"),
        ({"type": "strnig"}, "not a valid JSON Schema"),
        ({"properties": {"secret": {"type": "strnig"}}}, "at properties/*/type"),
        ({"minimum": "3"}, "not a valid JSON Schema"),
        ({"$schema": "http://json-schema.org/draft-03/schema#"}, "names a draft"),
        ({"$schema": 5}, "names a draft"),
        ({"$schema": ["secret"]}, "names a draft"),
        ({"pattern": "(unclosed"}, "does not compile"),
        ({"patternProperties": {"[": {}}}, "does not compile"),
        ({"pattern": "a" * 1001}, "longer than 1000"),
        ({"patternProperties": {"a" * 1001: {}}}, "longer than 1000"),
        ({"enum": ["x" * 70_000]}, "64 KB"),
    ],
)
def test_a_schema_breaking_a_rule_is_refused_naming_the_field_and_not_echoed(
    schema: dict[str, Any], words: str
) -> None:
    with pytest.raises(ValidationError) as exc:
        JsonSchemaSpec(schema=schema)
    [error] = exc.value.errors()
    assert error["loc"] == ("schema",)
    assert words in error["msg"]
    assert not [word for word in ("example.com", "strnig", "unclosed", "secret", "other.json") if word in error["msg"]]


def nested(depth: int) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "object"}
    for _ in range(depth - 1):
        schema = {"type": "object", "properties": {"a": schema}}
    return schema


def test_schema_depth_is_capped() -> None:
    JsonSchemaSpec(schema=nested(21))  # each level is two: the schema and its properties
    with pytest.raises(ValidationError, match="deeper than 64"):
        JsonSchemaSpec(schema=nested(40))


def test_references_in_data_are_data() -> None:
    """const, enum, default and examples hold values, which may look like anything."""
    schema = {"const": {"$ref": "https://example.com/x", "$id": "y"}, "examples": [{"$ref": "http://z"}]}
    assert judged('{"$ref": "https://example.com/x", "$id": "y"}', schema)[1] == "valid"


def test_nothing_is_fetched(monkeypatch: pytest.MonkeyPatch) -> None:
    """A remote $ref is refused; and a validator built past that rule (as no request can) resolves it to nothing,
    opening no socket."""
    opened: list[Any] = []
    monkeypatch.setattr(socket.socket, "connect", lambda self, address: opened.append(address))
    monkeypatch.setattr(socket, "create_connection", lambda *args, **kwargs: opened.append(args))
    with pytest.raises(ValidationError, match="refers outside itself"):
        JsonSchemaSpec(schema={"$ref": "http://127.0.0.1:9/schema.json"})
    with pytest.raises(referencing.exceptions.Unresolvable):
        json_validation.first_error(json_schemas.canonical({"$ref": "http://127.0.0.1:9/schema.json"}), 1, float("inf"))
    assert opened == []


def test_a_pattern_that_backtracks_without_end_is_a_timeout_not_a_hang() -> None:
    schema = {"type": "object", "patternProperties": {"^(a|aa)+$": {"type": "integer"}}}
    bomb = "a" * 5000 + "!"
    assert judged(json.dumps({bomb: 1}), schema) == (None, "timeout", "Validation ran past 1 s.")
    assert judged(json.dumps(bomb), {"type": "string", "pattern": "^(a|aa)+$"})[:2] == (None, "timeout")
    strict = {"type": "object", "properties": {"x": {}}, "patternProperties": {"^(a|aa)+$": {}}}
    assert judged(json.dumps({bomb: 1}), {**strict, "additionalProperties": False})[1] == "timeout"
    assert judged(json.dumps({bomb: 1}), {**strict, "unevaluatedProperties": False})[1] == "timeout"
    assert judged(json.dumps("aaaa"), {"type": "string", "pattern": "^(a|aa)+$"})[1] == "valid"


def test_big_and_deep_answers_get_a_verdict() -> None:
    big = {"name": "x" * 1_000_000, "items": [{"sku": "ABC-123", "price": i} for i in range(100)]}
    assert judged(json.dumps(big))[1] == "valid"  # 1 MB parsed (a million-element array can take past the deadline)
    assert (
        judged(json.dumps({**big, "items": [*big["items"], {}]}))[2]
        == 'at $.items[100]: lacks the required property "sku"'
    )
    assert judged("[" * 100_000)[1] == "no_json"
    assert judged("[" * 100_000 + "]" * 100_000, {})[1] in ("no_json", "invalid")
    deep = "[" * 65 + "]" * 65
    assert judged(deep, {}) == (0.0, "invalid", "The JSON nests deeper than 64 levels.")
    assert judged("[" * 64 + "]" * 64, {})[1] == "valid"
    assert judged("1" * 5000, {})[1] == "no_json"  # past Python's digit limit


def test_the_schema_is_checked_once_for_a_group() -> None:
    json_schemas._problem.cache_clear()
    schema = {"type": "object", "properties": {"k": {"type": "integer"}}}
    for _ in range(8):
        JsonSchemaSpec(schema=dict(reversed(list(schema.items()))))  # the same schema, keys in another order
    assert json_schemas._problem.cache_info().misses == 1


def test_an_oversized_schema_never_enters_the_caches() -> None:
    """The caches hold up to 1024 schemas each: of at most 64 KB, or they would hold 1024 requests' worth."""
    json_schemas._problem.cache_clear()
    json_schemas._strictified_text.cache_clear()
    big = {"type": "object", "properties": {"a": {}}, "enum": ["x" * 70_000]}
    for strict in (False, True):
        with pytest.raises(ValidationError, match="64 KB"):
            JsonSchemaSpec(schema=big, strict=strict)
    assert json_schemas._problem.cache_info().currsize == json_schemas._strictified_text.cache_info().currsize == 0


def test_the_spec_round_trips_under_its_wire_name() -> None:
    spec = JsonSchemaSpec(schema={"type": "integer"}, strict=True)
    wire = json.loads(spec.model_dump_json())
    assert wire["schema"] == {"type": "integer"} and "schema_" not in wire
    assert JsonSchemaSpec.model_validate(wire) == spec
    assert "schema" in JsonSchemaSpec.model_json_schema()["properties"]


def test_a_loop_the_rules_miss_is_null_not_a_crash() -> None:
    """Were a loop of references to pass the schema's rules, validation's RecursionError is this item's null."""
    spec = JsonSchemaSpec.model_construct(schema_={"allOf": [{"$ref": "#"}]}, strict=False, think_tag="think")
    found = json_schema.score(ScoreItem(completion="{}", json_schema=spec), spec)
    assert (found.score, found.verdict) == (None, "internal_error")
