"""The pooled resources, one table: the math worker pool, the code sandbox, the reward models and the generative
judges. The runtime builds each from the settings, starts and closes them together and asks each whether it is ready
and what `/readyz` shows under its name; pooled components reach theirs through `scoring.pooled.Resources.part(name)`.
A new kind of resource is an entry in `PARTS`, not a path written into the runtime.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Protocol

from sandbox import Executor, Limits, SandboxConfig, create_executor
from verifier_service.judges import Judges
from verifier_service.metrics import Metrics
from verifier_service.pool import WorkerPool
from verifier_service.settings import VerifierSettings

if TYPE_CHECKING:
    from reward_models.runtime import ModelRuntime

WORKER_TASK = "verifier_service.scoring.worker:run"  # math comparisons and chunks of text components


class Part(Protocol):
    """A pooled resource as the runtime drives it."""

    async def start(self) -> None: ...

    async def close(self) -> None: ...

    def report(self) -> tuple[bool, dict[str, Any]]:
        """Whether it is ready, and what /readyz shows of it."""
        ...

    def waiting_for(self, shown: dict[str, Any]) -> str:
        """Why it is not ready yet, in words, from what `report` showed (for the log)."""
        ...


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
        compile_cache_mb=box.compile_cache_mb,
        compile_limits=replace(
            SandboxConfig.compile_limits,
            wall_s=box.compile_wall_s,
            cpu_s=box.compile_cpu_s,
            memory_mb=box.compile_memory_mb,
            max_file_mb=box.compile_max_binary_mb,
        ),
    )


class MathWorkers:
    """The worker processes: math comparisons, sql, procedural scorers and chunks of text components."""

    def __init__(self, pool: WorkerPool, metrics: Metrics) -> None:
        self.pool, self.metrics = pool, metrics

    @classmethod
    def build(cls, settings: VerifierSettings, metrics: Metrics) -> MathWorkers:
        return cls(WorkerPool(settings.math_workers, WORKER_TASK), metrics)

    async def start(self) -> None:
        await self.pool.start()

    async def close(self) -> None:
        await self.pool.close()

    def report(self) -> tuple[bool, dict[str, Any]]:
        pids = self.pool.pids()
        self.metrics.workers_alive.set(len(pids))
        return self.pool.ready, {"alive": len(pids), "pids": pids}

    def waiting_for(self, shown: dict[str, Any]) -> str:
        return f"{shown['alive']} of {self.pool.size} math workers up"


class Sandbox:
    """The executor that runs model-written code; none when code scoring is off."""

    def __init__(self, executor: Executor | None, metrics: Metrics) -> None:
        self.executor = executor
        metrics.sandbox.status = self.status

    @classmethod
    def build(cls, settings: VerifierSettings, metrics: Metrics) -> Sandbox:
        executor = (
            create_executor(settings.sandbox_backend, sandbox_config(settings)) if settings.code_enabled else None
        )
        return cls(executor, metrics)

    async def start(self) -> None:
        if self.executor is not None:
            await self.executor.start()

    async def close(self) -> None:
        if self.executor is not None:
            await self.executor.close()

    def status(self) -> dict[str, Any]:
        if self.executor is None:
            return {"enabled": False, "ready": True, "detail": "code scoring is off (CODE_ENABLED)"}
        return {"enabled": True, **self.executor.status()}

    def report(self) -> tuple[bool, dict[str, Any]]:
        status = self.status()
        return bool(status.get("ready")), status

    def waiting_for(self, shown: dict[str, Any]) -> str:
        # the sandbox logs its own error: said once, there
        why = "its error is logged above and shown by /readyz" if shown.get("last_error") else "starting"
        return f"no sandbox can run code yet ({why})"


class Models:
    """The reward models of VERIFIER_MODELS; with none configured, nothing is loaded, torch included."""

    def __init__(self, runtime: ModelRuntime | None) -> None:
        self.runtime = runtime

    @classmethod
    def build(cls, settings: VerifierSettings, metrics: Metrics) -> Models:
        if not settings.models:
            return cls(None)
        from reward_models.runtime import ModelRuntime  # imports no torch until it starts

        return cls(ModelRuntime(settings.models))

    async def start(self) -> None:
        if self.runtime is not None:
            await self.runtime.start()

    async def close(self) -> None:
        if self.runtime is not None:
            await self.runtime.close()

    def report(self) -> tuple[bool, dict[str, Any]]:
        if self.runtime is None:
            return True, {}
        return self.runtime.ready, self.runtime.status()

    def waiting_for(self, shown: dict[str, Any]) -> str:
        loading = [name for name, model in shown.items() if not model["loaded"]]
        return f"models not loaded yet: {', '.join(loading)}"


# Name (its key in /readyz and in Resources) -> how to build it from the settings. Started together, in this order
# of listing; closed together.
PARTS: dict[str, Callable[[VerifierSettings, Metrics], Part]] = {
    "math_workers": MathWorkers.build,
    "sandbox": Sandbox.build,
    "models": Models.build,
    "judges": Judges.build,
}
