"""GRPO-shaped math workloads for the benchmarks: pure functions of a seed, no I/O.

A training step samples `group_size` completions for each of `prompts` prompts. Within a group the final
answers repeat, as they do in real samples (several completions agree on one answer), while the reasoning text
differs per completion. Each completion is tagged with what the generator meant it to be (`intent`) and how its
answer is written (`form`), so a benchmark can explain a disagreement without guessing.

- `gsm8k_step`: plain-number answers (gold "72", "1,234", "7.5"); `<think>` reasoning of a few hundred to ~1500
  characters with intermediate numbers; the answer as `#### N`, "The answer is N.", `\\boxed{N}` or `**N**`.
  About 50% right, 35% wrong, 15% malformed (truncated, no answer, answer in words, empty box).
- `math_step`: bare-LaTeX gold answers (fractions, roots, intervals, polynomials, multiples of pi, tuples and
  some integers, as in the MATH dataset); the answer in `\\boxed{}`, right ones often in an equivalent but
  different form (`\\dfrac{2}{4}` for `\\frac{1}{2}`, `(x+1)^2` for `x^2+2x+1`). About 45% right, 40% wrong,
  15% malformed.

>>> step = gsm8k_step(seed=1, prompts=2, group_size=8)
>>> len(step), step == gsm8k_step(seed=1, prompts=2, group_size=8)
(16, True)
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction
from math import gcd


@dataclass(frozen=True)
class Sample:
    """One completion to score against its prompt's gold answer."""

    prompt: int  # index of the prompt (group) within the step
    gold: str
    completion: str
    intent: str  # "right", "wrong" or "malformed:<how>"
    form: str  # how the final answer is written ("boxed", "gsm8k", ...; "-" when there is none)


# ---------------------------------------------------------------- shared pieces

_FILLERS = (
    "Let me re-read the problem to make sure I have the numbers right.",
    "Okay, so the question is asking for the final quantity.",
    "Hmm, I need to be careful here.",
    "Wait, let me double-check that step.",
    "That seems reasonable so far.",
    "Let me organize what I know.",
    "I should not forget any part of the question.",
    "Actually, let me recompute this more carefully.",
    "So far so good.",
    "Let me think about whether this makes sense.",
)

_MALFORMED_WEIGHTS = {
    "truncated": 0.45,  # hit the token limit inside the reasoning: no `</think>`
    "truncated_after_guess": 0.10,  # ... after writing a tentative answer inside the reasoning
    "no_answer": 0.20,  # closed the reasoning, then gave no final answer
    "words": 0.15,  # the answer in words, not a number or an expression
    "empty": 0.10,  # an empty answer marker
}


def _pick(rng: random.Random, weights: dict[str, float]) -> str:
    return rng.choices(list(weights), weights=list(weights.values()))[0]


def _intents(rng: random.Random, size: int, right: float, wrong: float) -> list[str]:
    """The intents of one group: right / wrong / malformed:<how>, drawn per completion."""
    out = []
    for _ in range(size):
        r = rng.random()
        if r < right:
            out.append("right")
        elif r < right + wrong:
            out.append("wrong")
        else:
            out.append("malformed:" + _pick(rng, _MALFORMED_WEIGHTS))
    return out


def _pad_reasoning(rng: random.Random, lines: list[str], target: int) -> str:
    """Mix filler sentences into the reasoning lines until it is about `target` characters long."""
    lines = list(lines)
    while sum(len(line) + 1 for line in lines) < target:
        lines.insert(rng.randrange(len(lines) + 1), rng.choice(_FILLERS))
    return "\n".join(lines)


def _truncate(rng: random.Random, reasoning: str) -> str:
    """A completion cut by the generation limit somewhere in its reasoning."""
    cut = rng.randrange(len(reasoning) // 2, len(reasoning))
    return "<think>\n" + reasoning[:cut]


def _group_answers(rng: random.Random, right: list[str], wrong: Callable[[], str], count: int) -> list[str]:
    """The answers a group's completions give: a dominant form and a few popular wrong values."""
    dominant = right[0] if rng.random() < 0.6 else rng.choice(right)
    return [dominant, *right, *(wrong() for _ in range(count))]


def _choose_right(rng: random.Random, answers: list[str], forms: int) -> str:
    return answers[0] if rng.random() < 0.6 else rng.choice(answers[1 : 1 + forms])


def _choose_wrong(rng: random.Random, answers: list[str], forms: int, fresh: Callable[[], str]) -> str:
    popular = answers[1 + forms :]
    return rng.choice(popular) if popular and rng.random() < 0.8 else fresh()


# ---------------------------------------------------------------- GSM8K-shaped

_NAMES = ("Janet", "Tom", "Aisha", "Carlos", "Mei", "Liam", "Priya", "Noah", "Sofia", "Ravi")
_THINGS = ("eggs", "apples", "stickers", "pages", "marbles", "cookies", "tickets", "books", "cupcakes", "coins")
_GSM8K_FORMS = {"gsm8k": 0.35, "answer_is": 0.3, "boxed": 0.25, "bold": 0.1}
_WORDS = ("twelve", "forty-two", "seventy-two", "one hundred", "eight", "nineteen")


def _arithmetic_chain(rng: random.Random) -> tuple[list[tuple[str, int, int, int]], int]:
    """A few integer steps (op, a, b, result) ending at the answer; intermediate values stay positive."""
    value = rng.randint(3, 60)
    steps = []
    for _ in range(rng.randint(3, 6)):
        op = rng.choice("+-*/")
        if op == "+":
            b = rng.randint(2, 90)
            new = value + b
        elif op == "-" and value > 4:
            b = rng.randint(1, value - 1)
            new = value - b
        elif op == "*" and value < 500:
            b = rng.randint(2, 12)
            new = value * b
        else:
            divisors = [d for d in range(2, 13) if value % d == 0]
            if not divisors:
                op, b, new = "+", rng.randint(2, 40), 0
                new = value + b
            else:
                op, b = "/", rng.choice(divisors)
                new = value // b
        steps.append((op, value, b, new))
        value = new
    return steps, value


def _gsm8k_line(rng: random.Random, op: str, a: int, b: int, result: int, thing: str) -> str:
    sym = {"+": "+", "-": "-", "*": "*", "/": "/"}[op]
    templates = (
        f"{a} {sym} {b} = {result}",
        f"So that gives {a} {sym} {b} = {result} {thing}.",
        f"Next: {a} {sym} {b} = {result}.",
        f"We compute {a} {sym} {b}, which is {result}.",
        f"That means {result} {thing} (since {a} {sym} {b} = {result}).",
    )
    return rng.choice(templates)


def _number_text(rng: random.Random, value: Fraction, money: bool) -> str:
    """How a completion writes a number: `1,234`, `1234`, `$7.50`, `7.5`."""
    if value.denominator == 1:
        n = int(value)
        text = f"{n:,}" if n >= 1000 and rng.random() < 0.5 else str(n)
    else:
        text = f"{float(value):.2f}" if money and rng.random() < 0.5 else f"{float(value):g}"
    return f"${text}" if money and rng.random() < 0.3 else text


def _gsm8k_answer(rng: random.Random, form: str, number: str) -> str:
    if form == "gsm8k":
        return rng.choice(("Adding it all up, we get the result.\n#### ", "#### ")) + number.lstrip("$")
    if form == "answer_is":
        return rng.choice(("The answer is ", "So the answer is ", "The final answer is ")) + number + "."
    if form == "boxed":
        return rng.choice(("The answer is $\\boxed{", "\\boxed{", "Therefore, the final answer is $\\boxed{")) + (
            number.replace("$", "\\$") + ("}$." if not number.endswith("}") else "$")
        ).replace("}$.", "}$." if True else "")
    return rng.choice(("She ends up with **", "**Answer: ", "The total is **")) + number + "**."


def _gsm8k_group(rng: random.Random, prompt: int, size: int) -> list[Sample]:
    name, thing = rng.choice(_NAMES), rng.choice(_THINGS)
    steps, final = _arithmetic_chain(rng)
    money = rng.random() < 0.25
    gold_value = Fraction(final, 2) if money and final % 2 and rng.random() < 0.5 else Fraction(final)
    if gold_value.denominator == 1 and final >= 1000 and rng.random() < 0.5:
        gold = f"{final:,}"
    else:
        gold = f"{float(gold_value):g}" if gold_value.denominator != 1 else str(final)

    def fresh_wrong() -> str:
        slip = rng.choice((steps[-1][1], final + rng.randint(1, 20), max(1, final - rng.randint(1, 20)), final * 2))
        return _number_text(rng, Fraction(slip) if slip != gold_value else gold_value + 1, money)

    right = [_number_text(rng, gold_value, money) for _ in range(3)]
    answers = _group_answers(rng, right, fresh_wrong, rng.randint(1, 2))
    group_form = _pick(rng, _GSM8K_FORMS)
    samples = []
    for intent in _intents(rng, size, right=0.50, wrong=0.35):
        form = group_form if rng.random() < 0.7 else _pick(rng, _GSM8K_FORMS)
        if intent == "right":
            number = _choose_right(rng, answers, len(right))
        else:
            number = _choose_wrong(rng, answers, len(right), fresh_wrong)
        lines = [f"{name} has some {thing}; let me follow the steps."]
        lines += [_gsm8k_line(rng, *step, thing) for step in steps]
        if money and gold_value.denominator != 1:
            lines.append(f"Half of {final} is {float(gold_value):g}.")
        lines.append(f"So the result should be {number.lstrip('$')}.")
        reasoning = _pad_reasoning(rng, lines, rng.randint(300, 1500))
        samples.append(_gsm8k_sample(rng, prompt, gold, reasoning, intent, form, number))
    return samples


def _gsm8k_sample(
    rng: random.Random, prompt: int, gold: str, reasoning: str, intent: str, form: str, number: str
) -> Sample:
    if intent == "malformed:truncated":
        return Sample(prompt, gold, _truncate(rng, reasoning), intent, "-")
    if intent == "malformed:truncated_after_guess":
        text = f"<think>\n{reasoning}\nSo the answer is {number}. Hmm, but wait, let me re-check the second st"
        return Sample(prompt, gold, text, intent, "-")
    head = f"<think>\n{reasoning}\n</think>\n\n"
    if intent == "malformed:no_answer":
        tail = rng.choice(("I could not finish the calculation.", "", "Let me know if you need more help!"))
        return Sample(prompt, gold, head + tail, intent, "-")
    if intent == "malformed:words":
        return Sample(prompt, gold, head + f"The answer is {rng.choice(_WORDS)}.", intent, "words")
    if intent == "malformed:empty":
        return Sample(prompt, gold, head + rng.choice(("#### ", "The answer is \\boxed{}.")), intent, "empty")
    return Sample(prompt, gold, head + _gsm8k_answer(rng, form, number), intent, form)


def gsm8k_step(seed: int, prompts: int = 64, group_size: int = 8) -> list[Sample]:
    """One training step of GSM8K-shaped samples: `prompts` groups of `group_size`, deterministic in `seed`."""
    rng = random.Random(f"gsm8k-{seed}")
    return [s for p in range(prompts) for s in _gsm8k_group(rng, p, group_size)]
