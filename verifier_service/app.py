"""The application factory. Resources (the worker pool, the sandbox) live in the lifespan, never at import time."""

from __future__ import annotations

import gc
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
from verifier_service.model_routes import router as model_router
from verifier_service.model_update import EvalMemory
from verifier_service.paths import TrailingSlash
from verifier_service.routes import router
from verifier_service.runtime import Runtime
from verifier_service.schema import EvalRequest, ReloadRequest, ScoreRequest, ScoreResponse
from verifier_service.settings import VerifierSettings
from verifier_service.url_key import UrlKey

log = logging.getLogger(__name__)
GC_THRESHOLD = 100_000  # the collector's first threshold in a process that only serves (`tune_collector`)


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
        redirect_slashes=False,  # paths.TrailingSlash serves `/v1/score/` itself; no empty 307s
    )
    app.state.settings = settings
    app.state.metrics = Metrics()
    app.state.eval_memory = EvalMemory()  # each model's last eval scores per version, for drift
    app.add_middleware(BodySizeLimit, max_bytes=settings.max_request_bytes)
    # Counts every answer to a score request (/v1/score and the trainer routes), whoever produced it.
    app.add_middleware(CountResponses, metrics=app.state.metrics, paths=frozenset({"/v1/score", *SCORE_PATHS}))
    app.add_middleware(TrailingSlash)  # before CountResponses: `/v1/score/` is counted as `/v1/score`
    app.add_middleware(UrlKey)  # outermost: an API key in the URL leaves it before anything else sees the request
    install_error_handlers(app)
    app.include_router(router)
    app.include_router(model_router)
    install_compat(app)
    app.openapi = lambda: _openapi(app)  # type: ignore[method-assign]
    return app


def log_auth(settings: VerifierSettings) -> None:
    """What an operator must see at start: whether requests need a key, and if not, who can score."""
    if settings.api_key is None:
        log.info("auth: off (no VERIFIER_API_KEY): anyone who can reach %s can score", reachable_at(settings))
    else:
        log.info(
            "auth: on (VERIFIER_API_KEY): /v1/score and /v1/models/{name}/reload and /eval need 'Authorization: "
            "Bearer <key>'; the trainer routes take it "
            "there or in the URL (/v1/compat/key/<key>/...)"
        )


def reachable_at(settings: VerifierSettings) -> str:
    """Where the service can be reached, in words. Inside a container it listens on every address of the container,
    and what the host publishes is what counts: compose passes that on (VERIFIER_PUBLISHED_ADDRESS).

    >>> reachable_at(VerifierSettings(host="0.0.0.0", port=8088, published_address="127.0.0.1:8088"))
    '127.0.0.1:8088 (where its port is published), or port 8088 of its container on the container network'
    >>> reachable_at(VerifierSettings(host="0.0.0.0", port=8088))
    'port 8088 on any address of this machine (or container)'
    """
    listening = _address(settings.host, str(settings.port))
    if settings.published_address is None:
        return listening
    host, _, port = settings.published_address.rpartition(":")
    published = _address(host, port).replace("of this machine (or container)", "of its host")
    return (
        f"{published} (where its port is published), or port {settings.port} of its container on the container network"
    )


def _address(host: str, port: str) -> str:
    if host in ("", "0.0.0.0", "::", "[::]", "*"):
        return f"port {port} on any address of this machine (or container)"
    return f"[{host}]:{port}" if ":" in host and not host.startswith("[") else f"{host}:{port}"


def _openapi(app: FastAPI) -> dict[str, Any]:
    """FastAPI's document, plus the request schema that /v1/score reads itself (see routes.read_score_request), and
    the response example as the server answers it (FastAPI drops its null fields)."""
    if app.openapi_schema is None:
        schema = get_openapi(title=app.title, version=app.version, summary=app.summary, routes=app.routes)
        components = schema.setdefault("components", {}).setdefault("schemas", {})
        request = ScoreRequest.model_json_schema(ref_template="#/components/schemas/{model}")
        components.update(request.pop("$defs", {}))
        components["ScoreRequest"] = request
        for model in (ReloadRequest, EvalRequest):  # read by their routes themselves too (model_routes.read)
            published = model.model_json_schema(ref_template="#/components/schemas/{model}")
            components.update(published.pop("$defs", {}))
            components[model.__name__] = published
        components["ScoreResponse"]["examples"] = ScoreResponse.model_json_schema()["examples"]
        app.openapi_schema = schema
    return app.openapi_schema


def tune_collector() -> None:
    """Set the garbage collector up for a process that serves the app and nothing else: the `python -m
    verifier_service` server and each Ray Serve replica. An in-process `Verifier` leaves its host's collector alone.

    What the imports made lives as long as the process: frozen, out of the collector's sight, a full collection walks
    only what requests made (a 512-item batch with every component otherwise pays ~10 ms for one). A collection runs
    when the tracked objects made minus those freed pass the first threshold (700 by default). A large request keeps
    tens of thousands alive while it runs, so at 700 the collector walks them again and again (4 to 7 ms of a
    512-item batch with every component). Little of what requests make is cyclic garbage (a failed task's traceback
    is: it may hold a chunk's completions), and it is freed after at most `GC_THRESHOLD` objects.
    """
    gc.freeze()
    gc.set_threshold(GC_THRESHOLD, 10, 10)
