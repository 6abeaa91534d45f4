"""compose.yaml as the compose CLI reads it (`config`: client-side, nothing starts): what it tells the service."""

from __future__ import annotations

import os
import subprocess
from typing import Any

import pytest
import yaml

from tests.conftest import ROOT
from tests.integration.compose import compose_cli


def merged(**env: str) -> dict[str, Any]:
    keep = {k: v for k, v in os.environ.items() if not k.startswith(("VERIFIER_", "COMPOSE_"))}
    done = subprocess.run(
        [*compose_cli(), "-f", "compose.yaml", "config"],
        cwd=ROOT,
        env={**keep, **env},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return yaml.safe_load(done.stdout)  # type: ignore[no-any-return]


def published(port: Any) -> str:
    """host_ip:published of one `ports` entry, in v1's short form or v2's long one."""
    if isinstance(port, str):  # "127.0.0.1:8088:8088/tcp"
        host, published_port, _ = port.rsplit(":", 2)
        return f"{host}:{published_port}"
    return f"{port['host_ip']}:{port['published']}"


@pytest.mark.parametrize(
    "env", [{}, {"VERIFIER_BIND": "0.0.0.0", "VERIFIER_HOST_PORT": "9000"}, {"VERIFIER_HOST_PORT": "8089-8096"}]
)
def test_the_service_is_told_where_compose_publishes_it(env: dict[str, str]) -> None:
    """Inside its container the service listens on 0.0.0.0; its start-up log says who can reach it from what
    compose publishes (VERIFIER_PUBLISHED_ADDRESS), which must be what `ports` publishes."""
    verifier = merged(**env)["services"]["verifier"]
    [port] = verifier["ports"]
    assert verifier["environment"]["VERIFIER_PUBLISHED_ADDRESS"] == published(port)
