"""The application factory. Resources (the worker pool, the sandbox) live in the lifespan, never at import time."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi
from fastapi_offline import FastAPIOffline

from verifier_service import __version__
from verifier_service.compat import SCORE_PATHS, install_compat
from verifier_service.errors import install_error_handlers
from verifier_service.limits import BodySizeLimit
from verifier_service.metrics import CountResponses, Metrics
from verifier_service.routes import router
from verifier_service.runtime import Runtime
from verifier_service.schema import ScoreRequest, ScoreResponse
from verifier_service.settings import VerifierSettings
from verifier_service.url_key import UrlKey

log = logging.getLogger(__name__)


def create_app(settings: VerifierSettings | None = None) -> FastAPI:
    settings = settings or VerifierSettings()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        log_auth(settings)
        runtime = Runtime(settings, app.state.metrics)
        app.state.runtime = runtime
        await runtime.start()
        try:
            yield
        finally:
            await runtime.close()

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
    # Counts every answer to a score request (/v1/score and the trainer routes), whoever produced it.
    app.add_middleware(CountResponses, metrics=app.state.metrics, paths=frozenset({"/v1/score", *SCORE_PATHS}))
    app.add_middleware(UrlKey)  # outermost: an API key in the URL leaves it before anything else sees the request
    install_error_handlers(app)
    app.include_router(router)
    install_compat(app)
    app.openapi = lambda: _openapi(app)  # type: ignore[method-assign]
    return app


def log_auth(settings: VerifierSettings) -> None:
    """What an operator must see at start: whether requests need a key."""
    if settings.api_key is None:
        log.info("auth: off (no VERIFIER_API_KEY): anyone who can reach %s:%d can score", settings.host, settings.port)
    else:
        log.info(
            "auth: on (VERIFIER_API_KEY): /v1/score needs 'Authorization: Bearer <key>'; the trainer routes take it "
            "there or in the URL (/v1/compat/key/<key>/...)"
        )


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
