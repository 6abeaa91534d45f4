"""verifier_service.ray_serve without a cluster: the application's options, each replica's settings, and the direct
listener (the app's own port beside Serve's proxy), run under Starlette's TestClient, which runs the lifespan.

Needs the `ray` extra: `make test` runs tests/ray with the ray overlay's Python (.venv-ray)."""

from __future__ import annotations

import asyncio
import gc
import re
import socket
import time
from collections.abc import Callable
from types import SimpleNamespace

import httpx
import pytest
from fastapi.testclient import TestClient
from pydantic import ValidationError

from tests.conftest import free_port
from verifier_service import ray_serve
from verifier_service.app import GC_THRESHOLD, create_app
from verifier_service.ray_serve import (
    VerifierReplica,
    bind,
    build_app,
    fitting_nodes,
    replica_defaults,
    serve_directly,
)
from verifier_service.settings import VerifierSettings

ONE_ITEM = {"items": [{"completion": "<think>6*7</think>The answer is 42.", "math": {"gold": "42"}, "format": {}}]}


def deployment_of(args: dict[str, object]) -> object:
    return build_app(args)._bound_deployment  # Serve has no public accessor for an application's deployment


def test_the_application_is_one_replica_per_node_with_the_drivers_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VERIFIER_MATH_TIMEOUT_S", "7")
    monkeypatch.setenv("VERIFIER_SANDBOX_BACKEND", "local")
    deployment = deployment_of({"num_replicas": 3, "num_cpus": 2})
    assert deployment.name == "Verifier"  # type: ignore[attr-defined]
    assert deployment.num_replicas == 3  # type: ignore[attr-defined]
    assert deployment._replica_config.max_replicas_per_node == 1  # type: ignore[attr-defined]
    assert deployment.max_ongoing_requests == 4  # type: ignore[attr-defined]  # two per CPU
    options = deployment.ray_actor_options  # type: ignore[attr-defined]
    assert options["num_cpus"] == 2
    assert options["runtime_env"]["env_vars"] == {
        "VERIFIER_MATH_TIMEOUT_S": "7",
        "VERIFIER_SANDBOX_BACKEND": "local",
        "RAY_USE_UVLOOP": "0",  # uvloop cannot start the sandboxes as another user
    }


def test_bad_arguments_and_bad_settings_fail_in_the_driver(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ValidationError, match="num_replicas"):
        build_app({"num_replicas": 0})
    with pytest.raises(ValidationError, match="num_cpu"):
        build_app({"num_replicas": 1, "num_cpu": 2})  # a typo is refused, not ignored
    monkeypatch.setenv("VERIFIER_MATH_TIMEOUT_S", "200")
    with pytest.raises(ValidationError, match="MATH_TIMEOUT_S must be shorter"):
        build_app({"num_replicas": 1})


def test_the_default_replica_count_is_the_nodes_that_fit() -> None:
    nodes = [
        {"Alive": True, "Resources": {"CPU": 4.0}},
        {"Alive": True, "Resources": {"CPU": 1.0}},
        {"Alive": False, "Resources": {"CPU": 8.0}},
        {"Alive": True, "Resources": {"GPU": 8.0}},  # a head node with num-cpus=0, as KubeRay advises
    ]
    assert fitting_nodes(nodes, 1) == 2
    assert fitting_nodes(nodes, 2) == 1
    assert fitting_nodes(nodes, 16) == 1  # at least one: Serve reports the replica it cannot place


def test_replicas_sharing_a_kernel_get_distinct_sandbox_uids_and_pools() -> None:
    replicas = [replica_defaults(ip, rank, 4) for ip in ("127.0.0.2", "127.0.0.3", "10.0.7.3") for rank in (0, 1)]
    ranges = [range(int(r["VERIFIER_SANDBOX__UID_BASE"]), int(r["VERIFIER_SANDBOX__UID_BASE"]) + 256) for r in replicas]
    same_kernel = ranges[:4]  # two nodes on one host (as bench/scale_ray.py runs), two replicas each
    assert all(set(a).isdisjoint(b) for i, a in enumerate(same_kernel) for b in same_kernel[i + 1 :])
    assert all(r.start >= 20001 and r.stop <= 2**31 - 1024 for r in ranges)
    assert len({r["VERIFIER_SANDBOX__POOL_NAME"] for r in replicas}) == 6
    assert replica_defaults("fd00::3", 0, 1)["VERIFIER_SANDBOX__POOL_NAME"] == "ray-fd00--3-0"
    VerifierSettings(**{k.removeprefix("VERIFIER_").lower(): v for k, v in replicas[0].items() if "__" not in k})


def test_a_replica_sets_up_its_collector_as_the_server_does(monkeypatch: pytest.MonkeyPatch) -> None:
    """A replica's process serves the app only: its imports frozen, the first threshold raised (app.tune_collector)."""
    monkeypatch.setattr(ray_serve.ray.util, "get_node_ip_address", lambda: "127.0.0.1")
    monkeypatch.setattr(ray_serve.serve, "get_replica_context", lambda: SimpleNamespace(rank=None))  # not in Serve
    for name in replica_defaults("127.0.0.1", 0, 1):  # the replica sets them in its process: restored after
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("VERIFIER_CODE_ENABLED", "false")
    threshold = gc.get_threshold()
    gc.unfreeze()
    gc.set_threshold(700, 10, 10)
    try:
        app = VerifierReplica(num_cpus=1, direct=False).__serve_build_asgi_app__()
        assert app.state.settings.math_workers == 1
        assert gc.get_threshold() == (GC_THRESHOLD, 10, 10)
        assert gc.get_freeze_count() > 0
    finally:
        gc.unfreeze()
        gc.set_threshold(*threshold)


def direct_app(port: int) -> TestClient:
    settings = VerifierSettings(host="127.0.0.1", port=port, math_workers=1, code_enabled=False)
    app = create_app(settings)
    serve_directly(app, settings)
    return TestClient(app)


def test_the_direct_listener_serves_the_same_app_for_the_lifespan() -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    with direct_app(port) as client:
        assert httpx.get(f"{url}/readyz", timeout=10).status_code == 200
        direct = httpx.post(f"{url}/v1/score", json=ONE_ITEM, timeout=30).json()
        assert [r["reward"] for r in direct["results"]] == [2.0]
        metrics = client.get("/metrics").text  # one runtime: the app's own metrics count the direct request
        assert 'verifier_requests_total{status="200"} 1.0' in metrics
    with pytest.raises(httpx.ConnectError):  # shut down with the app
        httpx.get(f"{url}/healthz", timeout=5)


def received_until_closed(conn: socket.socket) -> bytes:
    """All the listener sends until it closes the connection (a timeout fails the test)."""
    received = b""
    while chunk := conn.recv(65536):
        received += chunk
    return received


def test_the_direct_listener_bounds_connections_as_the_server_does(caplog: pytest.LogCaptureFixture) -> None:
    """The replica's own listener has the CLI server's connection limits (connections.py): past
    VERIFIER_MAX_CONNECTIONS the connection idle longest is closed to make room, one that sends nothing is answered
    408 once VERIFIER_HEADER_TIMEOUT_S has passed, a client is served all the while, and the log says so."""
    port = free_port()
    settings = VerifierSettings(
        host="127.0.0.1", port=port, math_workers=1, code_enabled=False, max_connections=2, header_timeout_s=2
    )
    app = create_app(settings)
    serve_directly(app, settings)
    with TestClient(app):
        oldest, *silent = (socket.create_connection(("127.0.0.1", port), timeout=30) for _ in range(3))
        try:
            made_room = received_until_closed(oldest)
            answers = [received_until_closed(conn) for conn in silent]
        finally:
            for conn in (oldest, *silent):
                conn.close()
        scored = httpx.post(f"http://127.0.0.1:{port}/v1/score", json=ONE_ITEM, timeout=30)
    assert made_room == b""  # closed to make room: no answer
    for received in answers:
        assert received.startswith(b"HTTP/1.1 408 "), received
        assert b"no complete request headers within 2s" in received
    assert scored.status_code == 200 and scored.json()["results"][0]["reward"] == 2.0
    said = " ".join(r.getMessage() for r in caplog.records if r.name == "verifier_service.connections")
    assert "(VERIFIER_MAX_CONNECTIONS: 2 open at most)" in said and "(VERIFIER_HEADER_TIMEOUT_S)" in said, said


def test_the_direct_listener_says_malformed_requests_a_line_a_second(caplog: pytest.LogCaptureFixture) -> None:
    """As the CLI server (`__main__.server_config`): each request the parser cannot read is answered 400, and they are
    counted in the connections' report, not logged one line each by uvicorn."""
    port = free_port()
    with direct_app(port):
        answers = []
        for _ in range(50):
            with socket.create_connection(("127.0.0.1", port), timeout=30) as conn:
                conn.sendall(b"NOT HTTP\r\n\r\n")
                answers.append(received_until_closed(conn))
        deadline = time.monotonic() + 10  # the last count is said a second after the line before it, at most
        while sum(counted_400(caplog)) < 50 and time.monotonic() < deadline:
            time.sleep(0.2)
    assert all(received.startswith(b"HTTP/1.1 400 ") for received in answers)
    assert "Invalid HTTP request" not in said_by(caplog, "uvicorn.error")
    assert sum(counted_400(caplog)) == 50 and 1 <= len(counted_400(caplog)) <= 3, said_by(caplog, "")


def counted_400(caplog: pytest.LogCaptureFixture) -> list[int]:
    return [int(n) for n in re.findall(r"closed (\d+) connections with 400", caplog.text)]


def said_by(caplog: pytest.LogCaptureFixture, logger: str) -> str:
    return " ".join(r.getMessage() for r in caplog.records if r.name == logger or not logger)


@pytest.mark.parametrize(("make", "nodelay"), [(bind, True), (lambda h, p: socket.create_server((h, p)), False)])
def test_connections_to_the_listener_have_tcp_nodelay(make: Callable[[str, int], socket.socket], nodelay: bool) -> None:
    """asyncio sets TCP_NODELAY only on connections of a socket made with IPPROTO_TCP; without it every answer waits
    for the client's delayed ACK (44 ms per one-item request, measured). `socket.create_server` shows the trap."""

    async def accept_one() -> bool:
        seen: asyncio.Future[bool] = asyncio.get_running_loop().create_future()

        class Probe(asyncio.Protocol):
            def connection_made(self, transport: asyncio.BaseTransport) -> None:
                sock = transport.get_extra_info("socket")
                seen.set_result(bool(sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY)))

        listener = make("127.0.0.1", 0)
        server = await asyncio.get_running_loop().create_server(Probe, sock=listener)
        _, writer = await asyncio.open_connection("127.0.0.1", listener.getsockname()[1])
        try:
            return await asyncio.wait_for(seen, 10)
        finally:
            writer.close()
            server.close()

    assert asyncio.run(accept_one()) is nodelay


def test_a_taken_port_fails_the_replica_with_the_reason() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        settings = VerifierSettings(host="127.0.0.1", port=port, math_workers=1, code_enabled=False)
        app = create_app(settings)
        serve_directly(app, settings)
        with pytest.raises(OSError, match="in use"), TestClient(app):
            pass
