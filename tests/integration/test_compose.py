"""`docker compose up`, as a newcomer runs it from the docs: build (on the offline base where no registry answers),
wait for healthy, score math, format and code (run in hardened sandbox containers), lose sandboxes and the service
itself and recover, `docker compose down` and nothing is left. Then two replicas behind one address.

Every compose command is a line of the docs' bash blocks, run as written (see tests/integration/compose.py for the
environment it runs in). Slow the first time (the images build: minutes); later runs reuse the layer cache.
"""

from __future__ import annotations

import contextlib
import re
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import docker.errors
import httpx
import pytest
from docker.models.containers import Container

from tests.integration.compose import (
    BUILD_TIMEOUT_S,
    Project,
    doc_command,
    free_ports,
    project,
    score,
)
from trainer_client import ClientConfig, VerifierReward

pytestmark = [pytest.mark.docker, pytest.mark.slow]

SERVICE_UID = "10000"
HEALTHY_TIMEOUT_S = 300  # generous: a bound on waiting, not a performance claim

CODE_TESTS: list[dict[str, Any]] = [
    {"type": "call", "fn": "double", "args": [21], "expected": 42},
    {"type": "call", "fn": "double", "args": [0], "expected": 0},
]
# Prints where it runs: the backend names every sandbox "sandbox"; a sandbox uid is 10001 or above; only loopback.
WHERE = "import os, socket\nprint(socket.gethostname(), os.getuid() >= 10001, [n for _, n in socket.if_nameindex()])\n"
BATCH: list[dict[str, Any]] = [
    {"id": "math", "completion": "<think>48 + 24</think>The answer is \\boxed{72}.", "math": {"gold": "72"},
     "format": {}},
    {"id": "format", "completion": "no reasoning, just 72", "format": {}},
    {"id": "code", "completion": "<think>twice</think>```python\ndef double(x):\n    return 2 * x\n```",
     "code": {"tests": CODE_TESTS}},
    {"id": "half", "completion": "```python\ndef double(x):\n    return x * x\n```", "code": {"tests": CODE_TESTS}},
    {"id": "where", "completion": f"```python\n{WHERE}```",
     "code": {"tests": [{"type": "stdio", "stdout": "sandbox True ['lo']"}]}},
]  # fmt: skip
EXPECTED = {"math": 2.0, "format": 0.0, "code": 1.0, "half": 0.5, "where": 1.0}


@pytest.mark.timeout(2400)  # a first run builds the offline base (if needed) and the images
def test_compose_up_as_the_docs_say(tmp_path: Path) -> None:
    [port] = free_ports(1)
    with project(tmp_path, VERIFIER_HOST_PORT=str(port)) as proj:
        assert doc_command(r"scripts/offline-base-image.sh")  # what ensure_offline_base ran, if it had to
        up = r"BASE_IMAGE=\S+ docker compose up --build" if "BASE_IMAGE" in proj.env else r"docker compose up --build"
        proj.start(doc_command(up))
        [verifier] = proj.wait_healthy(proj.verifiers, 1, BUILD_TIMEOUT_S, starting=True)
        url = f"http://127.0.0.1:{port}"

        check_service_container(verifier, port)
        assert_scores(score(url, BATCH))
        check_sandboxes_hardened(proj.sandboxes(running_only=True))

        survive_sandbox_kills(proj, url)
        survive_restart(proj, url)
        survive_crash(proj, url)

        proj.run(doc_command(r"docker compose down"))
        assert proj.leftovers() == {"containers": [], "sandboxes": [], "networks": [], "volumes": []}


def check_service_container(verifier: Container, port: int) -> None:
    host = verifier.attrs["HostConfig"]
    assert host["PortBindings"] == {"8088/tcp": [{"HostIp": "127.0.0.1", "HostPort": str(port)}]}
    assert host["RestartPolicy"]["Name"] == "unless-stopped"
    assert host["ReadonlyRootfs"] is True and "ALL" in host["CapDrop"]
    processes = verifier.top(ps_args="-eo pid,uid,args")["Processes"]  # docker top needs the pid column
    service = [uid for _, uid, args in processes if args == "/opt/verifier/bin/python -m verifier_service"]
    assert service == [SERVICE_UID], processes  # the entrypoint dropped root before the service started


def check_sandboxes_hardened(sandboxes: list[Container]) -> None:
    assert sandboxes, "the service started no sandbox containers"
    for sandbox in sandboxes:
        host, config = sandbox.attrs["HostConfig"], sandbox.attrs["Config"]
        assert host["NetworkMode"] == "none"
        assert host["ReadonlyRootfs"] is True
        assert host["CapDrop"] == ["ALL"] and not host.get("CapAdd")
        assert "no-new-privileges" in host["SecurityOpt"] and not host["Privileged"]
        assert not host.get("Binds") and not sandbox.attrs["Mounts"]  # no socket, nothing of the host
        assert int(config["User"].split(":")[0]) >= 10001
        uids = {uid for _, uid, _ in sandbox.top(ps_args="-eo pid,uid,args")["Processes"]}
        assert "0" not in uids and uids, uids  # every process in it, the runner included, is non-root


def assert_scores(results: list[dict[str, Any]]) -> None:
    got = {r["id"]: r["reward"] for r in results}
    assert got == EXPECTED, results


def survive_sandbox_kills(proj: Project, url: str) -> None:
    """A sandbox killed under a program: that program is retried once on a fresh sandbox and scored as usual. If its
    sandbox dies again, it is `null` (sandbox_unavailable), never 0; the rest of the batch is scored either way, and
    the pool refills for the next request."""
    results, kills = score_while_killing(proj, url, "once", max_kills=1)
    assert kills == 1
    assert [r["reward"] for r in results] == [2.0, 1.0], results

    results, kills = score_while_killing(proj, url, "always", max_kills=10)
    assert kills >= 2
    [math, slow] = results
    assert math["reward"] == 2.0
    assert slow["reward"] is None and slow["status"] == "error", slow
    assert slow["components"]["code"]["verdict"] == "sandbox_unavailable", slow

    assert_scores(score(url, BATCH))


def score_while_killing(proj: Project, url: str, marker: str, max_kills: int) -> tuple[list[dict[str, Any]], int]:
    """Score a math item and a program that takes a few seconds, killing the sandbox container that runs the program
    (found by a marker in its process list) up to `max_kills` times while the request is in flight."""
    marker = f"marker-{marker}-{time.monotonic_ns()}"
    program = (
        "import subprocess, sys\n\ndef double(x):\n"
        f"    subprocess.run([sys.executable, '-c', 'import time; time.sleep(4)', '{marker}'], check=True)\n"
        "    return 2 * x\n"
    )
    items = [BATCH[0], {"id": "slow", "completion": f"```python\n{program}```",
                        "code": {"tests": CODE_TESTS[:1], "timeout_s": 30}}]  # fmt: skip
    with ThreadPoolExecutor(1) as pool:
        request = pool.submit(score, url, items)
        kills = kill_sandboxes_running(proj, marker, request, max_kills)
        return request.result(timeout=180), kills


def kill_sandboxes_running(proj: Project, marker: str, request: Future[Any], max_kills: int) -> int:
    killed: set[str] = set()
    deadline = time.monotonic() + 120
    while not request.done() and len(killed) < max_kills and time.monotonic() < deadline:
        for sandbox in proj.sandboxes(running_only=True):
            if sandbox.id in killed or not runs(sandbox, marker):
                continue
            try:
                sandbox.kill()
            except docker.errors.APIError:  # it finished and went meanwhile
                continue
            killed.add(sandbox.id)
            break  # one at a time: the program's retry may land on the next sandbox of this very list
        time.sleep(0.1)
    return len(killed)


def runs(sandbox: Container, marker: str) -> bool:
    try:
        processes = sandbox.top(ps_args="-eo pid,args")["Processes"] or []
    except docker.errors.APIError:  # not running any more
        return False
    return any(marker in row[-1] for row in processes)


def survive_restart(proj: Project, url: str) -> None:
    proj.run("docker compose restart verifier")
    proj.wait_healthy(proj.verifiers, 1, HEALTHY_TIMEOUT_S)
    assert_scores(score(url, BATCH))


def survive_crash(proj: Project, url: str) -> None:
    """The service process dies (SIGKILL: no cleanup): the restart policy brings the container back, and the new
    service removes the sandboxes its predecessor left before it starts its own."""
    [verifier] = proj.verifiers()
    restarts = verifier.attrs["RestartCount"]
    kill_service_process(verifier)
    restarted = wait_for(lambda: [v for v in proj.verifiers() if v.attrs["RestartCount"] > restarts], "a restart")
    assert restarted
    proj.wait_healthy(proj.verifiers, 1, HEALTHY_TIMEOUT_S)
    pool_size = wait_for(lambda: full_pool(url), "a full sandbox pool")
    sandboxes = proj.sandboxes()
    assert len(sandboxes) == pool_size and {s.status for s in sandboxes} == {"running"}, sandboxes
    assert_scores(score(url, BATCH))


def kill_service_process(verifier: Container) -> None:
    """SIGKILL `python -m verifier_service` from inside, as its own user (works whoever runs the tests)."""
    script = (
        "import os, signal\n"
        "for pid in filter(str.isdigit, os.listdir('/proc')):\n"
        "    try:\n"
        "        cmd = open(f'/proc/{pid}/cmdline', 'rb').read().split(b'\\0')\n"
        "    except OSError:\n"
        "        continue\n"
        "    if cmd[1:3] == [b'-m', b'verifier_service']:\n"
        "        os.kill(int(pid), signal.SIGKILL)\n"
    )
    with contextlib.suppress(docker.errors.APIError):  # the container may go down before the exec reports back
        verifier.exec_run(["/opt/verifier/bin/python", "-c", script], user=SERVICE_UID)


def full_pool(url: str) -> int | None:
    """The pool size once every sandbox of the pool is up, else None."""
    try:
        sandbox = httpx.get(f"{url}/readyz", timeout=5).json()["sandbox"]
    except (httpx.HTTPError, ValueError, KeyError):
        return None
    return int(sandbox["pool_size"]) if sandbox.get("up") == sandbox.get("pool_size") else None


def wait_for(probe: Callable[[], Any], what: str, timeout: float = HEALTHY_TIMEOUT_S) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = probe()
        if value:
            return value
        time.sleep(0.5)
    raise AssertionError(f"no {what} within {timeout}s")


@pytest.mark.timeout(1800)
def test_two_replicas_behind_one_address(tmp_path: Path) -> None:
    """The scale-out recipe: two replicas, each with its own sandbox pool, HAProxy in front; a trainer's reward
    function at that one address spreads its chunks over both, and keeps scoring when one replica is killed.
    `make down` then removes everything, the killed replica's sandboxes included."""
    [lb_port], replica_ports = free_ports(1), free_ports(2)
    ports = {"LB_PORT": str(lb_port), "VERIFIER_HOST_PORT": f"{replica_ports[0]}-{replica_ports[-1]}"}
    with project(tmp_path, **ports) as proj:
        proj.export(doc_command(r"export COMPOSE_FILE=\S+ VERIFIER_HOST_PORT=\S+"))
        proj.run(doc_command(r"docker compose up -d --build --scale verifier=2"), timeout=BUILD_TIMEOUT_S)
        replicas = proj.wait_healthy(proj.verifiers, 2, HEALTHY_TIMEOUT_S)
        pools = [proj.sandboxes(n, running_only=True) for n in (1, 2)]
        assert all(pools), pools  # each replica has a pool of its own, under its own label ...
        uids = [{int(s.attrs["Config"]["User"].split(":")[0]) for s in pool} for pool in pools]
        assert not uids[0] & uids[1], uids  # ... and its own sandbox uids: process limits count per uid

        lb_url = f"http://127.0.0.1:{lb_port}"
        wait_for(lambda: ready(lb_url), "the load balancer's /readyz 200")
        reward = VerifierReward(["math", "format"], base_url=lb_url,
                                client_config=ClientConfig(chunk_size=4, max_concurrency=4))  # fmt: skip
        try:
            before = [requests_served(proj.published_url(r)) for r in replicas]
            assert score_gsm8k_like(reward) == [2.0, 0.0] * 16
            after = [requests_served(proj.published_url(r)) for r in replicas]
            assert all(a > b for a, b in zip(after, before, strict=True)), (before, after)  # both took chunks

            replicas[0].kill()
            wait_for(lambda: all(s.status == "exited" for s in proj.sandboxes(1)), "the dead replica's sandboxes")
            assert proj.sandboxes(1), "a killed replica leaves its (stopped) sandboxes behind"
            assert score_gsm8k_like(reward) == [2.0, 0.0] * 16
        finally:
            reward.close()

        proj.run(doc_command(r"make down"))
        assert proj.leftovers() == {"containers": [], "sandboxes": [], "networks": [], "volumes": []}


def score_gsm8k_like(reward: VerifierReward) -> list[float | None]:
    completions = ["<think>6 * 7</think>The answer is \\boxed{42}.", "The answer is 41."] * 16
    return reward(prompts=["What is 6 * 7?"] * 32, completions=completions, completion_ids=None, solution=["42"] * 32)


def ready(url: str) -> bool:
    try:
        return httpx.get(f"{url}/readyz", timeout=5).status_code == 200
    except httpx.HTTPError:
        return False


def requests_served(url: str) -> float:
    metrics = httpx.get(f"{url}/metrics", timeout=10).text
    found = re.search(r'^verifier_requests_total\{status="200"\} (\S+)$', metrics, re.M)
    return float(found.group(1)) if found else 0.0
