"""C++ code rewards (issue 27): the service against the plain reference judge, and the compile cache on a GRPO batch.

(a) A 64-submission batch: the C++ agreement set's rows (tests/data/cpp_agreement/, every one but the broken-checker
    problem's: right, wrong, slow, crashing, memory-hungry, flooding and non-compiling programs, checkers included),
    each source made new for the round by a comment (`// round N`) so that nothing is answered from an earlier
    round's binaries. Graded by
      - the reference judge (bench/reference_judge.py: g++ and coreutils' `timeout` on the host, no sandbox), one
        submission after another, as a plain script grades them; CPU time: its children's (getrusage);
      - `python -m verifier_service` (the backend given, its default pool of one sandbox per CPU), the benchmark as
        the client: one POST /v1/score of all 64, timed from building the body to the decoded response; CPU time:
        the service's process tree (utime + stime of each process and of its reaped children, from /proc), which
        for docker misses the containers' processes (so the docker CPU number is a lower bound, and says so).
    Both must agree on every score (the run fails otherwise). Printed: wall and CPU seconds each, and the speed-up
    reference / service against the target (2x on this 2-core machine).
(b) A GRPO-shaped batch: --prompts problems x 8 completions each, drawn with replacement from the problem's
    solutions (so some completions in a group are identical), sources new to the service. Printed: items, distinct
    programs, and the service's binary cache (/readyz sandbox.binaries: hits and misses, checkers included) for the
    batch, then for the same batch sent again (a later step re-sampling the same programs). Identical programs in one
    batch are one job before they reach the cache (scoring/code.py CodeJob), so "compiles per item" is the number
    that says what the cache and the batching save together.

    .venv/bin/python bench/cpp_speed.py [--backend local|docker] [--rounds 1] [--prompts 8] [--json FILE] [--smoke]

--smoke: 8 submissions and 2 prompts, for tests/service/test_bench_cpp_speed.py (asserts the shape, no speed).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
from machine import free_port, load_average, stop
from reference_judge import Row, judge, load_set

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "data" / "cpp_agreement"
TARGET = 2.0  # the service at least this many times faster than the reference judge run one by one (2 cores)
GROUP = 8
START_TIMEOUT_S = 180.0


def fresh(row: Row, tag: str) -> Row:
    """The row with a source no earlier round compiled."""
    return Row(row.id, f"// {tag}\n{row.source}", row.spec, row.expected, row.note)


def completion(source: str) -> str:
    return f"<think>Plan the solution.</think>\nHere is my program:\n\n```cpp\n{source.rstrip()}\n```\n"


@contextmanager
def service(backend: str, image: str | None) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("VERIFIER_")}
    env |= {"VERIFIER_HOST": "127.0.0.1", "VERIFIER_PORT": str(port), "VERIFIER_LOG_LEVEL": "warning",
            "VERIFIER_SANDBOX_BACKEND": backend, "VERIFIER_SANDBOX__POOL_NAME": f"cpp-speed-{os.getpid()}",
            "VERIFIER_BATCH_TIMEOUT_S": "900"}  # fmt: skip
    if image:
        env["VERIFIER_SANDBOX__IMAGE"] = image
    log = Path(tempfile.mkstemp(prefix="cpp-speed-", suffix=".log")[1])
    with log.open("wb") as out:
        process = subprocess.Popen([sys.executable, "-m", "verifier_service"], cwd=ROOT, env=env, stdout=out,
                                   stderr=subprocess.STDOUT)  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the service did not start; log:\n{log.read_text(errors='replace')[-3000:]}")
            try:
                if httpx.get(f"{url}/readyz", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            time.sleep(0.2)
        yield url, process
    finally:
        stop(process)
        log.unlink(missing_ok=True)


def tree_cpu_s(root: int) -> float:
    """CPU seconds of a process and its descendants so far, reaped children included (utime, stime, cutime, cstime
    from /proc/<pid>/stat)."""
    parents: dict[int, int] = {}
    times: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        parents[int(entry.name)] = int(fields[1])
        times[int(entry.name)] = sum(int(f) for f in fields[11:15])
    total, stack = 0, [root]
    while stack:
        pid = stack.pop()
        total += times.get(pid, 0)
        stack.extend(child for child, parent in parents.items() if parent == pid)
    return total / os.sysconf("SC_CLK_TCK")


def score(url: str, rows: list[Row]) -> list[dict[str, Any]]:
    items = [{"id": row.id, "completion": completion(row.source), "code": row.spec} for row in rows]
    response = httpx.post(f"{url}/v1/score", json={"items": items}, timeout=900)
    response.raise_for_status()
    return [r["components"]["code"] for r in response.json()["results"]]


def binaries(url: str) -> dict[str, int]:
    return dict(httpx.get(f"{url}/readyz", timeout=30).json()["sandbox"]["binaries"])


def batch_vs_reference(url: str, pid: int, rows: list[Row], tag: str) -> dict[str, Any]:
    batch = [fresh(row, tag) for row in rows]
    cpu0, start = tree_cpu_s(pid), time.perf_counter()
    got = score(url, batch)
    service_wall, service_cpu = time.perf_counter() - start, tree_cpu_s(pid) - cpu0
    usage0, start = resource.getrusage(resource.RUSAGE_CHILDREN), time.perf_counter()
    reference = [judge(row.source, row.spec) for row in batch]
    usage1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    reference_wall = time.perf_counter() - start
    reference_cpu = (usage1.ru_utime - usage0.ru_utime) + (usage1.ru_stime - usage0.ru_stime)
    disagree = [f"{row.id}: service {s['verdict']} {s['score']} {[t['verdict'] for t in s.get('tests') or []]}, "
                f"reference {r.verdict} {r.score} {r.tests} {r.detail}"
                for row, s, r in zip(batch, got, reference, strict=True) if not same(s["score"], r.score)]  # fmt: skip
    return {"submissions": len(batch), "service_wall_s": service_wall, "service_cpu_s": service_cpu,
            "reference_wall_s": reference_wall, "reference_cpu_s": reference_cpu,
            "speedup": reference_wall / service_wall, "disagreements": disagree}  # fmt: skip


def same(a: float | None, b: float | None) -> bool:
    return (a is None and b is None) or (a is not None and b is not None and abs(a - b) < 1e-9)


def grpo_batch(rows: list[Row], prompts: int, seed: int, tag: str) -> list[Row]:
    rng = random.Random(seed)
    by_problem: dict[str, list[Row]] = {}
    for row in rows:
        by_problem.setdefault(row.id.split("/")[0], []).append(row)
    chosen = rng.sample(sorted(by_problem), prompts)
    return [fresh(rng.choice(by_problem[p]), tag) for p in chosen for _ in range(GROUP)]


def cache_on_grpo(url: str, batch: list[Row]) -> dict[str, Any]:
    sends = []
    for _ in range(2):
        before = binaries(url)
        score(url, batch)
        after = binaries(url)
        hits, misses = after["hits"] - before["hits"], after["misses"] - before["misses"]
        sends.append({"hits": hits, "misses": misses, "hit_rate": hits / max(1, hits + misses),
                      "compiles_per_item": misses / len(batch)})  # fmt: skip
    return {"items": len(batch), "distinct_programs": len({row.source for row in batch}), "sends": sends}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--backend", choices=["local", "docker"], default="local")
    parser.add_argument("--image", help="docker: the sandbox image (default: built from this checkout)")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--prompts", type=int, default=8)
    parser.add_argument("--seed", type=int, default=27)
    parser.add_argument("--json", type=Path)
    parser.add_argument("--smoke", action="store_true")
    args = parser.parse_args()
    rows = [row for row in load_set(DATA) if not row.id.startswith("broken_checker/")]
    if args.smoke:
        rows = [r for r in rows if r.id.startswith("aplusb/")][:4] + [
            r for r in rows if r.id.startswith("derangement/")
        ][:4]
        args.prompts, args.rounds = 2, 1
    image = args.image
    if args.backend == "docker" and not image:
        sys.path.insert(0, str(ROOT))
        from tests.images.build import base_image, ensure_sandbox_image

        image = ensure_sandbox_image(base_image(), tag="verifier-sandbox:bench")
    print(f"$ {' '.join([Path(sys.executable).name, *sys.argv])}")
    print(f"machine: {os.cpu_count()} CPUs, load average {load_average()}, backend {args.backend}")
    report: dict[str, Any] = {"backend": args.backend, "rounds": [], "load_before": load_average()}
    with service(args.backend, image) as (url, process):
        score(url, [fresh(rows[0], "warm-up")])  # a first compile: the sandboxes up, the header read once
        for n in range(args.rounds):
            got = batch_vs_reference(url, process.pid, rows, f"round {n} {time.time_ns()}")
            report["rounds"].append(got)
            cpu_note = " (lower bound: containers not counted)" if args.backend == "docker" else ""
            print(f"(a) round {n}: {got['submissions']} submissions: service {got['service_wall_s']:.1f} s wall, "
                  f"{got['service_cpu_s']:.1f} s CPU{cpu_note}; reference one by one {got['reference_wall_s']:.1f} s "
                  f"wall, {got['reference_cpu_s']:.1f} s CPU; speed-up {got['speedup']:.2f}x (target {TARGET:g}x); "
                  f"disagreements {len(got['disagreements'])} {got['disagreements']}")  # fmt: skip
        grpo = cache_on_grpo(url, grpo_batch(rows, args.prompts, args.seed, f"grpo {time.time_ns()}"))
        report["grpo"] = grpo
        print(f"(b) GRPO batch: {grpo['items']} items ({args.prompts} prompts x {GROUP}), "
              f"{grpo['distinct_programs']} distinct programs")  # fmt: skip
        for label, send in zip(("first send", "sent again"), grpo["sends"], strict=True):
            print(f"    {label}: binary cache hits {send['hits']}, misses (compiles) {send['misses']}, hit rate "
                  f"{send['hit_rate']:.2f}, compiles per item {send['compiles_per_item']:.3f}")  # fmt: skip
    report["load_after"] = load_average()
    print(f"load average after: {report['load_after']}")
    if args.json:
        args.json.write_text(json.dumps(report, indent=1))
    return 1 if any(r["disagreements"] for r in report["rounds"]) else 0


if __name__ == "__main__":
    sys.exit(main())
