"""What an operator sees, through a real server: the start-up log, the access log, /metrics by status, a client that
goes away, and a math-only deployment."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from tests.conftest import Server, free_port, running_server
from verifier_service.schema import COMPONENTS

BOMB = {"completion": "\\boxed{9^{9^{9^{9}}}}", "math": {"gold": "5"}}


def counters(server: Server) -> dict[str, float]:
    text = httpx.get(f"{server.url}/metrics").text
    return {m[1]: float(m[2]) for m in re.finditer(r'^verifier_requests_total\{status="(\d+)"\} (\S+)$', text, re.M)}


def wait_for(condition: object, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():  # type: ignore[operator]
        assert time.monotonic() < deadline, what
        time.sleep(0.1)


def test_start_up_names_unknown_settings_and_auth_and_probes_stay_out_of_the_access_log(tmp_path: Path) -> None:
    with running_server(tmp_path, apikey="typo", sandbox__poolsize="1", log_level="info", math_workers=1) as server:
        for _ in range(3):
            httpx.get(f"{server.url}/healthz")
            httpx.get(f"{server.url}/readyz")
        httpx.post(f"{server.url}/v1/score", json={"items": [{"completion": "x", "format": {}}]})
        log = server.output()
    assert "VERIFIER_APIKEY is not a setting of the verifier and changes nothing; did you mean VERIFIER_API_KEY?" in log
    assert "VERIFIER_SANDBOX__POOLSIZE is not a setting" in log and "VERIFIER_SANDBOX__POOL_SIZE?" in log
    assert "auth: off (no VERIFIER_API_KEY)" in log
    assert '"POST /v1/score HTTP/1.1" 200' in log
    assert "/healthz" not in log and "/readyz" not in log


def test_an_empty_api_key_stops_the_server_instead_of_opening_it(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("VERIFIER_")}
    env |= {"VERIFIER_API_KEY": "", "VERIFIER_PORT": str(free_port())}
    done = subprocess.run(
        [sys.executable, "-m", "verifier_service"], env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode != 0
    assert "VERIFIER_API_KEY is set but empty" in done.stderr and "Traceback" not in done.stderr


def test_auth_on_is_logged(tmp_path: Path) -> None:
    with running_server(tmp_path, api_key="k", log_level="info", math_workers=1) as server:
        log = server.output()
    assert "auth: on (VERIFIER_API_KEY)" in log and "is not a setting" not in log


def test_metrics_count_every_answer_by_status_and_a_dropped_body_is_no_error(tmp_path: Path) -> None:
    with running_server(tmp_path, api_key="k", math_workers=1, max_request_bytes=100_000) as server:
        key = {"Authorization": "Bearer k"}
        httpx.post(f"{server.url}/v1/score", json={"items": [{"completion": "x", "format": {}}]}, headers=key)
        httpx.post(f"{server.url}/v1/score", json={"items": []}, headers=key)
        httpx.post(f"{server.url}/v1/score", json={"items": []})
        httpx.post(f"{server.url}/v1/score", content=b"x" * 200_000, headers=key)
        port = int(server.url.rsplit(":", 1)[1])
        with socket.create_connection(("127.0.0.1", port)) as conn:  # promises 50 kB, sends 10 bytes, hangs up
            conn.sendall(
                b"POST /v1/score HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer k\r\n"
                b'Content-Type: application/json\r\nContent-Length: 50000\r\n\r\n{"items":'
            )
        wait_for(lambda: "499" in counters(server), 10, f"the dropped request is not counted: {counters(server)}")
        assert counters(server) == {"200": 1.0, "422": 1.0, "401": 1.0, "413": 1.0, "499": 1.0}
        log = server.output()
    assert "Traceback" not in log and "unhandled error" not in log and "ERROR" not in log, log


@pytest.mark.timeout(120)
def test_a_client_that_goes_away_has_its_work_cancelled(tmp_path: Path) -> None:
    """The client gives up after a second; the worker stuck on its item is freed then, not at the 60 s deadline."""
    with running_server(tmp_path, math_workers=1, math_timeout_s=60, batch_timeout_s=120) as server:
        [pid] = httpx.get(f"{server.url}/readyz").json()["math_workers"]["pids"]
        with pytest.raises(httpx.ReadTimeout):
            httpx.post(f"{server.url}/v1/score", json={"items": [BOMB]}, timeout=httpx.Timeout(60, read=1.0))
        wait_for(lambda: counters(server).get("499") == 1.0, 20, f"not cancelled: {counters(server)}")
        wait_for(lambda: httpx.get(f"{server.url}/readyz").status_code == 200, 20, "no fresh worker")
        ready = httpx.get(f"{server.url}/readyz")
        assert pid not in ready.json()["math_workers"]["pids"]
        later = httpx.post(f"{server.url}/v1/score", json={"items": [{"completion": "7", "math": {"gold": "7"}}]})
        assert later.json()["results"][0]["reward"] == 1.0


@pytest.mark.timeout(120)
@pytest.mark.parametrize("version", ["1.1", "1.0"])
def test_a_client_that_closes_its_connection_has_its_work_cancelled(tmp_path: Path, version: str) -> None:
    """Its request sent, the client closes the socket: the server reads the end of input. HTTP/1.1 gets interim
    answers that a gone client resets (a half-close gets its answer: test_http); HTTP/1.0 gets none, so its end of
    input is taken as the client gone, as uvicorn takes it."""
    with running_server(tmp_path, math_workers=1, math_timeout_s=60, batch_timeout_s=120) as server:
        body = json.dumps({"items": [BOMB]}).encode()
        port = int(server.url.rsplit(":", 1)[1])
        with socket.create_connection(("127.0.0.1", port)) as conn:
            conn.sendall(f"POST /v1/score HTTP/{version}\r\nHost: x\r\nContent-Type: application/json\r\n".encode()
                         + b"Content-Length: %d\r\n\r\n" % len(body) + body)  # fmt: skip
            began = "verifier_math_tasks_total 1.0"
            wait_for(lambda: began in httpx.get(f"{server.url}/metrics").text, 20, "the item was never handed out")
        wait_for(lambda: counters(server).get("499") == 1.0, 20, f"not cancelled: {counters(server)}")


def test_a_math_only_deployment_is_ready_and_refuses_code_items(tmp_path: Path) -> None:
    with running_server(tmp_path, code_enabled="false", math_workers=1) as server:
        ready = httpx.get(f"{server.url}/readyz")
        assert ready.status_code == 200
        assert ready.json()["sandbox"] == {
            "enabled": False, "ready": True, "detail": "code scoring is off (CODE_ENABLED)"
        }  # fmt: skip
        code = {"completion": "```python\nprint(1)\n```", "code": {"tests": [{"type": "stdio", "stdout": "1"}]}}
        math = {"completion": "7", "math": {"gold": "7"}}
        refused = httpx.post(f"{server.url}/v1/score", json={"items": [math, code]})
        assert refused.status_code == 422
        assert refused.json()["errors"][0]["loc"] == "items.1.code"
        assert "VERIFIER_CODE_ENABLED=false" in refused.json()["detail"]
        works = refused.json()["detail"].rpartition("these components work: ")[2]
        assert set(works.split(", ")) == set(COMPONENTS) - {"code"}, refused.json()["detail"]
        answered = httpx.post(f"{server.url}/v1/score", json={"items": [math]})
        assert answered.json()["results"][0]["reward"] == 1.0


def test_a_key_in_a_url_that_only_comes_close_is_masked_in_the_log(tmp_path: Path) -> None:
    key = "Sekrit-k3y-0123456789"
    near_misses = [
        f"/v1/compat//key/{key}/openrlhf",
        f"/V1/compat/key/{key}/openrlhf",
        f"/v1/compat/KEY/{key}/openrlhf",
        f"/v1/compat/openrlhf?key={key}",
        f"/v1/score?api_key={key}&x=1",
        f"/v1/compat/k%65y%2F{key}/openrlhf",
        f"/v1/compat/openrlhf%3Fkey%3D{key}",
        f"/v1/compat/key/{key}",
    ]
    with running_server(tmp_path, api_key=key, log_level="info", math_workers=1, code_enabled="false") as server:
        port = int(server.url.rsplit(":", 1)[1])
        for path in near_misses:  # raw: an HTTP client would normalise some of these paths before sending them
            with socket.create_connection(("127.0.0.1", port)) as conn:
                request = f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{{}}"
                conn.sendall(request.encode())
                assert conn.recv(1000).startswith(b"HTTP/1.1 4")  # 401, 404, or 422 where the key was right
        log = server.output()
    assert '"POST /v1/compat//key/***/openrlhf HTTP/1.1" 404' in log and "/v1/score?api_key=***&x=1" in log
    assert key not in log and key.lower() not in log.lower()


def test_the_auth_line_says_where_the_service_is_published(tmp_path: Path) -> None:
    """As compose starts it: what the host publishes, not the container's 0.0.0.0 (tests/deploy/test_compose_file.py
    checks that compose passes its `ports` on)."""
    with running_server(tmp_path, published_address="127.0.0.1:18088", log_level="info", math_workers=1) as server:
        log = server.output()
    assert "auth: off (no VERIFIER_API_KEY): anyone who can reach 127.0.0.1:18088 (where its port is published)" in log
    assert "is not a setting" not in log


def test_verifier_ready_is_logged_only_when_readyz_says_so(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A sandbox that cannot start (here: no Docker engine at DOCKER_HOST) keeps /readyz at 503: the log says the
    service started and why it is not ready, never 'verifier ready'."""
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no-engine.sock")
    settings = {"sandbox_backend": "docker", "log_level": "info", "math_workers": 1}
    with running_server(tmp_path, wait_for="/healthz", **settings) as server:
        wait_for(lambda: "not ready yet" in server.output(), 30, f"no not-ready line:\n{server.output()}")
        assert httpx.get(f"{server.url}/readyz").status_code == 503
        log = server.output()
    assert "verifier started, not ready yet (/readyz answers 503): no sandbox can run code yet (its error" in log
    assert "WARNING sandbox.docker_backend: no Docker engine" in log
    assert "verifier ready" not in log


def test_verifier_ready_is_logged_once_ready(tmp_path: Path) -> None:
    with running_server(tmp_path, code_enabled="false", log_level="info", math_workers=1) as server:
        wait_for(lambda: "verifier ready" in server.output(), 30, f"no ready line:\n{server.output()}")
        log = server.output()
    assert "verifier ready: 1 math workers, sandbox {'enabled': False, 'ready': True" in log
    assert "not ready yet" not in log


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_stop_signal_to_the_whole_process_group_shuts_down_quietly(tmp_path: Path, sig: signal.Signals) -> None:
    """systemd, a terminal's Ctrl-C and `kill -- -PGID` signal every process of the service, its workers and their
    forkserver too: the service shuts down, closes the pool, and the log does not tell of workers dying and being
    replaced, nor of a traceback."""
    with running_server(tmp_path, preexec_fn=os.setsid, log_level="info", math_workers=2) as server:
        pids = httpx.get(f"{server.url}/readyz").json()["math_workers"]["pids"]
        os.killpg(server.process.pid, sig)
        server.process.wait(timeout=30)
        log = server.output()
    assert "died while idle" not in log and "starting a replacement" not in log, log
    assert "Traceback" not in log and "Application shutdown complete" in log, log
    for pid in pids:
        wait_for(lambda pid=pid: not Path(f"/proc/{pid}").exists(), 10, f"math worker {pid} outlived the service")
