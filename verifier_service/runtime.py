"""The verifier's working parts apart from HTTP: the pooled resources of `resources.PARTS` (the math worker pool,
the sandbox executor unless code is off, the reward models) and the engine over them, started and stopped together.
The app's lifespan owns one; so does the in-process `Verifier`.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import os
from typing import Any

from verifier_service.engine import Engine
from verifier_service.metrics import Metrics
from verifier_service.resources import PARTS, Part
from verifier_service.schema import COMPONENTS, PrmSpec, ScoreItem
from verifier_service.scoring.pooled import Resources
from verifier_service.settings import VerifierSettings, unknown_settings

log = logging.getLogger(__name__)

READY_POLL_S = 1.0  # how often a service that started unready checks whether it is ready now, to say so
# Every component but code needs no sandbox: the message names them from the component table.
CODE_OFF = "code scoring is off on this server (VERIFIER_CODE_ENABLED=false); these components work: " + ", ".join(
    name for name in COMPONENTS if name != "code"
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
    if item.rm is not None and (model := settings.models.get(item.rm.model)) is None:
        return "rm.model", "names no model of this server (GET /v1/models lists them; VERIFIER_MODELS sets them)"
    if item.rm is not None and model is not None and model.kind != "rm":
        return "rm.model", f"names a model of kind {model.kind}; rm needs a sequence-classification model (kind rm)"
    if item.prm is not None and (found := prm_problem(item.prm, settings)) is not None:
        return found
    if item.judge is not None and item.judge.judge not in settings.judges:
        return "judge.judge", "names no judge of this server (GET /v1/judges lists them; VERIFIER_JUDGES sets them)"
    return None


def prm_problem(spec: PrmSpec, settings: VerifierSettings) -> tuple[str, str] | None:
    """(field, why) when this server cannot score a prm spec: its model is not served, or is of the wrong kind."""
    model = settings.models.get(spec.model)
    if model is None:
        return "prm.model", "names no model of this server (GET /v1/models lists them; VERIFIER_MODELS sets them)"
    needed = "prm_lm" if spec.layout == "step_tag" else "prm"
    if model.kind != needed:
        what = "a causal LM (kind prm_lm)" if needed == "prm_lm" else "a token-classification model (kind prm)"
        return "prm.model", f"names a model of kind {model.kind}; layout {spec.layout} needs {what}"
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
        self.parts: dict[str, Part] = {name: build(settings, self.metrics) for name, build in PARTS.items()}
        self.engine = Engine(Resources(settings, self.metrics, self.parts))
        self._announcer: asyncio.Future[None] | None = None

    async def start(self) -> None:
        """Start every part; if one cannot start, stop the others before raising."""
        warn_unknown_settings()
        check_sql_databases(self.settings)
        try:
            await asyncio.gather(*(part.start() for part in self.parts.values()))
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
        models = ", ".join(f"{name} {model['version']}" for name, model in body["models"].items()) or "none"
        log.info(
            "verifier ready: %d math workers, sandbox %s, models %s",
            len(body["math_workers"]["pids"]), body["sandbox"], models,
        )  # fmt: skip

    def _not_ready_reason(self, body: dict[str, Any]) -> str:
        return "; ".join(part.waiting_for(body[name]) for name, part in self.parts.items() if not part.report()[0])

    async def close(self) -> None:
        if self._announcer is not None:
            self._announcer.cancel()
            await asyncio.wait({self._announcer})  # ended, not only asked to end (wait raises neither's exception)
        await asyncio.gather(*(part.close() for part in self.parts.values()))

    def readiness(self) -> tuple[bool, dict[str, Any]]:
        """Ready when every part is (every math worker up, the sandbox able to run code unless code is off, every
        model loaded); and what /readyz shows: each part's report under its name."""
        reports = {name: part.report() for name, part in self.parts.items()}
        ready = all(ok for ok, _ in reports.values())
        return ready, {
            "status": "ready" if ready else "starting",
            **{name: shown for name, (_, shown) in reports.items()},
        }
