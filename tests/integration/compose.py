"""Run the deployment docs' commands, as written, against a real engine: a compose project, its containers, its
sandboxes, and how to be sure nothing of it is left.

The commands come from the ```bash blocks of README.md and docs/deploy.md. Only the environment differs from what a
user types: a unique project name (COMPOSE_PROJECT_NAME), free host ports, image tags of this checkout (so a test
never replaces the images a developer runs), and, where this host trusts extra CA certificates
(/usr/local/share/ca-certificates, e.g. a TLS-inspecting proxy), those for pip inside the build (PIP_CA_CERTS).
"""

from __future__ import annotations

import hashlib
import os
import re
import shlex
import socket
import subprocess
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import docker
import httpx
import pytest
from docker.models.containers import Container

from tests.images.build import ensure_offline_base, require_docker

ROOT = Path(__file__).resolve().parents[2]
DOCS = (ROOT / "README.md", ROOT / "docs" / "deploy.md")
DEFAULT_BASE = "python:3.12-slim"
POOL_LABEL = "verifier.sandbox.pool"
PROJECT_LABEL = "com.docker.compose.project"
SERVICE_LABEL = "com.docker.compose.service"
LOCAL_CAS = Path("/usr/local/share/ca-certificates")
BUILD_TIMEOUT_S = 1200  # the first build downloads the service's dependencies
COMMAND_TIMEOUT_S = 300
# This checkout's images: built once, reused by every later run through the layer cache.
TAG = "test-" + hashlib.sha256(str(ROOT).encode()).hexdigest()[:8]


def doc_command(pattern: str) -> str:
    """The one command line of the docs' bash blocks that matches `pattern` (in full), its comment cut off."""
    found = {line for line in doc_lines() if re.fullmatch(pattern, line)}
    assert len(found) == 1, f"expected one command matching {pattern!r} in README.md / docs/deploy.md, found {found}"
    return found.pop()


def doc_lines() -> list[str]:
    lines = []
    for doc in DOCS:
        for block in re.findall(r"```bash\n(.*?)```", doc.read_text(), re.S):
            lines += [re.sub(r"\s+#.*$", "", line).strip() for line in block.splitlines()]
    return [line for line in lines if line]


def compose_cli() -> list[str]:
    """`docker compose` (v2) where the plugin is installed, else `docker-compose` (v1); skip without either."""
    for cli in (["docker", "compose"], ["docker-compose"]):
        try:
            done = subprocess.run([*cli, "version"], capture_output=True, timeout=60)
        except FileNotFoundError:
            continue
        if done.returncode == 0:
            return cli
    pytest.skip("neither `docker compose` (v2) nor `docker-compose` (v1) is installed")


def base_image_override() -> str | None:
    """None where the default base (python:3.12-slim) is here or can be pulled; else the offline base, built now
    (by scripts/offline-base-image.sh, as the docs say) if missing. $VERIFIER_TEST_BASE_IMAGE wins."""
    if os.environ.get("VERIFIER_TEST_BASE_IMAGE"):
        return os.environ["VERIFIER_TEST_BASE_IMAGE"]
    for probe in (["image", "inspect", DEFAULT_BASE], ["pull", "--quiet", DEFAULT_BASE]):
        if subprocess.run(["docker", *probe], capture_output=True, timeout=COMMAND_TIMEOUT_S).returncode == 0:
            return None
    return ensure_offline_base()


def host_extra_cas() -> str:
    return "".join(p.read_text() for p in sorted(LOCAL_CAS.glob("**/*.crt")) if p.is_file())


def free_ports(count: int) -> list[int]:
    """`count` consecutive TCP ports free on 127.0.0.1 (a replica range must be contiguous)."""
    rng = uuid.uuid4().int
    for attempt in range(200):
        first = 20000 + (rng + attempt * 7919) % 30000
        if all(_port_free(first + i) for i in range(count)):
            return [first + i for i in range(count)]
    raise RuntimeError(f"no {count} consecutive free ports found")


def _port_free(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


@dataclass
class Project:
    """One compose project under test, named uniquely, and the Docker API to look at what it made."""

    name: str
    env: dict[str, str]
    cli: list[str]
    log_dir: Path
    engine: docker.DockerClient = field(default_factory=lambda: docker.from_env(timeout=60))
    background: list[subprocess.Popen[bytes]] = field(default_factory=list)

    # --- running the docs' commands -----------------------------------------------------------------------------

    def argv(self, line: str) -> tuple[list[str], dict[str, str]]:
        """A docs command line as argv and environment: `export A=B`/`A=B cmd` set variables, and `docker compose`
        becomes the compose CLI this host has."""
        words, env = shlex.split(line), dict(self.env)
        if words[0] == "export":
            words = words[1:]
        while words and re.fullmatch(r"[A-Z_][A-Z0-9_]*=.*", words[0]):
            key, value = words.pop(0).split("=", 1)
            env.setdefault(key, value)  # what the test pinned (ports, tags) wins over the docs' example values
        if words[:2] == ["docker", "compose"]:
            words = [*self.cli, *words[2:]]
        if words[: len(self.cli)] == self.cli and (ROOT / ".env").exists():
            words[len(self.cli) : len(self.cli)] = ["--env-file", os.devnull]  # a developer's .env stays out of it
        return words, env

    def export(self, line: str) -> None:
        """Apply an `export A=B C=D` line of the docs to every later command."""
        words, env = self.argv(line)
        assert not words, f"not a plain export: {line!r}"
        self.env = env

    def run(self, line: str, timeout: float = COMMAND_TIMEOUT_S) -> str:
        argv, env = self.argv(line)
        done = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout)
        output = done.stdout + done.stderr
        with (self.log_dir / f"{self.name}.log").open("a") as log:
            log.write(f"$ {line}\n{output}\n")
        assert done.returncode == 0, f"`{line}` exited with {done.returncode}:\n{_tail(output)}"
        return output

    def start(self, line: str) -> subprocess.Popen[bytes]:
        """Run a foreground command (`docker compose up --build`) in the background, its output to a log."""
        argv, env = self.argv(line)
        with (self.log_dir / f"{self.name}-up.log").open("wb") as log:
            process = subprocess.Popen(argv, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
        self.background.append(process)
        return process

    def up_log(self) -> str:
        path = self.log_dir / f"{self.name}-up.log"
        return _tail(path.read_text(errors="replace")) if path.exists() else ""

    # --- what the project made -------------------------------------------------------------------------------

    def containers(self, service: str | None = None) -> list[Container]:
        labels = [f"{PROJECT_LABEL}={self.name}", *([f"{SERVICE_LABEL}={service}"] if service else [])]
        return self.engine.containers.list(all=True, filters={"label": labels}, ignore_removed=True)

    def verifiers(self) -> list[Container]:
        return sorted(self.containers("verifier"), key=lambda c: int(c.labels["com.docker.compose.container-number"]))

    def sandboxes(self, replica: int = 1, *, running_only: bool = False) -> list[Container]:
        label = f"{POOL_LABEL}={self.name}-verifier-{replica}"
        return self.engine.containers.list(all=not running_only, filters={"label": label}, ignore_removed=True)

    def all_sandboxes(self) -> list[Container]:
        """Every sandbox container of this project's replicas, running or not."""
        pattern = re.compile(rf"{re.escape(self.name)}-verifier-\d+")
        found = self.engine.containers.list(all=True, filters={"label": POOL_LABEL}, ignore_removed=True)
        return [c for c in found if pattern.fullmatch(c.labels.get(POOL_LABEL, ""))]

    def leftovers(self) -> dict[str, list[str]]:
        """What of this project still exists: containers (sandboxes included), networks, volumes."""
        label = {"label": f"{PROJECT_LABEL}={self.name}"}
        return {
            "containers": [c.name for c in self.containers()],
            "sandboxes": [c.name for c in self.all_sandboxes()],
            "networks": [n.name for n in self.engine.networks.list(filters=label)],
            "volumes": [v.name for v in self.engine.volumes.list(filters=label)],
        }

    def published_url(self, container: Container, port: str = "8088/tcp") -> str:
        container.reload()
        binding = container.attrs["NetworkSettings"]["Ports"][port][0]
        return f"http://{binding['HostIp']}:{binding['HostPort']}"

    # --- waiting ---------------------------------------------------------------------------------------------------

    def wait_healthy(
        self, containers: Callable[[], list[Container]], count: int, timeout: float, *, starting: bool = False
    ) -> list[Container]:
        """Wait until `count` containers are healthy (their healthcheck: /readyz 200); fail with the logs if not.
        `starting`: a foreground `up` is building and starting them, and must not fail meanwhile."""
        deadline = time.monotonic() + timeout
        states: list[str] = []
        while time.monotonic() < deadline:
            for process in self.background if starting else []:
                assert process.poll() in (None, 0), f"compose exited with {process.returncode}:\n{self.up_log()}"
            found = containers()
            states = [c.attrs["State"].get("Health", {}).get("Status", c.status) for c in found]
            if len(found) == count and all(s == "healthy" for s in states):
                return found
            time.sleep(0.5)
        logs = "\n".join(c.logs(tail=40).decode(errors="replace") for c in containers())
        raise AssertionError(f"not {count} healthy within {timeout}s: {states}\n{logs}\n{self.up_log()}")

    # --- teardown --------------------------------------------------------------------------------------------------

    def force_down(self) -> None:
        """Whatever happened, leave nothing behind (the tests check `down` itself before this runs)."""
        argv, env = self.argv("docker compose down --remove-orphans --timeout 30")
        subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, timeout=COMMAND_TIMEOUT_S)
        for container in self.all_sandboxes():
            container.remove(force=True)
        for process in self.background:
            try:
                process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        self.engine.close()


@contextmanager
def project(tmp_path: Path, **env: str) -> Iterator[Project]:
    """A uniquely named compose project of this checkout; `down` in the end, whatever happens."""
    require_docker()
    name = f"vtest{os.getpid()}{uuid.uuid4().hex[:6]}"
    inherited = {k: v for k, v in os.environ.items() if not k.startswith(("VERIFIER_", "COMPOSE_"))}
    pinned = {
        "COMPOSE_PROJECT_NAME": name,
        "VERIFIER_IMAGE": f"reward-verifier:{TAG}",
        "SANDBOX_IMAGE": f"verifier-sandbox:{TAG}",
        "LB_IMAGE": f"verifier-lb:{TAG}",
    }
    cas = os.environ.get("PIP_CA_CERTS") or host_extra_cas()
    if cas:
        pinned["PIP_CA_CERTS"] = cas
    base = base_image_override()
    if base is not None:
        pinned["BASE_IMAGE"] = base
    proj = Project(name, inherited | pinned | env, compose_cli(), tmp_path)
    try:
        yield proj
    finally:
        proj.force_down()


def score(url: str, items: list[dict[str, Any]], timeout: float = 120) -> list[dict[str, Any]]:
    response = httpx.post(f"{url}/v1/score", json={"items": items}, timeout=timeout)
    assert response.status_code == 200, response.text
    return list(response.json()["results"])


def _tail(text: str, lines: int = 60) -> str:
    return "\n".join(text.strip().splitlines()[-lines:])
