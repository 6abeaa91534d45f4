"""The verdicts the schema publishes per component (in /docs, and as the client's metric names) are the ones the code
can give: a verdict added to a scorer and not to `schema.VERDICTS` fails here."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from sandbox import TestVerdict
from verifier_service.schema import TEST_VERDICTS, VERDICTS, Verdict
from verifier_service.scoring.code import _RUN_VERDICTS

PACKAGE = Path(__file__).resolve().parents[2] / "verifier_service"


def named_verdicts(module: str) -> set[Verdict]:
    return {Verdict[name] for name in re.findall(r"\bVerdict\.([A-Z_]+)", (PACKAGE / module).read_text())}


@pytest.mark.parametrize(
    ("module", "component"),
    [
        ("scoring/math.py", "math"),
        ("scoring/code.py", "code"),
        ("scoring/think_format.py", "format"),
        ("scoring/json_schema.py", "json_schema"),
        ("scoring/sql.py", "sql"),
        ("scoring/procedural.py", "procedural"),
    ],
)
def test_every_verdict_a_scorer_gives_is_published_for_its_component(module: str, component: str) -> None:
    assert named_verdicts(module) <= set(VERDICTS[component])


def test_the_engine_gives_only_math_and_code_verdicts_that_are_published() -> None:
    assert named_verdicts("engine.py") <= set(VERDICTS["math"]) | set(VERDICTS["code"])
    assert set(_RUN_VERDICTS.values()) | {Verdict.PASSED, Verdict.FAILED} <= set(VERDICTS["code"])


def test_the_published_test_verdicts_are_the_sandboxes() -> None:
    assert tuple(verdict.value for verdict in TestVerdict) == TEST_VERDICTS
