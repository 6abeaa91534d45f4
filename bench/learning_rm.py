"""A reward model beside the rule, trained online from the rule's outcomes (issue 25), on bench/learning.py's task:
GRPO rewarded by the rule alone, against GRPO rewarded by the rule plus a reward model that the run itself keeps
fine-tuning from the rule outcomes (`python -m trainer_client.train --online_rm`), and that run's control (the same
with the gold answers shuffled).

    .venv/bin/python bench/learning_rm.py --seed 0        # on 2 CPU cores: about an hour
    .venv/bin/python bench/learning_rm.py --smoke         # a few steps of each stage (no claim): what tests/client runs
    python bench/learning_rm.py --device cuda --parallel-control --prompts-per-step 32 --grpo-steps 250 \\
        --checkpoints 5 --math-workers 16                # on a GPU, the three runs at once

In one run, with a live verifier it starts (serving two reward models, `rm_run` and `rm_control`, one per run that
updates its own; `VERIFIER_MODEL_ROOTS` is the output folder):

1. The task, its warm start and held-out problems, as bench/learning.py makes them.
2. The reward model starts as the warm start itself under a new score head (a sequence-classification model over
   its weights, as PRIME starts its reward model from the SFT model), reloaded into the verifier under both names.
3. Three GRPO runs of the same length from the warm start: `run`, math + format + overlong (bench/learning.py's
   recipe); `rm`, the same plus `rm` (the model's sigmoid, at half the rule's weight: it ranks answers within the
   rule's verdict, never lifts a wrong one over a right one), with `--online_rm rm_run --online_rm_every K`: every K
   steps the model is fine-tuned on the pairs of right and wrong answers of the last K steps (TRL's RewardTrainer),
   reloaded, and evaluated on held-out prompts; `control`, the `rm` run on shuffled golds with `rm_control`.
4. Held-out accuracy (greedy, scored by math) at every checkpoint of each run; the reward model's held-out ranking
   accuracy at each update, from the `rm` run's log (`online_rm/ranking_accuracy`).

Targets: the reward model's held-out ranking accuracy reaches at least 90%; the `rm` run's mean held-out accuracy
over the checkpoints is at least the `run`'s (it learns at least as fast); the control gains under 5 points. Writes
`summary.json` and `learning.png` to `--out`.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from learning import MATH, Variant, describe_machine, math_task, parse_args, run
from machine import load_average

from trainer_client import VerifierClient

MODELS = ("rm_run", "rm_control")  # one per run that updates its model


def own_args(argv: Sequence[str] | None) -> tuple[argparse.Namespace, list[str]]:
    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument("--rm-every", type=int, default=20, help="GRPO steps between updates of the reward model")
    parser.add_argument("--rm-weight", type=float, default=0.5, help="the model's weight (math's is 1)")
    parser.add_argument("--rm-method", choices=("pairs", "outcome"), default="pairs")
    parser.add_argument("--rm-lr", type=float, default=1e-4, help="the reward model's learning rate")
    parser.add_argument("--rm-epochs", type=int, default=1, help="passes over the outcomes kept, per update")
    parser.add_argument(
        "--scale-rewards",
        choices=("group", "batch", "none"),
        default="group",
        help="GRPOConfig's scale_rewards, for every run: group divides each group's advantages by its own std, so "
        "in a group the rule scores alike the model's small differences become the whole signal",
    )
    return parser.parse_known_args(argv)


def reward_model_from(warm: Path, out: Path) -> Path:
    """The warm start under a new score head, as a sequence-classification model RewardTrainer trains and the rm
    component serves (num_labels 1, pad_token_id set)."""
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(warm)
    model = AutoModelForSequenceClassification.from_pretrained(warm, num_labels=1)
    model.config.pad_token_id = tokenizer.pad_token_id
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    return out


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    extra, rest = own_args(argv)
    args = parse_args(rest, description=__doc__, results="learning-rm")
    if args.smoke:
        extra.rm_every = 1
    out: Path = args.out.resolve()
    args.out = out
    out.mkdir(parents=True, exist_ok=True)
    describe_machine()
    task = math_task(args, out)
    # The verifier loads its models when it starts, before the warm start exists: a stand-in of the same shape
    # first, the warm start's reward model reloaded in its place once there is one.
    stand_in = out / "rm-stand-in"
    task.build(stand_in)
    reward_model_from(stand_in, stand_in)
    models = {name: {"path": str(stand_in), "max_tokens": 512} for name in MODELS}
    settings = {"VERIFIER_MODELS": json.dumps(models), "VERIFIER_MODEL_ROOTS": json.dumps([str(out)])}

    def prepare(warm: Path, url: str) -> None:
        start = reward_model_from(warm, out / "rm-start")
        with VerifierClient(url) as client:
            for name in MODELS:
                client.reload_model(name, str(start))

    def with_model(name: str) -> tuple[str, ...]:
        options = {"rm": {"model": name, "transform": "sigmoid"}}
        return (
            "--reward_components", *MATH.components, "rm",
            "--reward_weights", *(["1"] * len(MATH.components)), str(extra.rm_weight),
            "--reward_options", json.dumps(options),
            "--online_rm", name,
            "--online_rm_every", str(extra.rm_every),
            "--online_rm_method", extra.rm_method,
            "--online_rm_learning_rate", str(extra.rm_lr),
            "--online_rm_epochs", str(extra.rm_epochs),
            "--online_rm_output_dir", str(out / f"{name}-updates"),
        )  # fmt: skip

    scaling = ("--scale_rewards", extra.scale_rewards)
    variants = [
        Variant("run", task.train, scaling, label="rule"),
        Variant("rm", task.train, (*scaling, *with_model("rm_run")), label="rule + online reward model"),
        *(
            []
            if args.no_control
            else [Variant("control", task.control, (*scaling, *with_model("rm_control")), "control")]
        ),
    ]
    summary = run(args, MATH, task, variants, settings, prepare)
    ranking: list[tuple[int, float]] = []  # at each update: the first step that logged a new evaluation
    for entry in summary["rm"]["log"]:
        value = entry.get("online_rm/ranking_accuracy")
        if value is not None and (not ranking or value != ranking[-1][1]):
            ranking.append((entry["step"], value))
    summary["rm_ranking"] = ranking
    mean = {
        key: sum(p["accuracy"] for p in summary[key]["curve"]) / len(summary[key]["curve"]) for key in ("run", "rm")
    }
    best = max((accuracy for _, accuracy in ranking), default=None)
    brief = {
        "before": summary["before"],
        "rule_after": summary["run_after"],
        "rm_after": summary["rm_after"],
        "control_after": summary.get("control_after"),
        "rule_mean": mean["run"],
        "rm_mean": mean["rm"],
        "ranking_accuracy_last": ranking[-1][1] if ranking else None,
        "ranking_accuracy_best": best,
    }
    (out / "summary-rm.json").write_text(json.dumps(brief, indent=1) + "\n")
    print(json.dumps(brief))
    print("reward model's held-out ranking accuracy after each update (step): "
          + ", ".join(f"{s}: {a:.3f}" for s, a in ranking))  # fmt: skip
    if not args.smoke:
        control = summary.get("control_after")
        met = {
            "ranking >= 90%": best is not None and best >= 0.9,
            "rule + model at least as fast": mean["rm"] >= mean["run"],
            "control < +5": control is None or control - summary["before"] < 5,
        }
        print("targets: " + ", ".join(f"{name}: {'met' if ok else 'NOT met'}" for name, ok in met.items()))
    print(f"wrote {out / 'summary.json'} and {out / 'learning.png'}; load average {load_average()}")
    return summary


if __name__ == "__main__":
    sys.exit(0 if main() else 1)
