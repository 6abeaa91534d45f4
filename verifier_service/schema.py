"""The wire contract of the verifier, v1 (DESIGN.md section 3).

This module is the one place the request and response shapes are defined: the service validates with these
models and the trainer client builds and parses with them. It imports pydantic and, of the project, only what imports
nothing of it: `json_schemas` (the rules a json_schema spec's schema must pass) and constants, the names of
reasoning-gym's datasets (procedural_datasets.py) and the pattern of a model's name (reward_models/spec.py).
"""

from __future__ import annotations

import difflib
import json
import math
import numbers
import re
from collections.abc import Sequence
from enum import StrEnum
from typing import Annotated, Any, ClassVar, Literal, TypeGuard, get_args

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PrivateAttr,
    StrictBool,
    StrictFloat,
    StrictInt,
    TypeAdapter,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic.types import JsonValue

from reward_models.spec import MODEL_NAME
from verifier_service import json_schemas
from verifier_service.procedural_datasets import DATASETS as PROCEDURAL_DATASETS
from verifier_service.procedural_datasets import REASONING_GYM_VERSION
from verifier_service.procedural_datasets import installed as procedural_installed

API_VERSION = "v1"
# Every component, in the order results list them. A component is a spec model below (a `ComponentSpec`), a field
# of `ScoreItem` and a scorer in `verifier_service.components`.
ComponentName = Literal[
    "math", "code", "choice", "answer", "json_schema", "sql", "instructions", "procedural",
    "format", "overlong", "length", "repetition", "language", "steps", "rm", "prm", "judge",
]  # fmt: skip
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
    # choice, answer (with correct, wrong, no_answer, hedged)
    NOT_AN_OPTION = "not_an_option"  # choice: the answer names a letter that is not among the options
    PARTIAL = "partial"  # answer, match "f1": some words in common with the gold
    BAD_GOLD = "bad_gold"  # cannot judge: the gold is not a usable answer
    # procedural (with correct, partial, wrong, no_answer, answer_too_long, timeout)
    SCORER_ERROR = "scorer_error"  # cannot judge: the dataset's own scorer raised
    SCORER_UNAVAILABLE = "scorer_unavailable"  # cannot judge: reasoning-gym is not installed on this server
    # overlong, length
    WITHIN_BUDGET = "within_budget"
    IN_BUFFER = "in_buffer"
    OVER_LIMIT = "over_limit"
    TRUNCATED = "truncated"
    LENGTH_UNKNOWN = "length_unknown"  # cannot judge: no `completion_tokens`, and `unit` is not "chars"
    PRIMARY_UNJUDGED = "primary_unjudged"  # cannot judge: the component correctness comes from scored null
    # repetition
    NO_REPETITION = "no_repetition"
    REPETITIVE = "repetitive"
    LOOP = "loop"
    TOO_SHORT = "too_short"
    # language
    CONSISTENT = "consistent"  # every word in the target language
    MIXED = "mixed"  # some
    OTHER_LANGUAGE = "other_language"  # none
    NO_TEXT = "no_text"  # cannot judge: the scope has no words at all
    # json_schema (with timeout); steps: every arithmetic claim checked is right (mean: the share of right ones)
    VALID = "valid"
    INVALID = "invalid"  # the answer is JSON that breaks the schema
    NO_JSON = "no_json"  # no JSON value in the answer
    # sql (with timeout)
    MATCH = "match"  # the predicted query's rows are the gold query's
    MISMATCH = "mismatch"
    WRITE_ATTEMPT = "write_attempt"  # the query tried to write, attach, change a pragma or load an extension
    PRED_ERROR = "pred_error"  # the predicted query failed (syntax or runtime error)
    NO_SQL = "no_sql"
    GOLD_ERROR = "gold_error"  # cannot judge: the schema or the gold query failed
    # instructions
    FOLLOWED = "followed"  # every instruction followed
    # some instruction not followed; with grading "fraction" the score is the share followed
    NOT_FOLLOWED = "not_followed"
    UNKNOWN_INSTRUCTION = "unknown_instruction"  # cannot judge: an instruction id no check has
    BAD_KWARGS = "bad_kwargs"  # cannot judge: an instruction's kwargs lack a key its check needs, or have a wrong type
    # steps (with valid)
    INVALID_STEP = "invalid_step"  # some claim is wrong
    NO_STEPS = "no_steps"  # no arithmetic claim to check: scores 1, nothing to fault
    # rm, prm (prm: with no_steps, which scores null: a completion with no steps is not judged)
    SCORED = "scored"  # the model's score
    TOO_LONG = "too_long"  # cannot judge: the input is longer than the model's max_tokens (rm: on_overflow "null")
    MODEL_ERROR = "model_error"  # cannot judge: the model failed on this input (its forward pass, its template)
    BAD_LAYOUT = (
        "bad_layout"  # cannot judge, prm: a step holds the model's tag token, or a tag is not one of its tokens
    )
    GATED_OUT = "gated_out"  # gate "right": the rule did not call the answer right; score 0, the model not run
    # judge (with correct, invalid, no_answer, primary_unjudged)
    INCORRECT = "incorrect"  # the judge said the answer does not match the reference
    JUDGE_DISAGREE = "judge_disagree"  # swap: the two orders disagree (0, or null with on_disagree "null")
    JUDGE_UNPARSEABLE = "judge_unparseable"  # cannot judge: the reply holds no label of the preset, or two
    JUDGE_TIMEOUT = "judge_timeout"  # cannot judge: the judge did not answer within its timeout_s
    JUDGE_ERROR = "judge_error"  # cannot judge: the judge could not be reached, answered an error or a malformed body


TEST_VERDICTS = ("passed", "wrong_answer", "runtime_error", "timeout", "memory_limit", "output_limit")


ExtractionTarget = Literal["latex", "expr", "string"]
Language = Literal["en", "zh", "ja", "fr", "de", "es", "ru", "ar", "hi"]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


# --- Inputs as trainers hold them ---------------------------------------------------------------------------------
# /v1/score, the trainer client, the trainer routes and the adapters all validate with these models, so the shapes
# trainers keep their data in are read here, once: a number as a gold answer, a bare string as an assert test, a chat
# list as the completion or the prompt. Numbers in options are JSON numbers: "12" and true are not 12 (JsonInt,
# StrictFloat; a float option takes an integer, an integer option a float with no fraction, as JSON Schema's
# "integer" does: 12.0).


def _listed(value: Any) -> TypeGuard[list[Any] | tuple[Any, ...]]:
    return isinstance(value, (list, tuple))  # `list | tuple` would build a union on every call


def _integral(value: Any) -> Any:
    """A float with no fraction as an int, and an integer of another library (numpy's int64, which a dataset's column
    gives) as the int it is; anything else as it is, for a strict int to judge. Neither comes from JSON, where only
    12 and 12.0 are 12.

    >>> import numpy
    >>> _integral(12.0), _integral(numpy.int64(12)), _integral(True), _integral("12"), _integral(12.5)
    (12, 12, True, '12', 12.5)
    """
    if type(value) is float:
        return int(value) if value.is_integer() else value
    if type(value) is not int and type(value) is not bool and isinstance(value, numbers.Integral):
        return int(value)
    return value


JsonInt = Annotated[StrictInt, BeforeValidator(_integral)]
JsonIntOrNone = Annotated[StrictInt | None, BeforeValidator(_integral)]  # so that its bounds are published as such
# A token id: a plain strict int (no per-id conversion: an item may carry 8,000 of them, a request a million)
TokenId = Annotated[StrictInt, Field(ge=0, le=2**31 - 1)]
MAX_COMPLETION_IDS = 1_000_000


class _Lenient(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)


class ContentPart(_Lenient):
    """A part of a message's content (OpenAI's content parts): its `text` is read; a part without one (an image) adds
    nothing."""

    type: str | None = None
    text: str | None = None


class ChatMessage(_Lenient):
    """A chat message, as OpenAI's API and TRL's conversational datasets hold it; other keys (tool calls, names) are
    ignored. `reasoning_content` (or `thinking`) is reasoning a trainer parsed out of the message (TRL's
    `parse_response` does): it is put back, in think tags, before the text."""

    role: str = "assistant"
    content: str | list[ContentPart] | None = None
    reasoning_content: str | None = None
    thinking: str | None = None

    def text(self) -> str:
        """The content as one text: a string as it is, the parts' texts joined."""
        if self.content is None or isinstance(self.content, str):
            return self.content or ""
        return "".join(part.text for part in self.content if part.text is not None)


_CHAT: TypeAdapter[list[ChatMessage]] = TypeAdapter(list[ChatMessage])
_CHAT_SHAPE = "a string, or a list of chat messages ({role, content}; content a string or a list of {type, text} parts)"


def _chat(value: Any, field: str) -> list[ChatMessage]:
    """`value` as chat messages; a ValueError naming `field` and the place that is not a message (never a value)."""
    try:
        return _CHAT.validate_python(value)
    except ValidationError as exc:
        index, *inner = exc.errors()[0]["loc"]
        what = f"its {inner[0]!r} is not valid" if inner else "it is not an object"
        raise ValueError(f"{field} must be {_CHAT_SHAPE}; message {index}: {what}") from None


def completion_text(completion: str | Sequence[Any]) -> str:
    """The text to grade: a plain completion as it is; for a chat completion, the last assistant message (a message
    without a role is one), with its parsed-out reasoning put back in think tags. Lone surrogates (which no UTF-8
    request can carry) become U+FFFD. The one definition: `ScoreItem` validates a chat completion with it, and the
    trainer client calls it on whatever TRL passes.

    >>> completion_text("The answer is 4.")
    'The answer is 4.'
    >>> completion_text([{"role": "user", "content": "2+2?"}, {"role": "assistant", "content": "<think>2+2</think>4"}])
    '<think>2+2</think>4'
    >>> completion_text([{"role": "assistant", "content": [{"type": "text", "text": "4"}]}])
    '4'
    >>> completion_text([{"role": "assistant", "reasoning_content": "2+2", "content": "4"}])
    '<think>2+2</think>4'
    """
    if isinstance(completion, str):
        return valid_unicode(completion)
    for message in reversed(_chat(completion, "completion")):
        if message.role == "assistant":
            reasoning = message.reasoning_content or message.thinking
            text = message.text()
            return valid_unicode(f"<think>{reasoning}</think>{text}" if reasoning is not None else text)
    return ""


def prompt_text(prompt: str | Sequence[Any]) -> str:
    """A prompt as text: a chat prompt's messages, each as its text, one after another.

    >>> prompt_text([{"role": "system", "content": "Be brief."}, {"role": "user", "content": "2+2?"}])
    'Be brief.\\n\\n2+2?'
    """
    if isinstance(prompt, str):
        return valid_unicode(prompt)
    return valid_unicode("\n\n".join(message.text() for message in _chat(prompt, "prompt")))


def valid_unicode(text: str) -> str:
    """The text with lone surrogates replaced by U+FFFD: a decoder that split a character must cost that character,
    not the whole batch's request.

    >>> valid_unicode("4 \\ud800") == "4 \\ufffd" and valid_unicode("ok") == "ok"
    True
    """
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return _SURROGATE.sub("\ufffd", text)
    return text


_SURROGATE = re.compile("[\ud800-\udfff]")


MAX_GOLD_DIGITS = 4000  # an int gold with more digits is refused: Python turns at most 4300 into text by default


def number_text(value: Any) -> str:
    """A gold answer given as a number, as text: an int in digits, a float as Python writes it (72.0, 1e+20). A
    boolean is not a number; a non-finite float, or an int of more than MAX_GOLD_DIGITS digits, is refused.

    >>> number_text(72), number_text(0.5), number_text(-3.0)
    ('72', '0.5', '-3.0')
    """
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ValueError("a gold answer must be a string or a number (not a boolean)")
    if isinstance(value, numbers.Integral):
        number = int(value)
        if number.bit_length() > _GOLD_BITS:
            raise ValueError(
                f"a gold given as a number has at most {MAX_GOLD_DIGITS} digits; send a longer one as text"
            )
        return str(number)
    number_ = float(value)
    if not math.isfinite(number_):
        raise ValueError("a gold given as a number must be finite")
    return repr(number_)


_GOLD_BITS = int(MAX_GOLD_DIGITS * math.log2(10))  # 10**MAX_GOLD_DIGITS needs one more bit: never past the limit


def _gold_text(value: Any) -> Any:
    """A gold that is a number, as text; anything else as it is, for the field's own type to judge."""
    if type(value) is str:  # the common case, first: this runs for every gold of every request
        return value
    return number_text(value) if isinstance(value, numbers.Number) else value


def _golds_text(value: Any) -> Any:
    """`_gold_text` for a gold or for each of a list of them."""
    if _listed(value):
        return [_gold_text(gold) for gold in value]
    return _gold_text(value)


# What the published schema shows a client may send where a validator above reads more than the field's own type.
_GoldInput = Annotated[str, Field(min_length=1, max_length=10_000)] | StrictInt | StrictFloat
_GoldsInput = str | StrictInt | StrictFloat | list[str | StrictInt | StrictFloat]
_AssertString = Annotated[str, Field(description="An assert test: the same as {type: assert, code: <the string>}.")]
_ChatInput = str | list[ChatMessage]
_Index = Annotated[StrictInt, Field(ge=0, le=25, description="A 0-based option index: 0 is the first letter.")]
_LettersInput = str | _Index | list[str | _Index]


Role = Literal["primary", "shaping"]
PrimaryName = Literal[
    "math", "code", "choice", "answer", "json_schema", "sql", "instructions", "procedural"
]  # the components that judge correctness


class ComponentSpec(_Strict):
    """A component's request options. Beside the options, each spec class says what its component is (read by the
    engine, the order guard and `GET /v1/components`): its role, its verdicts and its score range."""

    role: ClassVar[Role] = "shaping"  # primary: judges whether the answer is right (other components may read it)
    verdicts: ClassVar[tuple[Verdict, ...]]  # every verdict it gives, those that score null included
    null_verdicts: ClassVar[tuple[Verdict, ...]] = ()  # the verdicts that can score null: the item is not judged
    range_text: ClassVar[str] = "[0, 1]"  # the score range, in terms of the options
    reads_prompt: ClassVar[bool] = False  # whether it judges the item's prompt too (clients then send it)

    def score_range(self) -> tuple[float, float]:
        """The lowest and highest score under these options."""
        return (0.0, 1.0)

    def partial_credit(self) -> bool:
        """Whether a wrong answer may score above 0 (read by the order guard, for correctness components)."""
        return False

    def reads_correctness(self) -> bool:
        """Whether it is scored from another component's verdict on the same item, after that one (a
        `CorrectnessGate` that is gated)."""
        return False

    def answer_ranges(self) -> AnswerRanges | None:
        """For the order guard: the (lowest, highest) score of a right answer and of a wrong one, for a shaping
        component whose score can differ between the two (gated on correctness, or a model's score); None for one
        that scores a right and a wrong answer of the same text alike (format, overlong) and for correctness
        components, which the guard reads through their weight and `partial_credit()`."""
        return None

    @classmethod
    def available(cls) -> bool:
        """Whether this server can judge the component (GET /v1/components says it)."""
        return True


AnswerRanges = tuple[tuple[float, float], tuple[float, float]]  # (lowest, highest) of a right answer, of a wrong one


class CorrectnessGate(ComponentSpec):
    """The options of a component that can read whether the answer is right from a primary component of the same
    item (scored once, before it; when that one is null, so is this)."""

    correct_from: PrimaryName | None = Field(
        None, description="The component that says whether the answer is right; default: the item's only one."
    )
    correct_threshold: StrictFloat = Field(
        1.0, ge=0, le=1, description="That component's score from which the answer counts as right."
    )

    def reads_correctness(self) -> bool:
        return True


class GatedSpec(CorrectnessGate):
    """A shaping component whose score always depends on whether the answer is right (scoring.GATED scores it)."""

    def answer_ranges(self) -> AnswerRanges:
        raise NotImplementedError


_TAG_PATTERN = r"^[A-Za-z][\w-]{0,31}$"
Finite = Annotated[StrictFloat, Field(ge=-WEIGHT_LIMIT, le=WEIGHT_LIMIT, allow_inf_nan=False)]
LengthUnit = Literal["tokens", "chars"]


def _unit() -> Any:
    return Field(
        "tokens",
        description="tokens: the item's `completion_tokens` (the component is null without it); chars: the "
        "completion's length in characters, only when asked for.",
    )


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
    boxed_priority: JsonInt = Field(
        0,
        ge=-1,
        le=1000,
        description="Priority of \\boxed{} among extraction patterns (0 first, 50 after 'final answer is', -1 never).",
    )
    float_rounding: JsonInt = Field(6, ge=0, le=15, description="Decimal places floats are rounded to.")
    numeric_precision: JsonInt = Field(15, ge=1, le=100, description="Significant digits for numeric evaluation.")
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


class MathSpec(ComponentSpec):
    """Final-answer math, compared symbolically (math-verify): 1 right, 0 wrong."""

    role = "primary"
    verdicts = (
        Verdict.CORRECT, Verdict.WRONG, Verdict.NO_ANSWER, Verdict.HEDGED, Verdict.TIMEOUT, Verdict.ANSWER_TOO_LONG,
        Verdict.GOLD_UNPARSEABLE, Verdict.WORKER_CRASHED, Verdict.DEADLINE_EXCEEDED, Verdict.INTERNAL_ERROR,
    )  # fmt: skip
    null_verdicts = (
        Verdict.GOLD_UNPARSEABLE, Verdict.WORKER_CRASHED, Verdict.DEADLINE_EXCEEDED, Verdict.INTERNAL_ERROR,
    )  # fmt: skip

    gold: str = Field(
        ...,
        min_length=1,
        max_length=10_000,
        description="The right answer: an expression, LaTeX, or a number (as text or as a JSON number).",
    )
    options: MathOptions = Field(MathOptions(), description="How answers are extracted and compared.")

    _gold_number = field_validator("gold", mode="before", json_schema_input_type=_GoldInput)(_gold_text)


class FormatOptions(ComponentSpec):
    """The reasoning format: one reasoning block, nothing before it, an answer after it: 1 well formed, else 0."""

    verdicts = (
        Verdict.OK, Verdict.MISSING_OPEN_TAG, Verdict.MISSING_CLOSE_TAG, Verdict.TEXT_BEFORE_REASONING,
        Verdict.NESTED_TAGS, Verdict.MULTIPLE_BLOCKS, Verdict.REVERSED_TAGS, Verdict.EMPTY_ANSWER,
    )  # fmt: skip

    tag: str = Field("think", pattern=r"^[A-Za-z][\w-]{0,31}$", description="Name of the reasoning tag.")
    prefilled: StrictBool = Field(False, description="The chat template already opened the tag.")
    require_answer: StrictBool = Field(True, description="A non-empty answer must follow the closing tag.")


def _not_set(value: object) -> bool:
    return value is False


def _tag_required(schema: dict[str, Any]) -> None:
    schema["required"] = ["type", *schema.get("required", [])]


class _TaggedTest(_Strict):
    """A code test. On the wire `type` is required (it picks the kind); in Python it defaults to the class's."""

    model_config = ConfigDict(json_schema_extra=_tag_required)

    hidden: StrictBool = Field(
        False,
        # Left out of a dump when false: the client's requests stay what a server without the field accepts.
        exclude_if=_not_set,
        description="A failed test's detail quotes no expected output or value of it (for tests kept from the "
        "model: a trainer that shows details to the model must not show it the answers).",
    )


class StdioTest(_TaggedTest):
    """stdin -> expected stdout; compared as whitespace-separated tokens unless `compare` says otherwise."""

    type: Literal["stdio"] = "stdio"
    stdin: str = ""
    stdout: str
    compare: Literal["tokens", "exact", "float"] = Field(
        "tokens",
        description="tokens: whitespace-separated; exact: byte for byte; float: tokens, numbers within tolerance",
    )
    tolerance: StrictFloat = Field(1e-6, ge=0, le=1)


class CallTest(_TaggedTest):
    """`fn(*args, **kwargs)` must return `expected`; the value is made plain JSON in the sandbox, compared outside."""

    type: Literal["call"] = "call"
    fn: str = Field(..., pattern=r"^[A-Za-z_][A-Za-z0-9_]*$", max_length=200)
    args: list[Any] = []
    kwargs: dict[str, Any] = {}
    expected: Any = None
    tolerance: StrictFloat = Field(0.0, ge=0, le=1, description="0: numbers compare exactly (240.0 == 240)")


class AssertTest(_TaggedTest):
    type: Literal["assert"] = "assert"
    code: str


CodeTest = Annotated[StdioTest | CallTest | AssertTest, Field(discriminator="type")]
_TestsInput = Annotated[list[CodeTest | _AssertString], Field(min_length=1, max_length=1000)]


_CHECKER_RESERVED = ("input", "output", "answer", "main", "main.py", "main.cpp", "diagnostics.txt")


class CheckerSpec(_Strict):
    """A program that judges each stdio test's output in place of the comparison, testlib's way: run in the sandbox
    as `checker input output answer` (the test's stdin, the program's stdout, the test's stdout, as files); exit 0
    accepted, 1 wrong answer, 2 presentation error (both 0); any other status, or a crash, is the checker's failure:
    `invalid_test` (null), never the program's."""

    language: Literal["python", "cpp"] = "python"
    source: str = Field(..., min_length=1, max_length=1 << 20)
    files: dict[str, str] = Field(
        {},
        max_length=8,
        description="Files beside a C++ checker's source when it compiles (testlib.h, which no package index has).",
    )
    points: StrictBool = Field(
        False,
        description="Partial credit (CMS style): an accepting checker (exit 0) prints the test's score in [0, 1] as "
        "its first line of stdout; missing, not a number or out of range: the checker's failure (invalid_test, null).",
    )

    @field_validator("files")
    @classmethod
    def _plain_names(cls, files: dict[str, str]) -> dict[str, str]:
        for name in files:
            if not re.fullmatch(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}", name) or name in _CHECKER_RESERVED:
                raise ValueError(
                    "a file name is a plain name (letters, digits, _ . -), none of " + ", ".join(_CHECKER_RESERVED)
                )
        if sum(len(text) for text in files.values()) > 4 << 20:
            raise ValueError("the files hold at most 4 MiB of text")
        return files


class CodeSpec(ComponentSpec):
    """Tests for the program in the completion's last fenced code block: the share of tests passed. Limits are per
    test, capped by the server."""

    role = "primary"
    verdicts = (
        Verdict.PASSED, Verdict.FAILED, Verdict.NO_CODE, Verdict.COMPILE_ERROR, Verdict.SANDBOX_UNAVAILABLE,
        Verdict.INVALID_TEST, Verdict.DEADLINE_EXCEEDED,
    )  # fmt: skip
    null_verdicts = (Verdict.SANDBOX_UNAVAILABLE, Verdict.INVALID_TEST, Verdict.DEADLINE_EXCEEDED)

    language: Literal["python", "cpp"] = Field(
        "python",
        description="python: the last ```python block (else the whole answer); cpp: the last ```cpp or ```c++ block, "
        "compiled in the sandbox with g++ -O2 -std=gnu++17 -DONLINE_JUDGE -pipe, stdio tests only",
    )
    tests: list[CodeTest] = Field(
        ..., min_length=1, max_length=1000, description="The tests; a bare string is an assert test (MBPP's test_list)."
    )
    checker: CheckerSpec | None = Field(
        None, description="Judges each stdio test's output in place of the comparison (many right answers)."
    )
    timeout_s: StrictFloat = Field(5.0, gt=0, le=60, description="wall-clock limit per test")
    memory_mb: JsonInt = Field(512, ge=16, le=8192)
    cpu_s: StrictFloat | None = Field(None, gt=0, le=60, description="default: timeout_s")
    max_processes: JsonIntOrNone = Field(None, ge=1, le=1024)
    max_output_bytes: JsonIntOrNone = Field(None, ge=1024, le=256 * 1024 * 1024)
    max_file_mb: JsonIntOrNone = Field(None, ge=1, le=1024)
    think_tag: str = Field("think", pattern=r"^[A-Za-z][\w-]{0,31}$")

    def partial_credit(self) -> bool:
        return True  # the share of tests passed

    @model_validator(mode="after")
    def _cpp_stdio(self) -> CodeSpec:
        if self.language == "cpp" and any(test.type != "stdio" for test in self.tests):
            raise ValueError("tests: a cpp program takes stdio tests only")
        if self.checker is not None and any(test.type != "stdio" for test in self.tests):
            raise ValueError("tests: a checker judges stdio tests only")
        return self

    @field_validator("tests", mode="before", json_schema_input_type=_TestsInput)
    @classmethod
    def _assert_strings(cls, tests: Any) -> Any:
        if _listed(tests):
            return [{"type": "assert", "code": test} if isinstance(test, str) else test for test in tests]
        return tests


Scope = Literal["all", "reasoning", "answer"]


def _think_tag() -> Any:
    return Field("think", pattern=_TAG_PATTERN, description="The reasoning tag: the answer is what follows its end.")


class ChoiceSpec(ComponentSpec):
    """Multiple choice (GPQA, MMLU): the letter in the last \\boxed{} after the reasoning, else the last "answer is"
    or "Answer:" line; 1 right, 0 wrong. Several letters ("A or B"), boxes that disagree and "not A" are `hedged`.
    An option's text counts as its letter only when exactly one option matches it."""

    role = "primary"
    verdicts = (
        Verdict.CORRECT, Verdict.WRONG, Verdict.NO_ANSWER, Verdict.HEDGED, Verdict.NOT_AN_OPTION, Verdict.BAD_GOLD,
    )  # fmt: skip
    null_verdicts = (Verdict.BAD_GOLD,)

    gold: str | tuple[str, ...] = Field(
        ...,
        description="The right letter, or a list of letters that must all be chosen (multi-select); a letter may be "
        "given as its 0-based option index (MMLU's `answer`).",
    )
    options: tuple[str, ...] | None = Field(
        None, max_length=26, description="The options' texts, in letter order; an answer may name one by its text."
    )
    letters: str | None = Field(
        None,
        pattern=r"^[A-Za-z]{2,26}$",
        description="The option letters; default: one per option (A, B, ...), else ABCDEFGHIJ.",
    )
    think_tag: str = _think_tag()

    # The model validator below reads indexes (it needs the letters); this one only publishes them.
    _indexes = field_validator("gold", mode="before", json_schema_input_type=_LettersInput)(lambda gold: gold)

    @model_validator(mode="before")
    @classmethod
    def _indexes_as_letters(cls, data: Any) -> Any:
        """A gold given as option indexes, as letters (of this spec's letters); the fields are checked after."""
        if not isinstance(data, dict) or not _has_index(gold := data.get("gold")):
            return data
        letters, options = data.get("letters"), data.get("options")
        known = _option_letters(letters if isinstance(letters, str) else None, options if _sized(options) else None)
        golds = [_letter(one, known) for one in gold] if _listed(gold) else _letter(gold, known)
        return {**data, "gold": golds}

    def option_letters(self) -> str:
        return _option_letters(self.letters, self.options)


def _option_letters(letters: str | None, options: Sequence[Any] | None) -> str:
    if letters is not None:
        return letters.upper()
    return "ABCDEFGHIJKLMNOPQRSTUVWXYZ"[: len(options)] if options else "ABCDEFGHIJ"


def _is_index(value: Any) -> bool:
    """An int (numpy's too), or a float with no fraction (JSON Schema's integer): never a boolean."""
    return type(_integral(value)) is int


def _has_index(gold: Any) -> bool:
    return _is_index(gold) or (_listed(gold) and any(_is_index(one) for one in gold))


def _sized(value: Any) -> bool:
    return _listed(value) and len(value) <= 26


def _letter(gold: Any, letters: str) -> Any:
    return option_letter(int(gold), letters) if _is_index(gold) else gold


def option_letter(index: int, letters: str) -> str:
    """The letter of a 0-based option index (MMLU's `answer`) among `letters`.

    >>> option_letter(2, "ABCD")
    'C'
    """
    if not 0 <= index < len(letters):
        raise ValueError(f"a gold given as an option index must be 0 to {len(letters) - 1} (one per option letter)")
    return letters[index]


class AnswerSpec(ComponentSpec):
    """A short free-form answer (QA, trivia, search agents): the last <answer> block, else the last \\boxed{}, else
    the last "Answer:" line, normalised as SQuAD does (numbers compared as numbers). Never credit for a substring;
    an answer listing several candidates for a single gold is `hedged`."""

    role = "primary"
    verdicts = (
        Verdict.CORRECT, Verdict.PARTIAL, Verdict.WRONG, Verdict.NO_ANSWER, Verdict.HEDGED, Verdict.BAD_GOLD,
    )  # fmt: skip
    null_verdicts = (Verdict.BAD_GOLD,)

    gold: str | tuple[str, ...] = Field(
        ..., description="The answer, or a list of accepted aliases; a number (a JSON number) is read as its text."
    )
    match: Literal["exact", "f1"] = Field(
        "exact", description="exact: 1 or 0 after normalisation; f1: word-overlap F1 with the best alias."
    )
    think_tag: str = _think_tag()

    _gold_numbers = field_validator("gold", mode="before", json_schema_input_type=_GoldsInput)(_golds_text)

    def partial_credit(self) -> bool:
        return self.match == "f1"

    @field_validator("gold")
    @classmethod
    def _bounded_gold(cls, gold: str | tuple[str, ...]) -> str | tuple[str, ...]:
        golds = (gold,) if isinstance(gold, str) else gold
        if not golds or len(golds) > 100 or any(len(g) > 10_000 for g in golds):
            raise ValueError("gold must be 1 to 100 answers of at most 10000 characters each")
        return gold


class JsonSchemaSpec(ComponentSpec):
    """Structured output: 1 when the answer (its one ```json block, else its one fenced block with no language, else
    the whole text after the reasoning) is a JSON value valid under `schema`, else 0 (`invalid`, naming the first
    error's path; `no_json`). References resolve only within the schema: nothing is ever fetched. Formats are not
    asserted (annotations, as JSON Schema 2020-12 says). A validation that runs past 1 s is `timeout` (null)."""

    model_config = ConfigDict(serialize_by_alias=True, validate_by_alias=True, validate_by_name=True)
    role = "primary"
    verdicts = (Verdict.VALID, Verdict.INVALID, Verdict.NO_JSON, Verdict.TIMEOUT)
    null_verdicts = (Verdict.TIMEOUT,)

    strict: StrictBool = Field(
        False,
        description="Require every listed property and allow no others, in every object of the schema (OpenAI's "
        "strict mode; NeMo-Gym's structured_outputs always does this).",
    )
    # `schema` is a (deprecated) BaseModel method, so the attribute has another name; requests say `schema`.
    schema_: dict[str, Any] = Field(
        ...,
        alias="schema",
        description="A JSON Schema (draft 2020-12 unless its $schema names draft 4, 6, 7 or 2019-09). Refused: a "
        "schema its metaschema rejects, a $ref not starting with '#', an $id below the root, more than 64 levels "
        "or 64 KB, a pattern over 1000 characters or one that does not compile.",
    )
    think_tag: str = _think_tag()

    @field_validator("schema_")
    @classmethod
    def _usable_schema(cls, schema: dict[str, Any], info: ValidationInfo) -> dict[str, Any]:
        found = json_schemas.problem(json_schemas.effective(schema, info.data.get("strict", False)))
        if found is not None:
            raise ValueError(found)
        return schema

    def text(self) -> str:
        """The canonical JSON of the schema answers are checked against (strictified when `strict`)."""
        return json_schemas.effective(self.schema_, self.strict)


SqlCompare = Literal["set", "multiset", "ordered"]
SQL_SCHEMA_CHARS = 1_000_000
_DB_NAME = r"^[A-Za-z0-9][\w.-]{0,63}$"


class SqlSpec(ComponentSpec):
    """Text-to-SQL execution match: the answer's last ```sql block runs on a fresh SQLite database built from
    `schema_sql` (or on a read-only database the server names, `db`), read-only, with a deadline that interrupts it;
    its rows are compared with the gold query's by value. 1 match, 0 otherwise (`executable_bonus` for rows that
    differ); a gold query that fails is null."""

    role = "primary"
    verdicts = (
        Verdict.MATCH, Verdict.MISMATCH, Verdict.WRITE_ATTEMPT, Verdict.PRED_ERROR, Verdict.NO_SQL, Verdict.TIMEOUT,
        Verdict.GOLD_ERROR, Verdict.WORKER_CRASHED, Verdict.DEADLINE_EXCEEDED, Verdict.INTERNAL_ERROR,
    )  # fmt: skip
    null_verdicts = (
        Verdict.GOLD_ERROR, Verdict.WORKER_CRASHED, Verdict.DEADLINE_EXCEEDED, Verdict.INTERNAL_ERROR,
    )  # fmt: skip

    schema_sql: str | None = Field(
        None,
        max_length=SQL_SCHEMA_CHARS,
        description="SQL that builds the database (CREATE TABLE and INSERT statements), run on a fresh in-memory "
        "database for each item. Give this or `db`.",
    )
    db: str | None = Field(
        None,
        pattern=_DB_NAME,
        description="The name of a read-only SQLite file this server lists in VERIFIER_SQL_DATABASES (pinned by its "
        "sha256). Give this or `schema_sql`.",
    )
    gold_sql: str = Field(..., min_length=1, max_length=10_000, description="The reference query.")
    compare: SqlCompare = Field(
        "set",
        description="set: rows compared as sets (order and duplicates ignored, as BIRD and SkyRL do); multiset: "
        "duplicates count; ordered: the order counts too (for a gold with ORDER BY).",
    )
    float_tol: StrictFloat = Field(
        1e-6, ge=0, le=1, description="Two numbers match when within this, relatively or absolutely; 0: exactly."
    )
    timeout_s: StrictFloat = Field(
        5.0, gt=0, le=30, description="Each query is interrupted after this long (the predicted one then scores 0)."
    )
    executable_bonus: StrictFloat = Field(
        0.0,
        ge=0,
        lt=1,
        description="The score of a predicted query that ran to its end but whose rows differ from the gold's "
        "(mismatch); every other wrong answer still scores 0. Arctic-Text2SQL-R1 pays 0.1; 0: none.",
    )
    think_tag: str = _think_tag()

    def partial_credit(self) -> bool:
        return self.executable_bonus > 0  # a wrong query that ran scores above 0

    @model_validator(mode="after")
    def _one_database(self) -> SqlSpec:
        if (self.schema_sql is None) == (self.db is None):
            raise ValueError("give exactly one of schema_sql and db")
        return self


_ENTRY_CHARS = 64 * 1024
_PROCEDURAL_ENUM: list[JsonValue] = [*sorted(PROCEDURAL_DATASETS)]  # published: generated requests name a real one


class ProceduralEntry(_Strict):
    """A reasoning-gym entry, as the library generates it (`dataset[i]`) and its JSON keeps it."""

    question: str = Field(..., description="The question (not scored; some scorers read it).")
    answer: str | None = Field(..., description="The entry's own answer (null for a dataset with none).")
    metadata: dict[str, Any] = Field(..., description="What the dataset's scorer reads besides the answer.")


class ProceduralSpec(ComponentSpec):
    """reasoning-gym's own scorer for one of its datasets, on the last <answer> block after the reasoning, else the
    last \\boxed{}, else the whole answer (as NeMo-Gym reads it): 1 when it scores the answer 1.0, else 0 (or its
    score, with `partial_credit`). Runs in a worker process with a time limit: a scorer that raises or overruns is
    null."""

    # `partial_credit` is the option's name on the wire; in Python it is `partial`, since ComponentSpec's
    # partial_credit() is the method the order guard asks.
    model_config = ConfigDict(serialize_by_alias=True)
    role = "primary"
    verdicts = (
        Verdict.CORRECT, Verdict.PARTIAL, Verdict.WRONG, Verdict.NO_ANSWER, Verdict.ANSWER_TOO_LONG, Verdict.TIMEOUT,
        Verdict.SCORER_ERROR, Verdict.SCORER_UNAVAILABLE, Verdict.WORKER_CRASHED, Verdict.DEADLINE_EXCEEDED,
        Verdict.INTERNAL_ERROR,
    )  # fmt: skip
    null_verdicts = (
        Verdict.TIMEOUT, Verdict.SCORER_ERROR, Verdict.SCORER_UNAVAILABLE, Verdict.WORKER_CRASHED,
        Verdict.DEADLINE_EXCEEDED, Verdict.INTERNAL_ERROR,
    )  # fmt: skip

    dataset: str = Field(
        ...,
        max_length=64,
        description=f"The reasoning-gym dataset that made the entry (its metadata.source_dataset), as reasoning-gym "
        f"{REASONING_GYM_VERSION} names it.",
        json_schema_extra={"enum": _PROCEDURAL_ENUM},
    )
    entry: ProceduralEntry = Field(
        ..., description=f"The entry the answer is scored against; at most {_ENTRY_CHARS // 1024} KB as JSON."
    )
    partial: StrictBool = Field(
        False,
        alias="partial_credit",
        description="Score a not fully right answer as the scorer does (between 0 and 1), not 0.",
    )
    timeout_s: StrictFloat = Field(5.0, gt=0, le=30, description="The scorer's wall-clock limit.")
    think_tag: str = _think_tag()
    _entry_json: str = PrivateAttr("")

    def partial_credit(self) -> bool:
        return self.partial

    @classmethod
    def available(cls) -> bool:
        return procedural_installed()  # the `procedural` extra; without it every item is null, scorer_unavailable

    @field_validator("dataset")
    @classmethod
    def _known_dataset(cls, dataset: str) -> str:
        if dataset not in PROCEDURAL_DATASETS:  # the message never echoes the name it was sent
            raise ValueError(
                f"not a dataset of reasoning-gym {REASONING_GYM_VERSION} (GET /v1/components lists them; for a "
                "composite entry, send its metadata.source_dataset)"
            )
        return dataset

    @model_validator(mode="after")
    def _bounded_entry(self) -> ProceduralSpec:
        try:
            text = canonical_json(self.entry.model_dump())
        except ValueError:
            raise ValueError("the entry must be plain JSON (no NaN or infinity)") from None
        if len(text) > _ENTRY_CHARS:
            raise ValueError(f"the entry must be at most {_ENTRY_CHARS // 1024} KB as JSON")
        self._entry_json = text
        return self

    def entry_json(self) -> str:
        """The entry as canonical JSON (made once, when the spec is validated)."""
        return self._entry_json


def canonical_json(value: Any) -> str:
    """One text for equal JSON values (keys sorted, no spaces): the entry as a hashable part of a job.

    >>> canonical_json({"b": 1, "a": [1.5, "x"]})
    '{"a":[1.5,"x"],"b":1}'
    """
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


class OverlongSpec(ComponentSpec):
    """DAPO's soft overlong punishment: 0 up to `max_tokens - buffer_tokens`, then falling linearly to `-penalty` at
    `max_tokens`; `-penalty` beyond it and for a truncated completion. Not gated on correctness."""

    verdicts = (Verdict.WITHIN_BUDGET, Verdict.IN_BUFFER, Verdict.OVER_LIMIT, Verdict.TRUNCATED, Verdict.LENGTH_UNKNOWN)
    null_verdicts = (Verdict.TRUNCATED, Verdict.LENGTH_UNKNOWN)  # truncated: only with on_truncated "null"
    range_text = "[-penalty, 0]"

    max_tokens: JsonInt = Field(..., ge=1, le=100_000_000, description="The generation cap (max_completion_length).")
    buffer_tokens: JsonIntOrNone = Field(
        None, ge=0, description="Length of the soft zone before the cap; default: max_tokens // 5."
    )
    penalty: StrictFloat = Field(1.0, gt=0, le=WEIGHT_LIMIT, allow_inf_nan=False, description="The score at the cap.")
    on_truncated: Literal["penalty", "null"] = Field(
        "penalty",
        description="A truncated completion (`truncated: true`) scores -penalty, or null (skipped in training).",
    )
    unit: LengthUnit = _unit()

    @model_validator(mode="after")
    def _buffer_within_cap(self) -> OverlongSpec:
        if self.buffer_tokens is not None and self.buffer_tokens > self.max_tokens:
            raise ValueError("buffer_tokens must be at most max_tokens")
        return self

    @property
    def buffer(self) -> int:
        return self.max_tokens // 5 if self.buffer_tokens is None else self.buffer_tokens

    def score_range(self) -> tuple[float, float]:
        return (-self.penalty, 0.0)


class LengthSpec(GatedSpec):
    """Conciseness, gated on correctness. cosine: from `*_short` at length 0 to `*_long` at `max_tokens` (and beyond)
    along half a cosine, with separate ends for right and wrong answers. target: a right answer scores
    1 - excess / scale_tokens (at least 0), where excess is how far it runs past `target_tokens` (kind up_to) or
    misses it either way (kind exact); a wrong one scores `wrong_score`."""

    verdicts = (Verdict.CORRECT, Verdict.WRONG, Verdict.LENGTH_UNKNOWN, Verdict.PRIMARY_UNJUDGED)
    null_verdicts = (Verdict.LENGTH_UNKNOWN, Verdict.PRIMARY_UNJUDGED)
    range_text = "cosine: [lowest, highest] of the four ends; target: [min(0, wrong_score), max(1, wrong_score)]"

    mode: Literal["cosine", "target"] = "cosine"
    max_tokens: JsonIntOrNone = Field(
        None, ge=1, le=100_000_000, description="cosine (required): where `*_long` is reached."
    )
    correct_short: Finite = Field(1.0, description="cosine: a right answer of length 0.")
    correct_long: Finite = Field(0.5, description="cosine: a right answer at max_tokens.")
    wrong_short: Finite = Field(-1.0, description="cosine: a wrong answer of length 0.")
    wrong_long: Finite = Field(-0.5, description="cosine: a wrong answer at max_tokens.")
    target_tokens: JsonIntOrNone = Field(
        None, ge=0, le=100_000_000, description="target (required): the length aimed at."
    )
    kind: Literal["up_to", "exact"] = Field("up_to", description="target: up_to charges only excess length.")
    scale_tokens: JsonIntOrNone = Field(
        None,
        ge=1,
        le=100_000_000,
        description="target: the excess at which a right answer scores 0; default: target_tokens.",
    )
    wrong_score: Finite = Field(0.0, description="target: the score of a wrong answer.")
    unit: LengthUnit = _unit()

    @model_validator(mode="after")
    def _mode_fields(self) -> LengthSpec:
        if self.mode == "cosine" and self.max_tokens is None:
            raise ValueError("mode cosine needs max_tokens")
        if self.mode == "target" and self.target_tokens is None:
            raise ValueError("mode target needs target_tokens")
        return self

    @property
    def scale(self) -> int:
        return self.scale_tokens or max(1, self.target_tokens or 0)

    def answer_ranges(self) -> AnswerRanges:
        if self.mode == "target":
            return (0.0, 1.0), (self.wrong_score, self.wrong_score)
        right = (min(self.correct_short, self.correct_long), max(self.correct_short, self.correct_long))
        wrong = (min(self.wrong_short, self.wrong_long), max(self.wrong_short, self.wrong_long))
        return right, wrong

    def score_range(self) -> tuple[float, float]:
        (right_low, right_high), (wrong_low, wrong_high) = self.answer_ranges()
        return (min(right_low, wrong_low), max(right_high, wrong_high))


class RepetitionSpec(ComponentSpec):
    """n-gram repetition: (1 - unique n-grams / all n-grams) * max_penalty, so 0 for none and max_penalty at most;
    a text that ends in a loop (one span repeated four or more times at its end) scores max_penalty."""

    verdicts = (Verdict.NO_REPETITION, Verdict.REPETITIVE, Verdict.LOOP, Verdict.TOO_SHORT)
    range_text = "[max_penalty, 0]"

    n: JsonInt = Field(3, ge=1, le=32, description="n-gram size, in units.")
    max_penalty: StrictFloat = Field(-1.0, le=0, ge=-WEIGHT_LIMIT, allow_inf_nan=False, description="The lowest score.")
    scope: Scope = Field(
        "all", description="all: the whole completion; reasoning: the reasoning block; answer: the text after it."
    )
    units: Literal["auto", "words"] = Field(
        "auto",
        description="auto: words, and each Han, kana or Thai character as its own unit (so Chinese and Japanese "
        "are measured); words: lowercase whitespace-separated words (open-r1's count).",
    )
    think_tag: str = _think_tag()

    def score_range(self) -> tuple[float, float]:
        return (self.max_penalty, 0.0)


# The languages `language` can target (ISO 639-1): IFEval's 30 response languages, Chinese, and 18 more (Greek and 17
# in Latin script). Each is written in one script (scoring/language.py's table says which).
LanguageTarget = Literal[
    "en", "es", "pt", "ar", "hi", "fr", "ru", "de", "ja", "it", "bn", "uk", "th", "ur", "ta", "te", "bg", "ko", "pl",
    "he", "fa", "vi", "ne", "sw", "kn", "mr", "gu", "pa", "ml", "fi", "zh", "nl", "sv", "da", "no", "tr", "id", "ms",
    "cs", "ro", "hu", "el", "ca", "sk", "hr", "sl", "lt", "lv", "et",
]  # fmt: skip


class LanguageSpec(ComponentSpec):
    """Language consistency (DeepSeek-R1's reward): the share of the scope's words that are in the target language.
    Han, kana, Hangul and Thai characters count one each; other words are identified offline by script and, where
    several languages share the script, by a language-ID model over each sentence. LaTeX math, code, URLs, numbers
    and symbols count neither way."""

    verdicts = (Verdict.CONSISTENT, Verdict.MIXED, Verdict.OTHER_LANGUAGE, Verdict.NO_TEXT)
    null_verdicts = (Verdict.NO_TEXT,)

    target: LanguageTarget = Field(..., description="The language the text should be in: an ISO 639-1 code.")
    scope: Scope = Field(
        "reasoning",
        description="reasoning: the reasoning block (R1's chain of thought); answer: the text after it; all: the "
        "whole completion.",
    )
    think_tag: str = _think_tag()


class StepsSpec(ComponentSpec):
    """A process reward without a model: every arithmetic claim written in the completion (`48 / 2 = 24`,
    GSM8K's `<<48/2=24>>`) checked in exact rational arithmetic. min: 1 when every step is right, else 0; mean: the
    share of right steps. No steps at all scores 1 (`no_steps`): there is nothing to fault. The result lists `steps`,
    each claim's character span in the completion and its score."""

    verdicts = (Verdict.VALID, Verdict.INVALID_STEP, Verdict.NO_STEPS)

    aggregate: Literal["min", "mean"] = Field(
        "min", description="min: 1 only when every step is right; mean: the share of right steps."
    )
    scope: Literal["all", "reasoning"] = Field(
        "all", description="all: the whole completion; reasoning: the reasoning block only."
    )
    think_tag: str = _think_tag()


class ModelScoreSpec(CorrectnessGate):
    """The options every model component shares (rm, prm): how its score meets the rule's verdict. Beside a
    correctness component a model may rank answers within the rule's verdict, never lift a wrong answer to a right
    one's reward (the order guard, unless allow_order_inversion): with a bounded score (rm's transform sigmoid; prm's
    always is), squash it under the rule (a weight below the rule's) or gate it on the rule (`gate: "right"`)."""

    order_hint: ClassVar[str]  # what a refusal by the order guard suggests for this component

    gate: Literal["none", "right"] = Field(
        "none",
        description="none: every answer gets the model's score; right: only an answer the rule calls right "
        "(its `correct_from` component's score at least `correct_threshold`) is run through the model, any other "
        "scores 0 (gated_out) without running it, and one the rule could not judge is null (primary_unjudged).",
    )

    def model_range(self) -> tuple[float, float]:
        """The lowest and highest score the model can give under these options."""
        raise NotImplementedError

    def reads_correctness(self) -> bool:
        return self.gate == "right"

    def answer_ranges(self) -> AnswerRanges:
        scored = self.model_range()
        return (scored, scored) if self.gate == "none" else (scored, (0.0, 0.0))

    def score_range(self) -> tuple[float, float]:
        low, high = self.model_range()
        return (min(low, 0.0), max(high, 0.0)) if self.gate == "right" else (low, high)

    def settled_by_gate(self, correctness: ComponentResult) -> ComponentResult | None:
        """With gate right, the result of an answer the model is not run on, from the result of the component that
        says whether it is right: 0 (gated_out) for one below `correct_threshold`, null (primary_unjudged) for one
        that component could not judge; None when the model is to score it (always, with gate none)."""
        if self.gate != "right":
            return None
        if correctness.score is None:
            detail = f"Whether the answer is right is unknown: its component gave {correctness.verdict}."
            return ComponentResult(score=None, verdict=Verdict.PRIMARY_UNJUDGED.value, detail=detail)
        if correctness.score < self.correct_threshold:
            detail = f"The rule did not call the answer right ({correctness.verdict}): the model was not run."
            return ComponentResult(score=0.0, verdict=Verdict.GATED_OUT.value, detail=detail)
        return None

    @model_validator(mode="after")
    def _gate_options(self) -> ModelScoreSpec:
        # their defaults are fine (a client may send every option); another value would be silently unused
        if self.gate == "none" and (self.correct_from is not None or self.correct_threshold != 1.0):
            raise ValueError('correct_from and correct_threshold apply only with gate "right"')
        return self


class RmSpec(ModelScoreSpec):
    """A reward model's score: a sequence-classification model this server loads (VERIFIER_MODELS; GET /v1/models
    lists them), such as TRL's RewardTrainer makes, given the prompt and the completion laid out as RewardTrainer
    trained it (raw: prompt + completion + EOS, with the tokenizer's special tokens; chat: the chat template over a
    user and an assistant turn). The score is its logit at the last token that is not padding (or the logit's
    sigmoid); the result names the model's version. Not a correctness component: beside one, it must not lift a wrong
    answer to a right one's reward (the order guard): bound it (transform sigmoid: raw logits stay refused either way),
    then squash it under the rule (a weight below the rule's) or gate it on the rule (gate right); or set
    allow_order_inversion."""

    verdicts = (Verdict.SCORED, Verdict.TOO_LONG, Verdict.MODEL_ERROR, Verdict.GATED_OUT, Verdict.PRIMARY_UNJUDGED)
    null_verdicts = (Verdict.TOO_LONG, Verdict.MODEL_ERROR, Verdict.PRIMARY_UNJUDGED)
    range_text = "any real number (transform raw); [0, 1] (transform sigmoid); 0 when gated out"
    reads_prompt = True
    order_hint = 'rm: transform "sigmoid", then a weight below the rule\'s or gate "right"'  # raw logits: neither

    model: str = Field(..., pattern=MODEL_NAME, description="The model's name on this server (VERIFIER_MODELS).")
    template: Literal["raw", "chat"] = Field(
        "raw",
        description="raw: prompt + completion + the EOS token's text, tokenized with special tokens (RewardTrainer's "
        "layout for a non-conversational dataset); chat: the tokenizer's chat template over a user turn (the prompt) "
        "and an assistant turn (the completion), as for a conversational one.",
    )
    transform: Literal["raw", "sigmoid"] = Field(
        "raw", description="raw: the logit itself; sigmoid: squashed into [0, 1] (0 and 1 only where it saturates)."
    )
    on_overflow: Literal["keep_end", "null"] = Field(
        "keep_end",
        description="An input longer than the model's max_tokens keeps its last max_tokens tokens (keep_end), or "
        "scores null (too_long). It is never cut at the end, where the answer is.",
    )

    def model_range(self) -> tuple[float, float]:
        return (0.0, 1.0) if self.transform == "sigmoid" else (-math.inf, math.inf)


ShortText = Annotated[str, Field(min_length=1, max_length=32)]


class PrmSpec(ModelScoreSpec):
    """A process reward model's score: a model this server loads (VERIFIER_MODELS, kind prm or prm_lm) scores each
    step of the whole completion, the chain of thought included (the completion is split at `separator`; pieces that
    are empty or only whitespace are no steps), laid out as the model was trained: trl, PRMTrainer's layout (BOS and
    the prompt, then each step tokenized alone followed by the separator's tokens; a step's score is softmax(logits)[1]
    at the separator's last token); qwen_prm, Qwen2.5-Math-PRM's (the chat template over its system turn, the prompt
    and the steps each followed by <extra_0>; softmax(logits)[1] at each <extra_0>); both for a token-classification
    model with two labels (kind prm). step_tag, Math-Shepherd's (prompt, a space, the steps each followed by a space
    and step_tag, joined by the separator; the softmax over the logits of good_token and bad_token at each tag, the
    good one), for a causal LM (kind prm_lm). The score is the steps' aggregate; the result lists each step's character
    span in the completion and its score, and names the model's version. A layout longer than the model's max_tokens
    is null (too_long), never cut; a completion with no steps is null (no_steps). Not a correctness component: beside
    one, it must not lift a wrong answer to a right one's reward (the order guard): weigh it below the rule, or gate
    it on the rule (gate right), or set allow_order_inversion. An item carrying completion_ids gets each step's
    token range in them too (token_start, token_end), where the ids decode to the completion."""

    verdicts = (
        Verdict.SCORED, Verdict.NO_STEPS, Verdict.TOO_LONG, Verdict.MODEL_ERROR, Verdict.BAD_LAYOUT, Verdict.GATED_OUT,
        Verdict.PRIMARY_UNJUDGED,
    )  # fmt: skip
    null_verdicts = (
        Verdict.NO_STEPS, Verdict.TOO_LONG, Verdict.MODEL_ERROR, Verdict.BAD_LAYOUT, Verdict.PRIMARY_UNJUDGED,
    )  # fmt: skip
    range_text = "[0, 1]; 0 when gated out"
    reads_prompt = True
    order_hint = 'prm: a weight below the rule\'s, or gate "right"'

    model: str = Field(..., pattern=MODEL_NAME, description="The model's name on this server (VERIFIER_MODELS).")
    layout: Literal["trl", "qwen_prm", "step_tag"] = Field(
        "trl",
        description="trl: PRMTrainer's training layout; qwen_prm: Qwen2.5-Math-PRM's (both kind prm); step_tag: "
        "Math-Shepherd's (kind prm_lm).",
    )
    separator: ShortText = Field("\n", description="What the completion's steps are split at.")
    aggregate: Literal["min", "last", "mean", "prod"] = Field(
        "min", description="How the step scores make the score: their minimum, the last one, their mean or product."
    )
    step_tag: ShortText = Field("\u043a\u0438", description="step_tag: the tag after each step (Math-Shepherd's).")
    good_token: ShortText = Field("+", description="step_tag: the token whose probability is a step's score.")
    bad_token: ShortText = Field("-", description="step_tag: the token it is weighed against.")

    def model_range(self) -> tuple[float, float]:
        return (0.0, 1.0)  # probabilities, and their aggregates


_KwargValue = str | StrictInt | StrictFloat | StrictBool | None | list[str | StrictInt | StrictFloat]
MAX_INSTRUCTIONS = 64


JUDGE_PLACEHOLDERS = ("{question}", "{gold}", "{answer}")


class JudgeSpec(CorrectnessGate):
    """A generative judge's verdict: a judge this server can ask (VERIFIER_JUDGES; GET /v1/judges lists them) is
    given the item's prompt as the question, `gold` as the reference and the extracted final answer (input "answer")
    or the completion's end (input "full"), in one user turn at temperature 0, and must reply with exactly one label
    of the preset's format: compass, CompassVerifier's A/B/C (CORRECT/INCORRECT/INVALID, or `\\boxed{A}`);
    general_verifier, TIGER-Lab General-Verifier's `Final Decision: Yes|No`; equivalence, NeMo-Gym's `[[A=B]]` /
    `[[A!=B]]`; custom, `correct_label` / `incorrect_label` (and `invalid_label`). A reply with none or with two
    different labels is null (judge_unparseable), never 0. An answer that is empty, only punctuation or only a
    reasoning opener ("Thought process:") is 0 (no_answer) without asking. With `when: "rule_miss"` the judge is
    asked only where the rule (`correct_from`) did not call the answer right, and can only raise it: an answer the
    rule calls right scores 1 (the detail says the rule decided). Not a correctness component: beside one, the order
    guard keeps a judged answer from outscoring a rule-verified one unless allow_order_inversion."""

    verdicts = (
        Verdict.CORRECT, Verdict.INCORRECT, Verdict.INVALID, Verdict.JUDGE_DISAGREE, Verdict.NO_ANSWER,
        Verdict.JUDGE_UNPARSEABLE, Verdict.JUDGE_TIMEOUT, Verdict.JUDGE_ERROR, Verdict.PRIMARY_UNJUDGED,
    )  # fmt: skip
    null_verdicts = (
        Verdict.JUDGE_DISAGREE, Verdict.JUDGE_UNPARSEABLE, Verdict.JUDGE_TIMEOUT, Verdict.JUDGE_ERROR,
        Verdict.PRIMARY_UNJUDGED,
    )  # fmt: skip
    reads_prompt = True
    order_hint: ClassVar[str] = 'judge: "when": "rule_miss", or a weight below the rule\'s'

    judge: str = Field(..., pattern=MODEL_NAME, description="The judge's name on this server (VERIFIER_JUDGES).")
    gold: str = Field(..., min_length=1, max_length=100_000, description="The reference answer.")
    preset: Literal["compass", "general_verifier", "equivalence", "custom"] = Field(
        "compass", description="The prompt and the label format (custom: prompt_template and the labels below)."
    )
    prompt_template: str | None = Field(
        None,
        min_length=1,
        max_length=50_000,
        description="Replaces the preset's prompt; {question}, {gold} and {answer} are filled in ({answer} required). "
        "The preset still reads the reply.",
    )
    correct_label: str | None = Field(None, min_length=1, max_length=64, description="custom: the correct label.")
    incorrect_label: str | None = Field(None, min_length=1, max_length=64, description="custom: the incorrect label.")
    invalid_label: str | None = Field(None, min_length=1, max_length=64, description="custom: an invalid label.")
    input: Literal["answer", "full"] = Field(
        "answer",
        description="answer: the final answer as math and answer extract it; full: the completion, keeping its end "
        "within the judge's context_chars.",
    )
    swap: StrictBool = Field(
        False,
        description="Ask again with the reference and the answer swapped when the first says correct (NeMo-Gym's "
        "check_twice_swap); correct only if both say so, judge_disagree otherwise.",
    )
    on_disagree: Literal["zero", "null"] = Field("zero", description="What judge_disagree scores: 0, or null.")
    when: Literal["always", "rule_miss"] = Field(
        "always",
        description="always: every answer is judged; rule_miss: only those the rule (correct_from) did not call "
        "right (from correct_threshold), the others score 1 without asking; one the rule could not judge is null "
        "(primary_unjudged).",
    )

    def reads_correctness(self) -> bool:
        return self.when == "rule_miss"

    def answer_ranges(self) -> AnswerRanges:
        return ((1.0, 1.0), (0.0, 1.0)) if self.when == "rule_miss" else ((0.0, 1.0), (0.0, 1.0))

    def settled_by_gate(self, correctness: ComponentResult) -> ComponentResult | None:
        """With when rule_miss, the result of an answer the judge is not asked about: 1 (correct, decided by the
        rule) for one the rule calls right, null for one it could not judge; None when the judge is to be asked."""
        if self.when != "rule_miss":
            return None
        if correctness.score is None:
            detail = f"Whether the answer is right is unknown: its component gave {correctness.verdict}."
            return ComponentResult(score=None, verdict=Verdict.PRIMARY_UNJUDGED.value, detail=detail)
        if correctness.score >= self.correct_threshold:
            detail = f"decided by the rule ({correctness.verdict}); the judge was not asked"
            return ComponentResult(score=1.0, verdict=Verdict.CORRECT.value, detail=detail)
        return None

    @model_validator(mode="after")
    def _check_options(self) -> JudgeSpec:
        if self.when == "always" and (self.correct_from is not None or self.correct_threshold != 1.0):
            raise ValueError('correct_from and correct_threshold apply only with when "rule_miss"')
        labels = [label for label in (self.correct_label, self.incorrect_label, self.invalid_label) if label]
        if self.preset == "custom":
            if self.prompt_template is None or self.correct_label is None or self.incorrect_label is None:
                raise ValueError("preset custom needs prompt_template, correct_label and incorrect_label")
            if len(set(labels)) != len(labels):
                raise ValueError("correct_label, incorrect_label and invalid_label must differ")
        elif labels:
            raise ValueError("correct_label, incorrect_label and invalid_label apply only to preset custom")
        if self.prompt_template is not None and "{answer}" not in self.prompt_template:
            raise ValueError("prompt_template must hold {answer}")
        return self


class InstructionsSpec(ComponentSpec):
    """IFEval-style verifiable instructions: Google IFEval's 25 checks under their ids and kwargs, and IFEvalG's
    training-only ones, graded on the answer after the reasoning. `loose` counts an instruction followed when IFEval's
    loose variants of the answer (first or last line removed, '*' removed) pass it. Language checks are deterministic,
    and text whose language cannot be decided does not follow them. An unknown id, or kwargs a check cannot use:
    null."""

    role = "primary"
    verdicts = (Verdict.FOLLOWED, Verdict.NOT_FOLLOWED, Verdict.UNKNOWN_INSTRUCTION, Verdict.BAD_KWARGS)
    null_verdicts = (Verdict.UNKNOWN_INSTRUCTION, Verdict.BAD_KWARGS)

    instruction_ids: tuple[Annotated[str, Field(max_length=100)], ...] = Field(
        ...,
        min_length=1,
        max_length=MAX_INSTRUCTIONS,
        description='The instructions to check, by IFEval id (e.g. "punctuation:no_comma"); GET /v1/components '
        "lists no ids: README lists them.",
    )
    kwargs: tuple[dict[str, _KwargValue] | None, ...] | None = Field(
        None,
        description="Each instruction's kwargs, in the order of instruction_ids (null: none); a null value is the same "
        "as an absent key. Default: none for all.",
    )
    grading: Literal["all", "fraction"] = Field(
        "all", description="all: 1 when every instruction is followed, else 0; fraction: the share followed."
    )
    mode: Literal["strict", "loose"] = Field(
        "strict", description="strict: the answer as it is; loose: IFEval's loose variants (any one passing counts)."
    )
    think_tag: str = _think_tag()

    def partial_credit(self) -> bool:
        return self.grading == "fraction"

    @model_validator(mode="after")
    def _parallel_kwargs(self) -> InstructionsSpec:
        if self.kwargs is not None and len(self.kwargs) != len(self.instruction_ids):
            raise ValueError("kwargs must have one entry (an object or null) per instruction id")
        if self.kwargs is not None and any(len(one or {}) > 32 for one in self.kwargs):
            raise ValueError("kwargs may have at most 32 keys per instruction")
        return self


Weight = Annotated[StrictFloat, Field(ge=-WEIGHT_LIMIT, le=WEIGHT_LIMIT, allow_inf_nan=False)]


def _publish_item_rules(schema: dict[str, Any]) -> None:
    """The rule of `_check_components` that a JSON schema can say plainly, in the published one: at least one
    component. The others (a weight only for a requested component, the order guard) are said in the descriptions
    and checked by the server: as `if`/`then` rules they stopped generators of test requests (schemathesis) from
    making any."""
    schema["anyOf"] = [{"required": [name], "properties": {name: {"type": "object"}}} for name in COMPONENTS]


class ScoreItem(_Strict):
    """One completion to score, with at least one component. Each component is a field named after it, holding its
    options; the item's reward is the weighted sum of their scores."""

    model_config = ConfigDict(json_schema_extra=_publish_item_rules)

    completion: str = Field(
        ...,
        description="The model's output: text, or a chat completion (its last assistant message is graded, with its "
        "reasoning_content in think tags).",
    )
    id: str | None = Field(None, max_length=256, description="Echoed back in the result.")
    prompt: str | None = Field(None, description="Not scored; kept for logs. Text, or a chat prompt.")
    completion_tokens: JsonIntOrNone = Field(
        None, ge=0, le=100_000_000, description="The completion's length in tokens (for overlong and length)."
    )
    truncated: StrictBool | None = Field(
        None, description="The completion was cut off at the generation cap (it ends in neither EOS nor padding)."
    )
    completion_ids: list[TokenId] | None = Field(
        None,
        max_length=MAX_COMPLETION_IDS,
        description="The completion's token ids as the policy generated them (TRL's completion_ids), for prm: each "
        "step then gets its token indices, where the ids decode to the completion with the model's policy_tokenizer.",
    )
    math: MathSpec | None = None
    code: CodeSpec | None = None
    choice: ChoiceSpec | None = None
    answer: AnswerSpec | None = None
    json_schema: JsonSchemaSpec | None = None
    sql: SqlSpec | None = None
    instructions: InstructionsSpec | None = None
    procedural: ProceduralSpec | None = None
    format: FormatOptions | None = None
    overlong: OverlongSpec | None = None
    length: LengthSpec | None = None
    repetition: RepetitionSpec | None = None
    language: LanguageSpec | None = None
    steps: StepsSpec | None = None
    rm: RmSpec | None = None
    prm: PrmSpec | None = None
    judge: JudgeSpec | None = None
    weights: dict[ComponentName, Weight] | None = Field(
        None,
        description=f"Component name -> weight in the reward (default 1.0 each); finite, |weight| <= {WEIGHT_LIMIT:g}, "
        "and only for components the item requests.",
    )
    allow_order_inversion: StrictBool = Field(
        False,
        description="Send an item whose weights and options let a wrong answer score at least as much as a right one "
        "(refused with 422 otherwise).",
    )

    @field_validator("completion", mode="before", json_schema_input_type=_ChatInput)
    @classmethod
    def _completion_text(cls, completion: Any) -> Any:
        return completion_text(completion) if _listed(completion) else completion

    @field_validator("prompt", mode="before", json_schema_input_type=_ChatInput | None)
    @classmethod
    def _prompt_text(cls, prompt: Any) -> Any:
        return prompt_text(prompt) if _listed(prompt) else prompt

    @model_validator(mode="after")
    def _check_components(self) -> ScoreItem:
        fields = self.__dict__  # the field values (a plain lookup: this runs for every item of every request)
        weights = fields["weights"]
        guarded = [(name, spec) for name in GUARDED_COMPONENTS if (spec := fields[name]) is not None]
        if not weights and not guarded:  # every primary scores 1 right and 0 wrong: no more to check
            if not any(fields[name] is not None for name in COMPONENTS):
                raise ValueError(_NO_COMPONENT)
            return self
        # The rest depends only on which components, their weights and the guarded components' options (all of
        # them: the guard reads transform, gate, correct_from, correct_threshold, a length's ends), which the items of
        # a batch mostly share: each combination is checked once.
        requested = tuple(name for name in COMPONENTS if fields[name] is not None)
        # Whether a correctness component gives partial credit follows from which it is and its options.
        key = (
            requested,
            tuple(weights.items()) if weights else None,
            self.allow_order_inversion,
            tuple(fields[name].partial_credit() for name in requested if name in PRIMARIES),
            *((name, *spec.__dict__.values()) for name, spec in guarded),
        )
        try:
            found = _CHECKED.get(key, _UNCHECKED)
        except TypeError:  # an option that cannot be hashed (none today): checked every time
            found = self._problem(list(requested), guarded)
        if found is _UNCHECKED:
            found = _CHECKED[key] = self._problem(list(requested), guarded)
            if len(_CHECKED) > _CHECKED_SIZE:
                _CHECKED.clear()
        if found is not None:
            raise ValueError(found)
        return self

    def _problem(self, requested: list[str], guarded: list[tuple[str, ComponentSpec]]) -> str | None:
        """What is wrong with this item's choice of components, weights and options (never naming a value it was
        sent), or None."""
        if not requested:
            return _NO_COMPONENT
        unrequested = [name for name in COMPONENTS if name in (self.weights or {}) and name not in requested]
        if unrequested:  # names from COMPONENTS only: the message never echoes input
            return f"weights name components this item does not request: {', '.join(unrequested)}"
        primaries = [name for name in requested if name in PRIMARIES]
        for name, spec in _readers(guarded):
            if spec.correct_from is None and len(primaries) != 1:
                needed = "one of" if not primaries else "correct_from to name one of"
                return f"{name} reads correctness from another component: the item needs {needed} " \
                       f"{', '.join(get_args(PrimaryName))}"  # fmt: skip
            if spec.correct_from is not None and spec.correct_from not in primaries:
                return f"{name}.correct_from names a component this item does not request"
        if not self.allow_order_inversion:
            failing = self._failing_groups(primaries, guarded)
            if failing:
                in_them = {name for group in failing for name in group}
                hints = [hint for name, spec in guarded if name in in_them and (hint := _order_hint(spec))]
                return (
                    f"with these weights and options a wrong answer scores at least as much as a right one ("
                    f"{'; '.join(' with '.join(group) for group in failing)}): make the correctness component's "
                    f"weight outweigh the rest{''.join(f'; {hint}' for hint in hints)}; or set "
                    "allow_order_inversion: true"
                )
        return None

    def _guarded(self) -> list[tuple[str, ComponentSpec]]:
        return [(name, spec) for name in GUARDED_COMPONENTS if (spec := getattr(self, name)) is not None]

    def spec(self, name: str) -> ComponentSpec | None:
        """The options of component `name`, None when the item does not request it."""
        spec: ComponentSpec | None = getattr(self, name)
        return spec

    def requested(self) -> list[str]:
        """The components this item asks for, in a fixed order."""
        fields = self.__dict__  # where pydantic keeps the field values: a plain lookup, 3x faster than getattr
        return [name for name in COMPONENTS if fields[name] is not None]

    def correctness_source(self, spec: CorrectnessGate) -> str:
        """The component a gated one reads correctness from (the item has been checked to have it)."""
        if spec.correct_from is not None:
            return spec.correct_from
        return next(name for name in self.requested() if name in PRIMARIES)

    def order_inversions(self) -> list[str]:
        """For each correctness component, whether a right answer (score 1) always outscores a wrong one (score 0),
        at any length: the components whose score can differ between a right and a wrong answer (it, those gated on
        it, a model's score: `answer_ranges()`) are compared at their worst; the others (format, overlong,
        repetition) score a right and a wrong answer alike. Returns the names of each group that fails."""
        primaries = [name for name in self.requested() if name in PRIMARIES]
        return [" with ".join(group) for group in self._failing_groups(primaries, self._guarded())]

    def _failing_groups(self, primaries: list[str], guarded: list[tuple[str, ComponentSpec]]) -> list[list[str]]:
        weights: dict[str, float] = {name: weight for name, weight in (self.weights or {}).items()}
        failing = []
        for primary in primaries:
            # a gated component counts for the primary it reads; a model's ungated score, for every primary
            on_it = [(name, spec) for name, spec in guarded if _source(spec, primaries) in (primary, None)]
            shaping = [(spec, weights.get(name, 1.0)) for name, spec in on_it]
            partial = getattr(self, primary).partial_credit()
            if not right_outscores_wrong(weights.get(primary, 1.0), partial, shaping):
                failing.append([primary, *(name for name, _ in on_it)])
        return failing


def _readers(guarded: list[tuple[str, ComponentSpec]]) -> list[tuple[str, CorrectnessGate]]:
    """The components that read correctness (length; rm and prm with gate right)."""
    return [(name, spec) for name, spec in guarded if isinstance(spec, CorrectnessGate) and spec.reads_correctness()]


def _source(spec: ComponentSpec, primaries: list[str]) -> str | None:
    """The primary a guarded component reads correctness from; None for one that reads none."""
    if isinstance(spec, CorrectnessGate) and spec.reads_correctness():
        return spec.correct_from or primaries[0]
    return None


def _threshold(spec: ComponentSpec) -> float:
    """The correctness score from which an answer takes the right branch of the component's answer_ranges (both
    branches are one for a component that reads no correctness)."""
    return spec.correct_threshold if isinstance(spec, CorrectnessGate) and spec.reads_correctness() else 1.0


def _order_hint(spec: ComponentSpec) -> str | None:
    hint: str | None = getattr(type(spec), "order_hint", None)
    return hint


def right_outscores_wrong(weight: float, partial: bool, shaping: Sequence[tuple[ComponentSpec, float]]) -> bool:
    """Whether a right answer (its correctness component's score 1, at `weight`) outscores every wrong one, each at
    its worst for it: the wrong answer scores 0, or anything below 1 when the component gives `partial` credit. Each
    shaping component (with its weight) is compared by its `answer_ranges()`: a gated one takes the branch that the
    answer's score puts it on, right from its correct_threshold up (so a threshold of 0 scores a wrong answer as a
    right one, and one below 1 does so for a partly right answer); a model's ungated score spans the same range on
    both. An unbounded score (a raw logit) with a nonzero weight can always lift a wrong answer.

    >>> sigmoid_rm = RmSpec(model="m", transform="sigmoid")
    >>> right_outscores_wrong(1.0, False, [(sigmoid_rm, 0.5)]), right_outscores_wrong(1.0, False, [(sigmoid_rm, 1.0)])
    (True, False)
    >>> right_outscores_wrong(1.0, True, [(sigmoid_rm, 0.5)])  # partial credit: a wrong answer's rule score nears 1
    False
    >>> right_outscores_wrong(1.0, True, [(RmSpec(model="m", transform="sigmoid", gate="right"), 100.0)])
    True
    """

    def bounds(spec: ComponentSpec, right: bool) -> tuple[float, float]:
        ranges = spec.answer_ranges()
        assert ranges is not None  # only guarded components are passed
        return ranges[0 if right else 1]

    def worst(spec: ComponentSpec, w: float) -> float:  # for the right answer: score 1 is on the right branch
        low, high = bounds(spec, True)
        return w * (low if w >= 0 else high) if w else 0.0  # 0 * inf is nan: a weight of 0 counts nothing

    def best(spec: ComponentSpec, w: float, score: float) -> float:  # for a wrong answer of this score
        low, high = bounds(spec, score >= _threshold(spec))
        return w * (high if w >= 0 else low) if w else 0.0

    right = weight + sum(worst(spec, w) for spec, w in shaping)
    if not partial:
        return right > sum(best(spec, w, 0.0) for spec, w in shaping)
    # Wrong scores fill [0, 1); thresholds cut it into pieces on which every gated component keeps its branch. On a
    # piece [start, end) the wrong answer's best is weight * score + the shaping parts: with a positive weight it
    # nears weight * end without reaching it, otherwise it is highest at start.
    cuts = sorted({0.0, *(t for spec, _ in shaping if 0 < (t := _threshold(spec)) < 1)})
    for start, end in zip(cuts, [*cuts[1:], 1.0], strict=True):
        shaped = sum(best(spec, w, start) for spec, w in shaping)
        if (right < weight * end + shaped) if weight > 0 else (right <= weight * start + shaped):
            return False
    return True


def _spec_classes() -> dict[str, type[ComponentSpec]]:
    specs = {}
    for name in COMPONENTS:
        (spec,) = (arg for arg in get_args(ScoreItem.model_fields[name].annotation) if arg is not type(None))
        specs[name] = spec
    return specs


SPECS: dict[str, type[ComponentSpec]] = _spec_classes()  # component name -> its spec class
PRIMARIES: tuple[str, ...] = get_args(PrimaryName)
# The components the order guard compares at their worst: those whose score can differ between a right and a wrong
# answer beyond the correctness component's (length, rm, prm: their spec has `answer_ranges`).
GUARDED_COMPONENTS = tuple(
    name for name, spec in SPECS.items() if spec.answer_ranges is not ComponentSpec.answer_ranges
)
PROMPT_READERS = tuple(name for name, spec in SPECS.items() if spec.reads_prompt)  # judge the prompt too
_NO_COMPONENT = f"each item needs at least one of {', '.join(COMPONENTS)}"
# ScoreItem._check_components's verdict on each combination of components, weights and gated options seen lately.
_CHECKED: dict[tuple[Any, ...], str | None] = {}
_CHECKED_SIZE = 4096
_UNCHECKED = object()
# Which verdicts each component gives (the OpenAPI document lists them per component). A newer server may add
# verdicts: clients should treat one they do not know as "other", never fail on it.
# Any component can also fail (null) as `internal_error`, a bug in the verifier, or `deadline_exceeded`, when the
# batch ran out of time before the component was scored.
ANY_COMPONENT_FAILS = (Verdict.INTERNAL_ERROR, Verdict.DEADLINE_EXCEEDED)
VERDICTS: dict[str, tuple[Verdict, ...]] = {
    name: tuple(dict.fromkeys((*spec.verdicts, *ANY_COMPONENT_FAILS))) for name, spec in SPECS.items()
}


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


class StepScore(BaseModel):
    """One checked step of a completion: its character span and its score."""

    model_config = ConfigDict(frozen=True)

    start: int = Field(..., description="The step's first character in the completion (0-based).")
    end: int = Field(..., description="One past its last character.")
    score: float | None = Field(..., description="The step's score; null where it could not be judged.")
    token_start: int | None = Field(
        None,
        exclude_if=_unused,
        description="prm, when the item carries completion_ids: the first of the ids that produce the step (an index "
        "into them; the token holding its first character, which may start before it).",
    )
    token_end: int | None = Field(
        None,
        exclude_if=_unused,
        description="One past the last of them (the token holding its last character, which may end after it).",
    )


class ComponentResult(BaseModel):
    """One component's outcome. Fields a component does not use are left out of the JSON. Frozen: the verifier shares
    one result among the items that earned it."""

    model_config = ConfigDict(frozen=True)

    score: float | None = Field(..., description="null: the verifier could not judge (see `verdict`)")
    verdict: str = Field(..., json_schema_extra=_enum(_ANY_VERDICT, _NEW_VERDICTS))
    detail: str | None = Field(
        None,
        description="One short sentence: what was wrong, or how a measured score was reached (overlong and length "
        "name the length, repetition the share of repeated n-grams); null when there is nothing to add.",
    )
    extracted: str | None = Field(
        None, exclude_if=_unused, description="math: the answer as extracted from the completion"
    )
    passed: int | None = Field(None, exclude_if=_unused, description="code: tests passed")
    total: int | None = Field(None, exclude_if=_unused, description="code: tests run")
    tests: list[TestVerdict] | None = Field(None, exclude_if=_unused, description="code: one verdict per test")
    steps: tuple[StepScore, ...] | None = Field(
        None,
        exclude_if=_unused,
        description="steps: each checked claim's character span in the completion and score; prm: each step's",
    )
    model_version: str | None = Field(
        None, exclude_if=_unused, description="rm, prm: the version of the model that gave the score (GET /v1/models)"
    )


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


class ModelInfo(BaseModel):
    """A model this server serves (VERIFIER_MODELS)."""

    name: str = Field(..., description="What `rm` and `prm` items name it by (`model`).")
    kind: Literal["rm", "prm", "prm_lm"] = Field(
        ...,
        description="rm: sequence classification; prm: process reward model (token classification); prm_lm: "
        "process reward model (causal LM).",
    )
    path: str = Field(
        ..., description="The checkpoint it was loaded from: a directory, or a hub id (for an engine's: its tokenizer)."
    )
    version: str | None = Field(
        ...,
        description="The loaded checkpoint's version (results echo it); for a model an engine serves, "
        "BACKEND:SERVED_MODEL; null: not loaded.",
    )
    backend: Literal["local", "vllm", "sglang"] = Field(
        "local", description="local: run by this service; vllm, sglang: served by that engine at `url`."
    )
    device: str = Field(..., description="Where it runs: cpu, cuda or cuda:N; remote: on the engine at `url`.")
    url: str | None = Field(None, description="The engine's URL, without credentials; null for a local model.")
    reachable: bool | None = Field(
        None,
        description="Whether the engine answered its last request or probe (GET /health, 2xx only: an engine still "
        "loading answers 503); re-probed in the background when shown and older than a few seconds; null for a "
        "local model.",
    )
    api_key: bool = Field(
        False, description="Whether a key is sent to the engine (api_key_env, read from the environment; never shown)."
    )
    loaded: bool = Field(..., description="Whether it is loaded and serving (for an engine's: its tokenizer).")
    reloading: bool = Field(False, description="Whether a reload of it is under way (the loaded version serves).")


class JudgeInfo(BaseModel):
    """A generative judge this server can ask (VERIFIER_JUDGES); its key is never shown, only whether it has one."""

    name: str = Field(..., description="What `judge` items name it by (`judge`).")
    base_url: str = Field(..., description="Its OpenAI-compatible endpoint, without credentials.")
    model: str
    reachable: bool | None = Field(
        ...,
        description="Whether it answered last (GET /models or a call): an answer of 401 or 403 (the key or the "
        "credentials refused) or a 5xx is not; null: not yet.",
    )
    why: str | None = Field(None, description="Why it is not reachable (no secret), when it is not.")
    api_key: bool = Field(..., description="Whether a key is sent (read from the environment).")
    max_concurrency: int
    timeout_s: float
    max_tokens: int
    context_chars: int


class JudgesResponse(BaseModel):
    judges: list[JudgeInfo]


class ModelsResponse(BaseModel):
    models: list[ModelInfo] = Field(..., description="Every model this server serves; empty when it serves none.")


# --- Online update: POST /v1/models/{name}/reload and /eval --------------------------------------------------------


class ReloadRequest(_Strict):
    """Which checkpoint to load in place of the one serving."""

    path: str | None = Field(
        None,
        min_length=1,
        max_length=1000,
        description="A checkpoint directory on the server, under one of VERIFIER_MODEL_ROOTS (as save_pretrained "
        "writes it, the tokenizer beside it). Default: the model's configured path (VERIFIER_MODELS), read again.",
    )


class ReloadResponse(ModelInfo):
    previous_version: str = Field(..., description="The version that served before this reload.")


RuleOutcome = Annotated[StrictFloat, Field(ge=0, le=1, allow_inf_nan=False)]


class EvalGroup(_Strict):
    """Completions of one prompt, each with its rule outcome (the reward the rules gave it, in [0, 1])."""

    prompt: str | None = Field(None, max_length=1_000_000, description="The prompt the model sees before each.")
    completions: list[str] = Field(..., min_length=1, max_length=4096)
    outcomes: list[RuleOutcome] = Field(..., min_length=1, max_length=4096, description="One per completion, in order.")

    @model_validator(mode="after")
    def _one_outcome_each(self) -> EvalGroup:
        if len(self.outcomes) != len(self.completions):
            raise ValueError("outcomes must have one value per completion")
        return self


class EvalRequest(_Strict):
    """Groups of completions with their rule outcomes, to score with the model and compare. An rm model scores each
    completion as the rm component does (`template`); a process reward model (kind prm or prm_lm) as the prm
    component does (`layout`, `separator`, `aggregate` and the step_tag fields, with its defaults): the completion's
    score is the aggregate of its steps' scores, and a completion with no steps is unscored."""

    groups: list[EvalGroup] = Field(..., min_length=1, max_length=4096)
    template: Literal["raw", "chat"] = Field("raw", description="rm: the layout the model sees, as rm's `template`.")
    layout: Literal["trl", "qwen_prm", "step_tag"] = Field(
        "trl", description="prm, prm_lm: the steps' layout, as prm's `layout` (step_tag for kind prm_lm)."
    )
    separator: ShortText = Field("\n", description="prm, prm_lm: what the completion's steps are split at.")
    aggregate: Literal["min", "last", "mean", "prod"] = Field(
        "min", description="prm, prm_lm: how the step scores make the completion's score, as prm's `aggregate`."
    )
    step_tag: ShortText = Field("\u043a\u0438", description="step_tag: the tag after each step, as prm's.")
    good_token: ShortText = Field("+", description="step_tag: the token whose probability is a step's score.")
    bad_token: ShortText = Field("-", description="step_tag: the token it is weighed against.")
    correct_threshold: StrictFloat = Field(
        0.5, ge=0, le=1, description="The outcome from which a completion counts as right (for pairs and AUROC)."
    )


class ScoreSummary(BaseModel):
    mean: float
    std: float = Field(..., description="The scores' standard deviation (divided by n).")
    p5: float
    p25: float
    p50: float
    p75: float
    p95: float


class EvalCounts(BaseModel):
    groups: int
    items: int = Field(..., description="Completions sent.")
    scored: int = Field(..., description="Completions the model scored; the metrics are over these.")
    unscored: int = Field(
        ...,
        description="Completions it could not score (its template or forward failed, the deadline passed; for a "
        "process reward model also no steps, steps that cannot be laid out, a layout over max_tokens); an rm input "
        "over max_tokens keeps its end and is scored.",
    )
    pairs: int = Field(..., description="(right, wrong) pairs within groups, among the scored.")


class EvalDrift(BaseModel):
    """The same completions as scored by the version that served before the last reload, in that version's last
    eval."""

    previous_version: str
    items: int = Field(..., description="Completions both versions scored (matched by prompt, completion, template).")
    mean_abs_diff: float | None = Field(..., description="Mean |score now - score then|; null for no common items.")
    spearman: float | None = Field(..., description="Rank correlation of the two; null under two items or constant.")


class EvalResponse(BaseModel):
    model: str
    model_version: str = Field(..., description="The version that scored every completion of this eval.")
    counts: EvalCounts
    ranking_accuracy: float | None = Field(
        ...,
        description="Share of (right, wrong) pairs within a group where the right one scores higher, ties half; "
        "null without pairs.",
    )
    auroc: float | None = Field(
        ...,
        description="AUROC of the score against right/wrong over all items (ties at midranks); null unless both occur.",
    )
    calibration_error: float | None = Field(
        ...,
        description="ECE against the outcome, 10 equal-width bins, of sigmoid(score) for an rm model and of the score "
        "itself (a probability) for a process reward model; null when nothing scored.",
    )
    scores: ScoreSummary | None = Field(
        ...,
        description="Of the scores: the raw logits (rm), the steps' aggregates (prm, prm_lm); null when nothing "
        "scored.",
    )
    drift: EvalDrift | None = Field(
        ..., description="Against the version before the last reload; null when no reload changed the version."
    )


class ErrorDetail(BaseModel):
    loc: str = Field(..., description="Where in the request, e.g. items.3.math.gold; never the submitted value.")
    msg: str = Field(..., description="What is wrong and what is allowed.")
    type: str | None = Field(None, description="pydantic's error type, e.g. missing, greater_than, extra_forbidden")


class ErrorResponse(BaseModel):
    """An error: 401, 413, 422 (with `errors`), 500 (with a request id for the logs). Never echoes input."""

    detail: str = Field(..., description="A readable message.")
    errors: list[ErrorDetail] | None = Field(None, description="422: each problem found (at most 20).")


MAX_NAME_CHARS = 40  # of an unknown name, said back


def closest_name(name: object, allowed: Sequence[str]) -> str | None:
    """The allowed name closest to one the schema does not know, if any is close: the one rule by which the service's
    errors and the client's suggest a name.

    >>> closest_name("maths", ["completion", "math", "code"]), closest_name("zzz", ["math", "code"])
    ('math', None)
    """
    text = str(name)
    close = difflib.get_close_matches(text, list(allowed), n=1, cutoff=0.6) if len(text) <= MAX_NAME_CHARS else []
    return close[0] if close else None


def unknown_name(what: str, name: object, allowed: Sequence[str], at: str = "") -> str:
    """What to say of a name the schema does not know (a field, an option, a key), `at` a place when given: the name,
    shortened and printable (it is the client's spelling of the schema, not its data), and the closest allowed one,
    else them all.

    >>> unknown_name("field", "maths", ["completion", "math", "code"])
    "unknown field 'maths'; did you mean 'math'?"
    >>> unknown_name("option", "bufer_tokens", ["max_tokens", "buffer_tokens"], at="overlong")
    "unknown option 'bufer_tokens' for overlong; did you mean 'buffer_tokens'?"
    >>> unknown_name("key", "k" * 50 + "\\n", ["math", "code"])
    "unknown key 'kkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkk...'; allowed: math, code"
    """
    text = str(name)
    shown = "".join(char if char.isprintable() and char != "\\" else "?" for char in text[:MAX_NAME_CHARS])
    shown += "..." if len(text) > MAX_NAME_CHARS else ""
    close = closest_name(text, allowed)
    hint = f"did you mean {close!r}?" if close else f"allowed: {', '.join(allowed)}"
    return f"unknown {what} {shown!r}{f' for {at}' if at else ''}; {hint}"
