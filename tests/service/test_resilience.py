"""The pool survives its workers dying; optional API key. Each test runs its own server."""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import running_server

BOMBS = ["\\boxed{9^{9^{9^{9}}}}", "\\boxed{8^{8^{8^{8}}}}"]


def _score(url: str, items: list[dict[str, Any]], **kwargs: Any) -> httpx.Response:
    return httpx.post(f"{url}/v1/score", json={"items": items}, timeout=120, **kwargs)


@pytest.mark.timeout(120)
def test_workers_killed_mid_batch(tmp_path: Path) -> None:
    with running_server(tmp_path, math_workers=2, math_timeout_s=30) as server:
        old_pids = httpx.get(f"{server.url}/readyz").json()["math_workers"]["pids"]
        # different golds: the two go to different workers (same-gold tasks share one)
        items = [{"id": f"bomb{i}", "completion": bomb, "math": {"gold": str(5 + i)}} for i, bomb in enumerate(BOMBS)]
        items += [
            {
                "id": f"ok{i}",
                "completion": f"\\boxed{{\\frac{{{i}}}{{{i + 1}}}}}",
                "math": {"gold": f"{i}/{i + 1}"},
            }
            for i in range(1, 11)
        ]
        box: dict[str, httpx.Response] = {}
        sender = threading.Thread(target=lambda: box.setdefault("r", _score(server.url, items)))
        sender.start()
        time.sleep(2.0)  # both workers are now stuck in C-level big-integer arithmetic
        for pid in old_pids:
            os.kill(pid, signal.SIGKILL)
        sender.join(timeout=90)
        response = box["r"]
        assert response.status_code == 200
        got = response.json()["results"]
        assert [r["id"] for r in got] == [item["id"] for item in items]
        for bomb in got[:2]:
            assert bomb["components"]["math"]["verdict"] == "worker_crashed"
            assert bomb["reward"] is None and bomb["status"] == "error"
        assert [r["reward"] for r in got[2:]] == [1.0] * 10
        # the pool refilled: ready again, with new processes, and later requests succeed
        deadline = time.monotonic() + 30
        while httpx.get(f"{server.url}/readyz").status_code != 200 and time.monotonic() < deadline:
            time.sleep(0.2)
        ready = httpx.get(f"{server.url}/readyz").json()
        assert ready["status"] == "ready"
        assert not set(ready["math_workers"]["pids"]) & set(old_pids)
        later = _score(server.url, [{"completion": "\\boxed{\\sqrt{4}}", "math": {"gold": "2"}}]).json()
        assert later["results"][0]["reward"] == 1.0
        assert "verifier_worker_crashes_total 2.0" in httpx.get(f"{server.url}/metrics").text


@pytest.mark.timeout(120)
def test_killing_the_service_takes_its_workers_along(tmp_path: Path) -> None:
    """A worker stuck in C-level arithmetic must not outlive a SIGKILLed service (docker kill, OOM killer)."""
    with running_server(tmp_path, math_workers=2, math_timeout_s=60) as server:
        pids = httpx.get(f"{server.url}/readyz").json()["math_workers"]["pids"]
        bomb = [{"completion": BOMBS[0], "math": {"gold": "5"}}]
        threading.Thread(target=lambda: _swallow(lambda: _score(server.url, bomb)), daemon=True).start()
        time.sleep(1.0)  # a worker is now deep in 9^(9^(9^9))
        server.process.kill()
        server.process.wait()
        deadline = time.monotonic() + 30
        while any(_alive(pid) for pid in pids) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not [pid for pid in pids if _alive(pid)]


def _wait_for_new_workers(url: str, old: list[int], timeout: float = 30) -> list[int]:
    """The worker pids once /readyz is 200 again with none of `old` among them."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        response = httpx.get(f"{url}/readyz")
        pids = response.json()["math_workers"]["pids"]
        if response.status_code == 200 and not set(pids) & set(old):
            return list(pids)
        time.sleep(0.1)
    raise AssertionError(f"no fresh ready worker within {timeout}s: {httpx.get(f'{url}/readyz').json()}")


@pytest.mark.timeout(120)
def test_a_timeout_from_a_stopped_worker_is_not_cached(tmp_path: Path) -> None:
    """A healthy worker says `\boxed{(1,2)}` equals `(1, 2)`; the timeout a stopped one caused must not stick."""
    with running_server(tmp_path, math_workers=1, math_timeout_s=1) as server:
        [pid] = httpx.get(f"{server.url}/readyz").json()["math_workers"]["pids"]
        item = [{"completion": "\\boxed{(1,2)}", "math": {"gold": "(1, 2)"}}]
        os.kill(pid, signal.SIGSTOP)
        [stalled] = _score(server.url, item).json()["results"]
        assert stalled["components"]["math"]["verdict"] == "timeout"
        _wait_for_new_workers(server.url, [pid])
        [again] = _score(server.url, item).json()["results"]
        assert again["components"]["math"]["verdict"] == "correct" and again["reward"] == 1.0


@pytest.mark.timeout(120)
def test_a_worker_that_dies_while_idle_is_replaced_at_once(tmp_path: Path) -> None:
    with running_server(tmp_path, math_workers=2) as server:
        old = httpx.get(f"{server.url}/readyz").json()["math_workers"]["pids"]
        os.kill(old[0], signal.SIGKILL)  # no request is under way, and none is sent until it is replaced
        pids = _wait_for_new_workers(server.url, [old[0]])
        assert len(pids) == 2 and old[1] in pids
        assert "verifier_workers_alive 2.0" in httpx.get(f"{server.url}/metrics").text


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def _swallow(call: Any) -> None:
    with contextlib.suppress(httpx.HTTPError):  # the server was killed under this request, as intended
        call()


def test_api_key(tmp_path: Path) -> None:
    with running_server(tmp_path, api_key="s3cret", math_workers=1) as server:
        item = [{"completion": "<think>a</think>b", "format": {}}]
        assert _score(server.url, item).status_code == 401
        wrong = _score(server.url, item, headers={"Authorization": "Bearer nope"})
        assert wrong.status_code == 401 and "s3cret" not in wrong.text
        right = _score(server.url, item, headers={"Authorization": "Bearer s3cret"})
        assert right.status_code == 200 and right.json()["results"][0]["reward"] == 1.0
        assert httpx.get(f"{server.url}/healthz").status_code == 200  # probes need no key


def test_body_size_limit(tmp_path: Path) -> None:
    with running_server(tmp_path, max_request_bytes=4096, math_workers=1) as server:
        response = _score(server.url, [{"completion": "x" * 5000, "format": {}}])
        assert response.status_code == 413
        assert "VERIFIER_MAX_REQUEST_BYTES" in response.json()["detail"]
