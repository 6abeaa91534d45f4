"""The Docker backend's own promises: hardened containers, labelled and cleaned up (at startup too, after a crash),
replaced when they misbehave or reach their reuse limit, and a clear `sandbox_unavailable` when no engine or image
is there. The hostile-program tests in this folder run on Docker too."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import threading
import time
import uuid
import warnings
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import docker
import pytest

from sandbox import CallTest, RunVerdict, SandboxConfig, TestVerdict
from sandbox.docker_backend import IMAGE_POLL_S, POOL_LABEL, DockerExecutor
from tests.sandbox.conftest import start_executor
from tests.sandbox.live import LiveExecutor

pytestmark = [pytest.mark.docker, pytest.mark.timeout(120, func_only=True)]
HONEST = ("def f(x):\n    return 2 * x\n", CallTest("f", (21,), expected=42))


@pytest.fixture
def engine(docker_image: str) -> Iterator[docker.DockerClient]:
    client = docker.from_env()
    yield client
    client.close()


def containers(client: docker.DockerClient, live: LiveExecutor) -> list[Any]:
    pool = live.executor.config.pool_name  # type: ignore[attr-defined]
    return client.containers.list(all=True, filters={"label": f"{POOL_LABEL}={pool}"}, ignore_removed=True)


RUNNER_STARTED = "def probe():\n    return open('/proc/1/stat').read().rsplit(')', 1)[1].split()[19]\n"  # its PID 1's


def test_containers_are_hardened(request: pytest.FixtureRequest, engine: docker.DockerClient) -> None:
    live = start_executor("docker", request, pool_size=2)
    try:
        found = containers(engine, live)
        assert len(found) == 2
        uids = set()
        for container in found:
            host, config = container.attrs["HostConfig"], container.attrs["Config"]
            assert host["NetworkMode"] == "none" and host["ReadonlyRootfs"] is True
            assert host["CapDrop"] == ["ALL"] and "no-new-privileges" in host["SecurityOpt"]
            assert host["PidsLimit"] > 0 and host["Memory"] > 0 and host["MemorySwap"] == host["Memory"]
            assert host["NanoCpus"] == 1_000_000_000 and host["IpcMode"] == "private"
            assert not host.get("Init")  # the runner is PID 1: see sandbox/docker_backend.py for why
            assert "size=" in host["Tmpfs"]["/tmp"] and "noexec" in host["Tmpfs"]["/tmp"]
            assert host["Binds"] in (None, []) and not host.get("Privileged")
            uid = int(config["User"].split(":")[0])
            assert uid >= 10001 and config["Labels"][POOL_LABEL] == live.executor.config.pool_name  # type: ignore[attr-defined]
            uids.add(uid)
        assert len(uids) == 2  # a uid per container: process limits do not add up across containers
        pool = live.executor.config.pool_name  # type: ignore[attr-defined]
        assert sorted(c.name for c in found) == [f"{pool}-sandbox-0", f"{pool}-sandbox-1"]  # `docker ps` ties them
        assert live.run(*HONEST).score == 1.0
    finally:
        live.close()
    assert containers(engine, live) == []  # removed at shutdown


def test_leftovers_of_a_crashed_service_are_removed_at_startup(
    request: pytest.FixtureRequest, engine: docker.DockerClient, docker_image: str
) -> None:
    pool_name = f"tests-leftovers-{time.monotonic_ns()}"
    labels = {POOL_LABEL: pool_name}
    left = [engine.containers.create(docker_image, ["--serve"], labels=labels, network_mode="none") for _ in range(2)]
    left[0].start()
    live = start_executor("docker", request, pool_size=1, pool_name=pool_name)
    try:
        ids = {c.id for c in containers(engine, live)}
        assert len(ids) == 1 and not ids & {c.id for c in left}
    finally:
        live.close()


def test_a_name_held_by_a_leftover_of_this_pool_is_taken_over_and_by_another_pool_is_left_alone(
    request: pytest.FixtureRequest, engine: docker.DockerClient, docker_image: str
) -> None:
    """Sandbox i is named <pool>-sandbox-<i>. A container of this pool holding that name (its removal failed, say)
    is removed when the slot's next sandbox starts; one of another pool is never touched: that slot cannot start."""
    live = start_executor("docker", request, pool_size=1)
    pool = live.executor.config.pool_name  # type: ignore[attr-defined]
    stray = None
    try:
        (current,) = containers(engine, live)
        current.rename(f"{pool}-renamed")  # the name is free again, for a leftover of this pool to take
        stray = engine.containers.create(docker_image, ["--serve"], name=f"{pool}-sandbox-0", labels={POOL_LABEL: pool})
        killer = "import os, signal\ndef f(x):\n    os.kill(os.getppid(), signal.SIGKILL)\n"
        live.run(killer, HONEST[1])  # its sandbox is replaced: the replacement needs the name
        assert live.run(*HONEST).score == 1.0
        (replacement,) = containers(engine, live)
        assert replacement.name == f"{pool}-sandbox-0" and replacement.id not in (current.id, stray.id)
        stray = None
    finally:
        live.close()
        if stray is not None:
            stray.remove(force=True)
    other = engine.containers.create(docker_image, ["--serve"], name=f"{pool}-sandbox-0", labels={POOL_LABEL: "x"})
    try:
        blocked = start_executor_unready(request, pool_name=pool)
        try:
            assert f"a container named {pool}-sandbox-0 exists and is not of this sandbox pool" in str(
                blocked.status()["last_error"]
            )
            other.reload()
            assert other.status == "created"  # still there, untouched
        finally:
            blocked.close()
    finally:
        other.remove(force=True)


def start_executor_unready(request: pytest.FixtureRequest, **config: Any) -> LiveExecutor:
    """A started docker executor that may not be ready (start_executor insists that it is)."""
    image = request.getfixturevalue("docker_image")
    return LiveExecutor(DockerExecutor(SandboxConfig(pool_size=1, image=image, **config)))


def test_the_engine_shows_which_uids_the_sandboxes_of_other_pools_run_as(
    request: pytest.FixtureRequest, engine: docker.DockerClient
) -> None:
    """What a service in a container of its own cannot see in /proc or /tmp: another service's sandboxes."""
    live = start_executor("docker", request, pool_size=1)
    pool = live.executor.config.pool_name  # type: ignore[attr-defined]
    try:
        uid = live.executor.uid(0)  # type: ignore[attr-defined]
        other = DockerExecutor(SandboxConfig(pool_name=f"{pool}-other"), client=engine)
        assert other.uids_seen_in_use()[uid] == f"sandbox container {pool}-sandbox-0 (pool {pool})"
        same = DockerExecutor(SandboxConfig(pool_name=pool), client=engine)
        assert uid not in same.uids_seen_in_use()  # its own pool's: leftovers, removed at its start
    finally:
        live.close()


def test_a_container_that_misbehaved_is_replaced(request: pytest.FixtureRequest, engine: docker.DockerClient) -> None:
    live = start_executor("docker", request, pool_size=1)
    try:
        (before,) = (c.id for c in containers(engine, live))
        killer = "import os, signal\ndef f(x):\n    os.kill(os.getppid(), signal.SIGKILL)\n"
        result = live.run(killer, HONEST[1])
        assert [t.verdict for t in result.tests] == [TestVerdict.RUNTIME_ERROR], result
        assert live.run(*HONEST).score == 1.0  # waits for the replacement
        after = [c.id for c in containers(engine, live)]
        assert after != [before] and len(after) == 1 and live.status()["replaced"] == 1
    finally:
        live.close()


def test_a_container_is_replaced_after_its_reuse_limit(
    request: pytest.FixtureRequest, engine: docker.DockerClient
) -> None:
    live = start_executor("docker", request, pool_size=1, jobs_per_sandbox=3)
    try:
        # The executor's own first job: the compile that checks the precompiled header (/readyz's cpp_pch), on the
        # first container, which then has two jobs left.
        pch_check = live.executor._pch_check
        assert pch_check is not None

        async def checked() -> None:
            await asyncio.shield(pch_check)

        live.call(checked())
        assert live.status()["cpp_pch"] is True
        seen = [live.probe(RUNNER_STARTED) for _ in range(7)]  # which container (its runner's start time)
        assert [seen.index(s) for s in seen] == [0, 0, 2, 2, 2, 5, 5], seen
        assert live.status()["replaced"] == 2
    finally:
        live.close()


def test_a_container_killed_from_outside_mid_run_is_retried_on_a_fresh_one(
    request: pytest.FixtureRequest, engine: docker.DockerClient
) -> None:
    live = start_executor("docker", request, pool_size=1)
    try:
        (victim,) = containers(engine, live)
        killer = threading.Timer(0.5, victim.kill)
        killer.start()
        result = live.run("import time\ndef f(x):\n    time.sleep(1.5)\n    return 2 * x\n", HONEST[1])
        killer.join()
        assert result.score == 1.0, result  # the infrastructure failed, not the program: the test ran again
    finally:
        live.close()


def test_no_image_means_sandbox_unavailable_never_a_zero(engine: docker.DockerClient) -> None:
    config = SandboxConfig(pool_size=1, image="verifier-sandbox:no-such-image", pool_name="tests-no-image")
    live = LiveExecutor(DockerExecutor(config))
    try:
        status = live.status()
        assert status["ready"] is False and "no-such-image" in status["last_error"]
        result = live.run(*HONEST)
        assert (result.verdict, result.score) == (RunVerdict.SANDBOX_UNAVAILABLE, None)
    finally:
        live.close()


def test_a_missing_image_is_named_once_with_its_build_command_and_used_once_it_is_built(
    engine: docker.DockerClient, docker_image: str, caplog: pytest.LogCaptureFixture
) -> None:
    image = f"verifier-sandbox:missing-{uuid.uuid4().hex[:12]}"
    build = f"docker build -f sandbox/image/Dockerfile -t {image} ."
    offline = f"docker build -f sandbox/image/Dockerfile --build-arg BASE_IMAGE=verifier-base:offline -t {image} ."
    config = SandboxConfig(pool_size=1, image=image, pool_name=f"tests-missing-{uuid.uuid4().hex[:8]}")
    with caplog.at_level(logging.INFO, logger="sandbox"):
        live = LiveExecutor(DockerExecutor(config))
        try:
            status = live.status()
            assert status["ready"] is False and build in status["last_error"] and offline in status["last_error"]
            result = live.run(*HONEST)
            assert (result.verdict, result.score) == (RunVerdict.SANDBOX_UNAVAILABLE, None)
            assert build in (result.detail or "")
            time.sleep(2 * IMAGE_POLL_S)  # it looks for the image again meanwhile, and says nothing more
            engine.images.get(docker_image).tag(image)  # as the command would: the image exists now
            deadline = time.monotonic() + 60
            while not live.status()["ready"] and time.monotonic() < deadline:
                time.sleep(0.1)
            assert live.run(*HONEST).score == 1.0
        finally:
            live.close()
            with contextlib.suppress(docker.errors.ImageNotFound):
                engine.images.remove(image)
    said = [r for r in caplog.records if build in r.getMessage()]
    assert len(said) == 1 and said[0].levelno == logging.ERROR, [r.getMessage() for r in caplog.records]


def test_no_engine_means_sandbox_unavailable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")
    live = LiveExecutor(DockerExecutor(SandboxConfig(pool_size=1)))
    try:
        assert live.status()["ready"] is False and "no Docker engine" in live.status()["last_error"]
        result = live.run(*HONEST)
        assert (result.verdict, result.score) == (RunVerdict.SANDBOX_UNAVAILABLE, None), result
    finally:
        live.close()
        with warnings.catch_warnings():  # docker-py leaks the socket of its failed connect: collect it here
            warnings.simplefilter("ignore", ResourceWarning)
            gc.collect()


def test_submissions_cost_no_container_start(request: pytest.FixtureRequest, engine: docker.DockerClient) -> None:
    """Many concurrent runs, the same two containers throughout: each submission goes to a resident runner."""
    live = start_executor("docker", request, pool_size=2)
    try:
        before = {c.id for c in containers(engine, live)}
        with ThreadPoolExecutor(8) as threads:
            scores = list(threads.map(lambda _: live.run(*HONEST).score, range(40)))
        assert scores == [1.0] * 40 and {c.id for c in containers(engine, live)} == before
    finally:
        live.close()


def test_docker_takes_the_container_names_of_every_pool_name_the_settings_take(
    docker_image: str, engine: docker.DockerClient
) -> None:
    """The rule tests/unit/test_app.py checks the settings against is the engine's: it creates a sandbox container
    named after each pool name the settings take, and refuses one named after each they refuse for its characters."""
    from pydantic import ValidationError

    from tests.unit.test_app import NOT_POOL_NAMES, POOL_NAMES
    from verifier_service.settings import SandboxSettings

    tag = uuid.uuid4().hex[:8]
    for name in POOL_NAMES:
        container = engine.containers.create(docker_image, name=f"{name}{tag}-sandbox-0", network_mode="none")
        container.remove(force=True)
    for name in NOT_POOL_NAMES:
        with pytest.raises(ValidationError):
            SandboxSettings(pool_name=name)
        if name and len(name) <= 64:  # not refused for its length alone
            with pytest.raises(docker.errors.APIError, match="Invalid container name"):
                engine.containers.create(docker_image, name=f"{name}{tag}-sandbox-0", network_mode="none")
