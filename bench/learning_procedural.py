"""A learning run on a task no one here wrote: GRPO through the verifier's `procedural` component (reasoning-gym's own
scorer) on reasoning-gym's `chain_sum` problems raises held-out accuracy, and the same run with every row's entry dealt
to another question (the control) does not.

    .venv/bin/python bench/learning_procedural.py --seed 0    # about half an hour on 2 CPU cores; no hub, no GPU
    python bench/gpu.py --phases procedural                   # on a GPU: seeds 0 and 1 with their controls, ~6 min
    .venv/bin/python bench/learning_procedural.py --smoke     # a few steps of each stage (no claim): tests/client

`bench/learning.py`'s pipeline (its `run`: a live verifier, the warm start, `python -m trainer_client.train` for the
run and the control, held-out evaluations at every checkpoint), on another task:

1. The data is reasoning-gym's, generated offline by the library (`reasoning_gym.create_dataset("chain_sum", ...)`,
   1-digit numbers, 3 or 4 terms: `State the final answer to the following arithmetic problem: 4 - 1 - 7 + 5 =`),
   training and held-out sets from different seeds, no held-out question among the training ones. The rows are
   reasoning-gym entries as the library makes them (`question`, `answer`, `metadata`, the metadata as its JSON
   string), which the training script maps to `procedural` specs itself (`--dataset_shape auto` detects them).
2. The warm start (TRL's SFTTrainer) writes the running total in `<think>` and then, in `<answer>` tags, the result
   only a third of the time, else another number it wrote down on the way (an operand, or a total before the last
   step): the model knows the format and the arithmetic but not which number is the answer.
3. GRPO rewarded by `procedural` (1 only when chain_sum's scorer gives the answer 1.0), `format` and `overlong`, then
   the control: the same command with each row's `answer` and `metadata` (the entry the scorer reads) dealt out to
   another row's question.
4. Held-out accuracy: greedy completions the verifier's `procedural` component scores 1.0, in percent.

Why chain_sum: its questions and answers are short (a 1M-parameter model on CPU spends its time on tokens), its
solution can be written as a few steps a small model learns in a few minutes of SFT, and its scorer
(`compute_decimal_reward`) gives 1.0 to the exact number (`-4`, `-4.0`, ` -4`) and partial credit to text that
only contains it (`-44`: 0.67, `-1` for 1: 0.5, `The answer is -4`: 0.125), which `procedural` without
`partial_credit` counts as wrong.

It writes `summary.json`, `learning.png` and the data to `--out` (default bench/results/learning-procedural-seed<N>).
"""

from __future__ import annotations

import json
import random
import time
from collections.abc import Sequence
from typing import Any

from learning import Recipe, Task, describe_machine, parse_args, run
from learning_task import build_from_lines, shuffled_golds, write_jsonl
from machine import load_average

DATASET = "chain_sum"
CONFIG = {"min_terms": 3, "max_terms": 4, "min_digits": 1, "max_digits": 1}
RIGHT_SHARE = 1 / 3  # of the warm-start completions that give the result they worked out
SYSTEM_PROMPT = "Think step by step inside <think> </think> tags, then give the answer inside <answer> </answer> tags."
RECIPE = Recipe(("procedural", "format", "overlong"), SYSTEM_PROMPT, "procedural")
SEED_SPAN = 1_000_000  # reasoning-gym seeds per run (train_seed)
MAX_COMPLETION_LENGTH = 64  # tokens: the longest warm-start completion is about 45


def train_seed(seed: int) -> int:
    """The reasoning-gym seed of a run's training set; its held-out set's is SEED_SPAN // 2 above it. reasoning-gym
    generates item i of a dataset from `seed + i`, so sets from nearby seeds share items: these are far apart."""
    return SEED_SPAN * (seed + 1)


def entries(count: int, seed: int) -> list[dict[str, Any]]:
    """`count` chain_sum entries from reasoning-gym, as JSON keeps them (the metadata's tuples become lists)."""
    import reasoning_gym

    dataset = reasoning_gym.create_dataset(DATASET, size=count, seed=seed, **CONFIG)
    return [json.loads(json.dumps(dict(entry))) for entry in dataset]


def row(entry: dict[str, Any]) -> dict[str, str]:
    """A training row: the entry, its metadata as its JSON string (one string column, whatever the keys)."""
    return {"question": entry["question"], "answer": entry["answer"], "metadata": json.dumps(entry["metadata"])}


def steps(entry: dict[str, Any]) -> list[tuple[int, str, int, int]]:
    """The running total of the entry's expression (`4 - 1 - 7`), one (total, sign, term, new total) per step."""
    tokens = entry["metadata"]["expression"].split()
    total, out = int(tokens[0]), []
    for sign, term in zip(tokens[1::2], tokens[2::2], strict=True):
        new = total + int(term) if sign == "+" else total - int(term)
        out.append((total, sign, int(term), new))
        total = new
    return out


def completion(entry: dict[str, Any], rng: random.Random) -> str:
    """A warm-start completion: the running total in `<think>`, then the result a third of the time, else another
    number written on the way (an operand or an earlier total)."""
    work = steps(entry)
    result = work[-1][3]
    written = {work[0][0], *(term for _, _, term, _ in work), *(new for *_, new in work[:-1])}
    wrong = sorted(written - {result})
    answer = result if not wrong or rng.random() < RIGHT_SHARE else rng.choice(wrong)
    thought = ", ".join(f"{total} {sign} {term} = {new}" for total, sign, term, new in work)
    return f"<think>{thought}</think><answer>{answer}</answer>"


def warm_start_rows(items: Sequence[dict[str, Any]], seed: int) -> list[dict[str, Any]]:
    """Prompt-completion chats for TRL's SFTTrainer, with the prompt the training script builds."""
    rng = random.Random(seed)
    return [
        {
            "prompt": [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": entry["question"]}],
            "completion": [{"role": "assistant", "content": completion(entry, rng)}],
        }
        for entry in items
    ]


def specs(entry: dict[str, Any]) -> dict[str, Any]:
    """What the verifier judges a held-out answer by (the procedural spec the training script makes of a row)."""
    return {"procedural": {"dataset": DATASET, "entry": entry}}


def held_out_entries(train: Sequence[dict[str, Any]], count: int, seed: int) -> list[dict[str, Any]]:
    """`count` entries from another seed whose questions are not among the training ones."""
    seen = {entry["question"] for entry in train}
    return [entry for entry in entries(4 * count, seed) if entry["question"] not in seen][:count]


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    args = parse_args(argv, __doc__, results="learning-procedural", max_completion_length=MAX_COMPLETION_LENGTH)
    out = args.out
    out.mkdir(parents=True, exist_ok=True)
    describe_machine()
    started = time.monotonic()
    train = entries(args.train_problems, seed=train_seed(args.seed))
    held_out = held_out_entries(train, args.eval_problems, seed=train_seed(args.seed) + SEED_SPAN // 2)
    rows = [row(entry) for entry in train]
    warm = warm_start_rows(train, args.seed)
    lines = [SYSTEM_PROMPT, *(e["question"] for e in train), *(r["completion"][0]["content"] for r in warm)]
    task = Task(
        train=write_jsonl(out / "train.jsonl", rows),
        control=write_jsonl(
            out / "train-shuffled.jsonl", shuffled_golds(rows, seed=args.seed, columns=("answer", "metadata"))
        ),
        warm_start=warm,
        held_out=[(entry["question"], specs(entry)) for entry in held_out],
        build=lambda path: build_from_lines(path, lines, args.seed),
    )
    print(
        f"task: reasoning-gym {DATASET} {CONFIG}, {len(train)} training entries, {len(held_out)} held out (none of "
        f"their questions trained on), generated in {time.monotonic() - started:.1f}s",
        flush=True,
    )
    summary = run(args, RECIPE, task)
    if not args.smoke and summary.get("control_after") is not None:
        gain, control_gain = summary["after"] - summary["before"], summary["control_after"] - summary["control_before"]
        print(f"gain {gain:+.1f} points in {summary['seconds']:.0f}s of GRPO, control {control_gain:+.1f}")
    print(f"wrote {out / 'summary.json'} and {out / 'learning.png'}; load average {load_average()}")
    return summary


if __name__ == "__main__":
    main()
