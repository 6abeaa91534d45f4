"""NeMo-Gym's structured_outputs tests as an oracle: each of their JSON cases, scored here with `strict` (their server
strictifies every schema), gets the verdict their reward and error type say: 1.0 is `valid`, a parse error
`no_json`, a validation error `invalid`. The cases and their source are in tests/data/json_schema/."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from verifier_service.schema import JsonSchemaSpec, ScoreItem
from verifier_service.scoring import json_schema

DATA = json.loads((Path(__file__).parents[1] / "data" / "json_schema" / "nemo_gym_structured_outputs.json").read_text())
CASES = [(group["schema"], case) for group in DATA["groups"] for case in group["cases"]]
THEIR_VERDICT = {None: "valid", "parse_error": "no_json", "tool_arguments_parse_error": "no_json",
                 "validation_error": "invalid"}  # fmt: skip


@pytest.mark.parametrize(("schema", "case"), CASES, ids=[case["case"] for _, case in CASES])
def test_we_agree_with_nemo_gym(schema: dict[str, Any], case: dict[str, Any]) -> None:
    spec = JsonSchemaSpec(schema=schema, strict=True)
    found = json_schema.score(ScoreItem(completion=case["response"], json_schema=spec), spec)
    assert found.verdict == THEIR_VERDICT[case["error_type"]]
    assert found.score == case["reward"]


def test_their_cases_cover_each_verdict_and_need_strict() -> None:
    """Without strict, the missing and the extra top-level field pass (the nested object's schema already forbids
    others): the cases test the strict reading, not a lenient one."""
    assert {THEIR_VERDICT[case["error_type"]] for _, case in CASES} == {"valid", "no_json", "invalid"}
    lenient = {
        case["case"]: json_schema.score(ScoreItem(completion=case["response"], json_schema=spec), spec).verdict
        for schema, case in CASES
        if (spec := JsonSchemaSpec(schema=schema)) and "field" in case["case"]
    }
    assert lenient == {
        "Test 3: Schema Mismatch (Missing field)": "valid",
        "Test 4: Schema Mismatch (Extra field)": "valid",
        "Test 6: Schema Mismatch (Nested extra field)": "invalid",
    }
