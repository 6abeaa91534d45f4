"""What the code tests share (test_code_api.py, test_cpp_api.py): a real server per sandbox backend with two
sandboxes (`service`), the sandbox image built from this checkout (`docker_image`), and /readyz's sandbox part."""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.conftest import Server, running_server
from tests.images.build import base_image, ensure_sandbox_image, require_docker

BACKENDS = ["local", pytest.param("docker", marks=pytest.mark.docker)]
SANDBOX_IMAGE = "verifier-sandbox:backend-tests"  # as tests/sandbox: one image (its tag plus a digest)
_pool_names = itertools.count()


def pool_name() -> str:
    """A Docker label no other server (of this session, or of another test process) uses."""
    return f"code-api-{os.getpid()}-{next(_pool_names)}"


@pytest.fixture(scope="session")
def docker_image() -> str:
    """The sandbox image built from this checkout."""
    require_docker()
    return ensure_sandbox_image(base_image(), tag=SANDBOX_IMAGE)


@pytest.fixture(scope="module", params=BACKENDS)
def service(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """A server per backend with two sandboxes, so that a batch of a few programs reaches both."""
    backend = request.param
    settings: dict[str, object] = {
        "sandbox_backend": backend,
        "sandbox__pool_size": 2,
        "sandbox__pool_name": pool_name(),
    }
    if backend == "docker":
        settings["sandbox__image"] = request.getfixturevalue("docker_image")
    with running_server(tmp_path_factory.mktemp(f"code-{backend}"), None, **settings) as server:
        if backend == "local" and sandbox_status(server)["isolation"] != "bubblewrap":
            pytest.skip("bubblewrap cannot run here (apt-get install bubblewrap; needs user namespaces)")
        yield server


def sandbox_status(server: Server) -> dict[str, Any]:
    return httpx.get(f"{server.url}/readyz", timeout=10).json()["sandbox"]
