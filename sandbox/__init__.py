"""Runs untrusted programs against tests, under limits, in isolation; knows nothing about HTTP or rewards.

executor = create_executor("docker", SandboxConfig())
await executor.start()
result = await executor.run(Submission(program, (CallTest("add", (1, 2), expected=3),)))
await executor.close()
"""

from __future__ import annotations

from typing import Literal

from sandbox.api import (
    AssertTest,
    CallTest,
    Checker,
    Executor,
    Limits,
    RunResult,
    RunVerdict,
    SandboxConfig,
    StdioTest,
    Submission,
    Test,
    TestOutcome,
    TestVerdict,
)

__all__ = [
    "AssertTest",
    "CallTest",
    "Checker",
    "Executor",
    "Limits",
    "RunResult",
    "RunVerdict",
    "SandboxConfig",
    "StdioTest",
    "Submission",
    "Test",
    "TestOutcome",
    "TestVerdict",
    "create_executor",
]


def create_executor(backend: Literal["local", "docker"], config: SandboxConfig | None = None) -> Executor:
    """The executor for a backend name (VERIFIER_SANDBOX_BACKEND); nothing starts until `await executor.start()`."""
    if backend == "docker":
        from sandbox.docker_backend import DockerExecutor  # the only module that imports `docker`

        return DockerExecutor(config)
    if backend == "local":
        from sandbox.local import LocalExecutor

        return LocalExecutor(config)
    raise ValueError(f"unknown sandbox backend {backend!r}: use 'local' or 'docker'")
