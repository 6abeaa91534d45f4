"""Validation problems as the API reports them: location, a message that says what is allowed, and the error type;
never the client's value, and a bounded number of them. An unknown field's name is said back (it is the client's
spelling of the schema, not its data), shortened and with the closest real name (`schema.unknown_name`, which the
trainer client's option errors use too). Used by the HTTP error handler, the trainer routes and the in-process
verifier alike."""

from __future__ import annotations

import functools
import typing
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from pydantic import BaseModel

from verifier_service.schema import COMPONENTS, ScoreRequest, unknown_name

MAX_ERRORS = 20  # listed in `errors`; a request with more says how many
MAX_MSG_CHARS = 600  # room for "unknown field ...; allowed: <every item field>" (313 chars with completion_ids)

# pydantic error types whose message says what is allowed and holds nothing of the input. Any other type gets a
# message made from its name alone; `extra_forbidden` and `union_tag_invalid` get messages of their own (pydantic's
# would leave the client's key in the location, or quote the client's tag).
_SAFE_MESSAGES = frozenset(
    {
        "missing", "string_type", "int_type", "float_type", "bool_type", "int_parsing", "float_parsing",
        "int_from_float", "bool_parsing", "finite_number", "greater_than", "greater_than_equal", "less_than",
        "less_than_equal", "multiple_of", "too_short", "too_long", "string_too_short", "string_too_long",
        "string_pattern_mismatch", "string_unicode", "literal_error", "enum", "list_type", "dict_type", "tuple_type",
        "set_type", "model_type", "model_attributes_type", "json_invalid", "json_type", "union_tag_not_found",
        "value_error", "none_required",
    }
)  # fmt: skip


def _models_in(annotation: Any) -> Iterator[type[BaseModel]]:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        yield annotation
    for arg in typing.get_args(annotation):  # Optional, list, dict, Annotated, unions
        yield from _models_in(arg)


def _names(model: type[BaseModel]) -> list[str]:
    """The field names of a model as requests write them (json_schema's `schema_` is `schema`)."""
    return [field.alias or name for name, field in model.model_fields.items()]


def _request_models(root: type[BaseModel] = ScoreRequest) -> dict[str, type[BaseModel]]:
    """Each model of the request by the name an error location gives it: the field that holds it, or, for a member
    of a tagged union (the code tests), its tag."""
    found: dict[str, type[BaseModel]] = {}
    stack = [root]
    while stack:
        model = stack.pop()
        for name, field in model.model_fields.items():
            for inner in _models_in(field.annotation):
                tag = typing.get_args(inner.model_fields["type"].annotation) if "type" in inner.model_fields else ()
                key = str(tag[0]) if len(tag) == 1 else name
                if key not in found:
                    found[key] = inner
                    stack.append(inner)
    return found


_MODELS = _request_models()
# Every name a location may show: what the schema defines. Anything else in a location came from the client.
_ALL_MODELS: list[type[BaseModel]] = [ScoreRequest, *_MODELS.values()]
_KNOWN = frozenset(_MODELS).union(*(_names(model) for model in _ALL_MODELS))


@functools.cache
def _known(root: type[BaseModel]) -> frozenset[str]:
    """The names a location may show for errors of `root`: the request's, and those of `root` and its models (the
    trainers' request shapes of compat_mapping)."""
    if root is ScoreRequest:
        return _KNOWN
    models = _request_models(root)
    return _KNOWN.union(models, _names(root), *(_names(model) for model in models.values()))


def _model_at(loc: Sequence[Any], root: type[BaseModel]) -> type[BaseModel]:
    for part in reversed(loc):
        if isinstance(part, str) and part in _MODELS:
            return _MODELS[part]
    return root


def _where(loc: Sequence[Any], top: str, known: frozenset[str] = _KNOWN) -> str:
    parts = [str(p) if isinstance(p, int) or p in known else "*" for p in loc]
    return ".".join(parts) or top


def _describe_one(error: Mapping[str, Any], root: type[BaseModel], top: str) -> dict[str, Any]:
    loc = [p for p in error.get("loc", ()) if p != "body"]
    kind = str(error.get("type"))
    ctx = error.get("ctx") or {}
    if kind == "extra_forbidden":  # the last element is the name the client sent
        name, loc = loc[-1] if loc else "", loc[:-1]
        msg = unknown_name("field", name, _names(_model_at(loc, root)))
    elif kind == "union_tag_invalid":
        msg = f"unknown {ctx.get('discriminator', 'tag')}; allowed: {ctx.get('expected_tags', '?')}"
    elif kind in _SAFE_MESSAGES:
        msg = str(error.get("msg", kind))
    else:
        msg = f"invalid value ({kind})"
    if "[key]" in loc:  # a dict key: the element before it is the key the client sent
        at = loc.index("[key]")
        key, loc = loc[at - 1] if at else "", loc[: at - 1]
        if kind == "literal_error" and loc[-1:] == ["weights"]:  # a component's name, misspelled
            msg = unknown_name("key", key, list(COMPONENTS))
        else:
            msg = f"a key: {msg}"
    return {"loc": _where(loc, top, _known(root)), "msg": msg[:MAX_MSG_CHARS], "type": kind}


def describe(
    errors: Sequence[Mapping[str, Any]], root: type[BaseModel] = ScoreRequest, top: str = "body"
) -> list[dict[str, Any]]:
    """pydantic's errors from validating a `root` as location, message and type, at most MAX_ERRORS of them: the
    input is never echoed. `top` names the location of an error about the whole value."""
    return [_describe_one(error, root, top) for error in errors[:MAX_ERRORS]]


def summarize(errors: Sequence[Mapping[str, Any]], root: type[BaseModel], where: str, shown: int = 3) -> str:
    """One line for the first few problems, each located under `where` (e.g. "items.3", "line 7")."""
    found = describe(errors, root, top="")
    parts = [f"{where}.{e['loc']}: {e['msg']}" if e["loc"] else f"{where}: {e['msg']}" for e in found[:shown]]
    more = f" (and {len(errors) - shown} more)" if len(errors) > shown else ""
    return "; ".join(parts) + more
