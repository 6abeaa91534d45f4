"""The wire contract of the verifier, v1 (DESIGN.md section 3).

This module is the one place the request and response shapes are defined: the service validates with these
models and the trainer client builds and parses with them. It imports pydantic and nothing else of the project.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Any, Literal, get_args

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    model_validator,
)

API_VERSION = "v1"
ComponentName = Literal["math", "code", "format"]
COMPONENTS: tuple[str, ...] = get_args(ComponentName)
WEIGHT_LIMIT = 1e6  # |weight| at most this: a weighted sum of component scores can never overflow to inf


class Verdict(StrEnum):
    """Every verdict the service can give. The wire carries them as plain strings."""

    # shared
    OK = "ok"
    INTERNAL_ERROR = "internal_error"  # cannot judge: a bug or a broken worker
    WORKER_CRASHED = "worker_crashed"  # cannot judge: the worker died under this item
    DEADLINE_EXCEEDED = "deadline_exceeded"  # cannot judge: the batch ran out of time before this item ran
    # math
    CORRECT = "correct"
    WRONG = "wrong"
    NO_ANSWER = "no_answer"
    HEDGED = "hedged"
    TIMEOUT = "timeout"
    ANSWER_TOO_LONG = "answer_too_long"
    GOLD_UNPARSEABLE = "gold_unparseable"  # cannot judge
    # code (per-test verdicts are in `tests`)
    PASSED = "passed"  # every test passed
    FAILED = "failed"  # some test did not pass; score is the pass fraction
    NO_CODE = "no_code"
    COMPILE_ERROR = "compile_error"
    SANDBOX_UNAVAILABLE = "sandbox_unavailable"  # cannot judge
    INVALID_TEST = "invalid_test"  # cannot judge: the test itself is broken
    # format
    MISSING_OPEN_TAG = "missing_open_tag"
    MISSING_CLOSE_TAG = "missing_close_tag"
    TEXT_BEFORE_REASONING = "text_before_reasoning"
    NESTED_TAGS = "nested_tags"
    MULTIPLE_BLOCKS = "multiple_blocks"
    REVERSED_TAGS = "reversed_tags"
    EMPTY_ANSWER = "empty_answer"


# Which verdicts each component gives (the OpenAPI document lists them per component). A newer server may add
# verdicts: clients should treat one they do not know as "other", never fail on it.
VERDICTS: dict[str, tuple[Verdict, ...]] = {
    "math": (
        Verdict.CORRECT, Verdict.WRONG, Verdict.NO_ANSWER, Verdict.HEDGED, Verdict.TIMEOUT, Verdict.ANSWER_TOO_LONG,
        Verdict.GOLD_UNPARSEABLE, Verdict.WORKER_CRASHED, Verdict.DEADLINE_EXCEEDED, Verdict.INTERNAL_ERROR,
    ),
    "code": (
        Verdict.PASSED, Verdict.FAILED, Verdict.NO_CODE, Verdict.COMPILE_ERROR, Verdict.SANDBOX_UNAVAILABLE,
        Verdict.INVALID_TEST, Verdict.DEADLINE_EXCEEDED,
    ),
    "format": (
        Verdict.OK, Verdict.MISSING_OPEN_TAG, Verdict.MISSING_CLOSE_TAG, Verdict.TEXT_BEFORE_REASONING,
        Verdict.NESTED_TAGS, Verdict.MULTIPLE_BLOCKS, Verdict.REVERSED_TAGS, Verdict.EMPTY_ANSWER,
    ),
}  # fmt: skip
TEST_VERDICTS = ("passed", "wrong_answer", "runtime_error", "timeout", "memory_limit", "output_limit")


ExtractionTarget = Literal["latex", "expr", "string"]
Language = Literal["en", "zh", "ja", "fr", "de", "es", "ru", "ar", "hi"]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class MathOptions(_Strict):
    """Per-request math options; they cover what math-verify's own test suite varies."""

    extraction: tuple[ExtractionTarget, ...] = Field(
        ("latex", "expr"), min_length=1, description="Which forms are extracted from the completion."
    )
    gold_extraction: tuple[ExtractionTarget, ...] | None = Field(
        None,
        min_length=1,
        description="Which forms are extracted from the gold answer; default: `extraction`.",
    )
    boxed_priority: int = Field(
        0,
        ge=-1,
        le=1000,
        description="Priority of \\boxed{} among extraction patterns (0 first, 50 after 'final answer is', -1 never).",
    )
    float_rounding: int = Field(6, ge=0, le=15, description="Decimal places floats are rounded to.")
    numeric_precision: int = Field(15, ge=1, le=100, description="Significant digits for numeric evaluation.")
    strict: StrictBool = Field(True, description="Variables matter and sets never equal tuples.")
    allow_set_relation_comp: StrictBool = Field(False, description="Let a relation (1 < x < 2) equal a set ((1, 2)).")
    string_choices: tuple[str, ...] = Field(
        ("A", "B", "C", "D"), max_length=64, description="Choices extracted by the `string` target."
    )
    language: Language = Field("en", description="Language of the answer words ('the answer is', '答案').")
    think_tag: str = Field(
        "think",
        pattern=r"^[A-Za-z][\w-]{0,31}$",
        description="Only text after the last closing tag is graded.",
    )


class MathSpec(_Strict):
    gold: str = Field(..., min_length=1, max_length=10_000)
    options: MathOptions = MathOptions()


class FormatOptions(_Strict):
    tag: str = Field("think", pattern=r"^[A-Za-z][\w-]{0,31}$", description="Name of the reasoning tag.")
    prefilled: StrictBool = Field(False, description="The chat template already opened the tag.")
    require_answer: StrictBool = Field(True, description="A non-empty answer must follow the closing tag.")


def _tag_required(schema: dict[str, Any]) -> None:
    schema["required"] = ["type", *schema.get("required", [])]


class _TaggedTest(_Strict):
    """A code test. On the wire `type` is required (it picks the kind); in Python it defaults to the class's."""

    model_config = ConfigDict(json_schema_extra=_tag_required)


class StdioTest(_TaggedTest):
    """stdin -> expected stdout; compared as whitespace-separated tokens unless `compare` says otherwise."""

    type: Literal["stdio"] = "stdio"
    stdin: str = ""
    stdout: str
    compare: Literal["tokens", "exact", "float"] = Field(
        "tokens",
        description="tokens: whitespace-separated; exact: byte for byte; float: tokens, numbers within tolerance",
    )
    tolerance: float = Field(1e-6, ge=0, le=1)


class CallTest(_TaggedTest):
    """`fn(*args, **kwargs)` must return `expected`; the value is made plain JSON in the sandbox, compared outside."""

    type: Literal["call"] = "call"
    fn: str = Field(..., pattern=r"^[A-Za-z_][A-Za-z0-9_]*$", max_length=200)
    args: list[Any] = []
    kwargs: dict[str, Any] = {}
    expected: Any = None
    tolerance: float = Field(0.0, ge=0, le=1, description="0: numbers compare exactly (240.0 == 240)")


class AssertTest(_TaggedTest):
    type: Literal["assert"] = "assert"
    code: str


CodeTest = Annotated[StdioTest | CallTest | AssertTest, Field(discriminator="type")]


class CodeSpec(_Strict):
    """Tests for the program in the completion's last fenced code block. Limits are per test, capped by the server."""

    language: Literal["python"] = "python"
    tests: list[CodeTest] = Field(..., min_length=1, max_length=1000)
    timeout_s: float = Field(5.0, gt=0, le=60, description="wall-clock limit per test")
    memory_mb: int = Field(512, ge=16, le=8192)
    cpu_s: float | None = Field(None, gt=0, le=60, description="default: timeout_s")
    max_processes: int | None = Field(None, ge=1, le=1024)
    max_output_bytes: int | None = Field(None, ge=1024, le=256 * 1024 * 1024)
    max_file_mb: int | None = Field(None, ge=1, le=1024)
    think_tag: str = Field("think", pattern=r"^[A-Za-z][\w-]{0,31}$")


Weight = Annotated[float, Field(ge=-WEIGHT_LIMIT, le=WEIGHT_LIMIT, allow_inf_nan=False)]


def _publish_item_rules(schema: dict[str, Any]) -> None:
    """The rules `_check_components` enforces, in the published JSON schema: at least one component, and a weight
    only for a component the item requests."""
    schema["anyOf"] = [{"required": [name], "properties": {name: {"type": "object"}}} for name in COMPONENTS]
    schema["allOf"] = [
        {
            "if": {"required": ["weights"], "properties": {"weights": {"type": "object", "required": [name]}}},
            "then": {"required": [name], "properties": {name: {"type": "object"}}},
        }
        for name in COMPONENTS
    ]


class ScoreItem(_Strict):
    """One completion to score. At least one component (`math`, `code`, `format`) is required."""

    model_config = ConfigDict(json_schema_extra=_publish_item_rules)

    completion: str = Field(..., description="The model's output, as text.")
    id: str | None = Field(None, max_length=256, description="Echoed back in the result.")
    prompt: str | None = Field(None, description="Not scored; kept for logs and future components.")
    math: MathSpec | None = None
    code: CodeSpec | None = None
    format: FormatOptions | None = None
    weights: dict[ComponentName, Weight] | None = Field(
        None,
        description=f"Component name -> weight in the reward (default 1.0 each); finite, |weight| <= {WEIGHT_LIMIT:g}, "
        "and only for components the item requests.",
    )

    @model_validator(mode="after")
    def _check_components(self) -> ScoreItem:
        requested = self.requested()
        if not requested:
            raise ValueError(f"each item needs at least one of {', '.join(COMPONENTS)}")
        unrequested = [name for name in COMPONENTS if name in (self.weights or {}) and name not in requested]
        if unrequested:  # names from COMPONENTS only: the message never echoes input
            raise ValueError(f"weights name components this item does not request: {', '.join(unrequested)}")
        return self

    def requested(self) -> list[str]:
        """The components this item asks for, in a fixed order."""
        return [name for name in COMPONENTS if getattr(self, name) is not None]


_REQUEST_EXAMPLE: dict[str, Any] = {
    "items": [
        {
            "id": "p0-c0",
            "completion": "<think>48 + 24 = 72</think>The answer is \\boxed{72}.",
            "math": {"gold": "72"},
            "format": {},
        },
        {
            "id": "p1-c0",
            "completion": "<think>Add them.</think>```python\ndef add(a, b):\n    return a + b\n```",
            "code": {"tests": [{"type": "call", "fn": "add", "args": [2, 3], "expected": 5}]},
            "weights": {"code": 2.0},
        },
    ]
}


class ScoreRequest(_Strict):
    model_config = ConfigDict(json_schema_extra={"examples": [_REQUEST_EXAMPLE]})

    items: list[ScoreItem] = Field(..., min_length=1, description="Scored independently; results keep this order.")


def _enum(values: tuple[str, ...], note: str = "") -> dict[str, Any]:
    return {"enum": list(values), **({"description": note} if note else {})}


_ANY_VERDICT = tuple(dict.fromkeys(v.value for group in VERDICTS.values() for v in group))
_NEW_VERDICTS = "A newer server may add verdicts: treat an unknown one as 'other'."


class TestVerdict(BaseModel):
    """One code test's outcome."""

    __test__ = False  # not a pytest test class

    verdict: str = Field(..., json_schema_extra=_enum(TEST_VERDICTS))
    detail: str | None = None


def _unused(value: object) -> bool:
    return value is None


class ComponentResult(BaseModel):
    """One component's outcome. Fields a component does not use are left out of the JSON."""

    score: float | None = Field(..., description="null: the verifier could not judge (see `verdict`)")
    verdict: str = Field(..., json_schema_extra=_enum(_ANY_VERDICT, _NEW_VERDICTS))
    detail: str | None = Field(None, description="What was wrong, in one short sentence; null when nothing was.")
    extracted: str | None = Field(
        None, exclude_if=_unused, description="math: the answer as extracted from the completion"
    )
    passed: int | None = Field(None, exclude_if=_unused, description="code: tests passed")
    total: int | None = Field(None, exclude_if=_unused, description="code: tests run")
    tests: list[TestVerdict] | None = Field(None, exclude_if=_unused, description="code: one verdict per test")


def _publish_components(schema: dict[str, Any]) -> None:
    """Each component's result under its name, with the verdicts that component gives."""
    result = schema["additionalProperties"]
    schema["properties"] = {
        name: {"allOf": [result], "properties": {"verdict": _enum(tuple(v.value for v in verdicts))}}
        for name, verdicts in VERDICTS.items()
    }


class ItemResult(BaseModel):
    id: str | None = Field(..., description="The item's id, echoed.")
    reward: float | None = Field(
        ..., description="The weighted sum of the component scores; null when any component could not be judged."
    )
    status: Literal["ok", "error"] = Field(..., description="error: reward is null; skip this item in training.")
    components: dict[str, ComponentResult] = Field(..., json_schema_extra=_publish_components)


_RESPONSE_EXAMPLE: dict[str, Any] = {
    "results": [
        {
            "id": "p0-c0",
            "reward": 2.0,
            "status": "ok",
            "components": {
                "math": {"score": 1.0, "verdict": "correct", "detail": None, "extracted": "72"},
                "format": {"score": 1.0, "verdict": "ok", "detail": None},
            },
        },
        {
            "id": "p1-c0",
            "reward": 2.0,
            "status": "ok",
            "components": {
                "code": {
                    "score": 1.0, "verdict": "passed", "detail": None, "passed": 1, "total": 1,
                    "tests": [{"verdict": "passed", "detail": None}],
                },
            },
        },
    ]
}  # fmt: skip


class ScoreResponse(BaseModel):
    model_config = ConfigDict(json_schema_extra={"examples": [_RESPONSE_EXAMPLE]})

    results: list[ItemResult] = Field(..., description="One per item, in request order.")


class ErrorDetail(BaseModel):
    loc: str = Field(..., description="Where in the request, e.g. items.3.math.gold; never the submitted value.")
    msg: str = Field(..., description="What is wrong and what is allowed.")
    type: str | None = Field(None, description="pydantic's error type, e.g. missing, greater_than, extra_forbidden")


class ErrorResponse(BaseModel):
    """An error: 401, 413, 422 (with `errors`), 500 (with a request id for the logs). Never echoes input."""

    detail: str = Field(..., description="A readable message.")
    errors: list[ErrorDetail] | None = Field(None, description="422: each problem found (at most 20).")
