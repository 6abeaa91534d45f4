"""Reward overhead per GRPO step: the verifier through `VerifierReward` vs TRL's `accuracy_reward` in-process.

Both score the same GSM8K-shaped chat completions (bench/workloads.py) the way GRPOTrainer calls a reward
function: one call per step with the whole batch. Each repetition uses a fresh batch (a new seed), so the
verifier's cross-request cache does not flatter it; the first call of each is a warm-up and not timed.

    .venv/bin/python bench/reward_overhead.py                    # starts a verifier on a free loopback port
    .venv/bin/python bench/reward_overhead.py --url http://127.0.0.1:8088 --sizes 64 256 1024 --repeats 5

Prints, per batch size, the median time per call of each and the ratio (TRL time / verifier time; above 1 the
verifier is faster). The two also disagree on some answers (TRL's extraction needs LaTeX-ish answers); the mean
rewards are printed so the comparison is not read as "same work, different speed" blindly.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from machine import free_port, stop
from workloads import gsm8k_step

from trainer_client import VerifierClient, VerifierReward

ROOT = Path(__file__).resolve().parents[1]
GROUP = 8  # completions per prompt, as GRPO's num_generations


def batch(size: int, seed: int) -> dict[str, Any]:
    """TRL's reward kwargs for one step of `size` completions."""
    samples = gsm8k_step(seed=seed, prompts=size // GROUP, group_size=GROUP)
    return {
        "prompts": [[{"role": "user", "content": f"problem {s.prompt}"}] for s in samples],
        "completions": [[{"role": "assistant", "content": s.completion}] for s in samples],
        "completion_ids": [[0]] * len(samples),
        "solution": [s.gold for s in samples],
    }


def timed(fn: Callable[..., list[float | None]], kwargs: dict[str, Any]) -> tuple[float, list[float | None]]:
    started = time.perf_counter()
    rewards = fn(**kwargs)
    return time.perf_counter() - started, rewards


def mean_reward(rewards: list[float | None]) -> float:
    scored = [r for r in rewards if r is not None]
    return sum(scored) / max(1, len(scored))


@contextmanager
def verifier(url: str | None) -> Iterator[str]:
    """The given verifier, or one started here (`python -m verifier_service`, default settings)."""
    if url:
        yield url
        return
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("VERIFIER_")}
    env |= {"VERIFIER_PORT": str(port), "VERIFIER_LOG_LEVEL": "warning"}
    process = subprocess.Popen([sys.executable, "-m", "verifier_service"], cwd=ROOT, env=env)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        stop(process)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--url", help="an running verifier; default: start one on loopback")
    parser.add_argument("--sizes", type=int, nargs="+", default=[64, 256, 1024])
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()

    import trl
    from trl.rewards import accuracy_reward

    with verifier(args.url) as url:
        with VerifierClient(url) as client:
            client.wait_until_ready(120)
        reward = VerifierReward("math", base_url=url)
        print(
            f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, Python "
            f"{platform.python_version()}, trl {trl.__version__}; verifier at {url}"
        )
        print(
            f"{'batch':>6} {'verifier ms/call':>17} {'trl ms/call':>12} {'ratio trl/verifier':>19} "
            f"{'verifier mean':>14} {'trl mean':>9} {'verifier nulls':>15}"
        )
        timed(reward, batch(GROUP, seed=10_000))  # warm-up: connections, workers, imports
        timed(accuracy_reward, batch(GROUP, seed=10_000))
        for size in args.sizes:
            ours, theirs, our_mean, their_mean, nulls = [], [], [], [], 0
            for repeat in range(args.repeats):
                kwargs = batch(size, seed=size * 1000 + repeat)
                seconds, rewards = timed(reward, kwargs)
                ours.append(seconds)
                our_mean.append(mean_reward(rewards))
                nulls += sum(r is None for r in rewards)
                seconds, rewards = timed(accuracy_reward, kwargs)
                theirs.append(seconds)
                their_mean.append(mean_reward(rewards))
            v, t = statistics.median(ours), statistics.median(theirs)
            print(
                f"{size:>6} {v * 1000:>17.1f} {t * 1000:>12.1f} {t / v:>19.2f} "
                f"{statistics.mean(our_mean):>14.3f} {statistics.mean(their_mean):>9.3f} {nulls:>15}"
            )
        reward.close()


if __name__ == "__main__":
    main()
