"""bench/trainer_calls.py's own arithmetic and items, which BENCHMARKS.md's per-sample numbers come from: the batched
request holds the items the verl adapter sends, a way that judges otherwise stops the benchmark, the ratios are of
the medians, and the CPU time of a process counts all its threads. (The run itself needs verl and OpenRLHF:
tests/interop/test_bench_trainer_calls.py.)"""

from __future__ import annotations

import asyncio
import os
import sys
import threading
import time
from pathlib import Path
from types import ModuleType

import httpx
import pytest

from tests.conftest import Server
from trainer_client.integrations.verl import compute_score

BENCH = Path(__file__).resolve().parents[2] / "bench"


@pytest.fixture
def bench(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    monkeypatch.syspath_prepend(str(BENCH))
    import trainer_calls

    return trainer_calls


def test_the_batched_request_scores_what_the_adapter_scores(bench: ModuleType, server: Server) -> None:
    step = bench.samples(7, 64)
    body = bench.batched_body(step, server.url)
    with httpx.Client(base_url=server.url, timeout=60) as client:
        batched = bench.batched(client, body)

    async def per_sample() -> list[dict[str, float]]:
        calls = (compute_score(bench.DATA_SOURCE, s.completion, s.gold, {}, url=server.url) for s in step)
        return await asyncio.gather(*calls)

    assert batched == [result["score"] for result in asyncio.run(per_sample())]
    assert len(set(batched)) > 1  # right and wrong answers both: the comparison means something


def test_a_way_that_judges_otherwise_stops_the_benchmark(bench: ModuleType) -> None:
    step = bench.samples(7, 16)
    right = [1.0, 0.0] * 8
    bench.check(step, {"batched": right, "verl": list(right)})
    with pytest.raises(SystemExit, match="verl gave other rewards"):
        bench.check(step, {"batched": right, "verl": [0.0, 0.0] * 8})
    with pytest.raises(SystemExit, match="unjudged"):
        bench.check(step, {"batched": [None, *right[1:]], "verl": right})


def test_the_ratios_are_of_the_medians(bench: ModuleType) -> None:
    def rounds(*walls: float) -> list[object]:
        return [bench.Timing(wall, 0.1 * wall, 0.2, 3) for wall in walls]

    times = {
        "batched": rounds(0.1, 0.2, 9.0),  # median 0.2: one slow round does not count
        "verl": rounds(0.5, 0.6, 0.7),  # 0.6
        "verl floor": rounds(0.4, 0.45, 0.5),  # 0.45
        "OpenRLHF URL": rounds(2.0, 2.0, 2.0),
        "OpenRLHF file": rounds(1.0, 1.0, 1.0),
    }
    lines = bench.report(times, 2048)
    assert lines[0] == "median of 3 rounds, 2048 samples each:"
    assert "verl / batched: 3.00x (target <= 1.5x)" in lines
    assert any(line.startswith("verl floor / batched: 2.25x") for line in lines)
    assert any(line.startswith("(verl - verl floor) / batched: 0.75x") for line in lines)
    assert "OpenRLHF URL / batched: 10.00x, verifier CPU 10.00x" in lines
    assert "OpenRLHF file / batched: 5.00x, verifier CPU 5.00x" in lines


@pytest.mark.skipif(sys.platform != "linux", reason="reads /proc, which only Linux has")
def test_a_process_cpu_time_counts_all_its_threads(bench: ModuleType) -> None:
    import machine

    spent: list[float] = []

    def burn() -> None:
        started = time.thread_time()
        deadline = time.monotonic() + 0.3
        while time.monotonic() < deadline:
            sum(range(1000))
        spent.append(time.thread_time() - started)

    before = machine.process_cpu_ns(os.getpid())
    worker = threading.Thread(target=burn)
    worker.start()
    worker.join()
    # the thread's own CPU time is in the process's, though the thread is not this (the main) one
    assert machine.process_cpu_ns(os.getpid()) - before >= 0.9 * spent[0] * 1e9 > 0
