"""Readable errors: validation messages without echoing input, no tracebacks, a request id in the logs."""

from __future__ import annotations

import logging
import uuid
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse

log = logging.getLogger(__name__)


def _where(loc: tuple[Any, ...]) -> str:
    parts = [str(p) for p in loc if p != "body"]
    return ".".join(parts) or "body"


def describe(errors: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Pydantic errors reduced to location, message and type: the submitted input is never echoed."""
    return [
        {"loc": _where(tuple(e.get("loc", ()))), "msg": e.get("msg", "invalid"), "type": e.get("type")} for e in errors
    ]


async def _validation_error(request: Request, exc: RequestValidationError) -> JSONResponse:
    errors = describe(list(exc.errors()))
    shown = "; ".join(f"{e['loc']}: {e['msg']}" for e in errors[:10])
    more = f" (and {len(errors) - 10} more)" if len(errors) > 10 else ""
    return JSONResponse(status_code=422, content={"detail": f"invalid request: {shown}{more}", "errors": errors})


async def _internal_error(request: Request, exc: Exception) -> JSONResponse:
    request_id = uuid.uuid4().hex[:12]
    log.error("unhandled error, request id %s", request_id, exc_info=exc)
    return JSONResponse(status_code=500, content={"detail": f"internal error (request id {request_id})"})


def install_error_handlers(app: FastAPI) -> None:
    app.add_exception_handler(RequestValidationError, _validation_error)  # type: ignore[arg-type]
    app.add_exception_handler(Exception, _internal_error)
