"""Proof that a model learns from the verifier's reward: GRPO through the verifier raises held-out accuracy, and the
same run with the gold answers shuffled (the control) does not.

    .venv/bin/python bench/learning.py --seed 0        # about 25 minutes on 2 CPU cores; no hub, no GPU
    .venv/bin/python bench/learning.py --smoke         # a few steps of each stage (no claim): what tests/client runs
    python bench/learning.py --device cuda --parallel-control --prompts-per-step 32 --grpo-steps 250 \
        --checkpoints 5 --math-workers 16             # on a GPU, run and control at once: 3 minutes on an H100

In one run, with a live verifier it starts (`python -m verifier_service` on a free loopback port):

1. Builds a GSM8K-shaped task of its own (`learning_task.py`: word problems at four levels with a `#### N` gold),
   a byte-level BPE tokenizer and a small Qwen2-style model with random weights.
2. Warm start: TRL's `SFTTrainer` on completions that work the problem out in `<think>` and then give the result
   only a third of the time (else a number of the question), so the model knows the format and the arithmetic but
   not which number to answer.
3. GRPO with the real training script, `python -m trainer_client.train` (TRL's GRPOTrainer), rewarded by the verifier
   with math + format + overlong; then the control, the same command on the same data with the gold answers dealt
   out to other questions. 400 steps of 8 prompts x 8 completions, learning rate 1e-4, and a KL penalty (beta 0.04)
   to the warm start: without it the updates soon garble the reasoning the warm start taught (at 2e-4 and beta 0
   the reward did not rise and the reasoning was garbled by step 264; at 1e-4, accuracy stalled near 50%).
4. Held-out accuracy (problems the training never saw, greedy decoding, scored by the verifier's math component)
   before, at every saved checkpoint, and after, for both runs.

It writes `summary.json` (`before`, `after`, `control_before`, `control_after` in percent, `steps`, `seconds`: the
GRPO run's wall time) and `learning.png` (reward per step, held-out accuracy, share of well-formed completions) to
`--out`. Target (issue 12): after - before >= 20 points with GRPO under 15 minutes, and control_after -
control_before < 5.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from learning_task import SYSTEM_PROMPT, build, problems, shuffled_golds, warm_start_rows, write_jsonl
from machine import load_average, verifier

from trainer_client import VerifierClient
from verifier_service.schema import ScoreItem

ROOT = Path(__file__).resolve().parents[1]
OFFLINE = {"HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}


@dataclass(frozen=True)
class Recipe:
    """What a learning run is rewarded and judged by (this file's: the math task's; `learning_procedural.py` has
    another): the training script's reward components and system prompt, and the correctness component whose
    score of 1.0 counts a held-out answer right."""

    components: tuple[str, ...]
    system_prompt: str
    judge: str


@dataclass(frozen=True)
class Task:
    """A learning run's data: the GRPO data and its control (JSONL files the training script reads), the warm
    start's prompt-completion chats, the held-out questions with the specs that judge them, and how the tokenizer
    and random model are built (into the folder it is given)."""

    train: Path
    control: Path
    warm_start: list[dict[str, Any]]
    held_out: list[tuple[str, dict[str, Any]]]
    build: Callable[[Path], object]


MATH = Recipe(("math", "format", "overlong"), SYSTEM_PROMPT, "math")


def parse_args(
    argv: Sequence[str] | None = None, description: str | None = __doc__, results: str = "learning", **defaults: Any
) -> argparse.Namespace:
    """The options of a learning run (this file's, or another task's with its own `description`, results folder
    `bench/results/<results>-seed<seed>` and option `defaults`)."""
    parser = argparse.ArgumentParser(description=description, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, help=f"default: bench/results/{results}-seed<seed>")
    parser.add_argument("--train-problems", type=int, default=4000, help="warm-start and GRPO prompts")
    parser.add_argument("--eval-problems", type=int, default=400, help="held-out problems")
    parser.add_argument("--sft-steps", type=int, default=600)
    parser.add_argument("--sft-lr", type=float, default=2e-3)
    parser.add_argument("--grpo-steps", type=int, default=400)
    parser.add_argument("--grpo-lr", type=float, default=1e-4)
    parser.add_argument("--beta", type=float, default=0.04, help="GRPO's KL coefficient (TRL's default is 0)")
    parser.add_argument("--prompts-per-step", type=int, default=8)
    parser.add_argument("--generations", type=int, default=8, help="completions per prompt")
    parser.add_argument("--max-completion-length", type=int, default=48)
    parser.add_argument("--checkpoints", type=int, default=6, help="held-out evaluations along each GRPO run")
    parser.add_argument("--no-control", action="store_true", help="skip the control run")
    parser.add_argument("--warm-start", type=Path, help="reuse the warm start (out/warm) of an earlier run, same seed")
    parser.add_argument(
        "--device",
        choices=("cpu", "cuda"),
        default="cpu",
        help="where the warm start, GRPO and evaluation run (float32 either way: the recipe was found on CPU)",
    )
    parser.add_argument(
        "--parallel-control",
        action="store_true",
        help="train the control beside the run, at the same time (a GPU has room for both)",
    )
    parser.add_argument("--math-workers", type=int, default=1, help="the verifier's VERIFIER_MATH_WORKERS")
    parser.add_argument("--smoke", action="store_true", help="a few steps of everything (no claim about learning)")
    parser.set_defaults(**defaults)
    args = parser.parse_args(argv)
    if args.smoke:
        args.train_problems, args.eval_problems, args.sft_steps, args.grpo_steps = 64, 16, 4, 2
        args.prompts_per_step, args.generations, args.checkpoints = 2, 4, 1
    args.out = args.out or ROOT / "bench" / "results" / f"{results}-seed{args.seed}"
    return args


def warm_start(model: Path, rows: Sequence[Mapping[str, Any]], args: argparse.Namespace, out: Path) -> None:
    """TRL's SFTTrainer on the warm-start chats (loss on the completion only); saves over `model`."""
    from datasets import Dataset
    from transformers import AutoTokenizer
    from trl import SFTConfig, SFTTrainer

    config = SFTConfig(
        output_dir=str(out),
        max_steps=args.sft_steps,
        per_device_train_batch_size=64,
        learning_rate=args.sft_lr,
        lr_scheduler_type="cosine",
        warmup_steps=min(30, args.sft_steps // 10),
        logging_steps=max(1, args.sft_steps // 10),
        save_strategy="no",
        report_to="none",
        use_cpu=args.device == "cpu",
        bf16=False,
        seed=args.seed,
        completion_only_loss=True,
    )
    dataset = Dataset.from_list(list(rows))
    tokenizer = AutoTokenizer.from_pretrained(model)
    trainer = SFTTrainer(model=str(model), args=config, train_dataset=dataset, processing_class=tokenizer)
    trainer.train()
    trainer.save_model(str(model))
    tokenizer.save_pretrained(model)


def evaluate(
    model_dir: Path,
    items: Sequence[tuple[str, Mapping[str, Any]]],
    url: str,
    max_new_tokens: int,
    recipe: Recipe = MATH,
    device: str = "cpu",
) -> dict[str, float]:
    """Held-out accuracy (the recipe's judge scores 1.0 under the item's specs) and the share of well-formed
    completions (format ok), in percent, of greedy completions to the (question, specs) items, scored by the
    verifier."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(model_dir, padding_side="left")
    model = AutoModelForCausalLM.from_pretrained(model_dir).to(device).eval()
    completions: list[str] = []
    for start in range(0, len(items), 128):
        chats = [
            [{"role": "system", "content": recipe.system_prompt}, {"role": "user", "content": question}]
            for question, _ in items[start : start + 128]
        ]
        batch = tokenizer.apply_chat_template(
            chats, add_generation_prompt=True, padding=True, return_tensors="pt", return_dict=True
        ).to(device)
        with torch.no_grad():
            output = model.generate(**batch, do_sample=False, max_new_tokens=max_new_tokens)
        completions += tokenizer.batch_decode(output[:, batch["input_ids"].shape[1] :], skip_special_tokens=True)
    scored = [
        ScoreItem.model_validate({"completion": text, **specs, "format": {}})
        for text, (_, specs) in zip(completions, items, strict=True)
    ]
    with VerifierClient(url) as client:
        results = client.score(scored)
    right = sum(result.components[recipe.judge].score == 1.0 for result in results)
    formed = sum(result.components["format"].score == 1.0 for result in results)
    return {"accuracy": 100 * right / len(items), "format": 100 * formed / len(items)}


def start_grpo(
    model: Path,
    data: Path,
    url: str,
    out: Path,
    args: argparse.Namespace,
    recipe: Recipe = MATH,
    extra: Sequence[str] = (),
) -> tuple[subprocess.Popen[bytes], float, Path]:
    """The training script, as a user runs it, started (with the `extra` flags after the others): its process, when
    it started, and its log (`finish` waits for it)."""
    save_steps = max(1, args.grpo_steps // args.checkpoints)
    argv = [
        "--model_name_or_path", str(model),
        "--dataset_name", str(data),
        "--verifier_url", url,
        "--reward_components", *recipe.components,
        "--system_prompt", recipe.system_prompt,
        "--output_dir", str(out),
        "--max_steps", str(args.grpo_steps),
        "--per_device_train_batch_size", str(args.prompts_per_step * args.generations),
        "--num_generations", str(args.generations),
        "--max_completion_length", str(args.max_completion_length),
        "--learning_rate", str(args.grpo_lr),
        "--lr_scheduler_type", "constant",
        "--beta", str(args.beta),
        "--logging_steps", "1",
        "--save_strategy", "steps",
        "--save_steps", str(save_steps),
        "--save_only_model", "true",
        "--report_to", "none",
        "--use_cpu", str(args.device == "cpu").lower(),
        "--bf16", "false",
        "--seed", str(args.seed),
        *extra,
    ]  # fmt: skip
    return launch(argv, out.with_suffix(".log"))


def launch(argv: Sequence[str], log: Path) -> tuple[subprocess.Popen[bytes], float, Path]:
    """`python -m trainer_client.train` with `argv`, offline, its output to `log`, started: its process, when it
    started, and its log (`finish` waits for it)."""
    started = time.monotonic()
    with log.open("w") as sink:
        process = subprocess.Popen(
            [sys.executable, "-m", "trainer_client.train", *argv],
            cwd=ROOT,
            env={**os.environ, **OFFLINE},
            stdout=sink,
            stderr=subprocess.STDOUT,
        )
    return process, started, log


def finish(started: tuple[subprocess.Popen[bytes], float, Path]) -> tuple[float, Path]:
    """Waits for a training script `launch` started; its wall time and its log. One that failed: the end of its log
    is printed (all there is to read on a machine whose files do not come back) and this process exits."""
    process, start, log = started
    try:
        code = process.wait()
    finally:
        if process.poll() is None:  # this process is being stopped: stop the script too
            process.terminate()
            process.wait()
    seconds = time.monotonic() - start
    if code != 0:
        print(log.read_text()[-4000:], flush=True)
        raise SystemExit(f"the training script failed (exit {code}); its log: {log}")
    return seconds, log


def curve(
    run: Path,
    items: Sequence[tuple[str, Mapping[str, Any]]],
    url: str,
    args: argparse.Namespace,
    recipe: Recipe = MATH,
) -> list[dict[str, float]]:
    """Held-out accuracy at every checkpoint the run saved, and at its end."""
    points = []
    checkpoints = sorted(run.glob("checkpoint-*"), key=lambda path: int(path.name.split("-")[1]))
    for checkpoint in checkpoints:
        points.append(
            {
                "step": int(checkpoint.name.split("-")[1]),
                **evaluate(checkpoint, items, url, args.max_completion_length, recipe, args.device),
            }
        )
    return points


def log_history(run: Path) -> list[dict[str, Any]]:
    state = json.loads((run / "trainer_state.json").read_text())
    return [entry for entry in state["log_history"] if "reward" in entry]


def plot(summary: dict[str, Any], path: Path, recipe: Recipe = MATH) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(1, 3, figsize=(15, 4.2))
    labels = summary.get("labels") or {"run": "verifier's reward", "control": "control (golds shuffled)"}
    colours = {"run": "tab:blue", "control": "tab:grey"}
    others = iter(["tab:orange", "tab:green", "tab:red", "tab:purple"])
    for key, label in labels.items():
        colour = colours.get(key) or next(others)
        part = summary.get(key)
        if not part:
            continue
        steps = [entry["step"] for entry in part["log"]]
        axes[0].plot(
            steps,
            smooth([entry[f"rewards/verifier_{recipe.judge}/mean"] for entry in part["log"]]),
            label=label,
            color=colour,
        )
        points = [{"step": 0, **summary["warm_start"]}, *part["curve"]]
        axes[1].plot([p["step"] for p in points], [p["accuracy"] for p in points], "o-", label=label, color=colour)
        axes[2].plot(
            steps,
            smooth([100 * entry["rewards/verifier_format/mean"] for entry in part["log"]]),
            label=label,
            color=colour,
        )
    axes[0].set(title=f"{recipe.judge} reward per step (mean, smoothed over 10)", xlabel="GRPO step", ylim=(0, 1))
    axes[1].set(title="held-out accuracy, greedy (%)", xlabel="GRPO step", ylim=(0, 100))
    axes[2].set(title="well-formed completions (%, smoothed)", xlabel="GRPO step", ylim=(0, 105))
    for axis in axes:
        axis.grid(alpha=0.3)
        axis.legend(loc="lower right")
    title = f"GRPO through the verifier ({recipe.judge}), seed {summary['seed']}: held-out accuracy "
    title += f"{summary['before']:.1f}% -> {summary['after']:.1f}%"
    if summary.get("control"):
        title += f", control {summary['control_before']:.1f}% -> {summary['control_after']:.1f}%"
    figure.suptitle(title)
    figure.tight_layout()
    figure.savefig(path, dpi=110)


def smooth(values: Sequence[float | None], window: int = 10) -> list[float]:
    """The mean of the last `window` values at each step; a step with no reward (None: the verifier was down) is
    left out."""
    means = []
    for i in range(len(values)):
        known = [value for value in values[max(0, i - window + 1) : i + 1] if value is not None]
        means.append(sum(known) / len(known) if known else float("nan"))
    return means


def describe_machine() -> None:
    import torch
    import transformers
    import trl

    print(
        f"machine: {platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}, torch "
        f"{torch.__version__}, transformers {transformers.__version__}, trl {trl.__version__}; load average "
        f"{load_average()}",
        flush=True,
    )


@dataclass(frozen=True)
class Variant:
    """One GRPO run of a learning bench: its name in the summary (`run` and `control` are the ones judged), its data
    (the task's or the control's) and flags of the training script beyond the recipe's."""

    key: str
    data: Path
    extra: tuple[str, ...] = ()
    label: str = ""


def variants_of(args: argparse.Namespace, task: Task) -> list[Variant]:
    """The usual pair: the run on the task's data, and the control on its shuffled golds (unless --no-control)."""
    run = Variant("run", task.train, label="verifier's reward")
    return [run] + ([] if args.no_control else [Variant("control", task.control, label="control (golds shuffled)")])


def run(
    args: argparse.Namespace,
    recipe: Recipe,
    task: Task,
    variants: Sequence[Variant] | None = None,
    settings: Mapping[str, str] | None = None,
    prepare: Callable[[Path, str], None] | None = None,
) -> dict[str, Any]:
    """A learning run, against a verifier it starts (with `settings`, VERIFIER_* variables, beside the math
    workers): the warm start (or `--warm-start`'s), `prepare(warm start, verifier URL)` when given, then GRPO on each
    variant (default: the task's data and its control), each evaluated on the held-out items at every checkpoint;
    writes `summary.json` and `learning.png` to `args.out` and returns the summary."""
    # stopped with SIGTERM: unwind, so the verifier and a running training script are stopped too
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    out: Path = args.out
    variants = list(variants or variants_of(args, task))
    with verifier(out / "verifier.log", VERIFIER_MATH_WORKERS=str(args.math_workers), **(settings or {})) as url:
        started = time.monotonic()
        model = out / "warm"
        if args.warm_start:  # an earlier run's warm start, same seed and task
            shutil.copytree(args.warm_start, model, dirs_exist_ok=True)
        else:
            task.build(model)
            warm_start(model, task.warm_start, args, out / "sft")
        warm = evaluate(model, task.held_out, url, args.max_completion_length, recipe, args.device)
        print(
            f"warm start ({args.sft_steps} SFT steps, {time.monotonic() - started:.0f}s): held-out accuracy "
            f"{warm['accuracy']:.1f}%, well formed {warm['format']:.1f}%",
            flush=True,
        )
        if prepare is not None:
            prepare(model, url)
        summary: dict[str, Any] = {"seed": args.seed, "warm_start": warm, "before": warm["accuracy"]}
        summary["labels"] = {variant.key: variant.label or variant.key for variant in variants}

        def start(variant: Variant) -> tuple[subprocess.Popen[bytes], float, Path]:
            return start_grpo(model, variant.data, url, out / variant.key, args, recipe, variant.extra)

        launched = {}
        if args.parallel_control:  # all at once; each is then waited for in turn
            launched = {variant.key: start(variant) for variant in variants}
        try:
            results = {variant.key: finish(launched.get(variant.key) or start(variant)) for variant in variants}
        finally:  # one failed: stop the others before the verifier goes
            for process, _, _ in launched.values():
                if process.poll() is None:
                    process.terminate()
                    process.wait()
        for variant in variants:
            key = variant.key
            seconds, log = results[key]
            points = curve(out / key, task.held_out, url, args, recipe)
            after = points[-1]["accuracy"]
            summary[key] = {"seconds": seconds, "curve": points, "log": log_history(out / key), "train_log": str(log)}
            print(
                f"{key}: {args.grpo_steps} GRPO steps in {seconds:.0f}s; held-out accuracy "
                + ", ".join(f"step {p['step']}: {p['accuracy']:.1f}%" for p in points),
                flush=True,
            )
            summary[f"{key}_after"] = after
            if key in ("run", "control"):
                summary["after" if key == "run" else "control_after"] = after
        summary["control_before"] = warm["accuracy"]  # the control starts from the same warm-start model
        summary["steps"] = args.grpo_steps
        summary["seconds"] = round(summary["run"]["seconds"], 1)
    brief = {
        key: summary.get(key) for key in ("before", "after", "control_before", "control_after", "steps", "seconds")
    }
    (out / "summary.json").write_text(json.dumps({**brief, "seed": args.seed, "details": summary}, indent=1) + "\n")
    plot(summary, out / "learning.png", recipe)
    print(json.dumps(brief))
    if args.smoke:  # a few steps of each stage: whether the pipeline runs, not whether the model learns
        print(f"smoke run: every stage ran ({args.sft_steps} SFT and {args.grpo_steps} GRPO steps); it makes no claim "
              "about learning (the target is judged by full runs only)")  # fmt: skip
    return summary


def math_task(args: argparse.Namespace, out: Path) -> Task:
    """This file's task: GSM8K-shaped problems, their shuffled-gold control and held-out problems, written to `out`."""
    train_items = problems(args.train_problems, seed=1000 + args.seed)
    seen = {item.question for item in train_items}
    held_out = [item for item in problems(4 * args.eval_problems, seed=2000 + args.seed) if item.question not in seen]
    held_out = held_out[: args.eval_problems]
    rows = [item.row() for item in train_items]
    task = Task(
        train=write_jsonl(out / "train.jsonl", rows),
        control=write_jsonl(out / "train-shuffled.jsonl", shuffled_golds(rows, seed=args.seed)),
        warm_start=warm_start_rows(train_items, args.seed),
        held_out=[(item.question, {"math": {"gold": str(item.result)}}) for item in held_out],
        build=lambda path: build(path, train_items, args.seed),
    )
    print(f"task: {len(train_items)} training problems, {len(held_out)} held out (none of their questions trained on)")
    return task


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    args = parse_args(argv)
    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    describe_machine()
    summary = run(args, MATH, math_task(args, out))
    if not args.smoke and summary.get("control_after") is not None:
        gain, control_gain = summary["after"] - summary["before"], summary["control_after"] - summary["control_before"]
        met = gain >= 20 and control_gain < 5 and summary["seconds"] <= 900
        print(
            f"gain {gain:+.1f} points in {summary['seconds']:.0f}s of GRPO, control {control_gain:+.1f} "
            f"(target: >= +20 within 15 minutes, control < +5): {'met' if met else 'NOT met'}"
        )
    print(f"wrote {out / 'summary.json'} and {out / 'learning.png'}; load average {load_average()}")
    return summary


if __name__ == "__main__":
    main()
