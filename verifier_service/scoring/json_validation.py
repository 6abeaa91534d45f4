"""The validator of an accepted JSON Schema (verifier_service/json_schemas.py has the rules it passed), which fetches
nothing and cannot be held up by the answer it checks: references resolve in an empty registry whose retrieval
raises; patterns (`pattern`, `patternProperties`, and the names `additionalProperties` checks against them) are
matched with the `regex` package under the answer's deadline; `uniqueItems` is checked in linear time (jsonschema's
own is quadratic on unhashable items); and the deadline is checked before every keyword. Formats are annotations,
as JSON Schema 2020-12 says by default: not asserted. Validators are cached by the schema's canonical JSON.
"""

from __future__ import annotations

import functools
import json
import time
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from typing import Any

import jsonschema
from jsonschema import ValidationError
from jsonschema.protocols import Validator

from verifier_service.json_schemas import DRAFTS, compiled, draft, registry

# When the validation of the answer now running must end (time.monotonic()), and the patternProperties of its whole
# schema; set by `first_error` around each call.
_DEADLINE: ContextVar[float] = ContextVar("json_schema_deadline", default=float("inf"))
_PATTERNS: ContextVar[tuple[str, ...]] = ContextVar("json_schema_patterns", default=())


class Overrun(BaseException):
    """The validation of one answer passed its deadline (a BaseException, so that no `except Exception` on the way
    swallows it)."""


def _search(pattern: str, text: str) -> bool:
    """Whether the pattern matches somewhere in the text, within the deadline (Overrun past it)."""
    left = _DEADLINE.get() - time.monotonic()
    if left <= 0:
        raise Overrun
    try:
        return compiled(pattern).search(text, timeout=min(left, 3600.0)) is not None
    except TimeoutError:
        raise Overrun from None


# --- Keywords that jsonschema implements with `re` or in quadratic time, redone -----------------------------------


def _pattern(validator: Any, pattern: str, instance: Any, schema: Any) -> Iterator[ValidationError]:
    if validator.is_type(instance, "string") and not _search(pattern, instance):
        yield ValidationError("does not match the schema's pattern")


def _pattern_properties(validator: Any, patterns: dict[str, Any], instance: Any, schema: Any) -> Iterator[Any]:
    if not validator.is_type(instance, "object"):
        return
    for pattern, subschema in patterns.items():
        for key, value in instance.items():
            if _search(pattern, key):
                yield from validator.descend(value, subschema, path=key, schema_path=pattern)


def _additional_properties(validator: Any, additional: Any, instance: Any, schema: Any) -> Iterator[Any]:
    if not validator.is_type(instance, "object"):
        return
    properties, patterns = schema.get("properties", {}), schema.get("patternProperties", {})
    extras = [
        key for key in instance if key not in properties and not any(_search(pattern, key) for pattern in patterns)
    ]
    if validator.is_type(additional, "object"):
        for extra in extras:
            yield from validator.descend(instance[extra], additional, path=extra)
    elif not additional and extras:
        yield ValidationError(f"{len(extras)} propert{'y' if len(extras) == 1 else 'ies'} the schema does not allow")


def _unique_items(validator: Any, unique: Any, instance: Any, schema: Any) -> Iterator[ValidationError]:
    if unique and validator.is_type(instance, "array"):
        seen: set[str] = set()
        for item in instance:
            key = json.dumps(_comparable(item), sort_keys=True)
            if key in seen:
                yield ValidationError("has non-unique elements")
                return
            seen.add(key)


def _comparable(value: Any) -> Any:
    """The value with integral floats as ints: JSON Schema's equality has 1 == 1.0 (and true != 1, which JSON keeps)."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, list):
        return [_comparable(each) for each in value]
    if isinstance(value, dict):
        return {key: _comparable(each) for key, each in value.items()}
    return value


def _unevaluated(original: Callable[..., Iterator[Any]]) -> Callable[..., Iterator[Any]]:
    """jsonschema's unevaluatedProperties matches patternProperties with `re`, which no deadline stops: the keys are
    first matched against every patternProperties key of the schema here, under the deadline, so a pattern that
    would run away on one of them gives an Overrun instead (the regex and re engines backtrack alike)."""

    def unevaluated(validator: Any, value: Any, instance: Any, schema: Any) -> Iterator[Any]:
        if validator.is_type(instance, "object"):
            for pattern in _PATTERNS.get():
                for key in instance:
                    _search(pattern, key)
        yield from original(validator, value, instance, schema)

    return unevaluated


@functools.lru_cache(maxsize=256)
def _patterns_in(text: str) -> tuple[str, ...]:
    """Every patternProperties key of the schema (canonical JSON)."""
    found: list[str] = []
    stack = [json.loads(text)]
    while stack:
        value = stack.pop()
        if isinstance(value, dict):
            patterns = value.get("patternProperties")
            found.extend(patterns if isinstance(patterns, dict) else ())
            stack.extend(value.values())
        elif isinstance(value, list):
            stack.extend(value)
    return tuple(found)


def _on_time(keyword: Callable[..., Iterator[Any]]) -> Callable[..., Iterator[Any]]:
    def checked(validator: Any, value: Any, instance: Any, schema: Any) -> Iterator[Any]:
        if time.monotonic() > _DEADLINE.get():
            raise Overrun
        return keyword(validator, value, instance, schema)

    return checked


def _bounded(cls: type[Validator]) -> type[Validator]:
    keywords = dict(cls.VALIDATORS)
    keywords.update(pattern=_pattern, patternProperties=_pattern_properties, uniqueItems=_unique_items)
    keywords["additionalProperties"] = _additional_properties
    if "unevaluatedProperties" in keywords:
        keywords["unevaluatedProperties"] = _unevaluated(keywords["unevaluatedProperties"])
    timed = {name: _on_time(keyword) for name, keyword in keywords.items()}
    bounded: type[Validator] = jsonschema.validators.extend(cls, validators=timed)
    return bounded


_BOUNDED = {cls: _bounded(cls) for cls in DRAFTS.values()}


@functools.lru_cache(maxsize=256)
def validator(text: str) -> Validator:
    """The validator of a usable schema (canonical JSON): references resolve within the schema (and the drafts'
    metaschemas, which jsonschema ships) and nothing is ever retrieved."""
    schema = json.loads(text)
    cls = draft(schema) or jsonschema.Draft202012Validator
    return _BOUNDED[cls](schema, registry=registry())


def first_error(text: str, instance: Any, deadline: float) -> ValidationError | None:
    """The first way the instance breaks the usable schema (canonical JSON), None when it is valid; Overrun when the
    deadline (time.monotonic()) passes first."""
    deadline_set, patterns_set = _DEADLINE.set(deadline), _PATTERNS.set(_patterns_in(text))
    try:
        return next(iter(validator(text).iter_errors(instance)), None)
    finally:
        _DEADLINE.reset(deadline_set)
        _PATTERNS.reset(patterns_set)
