"""Error responses: readable 422s (see problems.py), no tracebacks, a request id in the logs; a client that went away
is not an error of ours."""

from __future__ import annotations

import logging
import uuid
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.requests import ClientDisconnect
from starlette.responses import Response

from verifier_service.problems import describe

log = logging.getLogger(__name__)

SHOWN_IN_DETAIL = 5
CLIENT_CLOSED = 499  # nginx's code for "the client closed the request": only counted, never sent


async def _validation_error(request: Request, exc: RequestValidationError) -> JSONResponse:
    found = list(exc.errors())
    return invalid_request(describe(found), len(found))


def invalid_request(errors: list[dict[str, Any]], found: int) -> JSONResponse:
    """The 422 answer: the first few problems in `detail`, each of them (described, at most MAX_ERRORS) in `errors`;
    `found` counts them all."""
    shown = "; ".join(f"{e['loc']}: {e['msg']}" for e in errors[:SHOWN_IN_DETAIL])
    more = f" (and {found - SHOWN_IN_DETAIL} more)" if found > SHOWN_IN_DETAIL else ""
    return JSONResponse(status_code=422, content={"detail": f"invalid request: {shown}{more}", "errors": errors})


async def _client_disconnect(request: Request, exc: ClientDisconnect) -> Response:
    """The connection closed before the request was read whole (the client hung up, or its body was too slow:
    connections.py): nobody is left to answer, and it is not our error."""
    log.info("%s %s: the connection closed before the whole request arrived", request.method, request.url.path)
    return Response(status_code=CLIENT_CLOSED)


async def _internal_error(request: Request, exc: Exception) -> JSONResponse:
    """The 500 answer. Starlette raises the error on once this answer is sent, and uvicorn then closes the connection:
    the answer says so (`Connection: close`), or a client that keeps connections alive would send its next request
    down a connection that is gone and have it reset."""
    request_id = uuid.uuid4().hex[:12]
    log.error("unhandled error, request id %s", request_id, exc_info=exc)
    content = {"detail": f"internal error (request id {request_id})"}
    return JSONResponse(status_code=500, content=content, headers={"Connection": "close"})


def install_error_handlers(app: FastAPI) -> None:
    app.add_exception_handler(RequestValidationError, _validation_error)  # type: ignore[arg-type]
    app.add_exception_handler(ClientDisconnect, _client_disconnect)  # type: ignore[arg-type]
    app.add_exception_handler(Exception, _internal_error)
