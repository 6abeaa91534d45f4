"""Per-sample reward calls through the verl adapter against one batched request: what the coalescer costs.

    .venv/bin/python bench/per_sample.py                  # starts a verifier on a free loopback port
    .venv/bin/python bench/per_sample.py --samples 2048 --concurrency 64 --rounds 3

verl's reward loop calls `compute_score` once per sample, many at once; the adapter (trainer_client.integrations.verl)
gathers the calls made within a few milliseconds into one `/v1/score` request. Two ways to score the same
GSM8K-shaped samples (bench/workloads.py, `gsm8k_step`), alternated round by round, each round with fresh seeds,
against one verifier started here (math cache off, code off, default workers):

1. **batched**: the samples as one `POST /v1/score` (the floor: one request, the server parallelises it);
2. **per sample**: one `await compute_score(...)` per sample through the adapter, at most `--concurrency` in flight
   (an asyncio semaphore, as a worker with that many samples outstanding), in a fresh event loop per round;
3. **in slices**: the samples as `--concurrency`-item requests sent one after another with plain httpx, no adapter:
   what per-sample calls at that concurrency cost at best, since each slice must come back before the next starts.

Prints each round's times, the medians and the ratios: per sample / batched (target <= 1.5x), and per sample / in
slices (what the adapter itself adds); and how many requests the per-sample calls became (the verifier's /metrics).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import re
import statistics
import time
from typing import Any

import httpx
from machine import load_average, verifier
from workloads import Sample, gsm8k_step

from trainer_client.integrations.verl import compute_score

GROUP = 8


def samples(seed: int, count: int) -> list[Sample]:
    return gsm8k_step(seed=seed, prompts=count // GROUP, group_size=GROUP)


def batched(client: httpx.Client, step: list[Sample]) -> tuple[float, list[float | None]]:
    items = [{"completion": s.completion, "math": {"gold": s.gold}} for s in step]
    started = time.perf_counter()
    response = client.post("/v1/score", json={"items": items})
    response.raise_for_status()
    rewards = [result["reward"] for result in response.json()["results"]]
    return time.perf_counter() - started, rewards


def in_slices(client: httpx.Client, step: list[Sample], size: int) -> tuple[float, list[float | None]]:
    started, rewards = time.perf_counter(), []
    for start in range(0, len(step), size):
        items = [{"completion": s.completion, "math": {"gold": s.gold}} for s in step[start : start + size]]
        response = client.post("/v1/score", json={"items": items})
        response.raise_for_status()
        rewards += [result["reward"] for result in response.json()["results"]]
    return time.perf_counter() - started, rewards


def per_sample(url: str, step: list[Sample], concurrency: int) -> tuple[float, list[float | None]]:
    async def main() -> list[dict[str, float]]:
        limit = asyncio.Semaphore(concurrency)

        async def one(sample: Sample) -> dict[str, float]:
            async with limit:
                return await compute_score("openai/gsm8k", sample.completion, sample.gold, {}, url=url)

        return await asyncio.gather(*(one(sample) for sample in step))

    started = time.perf_counter()
    results = asyncio.run(main())
    return time.perf_counter() - started, [result["score"] for result in results]


def score_requests(client: httpx.Client) -> float:
    found = re.search(r'^verifier_requests_total\{status="200"\} (\S+)$', client.get("/metrics").text, re.M)
    return float(found[1]) if found else 0.0


def run(url: str, args: argparse.Namespace) -> None:
    with httpx.Client(base_url=url, timeout=300) as client:
        warm = samples(10_000, args.samples)
        batched(client, warm)  # warm-up: workers, first-request costs, the adapter's imports
        per_sample(url, warm, args.concurrency)
        times: dict[str, list[float]] = {"batched": [], "in slices": [], "per sample": []}
        requests = []
        print(f"\n{args.samples} samples per round, concurrency {args.concurrency}; seconds per round")
        for round_ in range(args.rounds):
            steps = [samples(3 * round_ + k, args.samples) for k in range(3)]
            t_batched, r_batched = batched(client, steps[0])
            t_slices, r_slices = in_slices(client, steps[1], args.concurrency)
            before = score_requests(client)
            t_each, r_each = per_sample(url, steps[2], args.concurrency)
            requests.append(score_requests(client) - before)
            check(steps, [r_batched, r_slices, r_each])
            for name, seconds in zip(times, (t_batched, t_slices, t_each), strict=True):
                times[name].append(seconds)
            print(f"round {round_ + 1}: batched {t_batched:.3f}  in slices {t_slices:.3f}  per sample {t_each:.3f} "
                  f"({requests[-1]:.0f} requests)")  # fmt: skip
    b, s, p = (statistics.median(times[name]) for name in times)
    print(f"\nmedian: batched {b:.3f} s ({args.samples / b:,.0f}/s), in slices {s:.3f} s, per sample {p:.3f} s "
          f"({args.samples / p:,.0f}/s); {statistics.median(requests):.0f} requests per round")  # fmt: skip
    print(f"per sample / batched: {p / b:.2f}x (target <= 1.5x); per sample / in slices: {p / s:.2f}x")


def check(steps: list[list[Sample]], rewards: list[list[Any]]) -> None:
    """Every way must judge every sample: a null (or a missing result) means the timing measures nothing."""
    if any(None in got or len(got) != len(step) for step, got in zip(steps, rewards, strict=True)):
        raise SystemExit("some samples were not judged: the benchmark measures nothing")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--samples", type=int, default=2048, help="samples per round (a multiple of 8)")
    parser.add_argument("--concurrency", type=int, default=64, help="per-sample calls in flight")
    parser.add_argument("--rounds", type=int, default=3, help="rounds of each way, alternated")
    args = parser.parse_args()
    print(
        f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, Python "
        f"{platform.python_version()}, httpx {httpx.__version__}; load average {load_average()}"
    )
    with verifier(VERIFIER_MATH_CACHE_SIZE="0") as url:
        run(url, args)
    print(f"load average at the end: {load_average()}")


if __name__ == "__main__":
    main()
