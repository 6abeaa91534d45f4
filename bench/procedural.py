"""The `procedural` component's cost: in process, and through the service.

    .venv/bin/python bench/procedural.py                  # starts a verifier on a free loopback port
    .venv/bin/python bench/procedural.py --repeats 200

1. **In process, per item**: on the event loop, `prepare` (finding the answer) on an 8,000-token completion that
   ends in an <answer> block; in a worker, `ProceduralJob.run` (reasoning-gym's scorer, once built) on each of a few
   datasets' generated entries, with their own right answer: plain comparisons (chain_sum, word_sorting), sympy
   (countdown, puzzle24), eval (n_queens), ARC grids (arc_agi). p50 and p99 per call.
2. **Through the service**: 64 items per request, the same entries, ms per item (the workers warm first).
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

import httpx
from machine import verifier

from verifier_service.schema import ScoreItem
from verifier_service.scoring.extract import final_answer_region
from verifier_service.scoring.procedural import ProceduralJob, extract_answer

DATASETS = ("chain_sum", "word_sorting", "countdown", "puzzle24", "n_queens", "arc_agi")
TOKENS, CHARS_PER_TOKEN = 8_000, 4


def entries(name: str, count: int) -> list[dict[str, Any]]:
    import reasoning_gym

    dataset = reasoning_gym.create_dataset(name, size=count, seed=3)
    return [json.loads(json.dumps(dataset[index])) for index in range(count)]


def completion(rng: random.Random, answer: str) -> str:
    words = ["so", "the", "sum", "is", "then", "add", "each", "of", "we", "check", "7", "12", "+", "="]
    reasoning = " ".join(rng.choice(words) for _ in range(TOKENS * CHARS_PER_TOKEN // 4))
    return f"<think>{reasoning}</think>\nThe answer is <answer>{answer}</answer>"


def percentiles(samples: list[float]) -> tuple[float, float]:
    ordered = sorted(samples)
    return statistics.median(ordered), ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))]


def timed(call: Callable[[], Any], repeats: int) -> list[float]:
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        call()
        samples.append((time.perf_counter() - start) * 1000)
    return samples


def in_process(repeats: int) -> dict[str, list[dict[str, Any]]]:
    rng, made = random.Random(0), {name: entries(name, 8) for name in DATASETS}
    text = completion(rng, made["countdown"][0]["answer"])
    p50, p99 = percentiles(timed(lambda: extract_answer(final_answer_region(text) or ""), repeats))
    print(f"prepare (find the answer), {len(text):,} chars: p50 {p50:.3f} ms, p99 {p99:.3f} ms")
    for name, rows in made.items():
        jobs = [ProceduralJob(name, json.dumps(e, sort_keys=True), str(e["answer"]), False, 5.0) for e in rows]
        assert all(job.run().verdict == "correct" for job in jobs), name  # builds the scorer, once
        samples = [ms for job in jobs for ms in timed(job.run, max(1, repeats // len(jobs)))]
        p50, p99 = percentiles(samples)
        print(f"run in a worker, {name:12s}: p50 {p50:.3f} ms, p99 {p99:.3f} ms")
    return made


def through_service(url: str, made: dict[str, list[dict[str, Any]]], requests: int) -> None:
    rng = random.Random(1)
    with httpx.Client(timeout=120) as client:
        for name, rows in made.items():
            items = [
                {"completion": completion(rng, str(e["answer"])), "procedural": {"dataset": name, "entry": e}}
                for e in rows * 8
            ]
            ScoreItem.model_validate(items[0])
            client.post(f"{url}/v1/score", json={"items": items}).raise_for_status()  # warm the workers
            per_item = []
            for _ in range(requests):
                start = time.perf_counter()
                answer = client.post(f"{url}/v1/score", json={"items": items})
                per_item.append((time.perf_counter() - start) * 1000 / len(items))
                assert {r["components"]["procedural"]["verdict"] for r in answer.json()["results"]} == {"correct"}
            print(f"through the service, {name:12s}: {statistics.median(per_item):.3f} ms per item (64 per request)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=200)
    parser.add_argument("--requests", type=int, default=5)
    parser.add_argument("--url", help="a running verifier (default: start one)")
    args = parser.parse_args()
    made = in_process(args.repeats)
    if args.url:
        through_service(args.url, made, args.requests)
    else:
        with verifier() as url:
            through_service(url, made, args.requests)


if __name__ == "__main__":
    sys.exit(main())
