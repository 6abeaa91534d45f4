"""Thin HTTP handlers: check, hand to the engine, return."""

from __future__ import annotations

import asyncio
import hmac
import logging
import time
from collections.abc import Awaitable
from typing import Annotated, Any, TypeVar

from fastapi import APIRouter, Depends, HTTPException, Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from pydantic import ValidationError

from verifier_service.catalog import ComponentsResponse, components
from verifier_service.engine import Engine
from verifier_service.errors import CLIENT_CLOSED
from verifier_service.metrics import Metrics
from verifier_service.runtime import Runtime, item_problem
from verifier_service.schema import (
    ErrorResponse,
    JudgeInfo,
    JudgesResponse,
    ModelInfo,
    ModelsResponse,
    ScoreRequest,
    ScoreResponse,
)
from verifier_service.settings import VerifierSettings

log = logging.getLogger(__name__)
T = TypeVar("T")

router = APIRouter()
COMPONENTS_INFO = components()  # a constant: the spec models do not change while the process runs

# Dependencies are `async def`: FastAPI runs a plain `def` one in a worker thread, a thread hop per dependency per
# request (about a millisecond of a small request's latency).


async def _settings(request: Request) -> VerifierSettings:
    return request.app.state.settings


async def _engine(request: Request) -> Engine:
    return request.app.state.runtime.engine


async def _metrics(request: Request) -> Metrics:
    return request.app.state.metrics


SettingsDep = Annotated[VerifierSettings, Depends(_settings)]
EngineDep = Annotated[Engine, Depends(_engine)]
MetricsDep = Annotated[Metrics, Depends(_metrics)]


_bearer = HTTPBearer(
    auto_error=False,
    description="Needed when the server sets VERIFIER_API_KEY: `Authorization: Bearer <key>`.",
)


async def require_api_key(
    settings: SettingsDep, credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)]
) -> None:
    """Runs before the body is read: a client without the key learns that first, whatever it sent."""
    if settings.api_key is None:
        return
    given = credentials.credentials if credentials is not None else ""
    if not given or not hmac.compare_digest(given.encode(), settings.api_key.get_secret_value().encode()):
        raise HTTPException(
            401, "missing or wrong API key (send 'Authorization: Bearer <key>')", {"WWW-Authenticate": "Bearer"}
        )


def check_limits(request: ScoreRequest, settings: VerifierSettings) -> None:
    """What the schema cannot say: 413 for a batch or a completion over the limits, 422 for an item this server does
    not score (code, when code is off)."""
    if len(request.items) > settings.max_batch_items:
        raise HTTPException(
            413,
            f"{len(request.items)} items in one request; the limit is {settings.max_batch_items} "
            "(VERIFIER_MAX_BATCH_ITEMS): split the batch",
        )
    refused = []
    for index, item in enumerate(request.items):
        problem = item_problem(item, settings)
        if problem is not None and problem[0] == "completion":
            raise HTTPException(413, f"items.{index}.completion {problem[1]}")
        if problem is not None:
            loc = ("items", index, *problem[0].split("."))  # a nested field: sql.db
            refused.append({"loc": loc, "msg": problem[1], "type": "value_error"})
    if refused:
        raise RequestValidationError(refused)


ERRORS: dict[int | str, dict[str, Any]] = {code: {"model": ErrorResponse} for code in (401, 413, 422)}


# The body is parsed and validated in one pass by pydantic's JSON parser (several times faster on big batches
# than FastAPI's json.loads-then-validate); the schema is still published in the OpenAPI document.
_REQUEST_BODY = {
    "required": True,
    "content": {"application/json": {"schema": {"$ref": "#/components/schemas/ScoreRequest"}}},
}


async def read_score_request(request: Request) -> ScoreRequest:
    try:
        return ScoreRequest.model_validate_json(await request.body())
    except ValidationError as exc:
        raise RequestValidationError(exc.errors(include_input=False, include_url=False)) from None


ScoreRequestDep = Annotated[ScoreRequest, Depends(read_score_request)]


@router.post(
    "/v1/score",
    dependencies=[Depends(require_api_key)],
    responses=ERRORS,
    response_model=ScoreResponse,
    openapi_extra={"requestBody": _REQUEST_BODY},
)
async def score(
    request: Request, body: ScoreRequestDep, engine: EngineDep, settings: SettingsDep, metrics: MetricsDep
) -> Response:
    """Score a batch of completions; one result per item, in order, each item's `id` echoed."""
    check_limits(body, settings)
    started = time.perf_counter()
    results = await until_disconnected(request, engine.score(body.items))
    if results is None:
        log.info("the client went away; the scoring of its %d items was cancelled", len(body.items))
        return Response(status_code=CLIENT_CLOSED)  # nobody reads it; counted in verifier_requests_total
    metrics.batch_seconds.observe(time.perf_counter() - started)
    return Response(ScoreResponse(results=results).model_dump_json(), media_type="application/json")


async def until_disconnected(request: Request, work: Awaitable[T]) -> T | None:
    """The work's result, or None once the client has gone away: then the work is cancelled (its math workers and
    sandboxes are retired and replaced) instead of running on to the batch deadline for nobody."""
    task = asyncio.ensure_future(work)
    gone = asyncio.ensure_future(_disconnect(request))
    try:
        await asyncio.wait({task, gone}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for future in (task, gone):
            if not future.done():
                future.cancel()
        await asyncio.gather(task, gone, return_exceptions=True)
    return task.result() if not task.cancelled() else None


async def _disconnect(request: Request) -> None:
    """Return when the client disconnects. The body is read by now, so the server's next message is that one."""
    while (await request.receive())["type"] != "http.disconnect":
        pass


@router.get("/", include_in_schema=False)
async def root(request: Request) -> dict[str, Any]:
    """Where to go from the bare address: the documentation and the routes."""
    return {
        "service": request.app.title,
        "version": request.app.version,
        "docs": "/docs",
        "openapi": "/openapi.json",
        "routes": {
            "score": "POST /v1/score",
            "components": "GET /v1/components",
            "models": "GET /v1/models",
            "judges": "GET /v1/judges",
            "model_update": "POST /v1/models/{name}/reload | /v1/models/{name}/eval",
            "trainers": "POST /v1/compat/openrlhf | /v1/compat/slime | /v1/compat/nemo-gym/verify",
            "health": "GET /healthz",
            "ready": "GET /readyz",
            "metrics": "GET /metrics",
        },
    }


@router.get("/v1/components", response_model=ComponentsResponse, response_model_by_alias=True)
async def list_components() -> ComponentsResponse:
    """Every component: its options with their defaults, its score range, its verdicts (and which of them are
    null), whether it reads correctness from another component. Generated from the models that validate requests."""
    return COMPONENTS_INFO


@router.get("/v1/models", response_model=ModelsResponse)
async def list_models(request: Request) -> ModelsResponse:
    """The reward models this server serves (VERIFIER_MODELS): name, kind, checkpoint path, loaded version, device."""
    runtime: Runtime | None = getattr(request.app.state, "runtime", None)
    shown = runtime.parts["models"].report()[1] if runtime is not None else {}
    return ModelsResponse(models=[ModelInfo(name=name, **model) for name, model in shown.items()])


@router.get("/v1/judges", response_model=JudgesResponse)
async def list_judges(request: Request) -> JudgesResponse:
    """The generative judges `judge` items may name (VERIFIER_JUDGES): endpoint, model, limits, whether each answers;
    never a key."""
    runtime: Runtime | None = getattr(request.app.state, "runtime", None)
    shown = runtime.parts["judges"].report()[1] if runtime is not None else {}
    return JudgesResponse(judges=[JudgeInfo(name=name, **judge) for name, judge in shown.items()])


@router.get("/healthz")
async def healthz() -> dict[str, str]:
    """The process is alive."""
    return {"status": "ok"}


@router.get("/readyz")
async def readyz(request: Request) -> JSONResponse:
    """Ready when every math worker is up, the sandbox can run code (unless code is off) and every model is loaded;
    503 otherwise."""
    runtime: Runtime | None = getattr(request.app.state, "runtime", None)
    if runtime is None:  # before the lifespan started it
        return JSONResponse({"status": "starting"}, status_code=503)
    ready, body = runtime.readiness()
    return JSONResponse(body, status_code=200 if ready else 503)


@router.get(
    "/metrics",
    response_class=Response,
    responses={200: {"content": {CONTENT_TYPE_LATEST: {"schema": {"type": "string"}}}, "description": "Metrics"}},
)
async def prometheus(metrics: MetricsDep) -> Response:
    """Prometheus text format: requests by HTTP status, items, verdicts per component, batch latency, math worker
    restarts and timeouts, cache hits, and the sandbox pool (sandboxes up, idle, busy, starting, replaced)."""
    return Response(generate_latest(metrics.registry), media_type=CONTENT_TYPE_LATEST)
