"""Settings and app wiring that need no running server."""

from __future__ import annotations

import asyncio
import re

import pytest
from fastapi.testclient import TestClient
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from sandbox.api import SandboxConfig, pool_name
from verifier_service.app import create_app
from verifier_service.schema import ScoreItem
from verifier_service.settings import SandboxSettings, VerifierSettings


def test_settings_from_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VERIFIER_PORT", "9001")
    monkeypatch.setenv("VERIFIER_MATH_WORKERS", "3")
    monkeypatch.setenv("VERIFIER_API_KEY", "hunter2-secret")
    settings = VerifierSettings()
    assert (settings.port, settings.math_workers) == (9001, 3)
    assert settings.api_key is not None and settings.api_key.get_secret_value() == "hunter2-secret"
    assert "hunter2" not in repr(settings)


def test_default_port_is_not_vllms() -> None:
    assert VerifierSettings().port == 8088


def test_settings_fail_fast() -> None:
    with pytest.raises(ValidationError, match="MATH_TIMEOUT_S"):
        VerifierSettings(math_timeout_s=60, batch_timeout_s=30)
    with pytest.raises(ValidationError):
        VerifierSettings(port=0)


@pytest.mark.parametrize("key", ["", "  "])
def test_an_empty_api_key_is_refused_not_taken_for_no_auth(monkeypatch: pytest.MonkeyPatch, key: str) -> None:
    monkeypatch.setenv("VERIFIER_API_KEY", key)
    with pytest.raises(ValidationError, match="VERIFIER_API_KEY is set but empty"):
        VerifierSettings()


def test_not_ready_before_the_pool_starts() -> None:
    client = TestClient(create_app(VerifierSettings(math_workers=1)))  # no `with`: the lifespan has not run
    response = client.get("/readyz")
    assert response.status_code == 503 and response.json()["status"] == "starting"
    assert client.get("/healthz").status_code == 200


def test_ready_inside_the_lifespan() -> None:
    with TestClient(create_app(VerifierSettings(math_workers=1))) as client:
        assert client.get("/readyz").status_code == 200
        body = {"items": [{"completion": "\\boxed{\\frac{2}{4}}", "math": {"gold": "1/2"}}]}
        assert client.post("/v1/score", json=body).json()["results"][0]["reward"] == 1.0


def test_item_needs_a_component() -> None:
    with pytest.raises(ValidationError, match="at least one of"):
        ScoreItem(completion="x")
    assert ScoreItem(completion="x", format={}).requested() == ["format"]


def test_sandbox_settings_reach_the_executor(monkeypatch: pytest.MonkeyPatch) -> None:
    from verifier_service.resources import sandbox_config

    monkeypatch.setenv("VERIFIER_SANDBOX__UID_BASE", "20001")
    monkeypatch.setenv("VERIFIER_SANDBOX__POOL_NAME", "replica-2")
    monkeypatch.setenv("VERIFIER_SANDBOX__MAX_WALL_S", "7")
    config = sandbox_config(VerifierSettings())
    assert (config.uid_base, config.pool_name, config.max_limits.wall_s) == (20001, "replica-2", 7.0)
    assert config.compile_limits == SandboxConfig().compile_limits  # the defaults: 30 s, 20 s, 1 GB, 16 MB
    for name, value in {"WALL_S": "45", "CPU_S": "9", "MEMORY_MB": "2048", "MAX_BINARY_MB": "64"}.items():
        monkeypatch.setenv(f"VERIFIER_SANDBOX__COMPILE_{name}", value)
    limits = sandbox_config(VerifierSettings()).compile_limits
    assert (limits.wall_s, limits.cpu_s, limits.memory_mb, limits.max_file_mb) == (45.0, 9.0, 2048, 64)


@pytest.mark.parametrize(
    ("name", "value"),
    [("COMPILE_WALL_S", "0"), ("COMPILE_CPU_S", "601"), ("COMPILE_MEMORY_MB", "64"), ("COMPILE_MAX_BINARY_MB", "0")],
)
def test_compile_limits_out_of_range_fail_naming_the_setting(
    monkeypatch: pytest.MonkeyPatch, name: str, value: str
) -> None:
    monkeypatch.setenv(f"VERIFIER_SANDBOX__{name}", value)
    with pytest.raises(ValidationError, match=name.lower()):
        VerifierSettings()


def test_a_compile_may_not_have_more_memory_than_the_sandbox(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VERIFIER_SANDBOX__MAX_MEMORY_MB", "1024")
    monkeypatch.setenv("VERIFIER_SANDBOX__COMPILE_MEMORY_MB", "2048")
    with pytest.raises(ValidationError, match="COMPILE_MEMORY_MB must not exceed"):
        VerifierSettings()


def test_a_lower_sandbox_memory_lowers_the_compile_limit_unless_that_is_set(monkeypatch: pytest.MonkeyPatch) -> None:
    """A deployment that lowered MAX_MEMORY_MB for Python programs (below the compile default, 1024) still starts."""
    monkeypatch.setenv("VERIFIER_SANDBOX__MAX_MEMORY_MB", "512")
    assert VerifierSettings().sandbox.compile_memory_mb == 512
    monkeypatch.setenv("VERIFIER_SANDBOX__MAX_MEMORY_MB", "8192")
    assert VerifierSettings().sandbox.compile_memory_mb == 1024


def test_an_internal_error_is_a_500_without_detail_and_is_counted(monkeypatch: pytest.MonkeyPatch) -> None:
    """A bug in the engine (the only way to a 500) still shows in verifier_requests_total."""
    from verifier_service.engine import Engine

    async def broken(self: Engine, items: object) -> None:
        raise RuntimeError("a bug with secret details")

    monkeypatch.setattr(Engine, "score", broken)
    app = create_app(VerifierSettings(math_workers=1, code_enabled=False))
    with TestClient(app, raise_server_exceptions=False) as client:
        response = client.post("/v1/score", json={"items": [{"completion": "x", "format": {}}]})
        metrics = client.get("/metrics").text
    assert response.status_code == 500 and "internal error (request id" in response.json()["detail"]
    assert "secret" not in response.text
    assert 'verifier_requests_total{status="500"} 1.0' in metrics


# Docker's rule for a container name (moby, daemon/names: RestrictedNamePattern); tests/sandbox/test_docker.py checks
# it against the engine. A sandbox container is named `<pool name>-sandbox-<slot>`.
DOCKER_NAME = re.compile(r"/?[a-zA-Z0-9][a-zA-Z0-9_.-]+")
POOL_NAMES = ["default", "a", "0", "proj-verifier-1", "stack_verifier.2", "ray-10.0.3.7-1", "A" * 64, "9._-"]
NOT_POOL_NAMES = ["_pool", ".x", "-a", "café", "ｆｕｌｌ", "a b", "a/b", "", "default\n", "a" * 65]


@pytest.mark.parametrize("name", POOL_NAMES)
def test_a_pool_name_the_settings_take_names_valid_containers(name: str) -> None:
    assert SandboxSettings(pool_name=name).pool_name == name
    assert all(DOCKER_NAME.fullmatch(f"{name}-sandbox-{slot}") for slot in (0, 255))


@pytest.mark.parametrize("name", NOT_POOL_NAMES)
def test_a_pool_name_docker_would_refuse_for_a_container_is_refused(name: str) -> None:
    with pytest.raises(ValidationError, match="pool_name"):
        SandboxSettings(pool_name=name)


@given(st.text(min_size=1, max_size=100))
def test_the_entrypoint_makes_a_pool_name_the_settings_take_from_any_text(text: str) -> None:
    name = pool_name(text)  # what deploy/entrypoint.py makes of a container's compose or swarm labels
    assert SandboxSettings(pool_name=name).pool_name == name and DOCKER_NAME.fullmatch(f"{name}-sandbox-0")


def test_the_largest_sandbox_pool_fits_one_block_of_uids() -> None:
    """Each replica gets one block of sandbox uids (deploy/entrypoint.py, ray_serve), one uid per sandbox."""
    from sandbox.uids import BLOCK

    assert SandboxSettings(pool_size=BLOCK).pool_size == BLOCK
    with pytest.raises(ValidationError, match="pool_size"):
        SandboxSettings(pool_size=BLOCK + 1)


def test_closing_the_runtime_waits_for_its_ready_announcer_to_end(monkeypatch: pytest.MonkeyPatch) -> None:
    """close() cancels the task that logs 'verifier ready' and returns once it has ended (however many loop turns
    its ending takes), so nothing of the runtime is left running when the loop closes."""
    from verifier_service.runtime import Runtime

    ended: list[bool] = []

    async def announcer(self: Runtime) -> None:
        try:
            await asyncio.sleep(3600)
        finally:
            await asyncio.sleep(0.05)
            ended.append(True)

    monkeypatch.setattr(Runtime, "_say_when_ready", announcer)

    async def main() -> None:
        runtime = Runtime(VerifierSettings(math_workers=1, code_enabled=False))
        await runtime.start()
        await asyncio.sleep(0)  # the announcer waits
        await runtime.close()
        assert ended == [True]

    asyncio.run(main())
