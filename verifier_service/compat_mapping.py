"""The trainers' own reward requests as score items, and their results as the answers those trainers read: OpenRLHF's
`--reward.remote_url`, slime's `--rm-type remote_rm`, NeMo-Gym's resources-server `/verify`
(docs/trainers.md). No HTTP here: `compat.py` reads the request, calls these, scores with the engine and
answers.

What a trainer sends as its label picks the components: a string (or a number) is the gold answer of the
components named by the URL's `components` (default math); an object, or a JSON string of one, is the item's
component specs (`{"math": {"gold": "72"}, "format": {}}`). Instruction-following ground truths in the datasets'
own shapes are `instructions` specs (`domain_labels`): a label that is open-instruct's ground-truth string
(`[{'instruction_id': [...], 'kwargs': [...]}]`), and a NeMo-Gym `/verify` body with `verifier_metadata` (or
`instruction_id_list` at its top level) and no `verifier`. Extra keys are fixed per URL, whatever the label asks
for, because the trainers build their metric columns from the first sample's keys.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar, cast

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from verifier_service.domain_labels import (
    LabelError,
    is_open_instruct_label,
    nemo_gym_instructions,
    open_instruct_instructions,
    structured_outputs_spec,
)
from verifier_service.problems import MAX_ERRORS, describe
from verifier_service.schema import COMPONENTS, PRIMARIES, SPECS, WEIGHT_LIMIT, GatedSpec, ItemResult, ScoreItem

# End-of-turn, end-of-text and padding tokens of the common chat templates (Qwen, Llama 2/3, Mistral, Phi-3, Gemma,
# DeepSeek, gpt-oss): what OpenRLHF's decoded queries end in. Both ways OpenRLHF calls the verifier strip them: the
# route (the default of VERIFIER_COMPAT_SPECIAL_TOKENS) and the reward-function file
# (trainer_client/integrations/openrlhf_reward_func.py). DeepSeek's is spelt with full-width bars.
SPECIAL_TOKENS = (
    "<|im_end|>", "<|endoftext|>", "</s>", "<|eot_id|>", "<|end_of_text|>", "<|eom_id|>", "<|end|>", "<end_of_turn>",
    "<eos>", "<｜end▁of▁sentence｜>", "<|end▁of▁sentence|>", "<|return|>", "<pad>",
    "<|pad|>",
)  # fmt: skip
PROMPT_TAIL = 200  # characters of a prompt that identify it in a query whose prompt was truncated on the left
QUERY_WITHOUT_PROMPT = (
    "does not hold its prompt (OpenRLHF decodes the prompt and the response together), so its response cannot be "
    "told apart from it"
)
# From the schema, so that a new component falls in its place: a gold label is the `gold` of the correctness
# components that have one (math, choice, answer); a URL may name the others that need no options (format,
# repetition), but not a gated one, nor one with required fields (their specs come as the label).
GOLD_COMPONENTS = tuple(name for name in PRIMARIES if "gold" in SPECS[name].model_fields)
PLAIN_COMPONENTS = tuple(
    name
    for name, spec in SPECS.items()
    if name not in PRIMARIES
    and not issubclass(spec, GatedSpec)
    and not any(field.is_required() for field in spec.model_fields.values())
)
JUDGED = "verifier_judged"  # 1.0, or 0.0 when the reward is a fallback (or NeMo's masked 0.0)
STRIP_WINDOW = 4096  # special tokens are stripped from this many final characters at most
SPEC_OR_GOLD = "a gold answer (a string or a number), or component specs (an object, or a JSON string of one)"
_SEPARATORS = re.compile(r"[\s,+]+")  # OpenRLHF splits its URL list on commas: "+" (a space, or %2B) separates too
M = TypeVar("M", bound=BaseModel)


class Invalid(Exception):
    """A request that does not say what to score: 422, each problem's location and what is allowed, never a value."""

    def __init__(self, errors: list[dict[str, Any]], found: int | None = None) -> None:
        super().__init__(errors)
        self.errors = errors[:MAX_ERRORS]
        self.found = len(errors) if found is None else found


def invalid(loc: str, msg: str) -> Invalid:
    return Invalid([{"loc": loc, "msg": msg, "type": "value_error"}])


def parse_body(model: type[M], raw: bytes) -> M:
    try:
        return model.model_validate_json(raw)
    except ValidationError as exc:
        errors = exc.errors(include_input=False, include_url=False)
        raise Invalid(describe(errors, root=model), len(errors)) from None


# The trainers' request bodies. Fields the trainers add beyond these are ignored; so are those of the dataset row
# that NeMo-Gym sends along (and echoes back).


class _Lenient(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)


class OpenRLHFRequest(_Lenient):
    """OpenRLHF's `--reward.remote_url` request: one query per sample (the decoded prompt and response, special tokens
    and all), its prompt and its label."""

    query: list[str] = Field(..., min_length=1, description="Prompt plus response, decoded with special tokens.")
    prompts: list[str] | None = Field(None, description="One per query: the prompt the query starts with.")
    labels: list[Any] | None = Field(None, description=f"One per query: {SPEC_OR_GOLD}.")


class SlimeRequest(_Lenient):
    """slime's `--rm-type remote_rm` request."""

    prompt: Any = Field(None, description="A string or a chat list; not scored.")
    response: str = Field(..., description="The response, as decoded by slime.")
    label: Any = Field(None, description=f"{SPEC_OR_GOLD[0].upper()}{SPEC_OR_GOLD[1:]}.")


class NeMoGymVerifyRequest(BaseModel):
    """NeMo-Gym's `/verify` body: the dataset row (its fields are echoed back), the Responses create parameters and
    the Responses object whose message text is scored."""

    model_config = ConfigDict(extra="allow", frozen=True)

    responses_create_params: dict[str, Any]
    response: dict[str, Any] = Field(..., description="An OpenAI Responses object; its message output text is scored.")
    verifier: Any = Field(None, description="Component specs (an object, or a JSON string of one); wins over the gold.")
    expected_answer: Any = Field(None, description="The gold answer (a string or a number).")
    schema_str: Any = Field(
        None,
        description="A structured_outputs row's JSON Schema, as a JSON string: scored by json_schema with strict "
        "(NeMo-Gym's reading) when there is no verifier spec; only its schema_type json.",
    )


@dataclass(frozen=True)
class CompatConfig:
    """A route's options, from its URL: the components a gold label is scored with (also the extra keys logged) and
    their weights, and the reward given where the verifier cannot judge (None: fail, or mask for NeMo)."""

    components: tuple[str, ...] = ("math",)
    weights: dict[str, float] | None = None
    on_unjudged: float | None = None

    @property
    def extra_keys(self) -> tuple[str, ...]:
        return (JUDGED, *(f"verifier_{name}" for name in self.components))


def parse_config(
    components: Sequence[str] | None, weights: Sequence[str] | None, on_unjudged: str | None
) -> CompatConfig:
    """The URL's options, each repeatable and separated by commas, spaces or `+`.

    >>> parse_config(["math+format"], ["format:0.5"], None)
    CompatConfig(components=('math', 'format'), weights={'format': 0.5}, on_unjudged=None)
    """
    names = tuple(dict.fromkeys(_split(components))) or ("math",)
    unknown = [name for name in names if name not in COMPONENTS]
    if unknown:
        raise invalid("?components", f"unknown component; allowed: {', '.join(COMPONENTS)}")
    needing = [name for name in names if name not in GOLD_COMPONENTS + PLAIN_COMPONENTS]
    if needing:
        raise invalid(
            "?components",
            f"{', '.join(needing)} need options: send component specs as the label (components from the URL can "
            f"be {', '.join(GOLD_COMPONENTS + PLAIN_COMPONENTS)})",
        )
    return CompatConfig(names, _weights(_split(weights)), _fallback(on_unjudged))


def _split(values: Sequence[str] | None) -> list[str]:
    return [part for value in values or () for part in _SEPARATORS.split(value) if part]


def _weights(parts: list[str]) -> dict[str, float] | None:
    weights = {}
    for part in parts:
        name, _, value = part.partition(":")
        if name not in COMPONENTS:
            raise invalid("?weights", f"each weight is component:number; components: {', '.join(COMPONENTS)}")
        weights[name] = _number(value, "?weights", f"each weight is component:number, at most {WEIGHT_LIMIT:g} in size")
    return weights or None


def _fallback(value: str | None) -> float | None:
    if value is None:
        return None
    return _number(value, "?on_unjudged", "the reward of a sample the verifier cannot judge: a finite number")


def _number(text: str, loc: str, msg: str) -> float:
    try:
        number = float(text)
    except ValueError:
        raise invalid(loc, msg) from None
    if not math.isfinite(number) or abs(number) > WEIGHT_LIMIT:
        raise invalid(loc, msg)
    return number


# What is scored.


def strip_special_tokens(text: str, tokens: Sequence[str]) -> str:
    """The text without the special tokens (and the whitespace between them) at its end.

    >>> strip_special_tokens("\\\\boxed{4}<|im_end|>\\n<|endoftext|>", ["<|im_end|>", "<|endoftext|>"])
    '\\\\boxed{4}'
    """
    head, tail = text[:-STRIP_WINDOW], text[-STRIP_WINDOW:]  # bounded work, whatever the text
    while True:
        trimmed = tail.rstrip()
        token = next((token for token in tokens if trimmed.endswith(token)), None)
        if token is None:
            return head + tail
        tail = trimmed[: -len(token)]


def openrlhf_completion(query: str, prompt: str | None, tokens: Sequence[str], where: str = "query") -> str:
    """The response in an OpenRLHF query: what follows the prompt (`prompt_end`; the whole query when no prompt is
    given), without trailing special tokens. OpenRLHF's query is its prompt and the response decoded together, so
    one that does not hold its prompt has no response to tell apart: `Invalid` at `where`, for the route and the
    reward-function file alike, rather than a reward for the prompt's text (a few-shot answer, a template that fails
    the format).

    >>> prompt = "A" * 500 + "...the end of a long prompt. Answer:"
    >>> openrlhf_completion("...the end of a long prompt. Answer: 5<|endoftext|>", prompt, ["<|endoftext|>"])  # cut
    ' 5'
    """
    end = prompt_end(query, prompt) if prompt else 0
    if end is None:
        raise invalid(where, QUERY_WITHOUT_PROMPT)
    return strip_special_tokens(query[end:], tokens)


def prompt_end(query: str, prompt: str) -> int | None:
    """Where the prompt ends in the query, or None when the query does not hold it. OpenRLHF truncates a prompt that
    is too long on the left (by tokens), so the query may hold only the prompt's end: its last PROMPT_TAIL
    characters, or, when less of it is left, its longest suffix that the query starts with, after the replacement
    characters a cut inside a character decodes to.

    >>> prompt_end("\ufffd界? 42", "你好世界?"), prompt_end("t: 42", "Prompt:")
    (3, 2)
    """
    if query.startswith(prompt):
        return len(prompt)
    tail = prompt[-PROMPT_TAIL:]
    at = query.find(tail) if tail else -1
    if at >= 0:
        return at + len(tail)
    cut = len(query[:3]) - len(query[:3].lstrip("\ufffd"))  # a UTF-8 character's bytes after the first, at most 3
    for start in range(max(0, len(prompt) - PROMPT_TAIL), len(prompt)):  # at most PROMPT_TAIL**2 characters read
        if query.startswith(prompt[start:], cut):
            return cut + len(prompt) - start
    return None


def response_text(response: dict[str, Any]) -> str:
    """The text of a Responses object, as NeMo-Gym's servers read it: its messages' `output_text` parts, joined.
    Reasoning items and tool calls are not part of it."""
    output = response.get("output")
    if not isinstance(output, list):
        raise invalid("response.output", "a list of Responses output items")
    return "".join(
        part["text"]
        for entry in output
        if isinstance(entry, dict) and entry.get("type") == "message" and isinstance(entry.get("content"), list)
        for part in entry["content"]
        if isinstance(part, dict) and part.get("type") == "output_text" and isinstance(part.get("text"), str)
    )


def score_item(completion: str, label: Any, config: CompatConfig, where: str) -> ScoreItem:
    """The item for one completion: the label's specs, or its gold for the URL's components. A problem with the label
    is located at `where`, one with the URL's options at `?weights`."""
    spec = _spec(label, where)
    if spec is not None:
        if "completion" in spec:
            raise invalid(f"{where}.completion", "the completion comes from the trainer's request, not the label")
        return _validated({**spec, "completion": completion}, lambda loc, described: _under(where, described))
    gold = _gold(label, where)
    fields: dict[str, Any] = {"completion": completion}
    for name in config.components:
        if name in GOLD_COMPONENTS and gold is None:
            raise invalid(where, f"{name} needs a gold answer: {SPEC_OR_GOLD}")
        fields[name] = {"gold": gold} if name in GOLD_COMPONENTS else {}
    if config.weights:
        fields["weights"] = config.weights
    return _validated(fields, lambda loc, described: "?weights" if not loc or loc[0] == "weights" else where)


def nemo_gym_label(body: NeMoGymVerifyRequest) -> tuple[Any, str]:
    """What a NeMo-Gym `/verify` body is scored against, and where it is in the body: `verifier` (specs), else the
    row's instruction list (`verifier_metadata`, or `instruction_id_list` at the top level: NeMo-Gym's
    instruction-following rows) as an `instructions` spec, else the schema of a structured_outputs row
    (`schema_str`, its text answers: NeMo-Gym scores tool-call arguments and other formats too, which json_schema
    does not) as a strict `json_schema` spec, else `expected_answer` (a gold)."""
    if body.verifier is not None:
        return body.verifier, "verifier"
    row = body.model_extra or {}
    if isinstance(row.get("verifier_metadata"), dict) or "instruction_id_list" in row:
        where = "verifier_metadata" if isinstance(row.get("verifier_metadata"), dict) else "instruction_id_list"
        try:
            spec = nemo_gym_instructions(row)
        except LabelError as exc:
            raise invalid(where, str(exc)) from None
        if spec is not None:
            return {"instructions": spec}, where
    if body.schema_str is not None:
        return _structured_outputs_label(body.schema_str, row), "schema_str"
    return body.expected_answer, "expected_answer"


def _structured_outputs_label(schema_str: Any, row: dict[str, Any]) -> dict[str, Any]:
    try:
        spec = structured_outputs_spec({**row, "schema_str": schema_str})
    except LabelError as exc:
        raise invalid(exc.field or "schema_str", str(exc)) from None
    return {"json_schema": spec}


def label_specs(label: Any, where: str) -> dict[str, Any] | None:
    """The component specs a label holds (an object, its JSON, or open-instruct's instruction ground truth); None for
    a gold answer. A label in one of these shapes that cannot be read is `Invalid` at `where`.

    >>> label_specs("[{'instruction_id': ['punctuation:no_comma'], 'kwargs': [None]}]", "label")
    {'instructions': {'instruction_ids': ['punctuation:no_comma'], 'kwargs': [None], 'grading': 'fraction'}}
    >>> label_specs("72", "label") is None
    True
    """
    return _spec(label, where)


def _spec(label: Any, where: str) -> dict[str, Any] | None:
    if isinstance(label, dict):
        return label
    if is_open_instruct_label(label):
        try:
            return {"instructions": open_instruct_instructions(label)}
        except LabelError as exc:
            raise invalid(where, str(exc)) from None
    if isinstance(label, str) and label.lstrip().startswith('{"'):  # JSON; never a LaTeX gold such as {1, 2}
        try:
            spec = json.loads(label)
        except (ValueError, RecursionError):  # RecursionError: nested past the interpreter's depth
            raise invalid(where, f"not valid JSON (or nested too deep); the label is {SPEC_OR_GOLD}") from None
        if isinstance(spec, dict):
            return spec
    return None


def _gold(label: Any, where: str) -> str | int | float | None:
    """The gold a label holds, as the label holds it: the schema reads a number (as text for math and answer, as an
    option index for choice) and refuses one that is not finite."""
    if label is None or (isinstance(label, str) and not label.strip()):
        return None
    if isinstance(label, str | int | float) and not isinstance(label, bool):
        return label
    raise invalid(where, f"the label is {SPEC_OR_GOLD}")


def _under(where: str, described: str) -> str:
    return f"{where}.{described}" if described else where


def _validated(fields: dict[str, Any], locate: Callable[[tuple[Any, ...], str], str]) -> ScoreItem:
    try:
        return ScoreItem.model_validate(fields)
    except ValidationError as exc:
        errors = exc.errors(include_input=False, include_url=False)
        described = describe(errors, root=ScoreItem, top="")
        located = [{**d, "loc": locate(tuple(e["loc"]), d["loc"])} for e, d in zip(errors, described, strict=False)]
        raise Invalid(located, len(errors)) from None


# What the trainers read back.


def unjudged(results: Sequence[ItemResult]) -> str | None:
    """Why the verifier could not judge the first result it could not judge (its null components' verdicts), or
    None when it judged them all."""
    for index, result in enumerate(results):
        if result.reward is None:
            nulls = [(name, c) for name, c in result.components.items() if c.score is None]
            why = "; ".join(f"{name}: {c.verdict}" + (f" ({c.detail})" if c.detail else "") for name, c in nulls)
            return f"sample {index}: {why}" if len(results) > 1 else why
    return None


def extras(result: ItemResult, config: CompatConfig) -> dict[str, float]:
    """The fixed extra keys: whether the verifier judged the sample, and each URL component's score (0.0 when the
    item does not ask for it or it is null)."""
    found = {JUDGED: 1.0 if result.reward is not None else 0.0}
    for name in config.components:
        component = result.components.get(name)
        found[f"verifier_{name}"] = component.score if component is not None and component.score is not None else 0.0
    return found


def reward_or_fallback(result: ItemResult, config: CompatConfig) -> float:
    """The reward; where the verifier could not judge, the URL's fallback (the route has checked there is one)."""
    if result.reward is not None:
        return result.reward
    assert config.on_unjudged is not None
    return config.on_unjudged


def scaled(reward: float, item: ScoreItem) -> float:
    """The reward divided by the sum of the item's positive weights, clipped into [0, 1]: OpenRLHF's `scores`, which
    its dynamic filtering compares with a range inside (0, 1)."""
    weights = cast(dict[str, float], item.weights or {})  # keys are component names
    total = sum(weight for name in item.requested() if (weight := weights.get(name, 1.0)) > 0)
    return min(1.0, max(0.0, reward / total if total > 0 else reward))


def openrlhf_answer(items: Sequence[ScoreItem], results: Sequence[ItemResult], config: CompatConfig) -> dict[str, Any]:
    """`{"rewards": [...], "scores": [...], "extra_logs": {key: [...]}}`, one entry per query (the form of OpenRLHF's
    own reward server). The one definition of what OpenRLHF reads, for the route and the reward-function file alike:
    `scores` is `scaled`, `extra_logs` the URL's `extra_keys`."""
    rewards = [reward_or_fallback(result, config) for result in results]
    logs = [extras(result, config) for result in results]
    return {
        "rewards": rewards,
        "scores": [scaled(reward, item) for reward, item in zip(rewards, items, strict=True)],
        "extra_logs": {key: [log[key] for log in logs] for key in config.extra_keys},
    }


def slime_answer(result: ItemResult, config: CompatConfig) -> dict[str, Any]:
    """`{"reward": r, "verifier_judged": 1.0, "verifier_math": ...}`; slime reads `reward` (`--reward-key reward`)."""
    return {"reward": reward_or_fallback(result, config), **extras(result, config)}


def nemo_gym_answer(body: NeMoGymVerifyRequest, result: ItemResult, config: CompatConfig) -> dict[str, Any]:
    """The body echoed, plus `reward`, `mask_sample` (true where the verifier could not judge: reward 0.0, and NeMo-RL
    leaves the sample out of the loss), `failure_reason` and the numeric extras, which Gym aggregates. Numbers JSON
    cannot carry (NaN, Infinity, and 1e999, read as Infinity) are echoed as null."""
    echoed = finite_or_null(body.model_dump(exclude_unset=True))
    masked = result.reward is None
    if isinstance(echoed.get("instance_config"), dict):  # where NeMo-RL reads the mask
        echoed["instance_config"] = {**echoed["instance_config"], "mask_sample": masked}
    reason = unjudged([result])
    return {
        **echoed,
        "reward": 0.0 if result.reward is None else result.reward,
        "mask_sample": masked,
        "failure_reason": f"the verifier could not judge this sample: {reason}" if reason else None,
        **extras(result, config),
    }


def finite_or_null(value: Any) -> Any:
    """`value` with each float that JSON cannot carry as null. Python's json module writes NaN and Infinity (a
    dataset row with a missing number holds NaN), and the body that comes back must be JSON.

    >>> finite_or_null({"a": [1.5, float("nan")], "b": {"c": float("inf")}, "d": "NaN"})
    {'a': [1.5, None], 'b': {'c': None}, 'd': 'NaN'}
    """
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {key: finite_or_null(item) for key, item in value.items()}
    if isinstance(value, list):
        return [finite_or_null(item) for item in value]
    return value
