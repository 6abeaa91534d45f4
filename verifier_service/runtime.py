"""The verifier's working parts apart from HTTP: the math worker pool, the sandbox executor (unless code is off) and
the engine over them, started and stopped together. The app's lifespan owns one; so does the in-process `Verifier`.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import os
from typing import Any

from sandbox import Executor, Limits, SandboxConfig, create_executor
from verifier_service.engine import Engine
from verifier_service.metrics import Metrics
from verifier_service.pool import WorkerPool
from verifier_service.schema import COMPONENTS, ScoreItem
from verifier_service.settings import VerifierSettings, unknown_settings

log = logging.getLogger(__name__)

WORKER_TASK = "verifier_service.scoring.worker:run"  # math comparisons and chunks of text components
READY_POLL_S = 1.0  # how often a service that started unready checks whether it is ready now, to say so
# Every component but code needs no sandbox: the message names them from the component table.
CODE_OFF = "code scoring is off on this server (VERIFIER_CODE_ENABLED=false); these components work: " + ", ".join(
    name for name in COMPONENTS if name != "code"
)


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


def item_problem(item: ScoreItem, settings: VerifierSettings) -> tuple[str, str] | None:
    """(field, why) when this server refuses an item that the schema accepts, else None."""
    if len(item.completion) > settings.max_completion_chars:
        chars, limit = len(item.completion), settings.max_completion_chars
        return "completion", f"has {chars} characters; the limit is {limit} (VERIFIER_MAX_COMPLETION_CHARS)"
    if item.code is not None and not settings.code_enabled:
        return "code", CODE_OFF
    if item.sql is not None and item.sql.db is not None and item.sql.db not in settings.sql_databases:
        return "sql.db", "names no database of this server (VERIFIER_SQL_DATABASES lists them)"
    return None


def check_sql_databases(settings: VerifierSettings) -> None:
    """Refuse to start when a database `sql` items may name is missing or is not the file its hash pins: the same
    gold must mean the same rows on every server."""
    for name, database in settings.sql_databases.items():
        digest = hashlib.sha256()
        try:
            with open(database.path, "rb") as file:
                while chunk := file.read(1 << 20):
                    digest.update(chunk)
        except OSError as exc:
            raise RuntimeError(f"VERIFIER_SQL_DATABASES: database {name!r} cannot be read ({exc.strerror})") from None
        if digest.hexdigest() != database.sha256.lower():
            raise RuntimeError(f"VERIFIER_SQL_DATABASES: database {name!r} does not have the sha256 it is listed with")


def warn_unknown_settings() -> None:
    """VERIFIER_* variables that set nothing, each with the closest real name: a typo must not pass unseen."""
    for name, close in unknown_settings(os.environ).items():
        hint = f"; did you mean {close}?" if close else ""
        log.warning("%s is not a setting of the verifier and changes nothing%s", name, hint)


class Runtime:
    def __init__(self, settings: VerifierSettings, metrics: Metrics | None = None) -> None:
        self.settings = settings
        self.metrics = metrics or Metrics()
        self.pool = WorkerPool(settings.math_workers, WORKER_TASK)
        self.executor: Executor | None = None
        if settings.code_enabled:
            self.executor = create_executor(settings.sandbox_backend, sandbox_config(settings))
        self.engine = Engine(settings, self.pool, self.metrics, self.executor)
        self._announcer: asyncio.Future[None] | None = None
        self.metrics.sandbox.status = self.sandbox_status

    async def start(self) -> None:
        """Start the workers and the sandbox; if either cannot start, stop the other before raising."""
        warn_unknown_settings()
        check_sql_databases(self.settings)
        try:
            await asyncio.gather(self.pool.start(), *([self.executor.start()] if self.executor else []))
        except BaseException:
            await self.close()
            raise
        self._announcer = asyncio.ensure_future(self._say_when_ready())

    async def _say_when_ready(self) -> None:
        """Log 'verifier ready' when /readyz would answer 200, and not before: the sandbox may come up after start
        (its image is still building, its engine is away). Until then, once, why not."""
        ready, body = self.readiness()
        if not ready:
            log.warning("verifier started, not ready yet (/readyz answers 503): %s", self._not_ready_reason(body))
        while not ready:
            await asyncio.sleep(READY_POLL_S)
            ready, body = self.readiness()
        log.info("verifier ready: %d math workers, sandbox %s", len(body["math_workers"]["pids"]), body["sandbox"])

    def _not_ready_reason(self, body: dict[str, Any]) -> str:
        reasons = []
        if not self.pool.ready:
            reasons.append(f"{body['math_workers']['alive']} of {self.settings.math_workers} math workers up")
        sandbox = body["sandbox"]
        if not sandbox.get("ready"):  # the sandbox logs its own error: said once, there
            why = "its error is logged above and shown by /readyz" if sandbox.get("last_error") else "starting"
            reasons.append(f"no sandbox can run code yet ({why})")
        return "; ".join(reasons)

    async def close(self) -> None:
        if self._announcer is not None:
            self._announcer.cancel()
            await asyncio.wait({self._announcer})  # ended, not only asked to end (wait raises neither's exception)
        await asyncio.gather(self.pool.close(), *([self.executor.close()] if self.executor else []))

    def sandbox_status(self) -> dict[str, Any]:
        if self.executor is None:
            return {"enabled": False, "ready": True, "detail": "code scoring is off (CODE_ENABLED)"}
        return {"enabled": True, **self.executor.status()}

    def readiness(self) -> tuple[bool, dict[str, Any]]:
        """Ready when every math worker is up and the sandbox can run code (unless code is off); and what /readyz
        shows."""
        pids = self.pool.pids()
        self.metrics.workers_alive.set(len(pids))
        sandbox = self.sandbox_status()
        ready = self.pool.ready and bool(sandbox.get("ready"))
        body = {"status": "ready" if ready else "starting", "math_workers": {"alive": len(pids), "pids": pids}}
        return ready, {**body, "sandbox": sandbox}
