"""`GET /v1/components`: what each component does, generated from the spec models that validate requests."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

from verifier_service.schema import ANY_COMPONENT_FAILS, SPECS, VERDICTS, ComponentSpec, GatedSpec, Verdict


class OptionInfo(BaseModel):
    required: bool
    default: Any = Field(None, description="The value used when the option is left out (null when required).")
    description: str | None = None


class ComponentInfo(BaseModel):
    role: Literal["primary", "shaping"] = Field(
        ..., description="primary: judges whether the answer is right; shaping: adjusts the reward around it."
    )
    description: str
    reads_correctness: bool = Field(
        ...,
        description="Always gated on correctness, read from a primary component of the same item (`correct_from`); "
        "rm is gated only when asked (its `gate` option).",
    )
    score_range: str = Field(..., description="Lowest and highest score, in terms of the options.")
    options: dict[str, OptionInfo]
    schema_: dict[str, Any] = Field(..., alias="schema", description="The options' JSON schema, as requests use it.")
    verdicts: list[str]
    null_verdicts: list[str] = Field(..., description="The verdicts whose score is null: the item is not judged.")
    available: bool = Field(
        True,
        description="Whether this server can judge it: false when what it needs is not installed (its items "
        "are then null).",
    )


class ComponentsResponse(BaseModel):
    components: dict[str, ComponentInfo]


def describe(spec: type[ComponentSpec], verdicts: tuple[Verdict, ...]) -> ComponentInfo:
    options = {
        field.alias or name: OptionInfo(  # the name on the wire
            required=field.is_required(),
            default=None if field.is_required() else field.get_default(call_default_factory=True),
            description=field.description,
        )
        for name, field in spec.model_fields.items()
    }
    null = [v.value for v in verdicts if v in spec.null_verdicts or v in ANY_COMPONENT_FAILS]
    return ComponentInfo(
        role=spec.role,
        description=" ".join((spec.__doc__ or "").split()),
        reads_correctness=issubclass(spec, GatedSpec),
        score_range=spec.range_text,
        options=options,
        schema=spec.model_json_schema(),
        verdicts=[v.value for v in verdicts],
        null_verdicts=null,
        available=spec.available(),
    )


def components() -> ComponentsResponse:
    return ComponentsResponse(components={name: describe(spec, VERDICTS[name]) for name, spec in SPECS.items()})
