"""Thin HTTP handlers: check, hand to the engine, return."""

from __future__ import annotations

import hmac
import time
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Header, HTTPException, Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from pydantic import ValidationError

from verifier_service.engine import Engine
from verifier_service.metrics import Metrics
from verifier_service.schema import ErrorResponse, ScoreRequest, ScoreResponse
from verifier_service.settings import VerifierSettings

router = APIRouter()

# Dependencies are `async def`: FastAPI runs a plain `def` one in a worker thread, a thread hop per dependency per
# request (about a millisecond of a small request's latency).


async def _settings(request: Request) -> VerifierSettings:
    return request.app.state.settings


async def _engine(request: Request) -> Engine:
    return request.app.state.engine


async def _metrics(request: Request) -> Metrics:
    return request.app.state.metrics


SettingsDep = Annotated[VerifierSettings, Depends(_settings)]
EngineDep = Annotated[Engine, Depends(_engine)]
MetricsDep = Annotated[Metrics, Depends(_metrics)]


async def require_api_key(settings: SettingsDep, authorization: Annotated[str | None, Header()] = None) -> None:
    if settings.api_key is None:
        return
    expected = f"Bearer {settings.api_key.get_secret_value()}"
    if authorization is None or not hmac.compare_digest(authorization.encode(), expected.encode()):
        raise HTTPException(401, "missing or wrong API key (send 'Authorization: Bearer <key>')")


def check_limits(request: ScoreRequest, settings: VerifierSettings) -> None:
    if len(request.items) > settings.max_batch_items:
        raise HTTPException(
            413,
            f"{len(request.items)} items in one request; the limit is {settings.max_batch_items} "
            "(VERIFIER_MAX_BATCH_ITEMS): split the batch",
        )
    for index, item in enumerate(request.items):
        if len(item.completion) > settings.max_completion_chars:
            raise HTTPException(
                413,
                f"items.{index}.completion has {len(item.completion)} characters; the limit is "
                f"{settings.max_completion_chars} (VERIFIER_MAX_COMPLETION_CHARS)",
            )


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
async def score(body: ScoreRequestDep, engine: EngineDep, settings: SettingsDep, metrics: MetricsDep) -> Response:
    """Score a batch of completions; one result per item, in order, each item's `id` echoed."""
    check_limits(body, settings)
    started = time.perf_counter()
    results = await engine.score(body.items)
    metrics.batch_seconds.observe(time.perf_counter() - started)
    metrics.requests.labels(status="ok").inc()
    return Response(ScoreResponse(results=results).model_dump_json(), media_type="application/json")


@router.get("/healthz")
async def healthz() -> dict[str, str]:
    """The process is alive."""
    return {"status": "ok"}


@router.get("/readyz")
async def readyz(request: Request, metrics: MetricsDep) -> JSONResponse:
    """Ready when every math worker is up and the sandbox can run code; 503 otherwise."""
    pool = getattr(request.app.state, "pool", None)
    executor = getattr(request.app.state, "executor", None)
    pids = pool.pids() if pool is not None else []
    metrics.workers_alive.set(len(pids))
    sandbox = executor.status() if executor is not None else {"ready": False}
    ready = pool is not None and pool.ready and bool(sandbox.get("ready"))
    body = {
        "status": "ready" if ready else "starting",
        "math_workers": {"alive": len(pids), "pids": pids},
        "sandbox": sandbox,
    }
    return JSONResponse(body, status_code=200 if ready else 503)


@router.get("/metrics")
async def prometheus(metrics: MetricsDep) -> Response:
    return Response(generate_latest(metrics.registry), media_type=CONTENT_TYPE_LATEST)
