"""The application factory. Resources (the worker pool) live in the lifespan, never at import time."""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi
from fastapi_offline import FastAPIOffline

from sandbox import Executor, Limits, SandboxConfig, create_executor
from verifier_service import __version__
from verifier_service.engine import Engine
from verifier_service.errors import install_error_handlers
from verifier_service.limits import BodySizeLimit
from verifier_service.metrics import CountResponses, Metrics
from verifier_service.pool import WorkerPool
from verifier_service.routes import router
from verifier_service.schema import ScoreRequest, ScoreResponse
from verifier_service.settings import VerifierSettings, unknown_settings

log = logging.getLogger(__name__)

MATH_TASK = "verifier_service.scoring.math:verify_math"


def sandbox_config(settings: VerifierSettings) -> SandboxConfig:
    box = settings.sandbox
    maxima = Limits(
        wall_s=box.max_wall_s,
        cpu_s=box.max_wall_s,
        memory_mb=box.max_memory_mb,
        max_processes=box.max_processes,
        max_file_mb=box.max_file_mb,
        max_output_bytes=box.max_output_bytes,
    )
    return SandboxConfig(
        pool_size=box.pool_size,
        max_limits=maxima,
        jobs_per_sandbox=box.jobs_per_sandbox,
        image=box.image,
        pool_name=box.pool_name,
        uid_base=box.uid_base,
        require_isolation=box.require_isolation,
    )


def create_app(settings: VerifierSettings | None = None) -> FastAPI:
    settings = settings or VerifierSettings()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        log_settings(settings)
        pool = WorkerPool(settings.math_workers, MATH_TASK)
        executor: Executor | None = None
        if settings.code_enabled:
            executor = create_executor(settings.sandbox_backend, sandbox_config(settings))
        app.state.pool, app.state.executor = pool, executor
        app.state.engine = Engine(settings, pool, app.state.metrics, executor)
        await asyncio.gather(pool.start(), *([executor.start()] if executor else []))
        sandbox = executor.status() if executor else "off (VERIFIER_CODE_ENABLED=false: code items get 422)"
        log.info("verifier ready: %d math workers, sandbox %s", settings.math_workers, sandbox)
        try:
            yield
        finally:
            await asyncio.gather(pool.close(), *([executor.close()] if executor else []))

    # FastAPIOffline: /docs and /redoc load Swagger UI and ReDoc from files in the package, not from a CDN.
    app = FastAPIOffline(
        title="Reward verifier",
        version=__version__,
        summary="Scores LLM completions (math answers, code against tests, think format) for RL training.",
        lifespan=lifespan,
    )
    app.state.settings = settings
    app.state.metrics = Metrics()
    app.add_middleware(BodySizeLimit, max_bytes=settings.max_request_bytes)
    app.add_middleware(CountResponses, metrics=app.state.metrics, path="/v1/score")  # outermost: sees every answer
    install_error_handlers(app)
    app.include_router(router)
    app.openapi = lambda: _openapi(app)  # type: ignore[method-assign]
    return app


def log_settings(settings: VerifierSettings) -> None:
    """What an operator must see at start: whether requests need a key, and VERIFIER_* variables that set nothing."""
    for name, close in unknown_settings(os.environ).items():
        hint = f"; did you mean {close}?" if close else ""
        log.warning("%s is not a setting of the verifier and changes nothing%s", name, hint)
    if settings.api_key is None:
        log.info("auth: off (no VERIFIER_API_KEY): anyone who can reach %s:%d can score", settings.host, settings.port)
    else:
        log.info("auth: on (VERIFIER_API_KEY): /v1/score needs 'Authorization: Bearer <key>'")


def _openapi(app: FastAPI) -> dict[str, Any]:
    """FastAPI's document, plus the request schema that /v1/score reads itself (see routes.read_score_request), and
    the response example as the server answers it (FastAPI drops its null fields)."""
    if app.openapi_schema is None:
        schema = get_openapi(title=app.title, version=app.version, summary=app.summary, routes=app.routes)
        components = schema.setdefault("components", {}).setdefault("schemas", {})
        request = ScoreRequest.model_json_schema(ref_template="#/components/schemas/{model}")
        components.update(request.pop("$defs", {}))
        components["ScoreRequest"] = request
        components["ScoreResponse"]["examples"] = ScoreResponse.model_json_schema()["examples"]
        app.openapi_schema = schema
    return app.openapi_schema
