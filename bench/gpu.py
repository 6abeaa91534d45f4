"""The training script on a GPU (issue 28): a GRPO step's time, the share of it spent waiting for the verifier's
rewards, peak GPU memory, and `learning.py`'s learning run at a larger scale.

    python bench/gpu.py --out "$OUT"                  # on a GPU machine: about 6.5 minutes on one H100
    python bench/gpu.py --smoke --out /tmp/gpu        # on CPU: tiny sizes, a few steps (what the test suite runs)

Everything runs offline: no model, tokenizer or dataset comes from the hub.

1. **Throughput** (`throughput.json`). A Qwen2-style model shaped as Qwen2.5-0.5B (hidden 896, 24 layers, 14 heads,
   2 KV heads, MLP 4,864, tied embeddings) with random weights, built here from its config, and a byte-level BPE
   tokenizer with Qwen2.5's vocabulary size (151,646), trained on random words so that the random model's tokens
   decode to text as long as a real completion's. A verifier on loopback with as many math workers as the machine
   has cores (code scoring off: no Docker there). Then `python -m trainer_client.train` on CUDA with `--bf16 true`
   (the README's one-GPU recipe, without vLLM: `transformers` generates), math + format rewards, on `learning.py`'s
   GSM8K-shaped task, at 64, 256 and 1,024 completions per step (8 per prompt, micro-batches of 32, so gradient
   accumulation 2, 8 and 32: one generation batch per step), `--max_completion_length 256`, a few steps each. Per
   size, from the run's `trainer_state.json` (the script logs it: `trainer_client/timings.py`), leaving out the
   first step (warm-up): TRL's `step_time`, `timing/generation`, `timing/rewards` (the reward functions' wall time
   as the trainer waits for it) and its share of the step, and `gpu/peak_memory_gib`.
   A random model's text has no answer in it, which is cheap to score; so the same reward functions (one request
   per batch, as in training) then score GSM8K- and MATH-shaped completions (`workloads.py`: reasoning, answers in
   every form, a share malformed) in batches of each size: what a trained model's rewards would cost, set against
   the step times measured.
2. **Learning** (`learning/`): `learning.py` on CUDA, seed 0, with its control trained beside it at the same time,
   at the scale `--learning-args` gives (default: 32 prompts x 8 completions per step, 250 steps, 16 math workers).
3. **Learning on reasoning-gym** (`procedural-seed<N>/`, issue 24; not in the default phases): `learning_procedural.py`
   on CUDA, each seed of `--seeds` with its control beside it, the seeds at the same time (each with its own verifier),
   at the scale `--procedural-args` gives (default: 32 prompts x 8 completions per step, 400 steps).

`--phases` runs some of them; `throughput.json`, `learning/summary.json`, `learning/learning.png` and each stage's
log go to `--out`, written as each stage ends (a run stopped early keeps what it finished).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import shlex
import string
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from statistics import mean, median
from typing import Any

from learning import OFFLINE, finish, launch
from learning_task import SYSTEM_PROMPT, problems, write_jsonl
from machine import load_average, verifier
from workloads import Sample, gsm8k_step, math_step

from trainer_client.tiny_model import build_model, build_tokenizer

ROOT = Path(__file__).resolve().parents[1]
QWEN_VOCAB = 151_646  # Qwen2.5's tokenizer (its embedding is padded to 151,936)
# Qwen2.5-0.5B's shape: about 494M parameters with its vocabulary
QWEN_05B = {"hidden": 896, "intermediate": 4864, "layers": 24, "heads": 14, "kv_heads": 2, "max_positions": 2048}
TINY = {"hidden": 32, "intermediate": 64, "layers": 2, "heads": 2, "kv_heads": 1, "max_positions": 512}
GENERATIONS = 8
LEARNING_ARGS = "--prompts-per-step 32 --grpo-steps 250 --checkpoints 5 --math-workers 16"
PROCEDURAL_ARGS = "--prompts-per-step 32 --grpo-steps 400 --checkpoints 4 --math-workers 6"


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "gpu")
    parser.add_argument(
        "--phases", nargs="+", choices=("throughput", "learning", "procedural"), default=["throughput", "learning"]
    )
    parser.add_argument("--sizes", type=int, nargs="+", default=[64, 256, 1024], help="completions per step")
    parser.add_argument("--steps", type=int, default=3, help="GRPO steps per size (the first is left out)")
    parser.add_argument("--micro-batch", type=int, default=32, help="completions per forward and backward pass")
    parser.add_argument("--max-completion-length", type=int, default=256)
    parser.add_argument("--math-workers", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--learning-args", default=LEARNING_ARGS, help="more options for learning.py")
    parser.add_argument("--procedural-args", default=PROCEDURAL_ARGS, help="more options for learning_procedural.py")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1], help="the procedural runs' seeds")
    parser.add_argument("--smoke", action="store_true", help="tiny sizes on CPU: whether every stage runs")
    args = parser.parse_args(argv)
    if args.smoke:
        args.sizes, args.steps, args.micro_batch, args.max_completion_length = [8, 16], 2, 8, 16
        args.math_workers = 2
        args.learning_args = "--smoke --parallel-control"  # tests/client/test_learning_bench.py runs it
        args.procedural_args = "--smoke"
    return args


def device_flags(smoke: bool) -> list[str]:
    return ["--use_cpu", "true", "--bf16", "false"] if smoke else ["--bf16", "true"]


def describe(smoke: bool) -> dict[str, Any]:
    import torch
    import transformers
    import trl

    machine: dict[str, Any] = {
        "cpus": os.cpu_count(),
        "python": sys.version.split()[0],
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "trl": trl.__version__,
        "load_average": load_average(),
    }
    if torch.cuda.is_available():
        machine |= {"gpu": torch.cuda.get_device_name(0), "gpu_memory_gib": torch.cuda.mem_get_info()[1] / 2**30}
    elif not smoke:
        raise SystemExit("no CUDA device: run with --smoke on a machine without a GPU")
    print(f"machine: {json.dumps(machine)}", flush=True)
    return machine


def build(path: Path, smoke: bool, rows: Sequence[dict[str, Any]]) -> int:
    """The tokenizer and the random model in `path`; the model's parameter count."""
    started = time.monotonic()
    rng = random.Random(0)
    letters = string.ascii_letters + string.digits
    lines = [SYSTEM_PROMPT, *(f"{row['question']} {row['answer']}" for row in rows)]
    lines += [
        " ".join("".join(rng.choice(letters) for _ in range(rng.randint(2, 10))) for _ in range(20))
        for _ in range(400 if smoke else 40_000)
    ]
    build_tokenizer(path, lines, vocab_size=2000 if smoke else QWEN_VOCAB)
    build_model(path, seed=0, device="cpu" if smoke else "cuda", **(TINY if smoke else QWEN_05B))
    if not smoke:  # the GPU memory the weights were drawn in goes back to the training scripts
        import torch

        torch.cuda.empty_cache()
    from safetensors import safe_open

    with safe_open(str(path / "model.safetensors"), "pt") as weights:
        parameters = sum(math.prod(weights.get_slice(name).get_shape()) for name in weights.keys())  # noqa: SIM118
    print(f"model: {parameters / 1e6:.0f}M parameters, built in {time.monotonic() - started:.0f}s", flush=True)
    return parameters


def train(model: Path, data: Path, url: str, out: Path, size: int, args: argparse.Namespace) -> dict[str, Any]:
    """`python -m trainer_client.train` at `size` completions per step; its logged steps and wall time."""
    micro = min(args.micro_batch, size)
    argv = [
        "--model_name_or_path", str(model),
        "--dataset_name", str(data),
        "--verifier_url", url,
        "--reward_components", "math", "format",
        "--system_prompt", SYSTEM_PROMPT,
        "--output_dir", str(out),
        "--max_steps", str(args.steps),
        "--per_device_train_batch_size", str(micro),
        "--gradient_accumulation_steps", str(size // micro),
        "--num_generations", str(GENERATIONS),
        "--max_completion_length", str(args.max_completion_length),
        "--learning_rate", "1e-6",
        "--logging_steps", "1",
        "--save_strategy", "no",
        "--report_to", "none",
        "--seed", "0",
        *device_flags(args.smoke),
    ]  # fmt: skip
    seconds, _ = finish(launch(argv, out.with_suffix(".log")))  # the log is run-<size>.log
    state = json.loads((out / "trainer_state.json").read_text())
    return {"log": [entry for entry in state["log_history"] if "step_time" in entry], "seconds": seconds}


def per_size(size: int, logged: list[dict[str, Any]]) -> dict[str, Any]:
    """One size's numbers: means over the steps after the first."""
    steps = logged[1:] or logged

    def avg(key: str) -> float | None:
        values = [entry[key] for entry in steps if entry.get(key) is not None]
        return round(mean(values), 3) if values else None

    step, rewards = avg("step_time"), avg("timing/rewards")
    return {
        "completions_per_step": size,
        "steps_measured": len(steps),
        "step_s": step,
        "generation_s": avg("timing/generation"),
        "rewards_s": rewards,
        "reward_share_pct": round(100 * rewards / step, 2) if step and rewards is not None else None,
        "peak_gpu_memory_gib": max((entry.get("gpu/peak_memory_gib") or 0 for entry in logged), default=None),
        "mean_completion_tokens": avg("completions/mean_length"),
    }


def realistic_rewards(url: str, sizes: Sequence[int], repeats: int) -> list[dict[str, Any]]:
    """The training script's math + format reward functions on GSM8K- and MATH-shaped completions, one batch of each
    size at a time as TRL calls them (each function in turn, one request for both): seconds per batch, the median of
    `repeats` batches; and how many rewards came back None (none should)."""
    from trainer_client.reward_group import VerifierRewards

    rewards = VerifierRewards(["math", "format"], base_url=url)
    rows = []
    for name, make in (("gsm8k", gsm8k_step), ("math", math_step)):
        for size in sizes:
            times, unscored = [], 0
            # a batch no one scored before (the service caches results), and one untimed first (the workers' first
            # parse imports what it needs)
            for seed in range(size * 1000, size * 1000 + repeats + 1):
                samples: list[Sample] = make(seed=seed, prompts=size // GENERATIONS, group_size=GENERATIONS)
                batch = {
                    "prompts": [[{"role": "user", "content": "q"}]] * len(samples),
                    "completions": [[{"role": "assistant", "content": s.completion}] for s in samples],
                    "solution": [s.gold for s in samples],
                }
                started = time.perf_counter()
                for function in rewards.functions:
                    unscored += sum(score is None for score in function(**batch))
                times.append(time.perf_counter() - started)
            seconds = round(median(times[1:]), 3)
            rows.append({"workload": name, "completions": size, "rewards_s": seconds, "unscored": unscored})
            print(f"rewards on {name}-shaped completions, {size} per batch: {rows[-1]['rewards_s']}s", flush=True)
    return rows


def throughput(args: argparse.Namespace, machine: dict[str, Any]) -> dict[str, Any]:
    out: Path = args.out / "throughput"
    out.mkdir(parents=True, exist_ok=True)
    prompts = max(args.sizes) // GENERATIONS * args.steps
    rows = [item.row() for item in problems(max(prompts, 64), seed=1000)]
    data = write_jsonl(out / "train.jsonl", rows)
    result: dict[str, Any] = {"machine": machine, "settings": {k: str(v) for k, v in vars(args).items()}}
    # the verifier (its math workers start) while the tokenizer and model are built
    with verifier(out / "verifier.log", VERIFIER_MATH_WORKERS=str(args.math_workers)) as url:
        result["parameters"] = build(out / "model", args.smoke, rows)
        result["sizes"] = []
        for size in args.sizes:
            run = train(out / "model", data, url, out / f"run-{size}", size, args)
            result["sizes"].append({**per_size(size, run["log"]), "script_s": round(run["seconds"], 1)})
            print(f"{size} completions per step: {json.dumps(result['sizes'][-1])}", flush=True)
            (args.out / "throughput.json").write_text(json.dumps(result, indent=1) + "\n")
        result["realistic_rewards"] = realistic_rewards(url, args.sizes, 3 if args.smoke else 5)
    result["load_average_after"] = load_average()
    (args.out / "throughput.json").write_text(json.dumps(result, indent=1) + "\n")
    return result


def learning(args: argparse.Namespace) -> None:
    learn(args, "learning.py", {0: args.out / "learning"}, args.learning_args)


def procedural(args: argparse.Namespace) -> None:
    outs = {seed: args.out / f"procedural-seed{seed}" for seed in args.seeds}
    learn(args, "learning_procedural.py", outs, args.procedural_args)


def learn(args: argparse.Namespace, script: str, outs: dict[int, Path], more: str) -> None:
    """`script` (a learning run: warm start, GRPO and its control, held-out evaluations) for each seed, the seeds at
    the same time, on CUDA with the control beside each run; prints each log's tail."""
    runs = []
    for seed, out in outs.items():
        argv = [sys.executable, str(ROOT / "bench" / script), "--seed", str(seed), "--out", str(out)]
        argv += [] if args.smoke else ["--device", "cuda", "--parallel-control"]
        argv += shlex.split(more)
        print(f"{out.name}: {shlex.join(argv[1:])}", flush=True)
        log = args.out / f"{out.name}.log"
        with log.open("w") as sink:
            env = {**os.environ, **OFFLINE}
            runs.append((subprocess.Popen(argv, cwd=ROOT, env=env, stdout=sink, stderr=subprocess.STDOUT), log))
    failed = []
    for process, log in runs:
        process.wait()
        lines = [line for line in log.read_text().splitlines() if "it/s]" not in line]
        print(f"{log.stem}:", "\n".join(lines[-12:]), sep="\n", flush=True)
        if process.returncode != 0:
            failed.append(f"{log.stem} (exit {process.returncode})")
    if failed:
        raise SystemExit(f"{script} failed: {', '.join(failed)}")


def main(argv: Sequence[str] | None = None) -> None:
    args = parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    machine = describe(args.smoke)
    started = time.monotonic()
    if "throughput" in args.phases:
        throughput(args, machine)
        print(f"throughput done in {time.monotonic() - started:.0f}s", flush=True)
    if "learning" in args.phases:
        learning(args)
        print(f"learning done; {time.monotonic() - started:.0f}s in all", flush=True)
    if "procedural" in args.phases:
        procedural(args)
        print(f"procedural learning done; {time.monotonic() - started:.0f}s in all", flush=True)


if __name__ == "__main__":
    main()
