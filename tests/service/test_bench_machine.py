"""bench/machine.py's process accounting, which bench/components.py prints beside its times: it must name the live
verifier's own process and its workers, and read time that grows while they work."""

from __future__ import annotations

import sys
from pathlib import Path
from types import ModuleType

import httpx
import pytest

from tests.conftest import Server

BENCH = Path(__file__).resolve().parents[2] / "bench"

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="reads /proc, which only Linux has")


@pytest.fixture
def machine(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    monkeypatch.syspath_prepend(str(BENCH))
    import machine

    return machine


def test_service_processes_are_the_server_and_its_workers(machine: ModuleType, server: Server) -> None:
    main, workers = machine.service_processes(server.url)
    assert main == server.process.pid
    assert workers == httpx.get(f"{server.url}/readyz").json()["math_workers"]["pids"]
    assert main not in workers


def test_cpu_time_grows_while_the_service_scores(machine: ModuleType, server: Server) -> None:
    service = machine.service_processes(server.url)
    main_before, _, workers_before = machine.verifier_cpu_ns(service)
    # enough items that their text components go to the workers (engine.WORKER_TEXT_ITEMS)
    items = [{"completion": f"<think>{n} + {n}</think>The answer is {2 * n}.", "format": {}} for n in range(256)]
    response = httpx.post(f"{server.url}/v1/score", json={"items": items}, timeout=60)
    assert response.status_code == 200
    main_after, _, workers_after = machine.verifier_cpu_ns(service)
    assert main_after > main_before
    assert workers_after > workers_before
