"""JSON Schemas sent in requests (the `json_schema` component): the rules a schema must pass to be accepted.

A schema is refused (422, `problem`) when it is not valid under its draft's metaschema, names a draft other than
4, 6, 7, 2019-09 or 2020-12 (default 2020-12), refers to anything outside itself (a `$ref`, `$dynamicRef` or
`$recursiveRef` not starting with `#`, or an `$id` below the root, which would make a sub-schema a resource of its
own), nests deeper than 64 levels or takes more than 64 KB as JSON, or has a `pattern` / `patternProperties` key
that is longer than 1000 characters or does not compile, or has `$ref`s that loop in place. The validator an
accepted schema gets is in scoring/json_validation.py.

The check is cached by the schema's canonical JSON, so the items of a GRPO group sharing one schema check it once.
This module imports nothing of the project (schema.py imports it).
"""

from __future__ import annotations

import functools
import json
from collections.abc import Iterator
from typing import Any

import jsonschema
import referencing
import referencing.exceptions
import referencing.jsonschema
import regex
from jsonschema.protocols import Validator

MAX_DEPTH = 64  # levels of a schema, and of an answer's JSON
MAX_BYTES = 64 * 1024  # a schema's canonical JSON
MAX_PATTERN = 1000  # characters of a pattern
DRAFTS: dict[str, type[Validator]] = {
    "http://json-schema.org/draft-04/schema": jsonschema.Draft4Validator,
    "http://json-schema.org/draft-06/schema": jsonschema.Draft6Validator,
    "http://json-schema.org/draft-07/schema": jsonschema.Draft7Validator,
    "https://json-schema.org/draft/2019-09/schema": jsonschema.Draft201909Validator,
    "https://json-schema.org/draft/2020-12/schema": jsonschema.Draft202012Validator,
}
_REFS = ("$ref", "$dynamicRef", "$recursiveRef")
_VALUES = ("const", "enum", "default", "examples")  # keywords whose values are data, not schemas
# Keywords whose values map names to schemas: their keys are names, their values schemas (read as keywords again).
_NAMED = ("properties", "patternProperties", "$defs", "definitions", "dependentSchemas", "dependencies")


def canonical(schema: Any) -> str:
    """The schema as canonical JSON (sorted keys, no spaces): the key of the caches. Raises ValueError (too deep to
    encode: RecursionError is one) on a schema no request can hold."""
    try:
        return json.dumps(schema, sort_keys=True, separators=(",", ":"), allow_nan=False)
    except (RecursionError, TypeError, ValueError) as exc:  # too deep, not JSON data, or an infinite number
        raise ValueError("schema cannot be written as JSON") from exc


def effective(schema: Any, strict: bool) -> str:
    """The canonical JSON of the schema answers are checked against: the schema, strictified when `strict`."""
    text = canonical(schema)
    # An oversized schema is refused (`problem`) strictified or not: it never becomes a key of the cache.
    return _strictified_text(text) if strict and _fits(text) else text


def _fits(text: str) -> bool:
    return len(text.encode()) <= MAX_BYTES


@functools.lru_cache(maxsize=1024)
def _strictified_text(text: str) -> str:
    return canonical(strictified(json.loads(text)))


def strictified(schema: Any) -> Any:
    """The schema with every object's properties required and no others allowed, as NeMo-Gym's structured_outputs
    server (`strictify_schema`) and OpenAI's strict mode make it: each dict holding `properties` gets `required` =
    all of them and `additionalProperties: false`, at every depth (the schema is at most MAX_DEPTH deep)."""
    if isinstance(schema, list):
        return [strictified(value) for value in schema]
    if not isinstance(schema, dict):
        return schema
    strict = {key: strictified(value) for key, value in schema.items()}
    if isinstance(strict.get("properties"), dict):
        strict["required"] = list(strict["properties"])
        strict["additionalProperties"] = False
    return strict


def problem(text: str) -> str | None:
    """What makes this schema (canonical JSON) unusable, in words that name the field and never quote it; None for a
    usable one. The size is checked before the cache, which holds only schemas of at most MAX_BYTES."""
    if not _fits(text):
        return f"schema takes more than {MAX_BYTES // 1024} KB as JSON"
    return _problem(text)


@functools.lru_cache(maxsize=1024)
def _problem(text: str) -> str | None:
    schema = json.loads(text)
    if not isinstance(schema, dict):
        return "schema must be a JSON object"
    cls = draft(schema)  # first: the scan reads $schema, which may be anything (a number)
    if cls is None:
        return "schema's $schema names a draft other than 4, 6, 7, 2019-09 and 2020-12"
    refs: list[str] = []
    found = _scan(schema, refs, draft4=cls is jsonschema.Draft4Validator)
    if found is not None:
        return found
    try:
        cls.check_schema(schema)
    except jsonschema.SchemaError as exc:
        return f"schema is not a valid JSON Schema (the {exc.validator!r} rule at {_where(exc.absolute_path, cls)})"
    # A local reference to nothing would fail every answer at validation: the schema's fault, said now.
    root = referencing.jsonschema.specification_with(str(cls.META_SCHEMA["$schema"])).create_resource(schema)
    resolver = registry().resolver_with_root(root)
    targets: dict[str, Any] = {}
    for ref in refs:
        try:
            targets[ref] = resolver.lookup(ref).contents
        except referencing.exceptions.Unresolvable:
            return "schema has a $ref to a place it does not have"
    if _loops(schema, targets):
        return "schema has $refs that loop without reading any deeper into the answer"
    return None


_IN_PLACE = ("allOf", "anyOf", "oneOf")  # lists of schemas applied to the same value
_IN_PLACE_ONE = ("not", "if", "then", "else")
_IN_PLACE_NAMED = ("dependentSchemas", "dependencies")  # schemas applied to the same object when it has the name


def _loops(schema: dict[str, Any], targets: dict[str, Any]) -> bool:
    """Whether following references and the keywords that apply a schema to the same value (allOf, not, if, ...) can
    come back to where it started: jsonschema would recurse on any answer until the stack runs out. A reference
    reached through `properties` or `items` reads one level deeper into the answer each time, which ends."""

    def next_to(node: dict[str, Any]) -> list[dict[str, Any]]:
        # A $dynamicRef or $recursiveRef may resolve further out at run time; its static target is one it can take.
        found = [targets[ref] for key in _REFS if isinstance(ref := node.get(key), str) and ref in targets]
        for key in _IN_PLACE:
            if isinstance(values := node.get(key), list):
                found += [each for each in values if isinstance(each, dict)]
        found += [each for key in _IN_PLACE_ONE if isinstance(each := node.get(key), dict)]
        for key in _IN_PLACE_NAMED:  # draft 4-7 `dependencies` also map names to lists of names: not schemas
            if isinstance(named := node.get(key), dict):
                found += [each for each in named.values() if isinstance(each, dict)]
        return [each for each in found if isinstance(each, dict)]

    state: dict[int, int] = {}  # id of a schema -> 1 while on the path, 2 when done
    for start in _subschemas(schema):
        if id(start) in state:
            continue
        path: list[tuple[dict[str, Any], Iterator[dict[str, Any]]]] = [(start, iter(next_to(start)))]
        state[id(start)] = 1
        while path:
            node, children = path[-1]
            child = next(children, None)
            if child is None:
                state[id(node)] = 2
                path.pop()
            elif state.get(id(child)) == 1:
                return True
            elif id(child) not in state:
                state[id(child)] = 1
                path.append((child, iter(next_to(child))))
    return False


def _subschemas(schema: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """Every dict in the schema (a superset of its subschemas; at most MAX_DEPTH deep, checked before)."""
    stack: list[Any] = [schema]
    while stack:
        value = stack.pop()
        if isinstance(value, dict):
            yield value
            stack.extend(value.values())
        elif isinstance(value, list):
            stack.extend(value)


def registry() -> referencing.Registry[Any]:
    """An empty registry whose retrieval raises: a reference to anything outside the schema resolves to nothing."""
    return referencing.Registry(retrieve=_refuse)  # type: ignore[call-arg]


def _where(path: Any, cls: type[Validator]) -> str:
    """Where in the schema, by its keywords and indexes; the schema's own names (of properties, of $defs) as `*`.

    >>> _where(["properties", "secret name", "type"], jsonschema.Draft202012Validator)
    'properties/*/type'
    """
    parts = list(path)
    shown = [str(p) if isinstance(p, int) or p in cls.VALIDATORS or p in _NAMED else "*" for p in parts[:8]]
    return "/".join(shown) + ("/..." if len(parts) > 8 else "") or "the root"


def draft(schema: dict[str, Any]) -> type[Validator] | None:
    uri = schema.get("$schema")
    if uri is None:
        return jsonschema.Draft202012Validator
    return DRAFTS.get(uri.rstrip("#")) if isinstance(uri, str) else None


def _scan(schema: dict[str, Any], refs: list[str], draft4: bool) -> str | None:
    """The first breach of the depth, reference and pattern rules, found without recursion; the `$ref`s (all local
    when none is found) are added to `refs`. `draft4`: the schema is draft 4's, where `id` is its `$id`."""
    stack: list[tuple[Any, int, str | None]] = [(schema, 1, None)]  # (value, depth, the key it sits under)
    while stack:
        value, depth, under = stack.pop()
        if depth > MAX_DEPTH:
            return f"schema nests deeper than {MAX_DEPTH} levels"
        if isinstance(value, list):
            stack.extend((each, depth + 1, under) for each in value)
            continue
        if not isinstance(value, dict) or under in _VALUES:
            continue
        if under in _NAMED:
            stack.extend((each, depth + 1, None) for each in value.values())
            continue
        for key, each in value.items():
            if key in _REFS and isinstance(each, str) and not each.startswith("#"):
                return f"schema refers outside itself ({key} must start with '#'): nothing is fetched"
            if key in _REFS and isinstance(each, str):
                refs.append(each)
            if depth > 1 and isinstance(each, str) and (key == "$id" or (draft4 and key == "id")):
                return "schema gives a sub-schema an $id: only the root may have one"
            if key == "pattern" and isinstance(each, str):
                found = _pattern_problem(each)
                if found:
                    return found
            if key == "patternProperties" and isinstance(each, dict):
                found = next(filter(None, map(_pattern_problem, each)), None)
                if found:
                    return found
            stack.append((each, depth + 1, key))
    return None


def _pattern_problem(pattern: str) -> str | None:
    if len(pattern) > MAX_PATTERN:
        return f"schema has a pattern longer than {MAX_PATTERN} characters"
    try:
        compiled(pattern)
    except (regex.error, ValueError, OverflowError):
        return "schema has a pattern that does not compile"
    return None


@functools.lru_cache(maxsize=4096)
def compiled(pattern: str) -> Any:
    return regex.compile(pattern)


def _refuse(uri: str) -> referencing.Resource[Any]:
    raise referencing.exceptions.NoSuchResource(ref=uri)  # type: ignore[call-arg]
