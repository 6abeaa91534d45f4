"""The wire contract of the verifier, v1 (DESIGN.md section 3).

This module is the one place the request and response shapes are defined: the service validates with these
models and the trainer client builds and parses with them. It imports pydantic and nothing else of the project.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    model_serializer,
    model_validator,
)

API_VERSION = "v1"
COMPONENTS = ("math", "code", "format")


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
    strict: bool = Field(True, description="Variables matter and sets never equal tuples.")
    allow_set_relation_comp: bool = Field(False, description="Let a relation (1 < x < 2) equal a set ((1, 2)).")
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
    prefilled: bool = Field(False, description="The chat template already opened the tag.")
    require_answer: bool = Field(True, description="A non-empty answer must follow the closing tag.")


class StdioTest(_Strict):
    """stdin -> expected stdout; compared as whitespace-separated tokens unless `compare` says otherwise."""

    type: Literal["stdio"] = "stdio"
    stdin: str = ""
    stdout: str
    compare: Literal["tokens", "exact", "float"] = Field(
        "tokens",
        description="tokens: whitespace-separated; exact: byte for byte; float: tokens, numbers within tolerance",
    )
    tolerance: float = Field(1e-6, ge=0, le=1)


class CallTest(_Strict):
    """`fn(*args, **kwargs)` must return `expected`; the value is made plain JSON in the sandbox, compared outside."""

    type: Literal["call"] = "call"
    fn: str = Field(..., pattern=r"^[A-Za-z_][A-Za-z0-9_]*$", max_length=200)
    args: list[Any] = []
    kwargs: dict[str, Any] = {}
    expected: Any = None
    tolerance: float = Field(0.0, ge=0, le=1, description="0: numbers compare exactly (240.0 == 240)")


class AssertTest(_Strict):
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


class ScoreItem(_Strict):
    completion: str
    id: str | None = Field(None, max_length=256)
    prompt: str | None = None
    math: MathSpec | None = None
    code: CodeSpec | None = None
    format: FormatOptions | None = None
    weights: dict[str, float] | None = None

    @model_validator(mode="after")
    def _check_components(self) -> ScoreItem:
        requested = self.requested()
        if not requested:
            raise ValueError("each item needs at least one of 'math', 'code' or 'format'")
        unknown = sorted(set(self.weights or {}) - set(requested))
        if unknown:
            raise ValueError(f"weights name components this item does not request: {unknown}")
        return self

    def requested(self) -> list[str]:
        """The components this item asks for, in a fixed order."""
        return [name for name in COMPONENTS if getattr(self, name) is not None]


class ScoreRequest(_Strict):
    items: list[ScoreItem] = Field(..., min_length=1)


class TestVerdict(BaseModel):
    verdict: str
    detail: str | None = None


_OPTIONAL_COMPONENT_FIELDS = ("extracted", "passed", "total", "tests")


class ComponentResult(BaseModel):
    """One component's outcome. Fields a component does not use are left out of the JSON."""

    score: float | None
    verdict: str
    detail: str | None = None
    extracted: str | None = Field(None, description="math: the answer as extracted from the completion")
    passed: int | None = Field(None, description="code: tests passed")
    total: int | None = Field(None, description="code: tests run")
    tests: list[TestVerdict] | None = Field(None, description="code: one verdict per test")

    @model_serializer(mode="wrap")
    def _drop_unused(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        data: dict[str, Any] = handler(self)
        for name in _OPTIONAL_COMPONENT_FIELDS:
            if data.get(name) is None:
                data.pop(name, None)
        return data


class ItemResult(BaseModel):
    id: str | None
    reward: float | None
    status: Literal["ok", "error"]
    components: dict[str, ComponentResult]


class ScoreResponse(BaseModel):
    results: list[ItemResult]


class ErrorResponse(BaseModel):
    detail: str | list[dict[str, Any]]
