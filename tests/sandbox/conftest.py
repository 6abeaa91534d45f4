"""Executors of both backends, started once per session: `executor` (a pool of two) and `solo` (one sandbox, so
that a probe run after a hostile run lands in the very sandbox the hostile program had)."""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterator
from typing import Any

import pytest

from sandbox import SandboxConfig, create_executor
from tests.images.build import base_image, ensure_sandbox_image, require_docker
from tests.sandbox.live import LiveExecutor

BACKENDS = ["local", pytest.param("docker", marks=pytest.mark.docker)]
SANDBOX_IMAGE = "verifier-sandbox:backend-tests"
_pool_names = itertools.count()


@pytest.fixture(scope="session")
def docker_image() -> str:
    """The sandbox image built from this checkout (on verifier-base:offline, built first if missing)."""
    require_docker()
    return ensure_sandbox_image(base_image(), tag=SANDBOX_IMAGE)


def start_executor(backend: str, request: pytest.FixtureRequest, **config: Any) -> LiveExecutor:
    """A started executor; the local backend is skipped where bubblewrap cannot run (its isolation is the point)."""
    if backend == "docker":
        config.setdefault("image", request.getfixturevalue("docker_image"))
        config.setdefault("pool_name", f"tests-{os.getpid()}-{next(_pool_names)}")  # never another session's pool
    live = LiveExecutor(create_executor(backend, SandboxConfig(**config)))  # type: ignore[arg-type]
    status = live.status()
    if backend == "local" and status["isolation"] != "bubblewrap":
        live.close()
        pytest.skip("bubblewrap cannot run here (apt-get install bubblewrap; needs user namespaces)")
    assert status["ready"], status
    return live


@pytest.fixture(scope="session", params=BACKENDS)
def executor(request: pytest.FixtureRequest) -> Iterator[LiveExecutor]:
    live = start_executor(request.param, request, pool_size=2)
    yield live
    live.close()


@pytest.fixture(scope="session", params=BACKENDS)
def solo(request: pytest.FixtureRequest) -> Iterator[LiveExecutor]:
    live = start_executor(request.param, request, pool_size=1)
    yield live
    live.close()


@pytest.fixture(scope="session")
def local_executor(request: pytest.FixtureRequest) -> Iterator[LiveExecutor]:
    live = start_executor("local", request, pool_size=2)
    yield live
    live.close()
