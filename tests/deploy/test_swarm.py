"""compose.swarm.yaml: the stack that docs/deploy.md deploys, as the docker CLI merges it (`docker stack config`,
client-side: no swarm is made). Every port in host mode and the replicas found by DNS: nothing needs IPVS."""

from __future__ import annotations

import itertools
import os
import re
import shlex
import shutil
import subprocess
from typing import Any

import pytest
import yaml

from tests.conftest import ROOT


def stack_command() -> list[str]:
    """The docs' `docker stack deploy` line, as words."""
    text = (ROOT / "docs" / "deploy.md").read_text()
    [line] = re.findall(r"^docker stack deploy .*$", text, re.M)
    return shlex.split(line)


def merged_stack(**env: str) -> dict[str, Any]:
    if shutil.which("docker") is None:
        pytest.skip("no docker CLI on PATH")
    words = stack_command()
    files = [arg for flag, arg in itertools.pairwise(words) if flag == "-c"]
    done = subprocess.run(
        ["docker", "stack", "config", *(f"--compose-file={name}" for name in files)],
        cwd=ROOT,
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=60,
    )
    if done.returncode != 0 and "unknown command" in done.stderr:
        pytest.skip("this docker CLI has no `docker stack config` (20.10+)")
    assert done.returncode == 0, done.stderr
    return yaml.safe_load(done.stdout)  # type: ignore[no-any-return]


def test_the_documented_stack_needs_no_ipvs() -> None:
    words = stack_command()
    assert words[-1] == "verifier" and "compose.swarm.yaml" in words
    stack = merged_stack(VERIFIER_HOST_PORT="8089")
    services = stack["services"]
    ports = {name: service.get("ports", []) for name, service in services.items()}
    assert all(port["mode"] == "host" for published in ports.values() for port in published), ports
    assert services["verifier"]["deploy"]["endpoint_mode"] == "dnsrr"
    assert services["verifier"]["deploy"]["placement"]["max_replicas_per_node"] == 1
    assert [p["published"] for p in ports["verifier"]] == [8089] and [p["published"] for p in ports["lb"]] == [8088]
    assert services["sandbox-image"]["deploy"]["replicas"] == 0
    assert stack["networks"]["default"]["driver"] == "overlay"


def test_the_lb_finds_the_replicas_by_the_service_name() -> None:
    """HAProxy resolves `verifier` through Docker's DNS: with dnsrr that name is every replica's address."""
    config = (ROOT / "deploy" / "lb" / "haproxy.cfg").read_text()
    assert re.search(r"^\s*server-template verifier \d+ verifier:8088\b", config, re.M)
    assert "nameserver dns 127.0.0.11:53" in config


def test_the_replicas_say_they_are_published_on_every_address_of_their_node() -> None:
    stack = merged_stack(VERIFIER_HOST_PORT="8089")
    assert stack["services"]["verifier"]["environment"]["VERIFIER_PUBLISHED_ADDRESS"] == "0.0.0.0:8089"
