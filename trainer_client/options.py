"""A reward function's component options: gathered from its arguments and checked against the wire schema when
the reward function is made, so a typo or a missing option fails before training, naming the option.

A component's options are the fields of its spec class (`verifier_service.schema.SPECS`) except those that come
from the dataset row (`ROW_FIELDS`: a gold answer, code tests, option texts).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, get_args

from pydantic import BaseModel, ValidationError

from verifier_service.schema import (
    PRIMARIES,
    SPECS,
    ComponentSpec,
    FormatOptions,
    GatedSpec,
    MathOptions,
    ScoreItem,
    closest_name,
    unknown_name,
)

# The spec fields each primary component takes from the dataset row, never from options.
ROW_FIELDS: dict[str, tuple[str, ...]] = {
    "math": ("gold",),
    "code": ("tests",),
    "choice": ("gold", "options"),
    "answer": ("gold",),
    "json_schema": ("schema",),
}
# Valid row fields, to check options without a dataset (and for the training script's pre-flight item, whose completion
# answers 1 and prints 1).
PLACEHOLDER_ROWS: dict[str, dict[str, Any]] = {
    "math": {"gold": "1"},
    "code": {"tests": [{"type": "stdio", "stdout": "1"}]},
    "choice": {"gold": "A", "options": ["1", "2"]},
    "answer": {"gold": "1"},
    "json_schema": {"schema": {"type": "integer"}},
    "sql": {"schema_sql": "", "gold_sql": "SELECT 1"},
    "language": {"target": "en"},
    "procedural": {
        "dataset": "basic_arithmetic",
        "entry": {"question": "1?", "answer": "1", "metadata": {"source_dataset": "basic_arithmetic"}},
    },
    "instructions": {"instruction_ids": ["punctuation:no_comma"]},
    "judge": {"gold": "1"},  # the judge itself is the run's option (`"judge": NAME`), as a model component's model
}

Options = dict[str, dict[str, Any]]  # component -> option name -> value


def row_fields(component: str, options: Mapping[str, Any]) -> list[str]:
    """The spec fields of `component` that must come from the dataset row: ROW_FIELDS for the components that read
    their own columns; for any other, its required fields that the options do not give (an `instructions` spec's
    `instruction_ids`, a `language` spec's `target` unless set for the whole run). Empty: the options are enough.

    >>> row_fields("choice", {}), row_fields("format", {})
    (['gold', 'options'], [])
    """
    if component in ROW_FIELDS:
        return list(ROW_FIELDS[component])
    fields = SPECS[component].model_fields
    return [name for name, info in fields.items() if info.is_required() and name not in options]


def check_components(components: Sequence[str]) -> None:
    """A ValueError naming the first name that is not a component, with the closest real one: a typo fails here, before
    anything looks a name up or sends it.

    >>> check_components(["math", "fromat"])  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: unknown component 'fromat'; did you mean 'format'? Components: math, code, choice, answer, ...
    """
    for name in components:
        if name not in SPECS:
            raise ValueError(f"unknown component {name!r}{closest_component(name)} Components: {', '.join(SPECS)}")


def closest_component(name: object) -> str:
    """The hint for a name that is not a component: "; did you mean 'x'?" for the closest one, else ";"."""
    close = closest_name(name, list(SPECS))
    return f"; did you mean {close!r}?" if close else ";"


def option_names(component: str) -> list[str]:
    """The options a component takes (its spec fields less the row's).

    >>> option_names("overlong")
    ['max_tokens', 'buffer_tokens', 'penalty', 'on_truncated', 'unit']
    """
    names = [field.alias or name for name, field in SPECS[component].model_fields.items()]
    return [name for name in names if name not in ROW_FIELDS.get(component, ())]


def gather_options(
    components: Sequence[str],
    options: Mapping[str, Mapping[str, Any] | ComponentSpec] | None,
    keywords: Mapping[str, Any],
    defaults: Mapping[str, Mapping[str, Any]] | None = None,
) -> Options:
    """Each sent component's options, from `options` (component -> a dict of options, or a spec object),
    `keywords` (the options of a reward with one component) and `defaults` (from the older arguments,
    `legacy_options`; used for the components the reward sends, ignored for others). An option given twice is an
    error; so are keywords with several components.

    >>> gather_options(["overlong"], None, {"max_tokens": 1024})
    {'overlong': {'max_tokens': 1024}}
    """
    check_components(components)
    given = [(name, _as_dict(name, values)) for name, values in (options or {}).items()]
    if keywords:
        if len(components) != 1:
            raise TypeError(
                f"options given as keywords ({', '.join(keywords)}) need a reward with one component; with several, "
                "pass options={component: {option: value}}"
            )
        given.append((components[0], dict(keywords)))
    gathered: Options = {}
    for name, values in given:
        _merge(gathered, name, values)
    correctness = correctness_component(components, gathered)
    sent = (*components, correctness) if correctness else tuple(components)
    for name, default in (defaults or {}).items():
        if name in sent:
            _merge(gathered, name, default)
    return gathered


def legacy_options(
    math_options: MathOptions | None = None,
    format_options: FormatOptions | None = None,
    code_timeout_s: float | None = None,
    code_memory_mb: int | None = None,
) -> Options:
    """The options that the reward's older arguments stand for.

    >>> legacy_options(format_options=FormatOptions(prefilled=True), code_timeout_s=2)
    {'format': {'prefilled': True}, 'code': {'timeout_s': 2}}
    """
    options: Options = {}
    if math_options is not None:
        options["math"] = {"options": math_options}
    if format_options is not None:
        options["format"] = _as_dict("format", format_options)
    code = {"timeout_s": code_timeout_s, "memory_mb": code_memory_mb}
    if any(value is not None for value in code.values()):
        options["code"] = {key: value for key, value in code.items() if value is not None}
    return options


def _merge(gathered: Options, name: str, values: Mapping[str, Any]) -> None:
    if name not in SPECS:
        raise ValueError(
            f"options name {name!r}, which is not a component{closest_component(name)} Components: {', '.join(SPECS)}"
        )
    twice = sorted(set(values) & set(gathered.get(name, {})))
    if twice:
        raise ValueError(f"{name} option {', '.join(twice)} given twice (as keywords, in options= or *_options=)")
    from_row = [key for key in values if key in ROW_FIELDS.get(name, ())]
    if from_row:
        raise ValueError(
            f"{name}.{from_row[0]} comes from the dataset (gold_column=, tests_column=, options_column=), not from "
            "the reward's options"
        )
    gathered[name] = {**gathered.get(name, {}), **values}


def _as_dict(component: str, values: Mapping[str, Any] | ComponentSpec) -> dict[str, Any]:
    if isinstance(values, ComponentSpec):
        if component in SPECS and not isinstance(values, SPECS[component]):
            raise ValueError(f"options[{component!r}] is a {type(values).__name__}, not a {SPECS[component].__name__}")
        fields = type(values).model_fields
        return {fields[key].alias or key: getattr(values, key) for key in values.model_fields_set}
    return dict(values)


def correctness_component(components: Sequence[str], options: Mapping[str, Mapping[str, Any]]) -> str | None:
    """The primary component a gated one (length) reads correctness from when the reward does not score it
    itself: `correct_from`, else math. It is sent in the same item with weight 0. None when none is needed.

    >>> correctness_component(["length"], {}), correctness_component(["length"], {"length": {"correct_from": "code"}})
    ('math', 'code')
    >>> correctness_component(["choice", "length"], {}) is None  # the reward's own primary
    True
    """
    gated = [name for name in components if issubclass(SPECS[name], GatedSpec)]
    if not gated:
        return None
    named = [options.get(name, {}).get("correct_from") for name in gated]
    wanted = [name for name in named if name in PRIMARIES and name not in components]
    if wanted:
        return str(wanted[0])
    if any(name is not None for name in named) or any(name in PRIMARIES for name in components):
        return None  # one the reward scores, or a wrong name for the schema to report
    return "math"


def check_request(
    owner: str,
    sent: Sequence[str],
    options: Mapping[str, Mapping[str, Any]],
    weights: Mapping[str, float] | None,
    allow_order_inversion: bool,
) -> None:
    """Validate the item this reward would send (placeholder rows), so a bad option fails now, not mid-training. A
    component with no placeholder row (one whose spec comes from a spec column) has its options checked, but not the
    fields its rows will bring."""
    try:
        template_item(sent, options, weights, allow_order_inversion)
    except ValidationError as exc:
        errors = [e for e in exc.errors() if not _from_row(e, options)]
        if errors:
            raise ValueError(f"{owner}: {describe(exc, errors)}") from None


def _from_row(error: Any, options: Mapping[str, Mapping[str, Any]]) -> bool:
    """An error that the fields a row brings would prevent (no placeholder stands in for them), not the options'
    fault: one of those fields missing, or a check of the whole spec (a before-validator: after-validators do not
    run while a field is missing) that the options alone cannot pass.

    >>> _from_row({"loc": ("overlong", "max_tokens"), "type": "missing"}, {}), _from_row(
    ...     {"loc": ("overlong", "max_tokens"), "type": "missing"}, {"overlong": {"unit": "chars"}})
    (True, True)
    >>> _from_row({"loc": ("overlong", "unit"), "type": "literal_error"}, {})  # a wrong option stays an error
    False
    """
    loc = tuple(str(part) for part in error["loc"])
    if not loc or loc[0] not in SPECS or loc[0] in PLACEHOLDER_ROWS:
        return False
    from_rows = row_fields(loc[0], options.get(loc[0], {}))
    if len(loc) == 1:
        return bool(from_rows)
    return error["type"] == "missing" and len(loc) == 2 and loc[1] in from_rows


def template_item(
    sent: Sequence[str],
    options: Mapping[str, Mapping[str, Any]],
    weights: Mapping[str, float] | None,
    allow_order_inversion: bool,
    completion: str = "",
) -> ScoreItem:
    """An item as a reward would send it, with placeholder rows (`PLACEHOLDER_ROWS`)."""
    fields = {name: {**PLACEHOLDER_ROWS.get(name, {}), **options.get(name, {})} for name in sent}
    return ScoreItem.model_validate(
        {
            "completion": completion,
            **fields,
            "weights": dict(weights) if weights else None,
            "allow_order_inversion": allow_order_inversion,
        }
    )


def describe(error: ValidationError, errors: Sequence[Any] | None = None) -> str:
    """pydantic's errors (or the `errors` kept of them) as one readable sentence each, naming the option and what is
    allowed."""
    chosen = error.errors() if errors is None else errors
    return "; ".join(_describe_one(tuple(str(part) for part in e["loc"]), e["type"], e["msg"]) for e in chosen)


def _describe_one(loc: tuple[str, ...], kind: str, message: str) -> str:
    message = message.removeprefix("Value error, ")
    if not loc:
        return message.replace("allow_order_inversion: true", "pass allow_order_inversion=True to the reward")
    where = ".".join(loc)
    if kind == "extra_forbidden":  # the server's suggestion (`schema.unknown_name`); an item's own field has no owner
        names = option_names(loc[0]) if len(loc) == 2 and loc[0] in SPECS else _fields(_model_at(loc[:-1]))
        return unknown_name("option" if len(loc) > 1 else "item field", loc[-1], names, at=".".join(loc[:-1]))
    if kind == "missing":
        return f"{'.'.join(loc[:-1])} needs the option {loc[-1]!r}"
    return f"{where}: {message}"


def _model_at(loc: Iterable[str]) -> type[BaseModel] | None:
    """The model whose fields live at `loc` of an item (("math", "options") -> MathOptions)."""
    model: type[BaseModel] = ScoreItem
    for part in loc:
        field = model.model_fields.get(part)
        if field is None:
            return None
        found = [a for a in (*get_args(field.annotation), field.annotation) if _is_model(a)]
        if not found:
            return None
        model = found[0]
    return model


def _is_model(value: Any) -> bool:
    return isinstance(value, type) and issubclass(value, BaseModel)


def _fields(model: type[BaseModel] | None) -> list[str]:
    return list(model.model_fields) if model is not None else []
