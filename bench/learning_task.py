"""The task, tokenizer, model and warm-start data of `bench/learning.py`, all built here (no hub).

The task is GSM8K-shaped: arithmetic word problems at four levels (add, take away, multiply, two steps) with a
solution that ends in `#### N`, so `python -m trainer_client.train` reads them as it reads GSM8K.

The warm start teaches the format and the arithmetic but not which number to give as the answer: its completions
work the problem out in `<think>` and then give the result only a third of the time, otherwise a number of the
question (as a model that has not learnt to answer would). Greedy decoding then answers about a third of the problems
right, and sampling gives GRPO groups with right and wrong answers: the verifier's reward is what can teach it to
give the result it worked out. With the gold answers shuffled (the control), the reward no longer says which.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# The tiny-model builders and chat format of `python -m trainer_client.tiny_model` (and the tests), here at this
# bench's sizes; learning.py takes write_jsonl from here.
from trainer_client.tiny_model import build_model, build_tokenizer
from trainer_client.tiny_model import write_jsonl as write_jsonl

NAMES = ["Tom", "Mia", "Sam", "Ana", "Leo", "Zoe", "Ben", "Ivy"]
THINGS = ["apples", "stickers", "marbles", "pencils", "coins", "books", "shells", "cards"]
LEVELS = ("add", "take", "times", "two_steps")
RIGHT_SHARE = 1 / 3  # of the warm-start completions that give the result they worked out
# Shorter than the training script's default (which works too): on CPU the prompt is most of the compute.
SYSTEM_PROMPT = "Think step by step inside <think> </think> tags, then give the answer: The answer is N."


@dataclass(frozen=True)
class Problem:
    question: str
    work: str  # the arithmetic, as the solution and the warm start's reasoning write it
    result: int
    numbers: tuple[int, ...]  # the numbers of the question: the warm start's wrong answers
    level: str

    def row(self) -> dict[str, str]:
        """A GSM8K row: `question`, and `answer` ending in the `#### N` line."""
        return {"question": self.question, "answer": f"{self.work}\n#### {self.result}", "level": self.level}


def problem(rng: random.Random, level: str) -> Problem:
    name, things = rng.choice(NAMES), rng.choice(THINGS)
    a, b = rng.randint(2, 9), rng.randint(2, 9)
    if level == "add":
        question = f"{name} has {a} {things} and gets {b} more. How many {things} does {name} have now?"
        return Problem(question, f"{a} + {b} = {a + b}", a + b, (a, b), level)
    if level == "take":
        a += b
        question = f"{name} has {a} {things} and gives away {b}. How many {things} are left?"
        return Problem(question, f"{a} - {b} = {a - b}", a - b, (a, b), level)
    if level == "times":
        question = f"{name} has {a} bags with {b} {things} in each. How many {things} are there in all?"
        return Problem(question, f"{a} * {b} = {a * b}", a * b, (a, b), level)
    c = rng.randint(1, a + b - 1)
    question = f"{name} has {a} {things}, gets {b} more and then gives away {c}. How many {things} are left?"
    work = f"{a} + {b} = {a + b}, {a + b} - {c} = {a + b - c}"
    return Problem(question, work, a + b - c, (a, b, c), level)


def problems(count: int, seed: int) -> list[Problem]:
    """`count` problems, the levels in turn."""
    rng = random.Random(seed)
    return [problem(rng, LEVELS[i % len(LEVELS)]) for i in range(count)]


def completion(item: Problem, rng: random.Random) -> str:
    """A warm-start completion: the work in `<think>`, then the result a third of the time, else a number of the
    question that is not the result."""
    wrong = [n for n in item.numbers if n != item.result]
    answer = item.result if not wrong or rng.random() < RIGHT_SHARE else rng.choice(wrong)
    return f"<think>{item.work}</think>The answer is {answer}."


def warm_start_rows(items: Sequence[Problem], seed: int, system_prompt: str = SYSTEM_PROMPT) -> list[dict[str, object]]:
    """Prompt-completion chats for TRL's SFTTrainer, with the prompt the training script builds."""
    rng = random.Random(seed)
    return [
        {
            "prompt": [{"role": "system", "content": system_prompt}, {"role": "user", "content": item.question}],
            "completion": [{"role": "assistant", "content": completion(item, rng)}],
        }
        for item in items
    ]


def shuffled_golds(
    rows: Sequence[Mapping[str, Any]], seed: int, columns: Sequence[str] = ("answer",)
) -> list[dict[str, Any]]:
    """The control's data: each question keeps its text, the solutions (`columns`) are dealt out to other questions
    (a derangement), so the gold the verifier checks against is another problem's."""
    order = list(range(len(rows)))
    rng = random.Random(seed)
    while len(rows) > 1 and any(i == j for i, j in enumerate(order)):
        rng.shuffle(order)
    return [{**row, **{name: rows[j][name] for name in columns}} for row, j in zip(rows, order, strict=True)]


def build(path: Path, items: Sequence[Problem], seed: int, system_prompt: str = SYSTEM_PROMPT) -> Path:
    """Tokenizer (trained on the prompts and warm-start completions) and random model in `path`."""
    rng = random.Random(seed)
    lines = [system_prompt, *(line for item in items for line in (item.question, completion(item, rng)))]
    return build_from_lines(path, lines, seed)


def build_from_lines(path: Path, lines: Sequence[str], seed: int) -> Path:
    """The learning benches' tokenizer (trained on `lines`) and random model, in `path`."""
    path.mkdir(parents=True, exist_ok=True)
    # digits one token each, so numbers are spelt digit by digit; hidden 128, 4 layers: about a million parameters
    build_tokenizer(path, lines, vocab_size=800, split_digits=True)
    build_model(path, seed=seed, hidden=128, intermediate=512, layers=4, heads=4, kv_heads=2, max_positions=512)
    return path
