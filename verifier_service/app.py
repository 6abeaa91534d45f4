"""The application factory. Resources (the worker pool) live in the lifespan, never at import time."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI

from verifier_service import __version__
from verifier_service.engine import Engine
from verifier_service.errors import install_error_handlers
from verifier_service.limits import BodySizeLimit
from verifier_service.metrics import Metrics
from verifier_service.pool import WorkerPool
from verifier_service.routes import router
from verifier_service.settings import VerifierSettings

log = logging.getLogger(__name__)

MATH_TASK = "verifier_service.scoring.math:verify_math"


def create_app(settings: VerifierSettings | None = None) -> FastAPI:
    settings = settings or VerifierSettings()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        pool = WorkerPool(settings.math_workers, MATH_TASK)
        app.state.pool = pool
        app.state.engine = Engine(settings, pool, app.state.metrics)
        await pool.start()
        log.info("verifier ready: %d math workers", settings.math_workers)
        try:
            yield
        finally:
            await pool.close()

    app = FastAPI(
        title="Reward verifier",
        version=__version__,
        summary="Scores LLM completions (math answers, think format) for RL training.",
        lifespan=lifespan,
    )
    app.state.settings = settings
    app.state.metrics = Metrics()
    app.add_middleware(BodySizeLimit, max_bytes=settings.max_request_bytes)
    install_error_handlers(app)
    app.include_router(router)
    return app
