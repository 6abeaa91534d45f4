"""Math reward speed: TRL's in-process math-verify loop vs the verifier service over HTTP, side by side.

Both score the same GRPO-shaped completions (bench/workloads.py): one training step is `--prompts-per-step`
prompts x `--group-size` completions, and every step uses fresh data (its own seed).

(a) the peer: TRL's `accuracy_reward` loop, mirrored from huggingface/trl@9a44e51 `trl/rewards/accuracy_rewards.py`
    (per completion: parse the gold, parse the completion with TRL's LaTeX config, verify), single-threaded in
    this process, with math-verify's default signal.alarm timeouts, as a GRPOTrainer runs it.
(b) this project: `python -m verifier_service` started as a subprocess with its default worker count, scored over
    HTTP with one `POST /v1/score` per training step. The cross-request cache is off
    (VERIFIER_MATH_CACHE_SIZE=0) and the data is fresh per step anyway.

Before timing, one untimed step per workload warms both sides up and checks that they agree; disagreements are
printed for a human to judge. Usage:

    .venv/bin/python bench/math_speed.py [--steps 8] [--workload both] [--json bench/results/math_speed.json]
"""

from __future__ import annotations

import argparse
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
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from importlib.metadata import version
from pathlib import Path
from typing import Any

import httpx
from latex2sympy2_extended import NormalizationConfig
from machine import free_port, load_average, stop
from math_verify import LatexExtractionConfig, parse, verify
from workloads import WORKLOADS, Sample

TRL_SOURCE = "huggingface/trl@9a44e5185cbe8a85088a39ef72941ec47265aef7 trl/rewards/accuracy_rewards.py"
TARGETS = {"gsm8k": 8.0, "math": 1.8}
ROOT = Path(__file__).resolve().parents[1]


# ---------------------------------------------------------------- (a) the peer: TRL's loop


def trl_accuracy_reward(completions: list[list[dict[str, str]]], solution: list[str], **kwargs: Any) -> list[Any]:
    """TRL's `accuracy_reward` as of the commit in TRL_SOURCE, line for line (its docstring left out)."""
    contents = [completion[0]["content"] for completion in completions]
    rewards = []
    for content, sol in zip(contents, solution, strict=True):
        gold_parsed = parse(sol, extraction_mode="first_match")
        if len(gold_parsed) != 0:
            # We require the answer to be provided in correct latex (no malformed operators)
            answer_parsed = parse(
                content,
                extraction_config=[
                    LatexExtractionConfig(
                        normalization_config=NormalizationConfig(
                            nits=False,
                            malformed_operators=False,
                            basic_latex=True,
                            boxed="all",
                            units=True,
                        ),
                        # Ensures that boxed is tried first
                        boxed_match_priority=0,
                        try_extract_without_anchor=False,
                    )
                ],
                extraction_mode="first_match",
            )
            # Compute binary rewards if verifiable, `None` otherwise to skip this example
            try:
                reward = float(verify(gold_parsed, answer_parsed))
            except Exception:
                reward = None
        else:
            # If the gold solution is not parseable, we assign `None` to skip this example
            reward = float(content.strip().lower() == sol.strip().lower())
        rewards.append(reward)
    return rewards


def trl_solution(workload: str, gold: str) -> str:
    """The `solution` column a TRL user would feed: GSM8K numbers as they are, MATH answers inside `$...$`.

    TRL's `parse(sol)` cannot read bare LaTeX (`\\frac12` parses to nothing, `2\\sqrt{3}` to 2, `(2, -3)` to -3),
    so without delimiters its loop would fall back to string comparison and do no math at all.
    """
    return f"${gold}$" if workload == "math" else gold


def trl_answer_text(completion: str) -> str:
    """What TRL's completion parse extracted (diagnostics only, never timed)."""
    config = [
        LatexExtractionConfig(
            normalization_config=NormalizationConfig(
                nits=False, malformed_operators=False, basic_latex=True, boxed="all", units=True
            ),
            boxed_match_priority=0,
            try_extract_without_anchor=False,
        )
    ]
    parsed = parse(completion, extraction_config=config, extraction_mode="first_match")
    return str(parsed[-1]) if parsed else "[nothing]"


def run_trl(workload: str, samples: list[Sample]) -> tuple[list[Any], float]:
    completions = [[{"role": "assistant", "content": s.completion}] for s in samples]
    solution = [trl_solution(workload, s.gold) for s in samples]
    started = time.perf_counter()
    rewards = trl_accuracy_reward(completions, solution)
    return rewards, time.perf_counter() - started


# ---------------------------------------------------------------- (b) this project: the service over HTTP


@dataclass
class Server:
    url: str
    process: subprocess.Popen[bytes]
    log_path: str
    ready: dict[str, Any] = field(default_factory=dict)
    env: dict[str, str] = field(default_factory=dict)


@contextlib.contextmanager
def running_server(start_timeout_s: float = 180.0) -> Iterator[Server]:
    """`python -m verifier_service` on a free loopback port, default worker count, result cache off."""
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("VERIFIER_")}  # defaults, not the caller's
    ours = {
        "VERIFIER_HOST": "127.0.0.1",
        "VERIFIER_PORT": str(port),
        "VERIFIER_MATH_CACHE_SIZE": "0",
        "VERIFIER_LOG_LEVEL": "warning",
    }
    env.update(ours)
    log = tempfile.NamedTemporaryFile(prefix="verifier-bench-", suffix=".log", delete=False)  # noqa: SIM115
    process = subprocess.Popen(
        [sys.executable, "-m", "verifier_service"], cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT
    )
    server = Server(f"http://127.0.0.1:{port}", process, log.name, env=ours)
    try:
        server.ready = _wait_ready(server, start_timeout_s)
        yield server
    except BaseException:
        print(f"server log kept at {log.name}", file=sys.stderr)
        raise
    else:
        Path(log.name).unlink(missing_ok=True)
    finally:
        stop(process, timeout_s=20)
        log.close()


def _wait_ready(server: Server, timeout_s: float) -> dict[str, Any]:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if server.process.poll() is not None:
            raise RuntimeError(f"the server exited with {server.process.returncode}; log:\n{_tail(server.log_path)}")
        with contextlib.suppress(httpx.TransportError):
            response = httpx.get(f"{server.url}/readyz", timeout=2.0)
            if response.status_code == 200:
                return dict(response.json())
        time.sleep(0.2)
    raise RuntimeError(f"the server was not ready within {timeout_s}s; log:\n{_tail(server.log_path)}")


def _tail(path: str, chars: int = 3000) -> str:
    return Path(path).read_text(errors="replace")[-chars:]


def run_service(client: httpx.Client, samples: list[Sample]) -> tuple[list[dict[str, Any]], float]:
    """One training step as one request; timed from building the body to the decoded response."""
    started = time.perf_counter()
    body = {"items": [{"completion": s.completion, "math": {"gold": s.gold}} for s in samples]}
    response = client.post("/v1/score", json=body)
    response.raise_for_status()
    results: list[dict[str, Any]] = response.json()["results"]
    elapsed = time.perf_counter() - started
    if len(results) != len(samples):
        raise RuntimeError(f"{len(samples)} items sent, {len(results)} results back")
    return [r["components"]["math"] for r in results], elapsed


def service_counters(client: httpx.Client) -> dict[str, float]:
    """The service's own counters: sympy tasks sent to workers, batch twins reused, cache hits."""
    wanted = ("verifier_math_tasks_total", "verifier_math_deduplicated_total", "verifier_math_cache_hits_total")
    counters = {}
    for line in client.get("/metrics").text.splitlines():
        name, _, value = line.partition(" ")
        if name in wanted:
            counters[name.removeprefix("verifier_math_").removesuffix("_total")] = float(value)
    return counters


# ---------------------------------------------------------------- agreement


@dataclass
class Agreement:
    """Where the two scorers agree, where they differ, and how each compares with what the generator meant."""

    total: int = 0
    same: int = 0
    trl_none: int = 0
    service_null: int = 0
    trl_as_meant: int = 0  # right -> 1.0, wrong or malformed -> 0.0
    service_as_meant: int = 0
    kinds: Counter[tuple[str, str]] = field(default_factory=Counter)
    examples: dict[tuple[str, str], list[tuple[Sample, Any, dict[str, Any]]]] = field(default_factory=dict)

    def add(self, samples: list[Sample], trl: list[Any], service: list[dict[str, Any]]) -> None:
        for sample, a, b in zip(samples, trl, service, strict=True):
            self.total += 1
            self.trl_none += a is None
            self.service_null += b["score"] is None
            trl_right, service_right, meant = a == 1.0, b["score"] == 1.0, sample.intent == "right"
            self.trl_as_meant += trl_right == meant
            self.service_as_meant += service_right == meant
            if trl_right == service_right:
                self.same += 1
                continue
            key = ("TRL 1, service 0" if trl_right else "TRL 0, service 1", f"{sample.intent} / {sample.form}")
            self.kinds[key] += 1
            self.examples.setdefault(key, []).append((sample, a, b))

    @property
    def fraction(self) -> float:
        return self.same / self.total if self.total else 1.0


def print_agreement(workload: str, label: str, agreement: Agreement, examples: int) -> None:
    n = agreement.total or 1
    print(
        f"  agreement ({label}): {agreement.fraction:.2%} of {agreement.total} completions "
        f"(TRL None: {agreement.trl_none}, service null: {agreement.service_null}); "
        f"as the generator meant (right -> 1, else 0): TRL {agreement.trl_as_meant / n:.2%}, "
        f"service {agreement.service_as_meant / n:.2%}"
    )
    for (direction, kind), count in sorted(agreement.kinds.items(), key=lambda kv: -kv[1]):
        print(f"    {count:5d}  {direction:17s}  intent / form: {kind}")
    ranked = sorted(agreement.kinds, key=lambda k: -agreement.kinds[k])
    for key in ranked[: max(examples, 0)]:
        for sample, a, b in agreement.examples[key][:2]:
            print(f"    --- example: {key[0]}, intent / form {key[1]}")
            print(f"      gold {sample.gold!r} (TRL given {trl_solution(workload, sample.gold)!r})")
            print(f"      TRL: reward {a}, extracted {trl_answer_text(sample.completion)!r}")
            print(f"      service: {b['verdict']!r}, extracted {b.get('extracted')!r}, detail {b.get('detail')!r}")
            print(f"      completion ends: {sample.completion[-150:]!r}")


def bare_gold_report(workload: str, samples: list[Sample]) -> str:
    """How TRL's `parse(sol)` reads the bare golds (why the loop is given `$gold$` for MATH)."""
    golds = sorted({s.gold for s in samples})
    unparsed = misread = 0
    for gold in golds:
        bare = parse(gold, extraction_mode="first_match")
        if not bare:
            unparsed += 1
        elif not verify(parse(f"${gold}$", extraction_mode="first_match"), bare):
            misread += 1
    return f"{unparsed} of {len(golds)} bare golds unparseable by TRL's parse(sol), {misread} misread"


# ---------------------------------------------------------------- other work on the machine


def _clock_ticks() -> int:
    try:
        return int(os.sysconf("SC_CLK_TCK"))
    except (ValueError, OSError, AttributeError):
        return 100


def _machine_busy_s() -> float:
    """CPU seconds all processes have spent busy since boot (Linux /proc/stat; 0 elsewhere)."""
    try:
        values = [int(v) for v in Path("/proc/stat").read_text().splitlines()[0].split()[1:9]]
    except (OSError, ValueError):
        return 0.0
    return (sum(values) - values[3] - values[4]) / _clock_ticks()  # all but idle and iowait


def _tree_cpu_s(root: int) -> float:
    """CPU seconds of `root` and every process below it (the server, its forkserver and its workers)."""
    stats: dict[int, tuple[int, float]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError, ValueError, IndexError):
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
                stats[int(entry.name)] = (int(fields[1]), (int(fields[11]) + int(fields[12])) / _clock_ticks())
    total, todo = 0.0, [root]
    while todo:
        pid = todo.pop()
        total += stats.get(pid, (0, 0.0))[1]
        todo += [child for child, (parent, _) in stats.items() if parent == pid]
    return total


@dataclass
class ForeignCpu:
    """CPU time other processes took while we timed: if it is large, the numbers are not clean."""

    server_pid: int
    started: tuple[float, float, float] = (0.0, 0.0, 0.0)

    def _sample(self) -> tuple[float, float, float]:
        me = os.times()
        return time.perf_counter(), _machine_busy_s(), me.user + me.system + _tree_cpu_s(self.server_pid)

    def start(self) -> None:
        self.started = self._sample()

    def stop(self) -> dict[str, float]:
        wall, busy, ours = (b - a for a, b in zip(self.started, self._sample(), strict=True))
        foreign = max(0.0, busy - ours)
        capacity = wall * (os.cpu_count() or 1)
        return {"wall_s": wall, "ours_cpu_s": ours, "foreign_cpu_s": foreign, "foreign_share": foreign / capacity}


# ---------------------------------------------------------------- the run


def step_seed(seed: int, step: int) -> int:
    return seed * 1000 + step  # step 0 is the untimed warm-up / agreement step


def run_workload(name: str, args: argparse.Namespace, client: httpx.Client, server_pid: int) -> dict[str, Any]:
    generate = WORKLOADS[name]
    print(f"\n== {name}: {args.steps} timed steps x {args.prompts_per_step} prompts x {args.group_size} completions")

    warmup = generate(step_seed(args.seed, 0), args.prompts_per_step, args.group_size)
    trl, trl_warm_s = run_trl(name, warmup)
    service, service_warm_s = run_service(client, warmup)
    print(f"  warm-up step (untimed): TRL {trl_warm_s:.2f}s, service {service_warm_s:.2f}s")
    print(f"  {bare_gold_report(name, warmup)}")
    checked = Agreement()
    checked.add(warmup, trl, service)
    print_agreement(name, "warm-up step, before timing", checked, args.examples)

    seen = {(s.gold, s.completion) for s in warmup}
    repeats = 0
    timed = Agreement()
    trl_times: list[float] = []
    service_times: list[float] = []
    before = service_counters(client)
    foreign = ForeignCpu(server_pid)
    foreign.start()
    for step in range(1, args.steps + 1):
        samples = generate(step_seed(args.seed, step), args.prompts_per_step, args.group_size)
        repeats += sum((s.gold, s.completion) in seen for s in samples)
        seen.update((s.gold, s.completion) for s in samples)
        trl, trl_s = run_trl(name, samples)
        service, service_s = run_service(client, samples)
        trl_times.append(trl_s)
        service_times.append(service_s)
        timed.add(samples, trl, service)
        print(f"  step {step}: {len(samples)} completions, TRL {trl_s:.2f}s, service {service_s:.3f}s")
    other = foreign.stop()
    after = service_counters(client)
    counters = {k: after[k] - before.get(k, 0.0) for k in after}
    print(
        f"  CPU over the timed steps: {other['wall_s']:.1f}s wall, this benchmark and the server used "
        f"{other['ours_cpu_s']:.1f} CPU-s, other processes {other['foreign_cpu_s']:.1f} CPU-s "
        f"({other['foreign_share']:.0%} of the machine)"
    )
    print_agreement(name, "timed steps", timed, args.examples)
    print(f"  completions repeated from earlier steps: {repeats}; service counters over the timed steps: {counters}")

    completions = timed.total
    a, b = sum(trl_times), sum(service_times)
    return {
        "workload": name,
        "completions": completions,
        "steps": args.steps,
        "trl_seconds": a,
        "service_seconds": b,
        "trl_completions_per_s": completions / a,
        "service_completions_per_s": completions / b,
        "speedup": a / b,
        "speedup_of_medians": statistics.median(trl_times) / statistics.median(service_times),
        "target": TARGETS[name],
        "trl_step_seconds": trl_times,
        "service_step_seconds": service_times,
        "agreement_warmup": checked.fraction,
        "agreement_timed": timed.fraction,
        "trl_as_meant_timed": timed.trl_as_meant / max(timed.total, 1),
        "service_as_meant_timed": timed.service_as_meant / max(timed.total, 1),
        "disagreements_timed": {f"{d}: {k}": n for (d, k), n in timed.kinds.items()},
        "repeated_completions": repeats,
        "service_counters": counters,
        "cpu": other,
    }


def machine() -> dict[str, Any]:
    model = ""
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    return {
        "cpu_count": os.cpu_count(),
        "cpus_usable": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
        "cpu_model": model,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "math_verify": version("math-verify"),
        "latex2sympy2_extended": version("latex2sympy2_extended"),
        "sympy": version("sympy"),
    }


def print_summary(results: list[dict[str, Any]]) -> None:
    print("\n== summary")
    header = f"{'workload':9s} {'completions':>11s} {'TRL s':>8s} {'service s':>10s} {'TRL c/s':>9s} "
    print(header + f"{'service c/s':>12s} {'speedup':>8s} {'(medians)':>9s} {'target':>7s} {'agreement':>10s}")
    for r in results:
        verdict = "ok" if r["speedup"] >= r["target"] else "BELOW TARGET"
        if r["cpu"]["foreign_share"] > 0.05:
            verdict += f" (other processes took {r['cpu']['foreign_share']:.0%} of the CPU: not clean)"
        print(
            f"{r['workload']:9s} {r['completions']:11d} {r['trl_seconds']:8.2f} {r['service_seconds']:10.3f} "
            f"{r['trl_completions_per_s']:9.1f} {r['service_completions_per_s']:12.1f} {r['speedup']:7.1f}x "
            f"{r['speedup_of_medians']:8.1f}x {r['target']:6.1f}x {r['agreement_timed']:9.2%}  {verdict}"
        )
    print("speedup = TRL seconds / service seconds over all timed steps; (medians) = median step / median step")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--steps", type=int, default=8, help="timed training steps per workload")
    parser.add_argument("--prompts-per-step", type=int, default=64)
    parser.add_argument("--group-size", type=int, default=8, help="completions per prompt")
    parser.add_argument("--workload", choices=("gsm8k", "math", "both"), default="both")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--examples", type=int, default=3, help="kinds of disagreement to show examples of (2 each)")
    parser.add_argument("--json", type=Path, help="write the results here")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    # TRL leaves math-verify's logging alone; its warnings go to stderr and do not change the timing much,
    # but they would bury the report. The service's workers do the same.
    logging.getLogger("math_verify").setLevel(logging.ERROR)
    info = machine()
    command = shlex.join(getattr(sys, "orig_argv", [sys.executable, *sys.argv]))
    print(f"command: {command}")
    print(f"machine: {info}")
    load_before = load_average()
    print(f"load average (1, 5, 15 min) before: {load_before}")
    print(f"peer: TRL accuracy_reward loop mirrored from {TRL_SOURCE}")
    names = ["gsm8k", "math"] if args.workload == "both" else [args.workload]
    with running_server() as server, httpx.Client(base_url=server.url, timeout=600.0) as client:
        print(f"service: {server.url}, env {server.env}, readyz {server.ready}")
        results = [run_workload(name, args, client, server.process.pid) for name in names]
    load_after = load_average()
    print_summary(results)
    print(f"load average (1, 5, 15 min) before: {load_before}, after: {load_after} (includes this run)")
    if any(r["cpu"]["foreign_share"] > 0.05 for r in results):
        print("WARNING: other processes took more than 5% of the CPU while steps were timed; the service uses")
        print("every core and the TRL loop one, so this hurts the service more: rerun on a quiet machine")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        report = {
            "command": command,
            "machine": info,
            "load_average": {"before": load_before, "after": load_after},
            "peer": TRL_SOURCE,
            "args": vars(args),
            "results": results,
        }
        args.json.write_text(json.dumps(report, indent=2, default=str) + "\n")
        print(f"results written to {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
