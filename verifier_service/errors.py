"""Readable errors: validation messages that name the field and what is allowed, never echo input, and stay small;
no tracebacks; a request id in the logs; a client that went away is not an error of ours."""

from __future__ import annotations

import logging
import typing
import uuid
from collections.abc import Iterator, Sequence
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel
from starlette.requests import ClientDisconnect
from starlette.responses import Response

from verifier_service.schema import ScoreRequest

log = logging.getLogger(__name__)

MAX_ERRORS = 20  # listed in `errors`; a request with more says how many
SHOWN_IN_DETAIL = 5
MAX_MSG_CHARS = 300
CLIENT_CLOSED = 499  # nginx's code for "the client closed the request": only counted, never sent

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
_KNOWN = frozenset(_MODELS).union(*(model.model_fields for model in _ALL_MODELS))


def _model_at(loc: Sequence[Any]) -> type[BaseModel]:
    for part in reversed(loc):
        if isinstance(part, str) and part in _MODELS:
            return _MODELS[part]
    return ScoreRequest


def _where(loc: Sequence[Any]) -> str:
    parts = [str(p) if isinstance(p, int) or p in _KNOWN else "*" for p in loc]
    return ".".join(parts) or "body"


def _describe_one(error: dict[str, Any]) -> dict[str, Any]:
    loc = [p for p in error.get("loc", ()) if p != "body"]
    kind = str(error.get("type"))
    ctx = error.get("ctx") or {}
    if kind == "extra_forbidden":  # the last element is the name the client sent
        loc = loc[:-1]
        msg = f"unknown field; allowed: {', '.join(_model_at(loc).model_fields)}"
    elif kind == "union_tag_invalid":
        msg = f"unknown {ctx.get('discriminator', 'tag')}; allowed: {ctx.get('expected_tags', '?')}"
    elif kind in _SAFE_MESSAGES:
        msg = str(error.get("msg", kind))
    else:
        msg = f"invalid value ({kind})"
    if "[key]" in loc:  # a dict key: the element before it is the key the client sent
        loc = loc[: loc.index("[key]") - 1]
        msg = f"a key: {msg}"
    return {"loc": _where(loc), "msg": msg[:MAX_MSG_CHARS], "type": kind}


def describe(errors: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """pydantic's errors as location, message and type, at most MAX_ERRORS of them: the input is never echoed."""
    return [_describe_one(error) for error in errors[:MAX_ERRORS]]


async def _validation_error(request: Request, exc: RequestValidationError) -> JSONResponse:
    found = list(exc.errors())
    errors = describe(found)
    shown = "; ".join(f"{e['loc']}: {e['msg']}" for e in errors[:SHOWN_IN_DETAIL])
    more = f" (and {len(found) - SHOWN_IN_DETAIL} more)" if len(found) > SHOWN_IN_DETAIL else ""
    return JSONResponse(status_code=422, content={"detail": f"invalid request: {shown}{more}", "errors": errors})


async def _client_disconnect(request: Request, exc: ClientDisconnect) -> Response:
    """The client hung up before its request was read whole: nobody is left to answer, and it is not our error."""
    log.info("%s %s: the client went away before sending the whole request", request.method, request.url.path)
    return Response(status_code=CLIENT_CLOSED)


async def _internal_error(request: Request, exc: Exception) -> JSONResponse:
    request_id = uuid.uuid4().hex[:12]
    log.error("unhandled error, request id %s", request_id, exc_info=exc)
    return JSONResponse(status_code=500, content={"detail": f"internal error (request id {request_id})"})


def install_error_handlers(app: FastAPI) -> None:
    app.add_exception_handler(RequestValidationError, _validation_error)  # type: ignore[arg-type]
    app.add_exception_handler(ClientDisconnect, _client_disconnect)  # type: ignore[arg-type]
    app.add_exception_handler(Exception, _internal_error)
