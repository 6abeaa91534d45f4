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


def _intents(rng: random.Random, size: int, right: float, malformed: float) -> list[str]:
    """The intents of one group: right / wrong / malformed:<how>, drawn per completion.

    Prompts differ in difficulty, so the group's chance of a right answer is drawn first (mean `right`); many
    real GRPO groups are all right or all wrong. `malformed` is the overall share of malformed completions.
    """
    p_right = rng.betavariate(2 * right, 2 * (1 - right))
    p_malformed = malformed / (1 - right)  # of the completions that are not right
    out = []
    for _ in range(size):
        if rng.random() < p_right:
            out.append("right")
        elif rng.random() < p_malformed:
            out.append("malformed:" + _pick(rng, _MALFORMED_WEIGHTS))
        else:
            out.append("wrong")
    return out


def _pad_reasoning(rng: random.Random, lines: list[str], target: int, more: Callable[[], str]) -> str:
    """Mix filler sentences and further steps (`more`) into the reasoning until it is about `target` long."""
    lines = list(lines)
    while sum(len(line) + 1 for line in lines) < target:
        extra = rng.choice(_FILLERS) if rng.random() < 0.4 else more()
        lines.insert(rng.randrange(1, len(lines) + 1), extra)
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
        divisors = [d for d in range(2, 13) if value % d == 0]
        if op == "-" and value > 4:
            b = rng.randint(1, value - 1)
            new = value - b
        elif op == "*" and value < 500:
            b = rng.randint(2, 12)
            new = value * b
        elif op == "/" and divisors:
            b = rng.choice(divisors)
            new = value // b
        else:
            op, b = "+", rng.randint(2, 90)
            new = value + b
        steps.append((op, value, b, new))
        value = new
    return steps, value


def _gsm8k_line(rng: random.Random, op: str, a: int, b: int, result: int, thing: str) -> str:
    templates = (
        f"{a} {op} {b} = {result}",
        f"So that gives {a} {op} {b} = {result} {thing}.",
        f"Next: {a} {op} {b} = {result}.",
        f"We compute {a} {op} {b}, which is {result}.",
        f"That means {result} {thing} (since {a} {op} {b} = {result}).",
    )
    return rng.choice(templates)


def _recheck(rng: random.Random, steps: list[tuple[str, int, int, int]], thing: str) -> str:
    """A model re-deriving one of its steps, sometimes with a slip it then corrects."""
    op, a, b, result = rng.choice(steps)
    if rng.random() < 0.3:
        return f"Hmm, is {a} {op} {b} = {result + rng.choice((-2, -1, 1, 10))}? No, it is {result}."
    return f"Double-checking: {a} {op} {b} = {result}, so {result} {thing} at that point."


def _number_text(rng: random.Random, value: Fraction, money: bool) -> str:
    """How a completion writes a number: `1,234`, `1234`, `$7.50`, `7.5`."""
    if value.denominator == 1:
        n = int(value)
        text = f"{n:,}" if n >= 1000 and rng.random() < 0.5 else str(n)
    else:
        text = f"{float(value):.2f}" if money and rng.random() < 0.5 else f"{float(value):.1f}"  # halves
    return f"${text}" if money and rng.random() < 0.3 else text


def _gsm8k_answer(rng: random.Random, form: str, number: str) -> str:
    if form == "gsm8k":
        return rng.choice(("Adding it all up, we get the result.\n#### ", "#### ")) + number.lstrip("$")
    if form == "answer_is":
        return rng.choice(("The answer is ", "So the answer is ", "The final answer is ")) + number + "."
    if form == "boxed":
        inner = number.replace("$", "\\$")
        return rng.choice(
            (
                f"The answer is $\\boxed{{{inner}}}$.",
                f"\\boxed{{{inner}}}",
                f"Therefore, the final answer is $\\boxed{{{inner}}}$.",
            )
        )
    return rng.choice(("She ends up with **", "**Answer: ", "The total is **")) + number + "**."


def _gsm8k_group(rng: random.Random, prompt: int, size: int) -> list[Sample]:
    name, thing = rng.choice(_NAMES), rng.choice(_THINGS)
    steps, final = _arithmetic_chain(rng)
    money = rng.random() < 0.25
    gold_value = Fraction(final, 2) if money and final % 2 and rng.random() < 0.5 else Fraction(final)
    if gold_value.denominator == 1 and final >= 1000 and rng.random() < 0.5:
        gold = f"{final:,}"
    else:
        gold = f"{float(gold_value):.1f}" if gold_value.denominator != 1 else str(final)

    def fresh_wrong() -> str:
        slip = rng.choice((steps[-1][1], final + rng.randint(1, 20), max(1, final - rng.randint(1, 20)), final * 2))
        return _number_text(rng, Fraction(slip) if slip != gold_value else gold_value + 1, money)

    right = [_number_text(rng, gold_value, money) for _ in range(3)]
    answers = _group_answers(rng, right, fresh_wrong, rng.randint(1, 2))
    group_form = _pick(rng, _GSM8K_FORMS)
    samples = []
    for intent in _intents(rng, size, right=0.50, malformed=0.15):
        form = group_form if rng.random() < 0.7 else _pick(rng, _GSM8K_FORMS)
        if intent == "right" or (intent.startswith("malformed") and rng.random() < 0.5):
            number = _choose_right(rng, answers, len(right))  # a malformed one may still state the right value
        else:
            number = _choose_wrong(rng, answers, len(right), fresh_wrong)
        lines = [f"{name} has some {thing}; let me follow the steps."]
        lines += [_gsm8k_line(rng, *step, thing) for step in steps]
        if money and gold_value.denominator != 1:
            lines.append(f"Half of {final} is {float(gold_value):.1f}.")
        lines.append(f"So the result should be {number.lstrip('$')}.")
        reasoning = _pad_reasoning(rng, lines, rng.randint(300, 1500), lambda: _recheck(rng, steps, thing))
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


# ---------------------------------------------------------------- MATH-shaped


@dataclass(frozen=True)
class _Problem:
    """A MATH-style answer: the bare-LaTeX gold, equivalent ways to write it, and a source of wrong ones."""

    family: str
    gold: str
    right: list[str]  # right[0] is the most common way to write it
    wrong: Callable[[], str]


def _signed(c: int, term: str, first: bool = False) -> str:
    """`+3x`, `-x`, `+5` as a polynomial term ('' for a zero coefficient)."""
    if c == 0:
        return ""
    sign = "-" if c < 0 else ("" if first else "+")
    mag = abs(c)
    return f"{sign}{'' if mag == 1 and term else mag}{term}"


def _integer(rng: random.Random) -> _Problem:
    n = rng.randint(0, 999)
    return _Problem("integer", str(n), [str(n)], lambda: str(n + rng.choice((-10, -2, -1, 1, 2, 3, 12))))


def _fraction(rng: random.Random) -> _Problem:
    q = rng.randint(2, 12)
    p = rng.choice([k for k in range(1, 3 * q) if gcd(k, q) == 1])
    s = "-" if rng.random() < 0.15 else ""
    k = rng.randint(2, 3)
    right = [f"{s}\\frac{{{p}}}{{{q}}}", f"{s}\\dfrac{{{p}}}{{{q}}}", f"{s}\\frac{{{k * p}}}{{{k * q}}}", f"{s}{p}/{q}"]
    if p < 10 and q < 10:
        right.append(f"{s}\\frac{p}{q}")
    gold = f"{s}\\frac{p}{q}" if p < 10 and q < 10 and rng.random() < 0.2 else right[0]

    def wrong() -> str:
        a, b = rng.choice(((p + 1, q), (q, p), (p, q + 1), (2 * p, q)))
        return f"{'' if rng.random() < 0.3 else s}\\frac{{{a}}}{{{b}}}"

    return _Problem("fraction", gold, right, wrong)


def _root(rng: random.Random) -> _Problem:
    k, m = rng.randint(2, 6), rng.choice((2, 3, 5, 6, 7, 10, 11, 13))
    right = [f"{k}\\sqrt{{{m}}}", f"\\sqrt{{{k * k * m}}}", f"{k} \\sqrt{{{m}}}"]
    if m < 10:
        right.append(f"{k}\\sqrt{m}")  # `\sqrt10` would be sqrt(1) * 0

    def wrong() -> str:
        return rng.choice(
            (f"{k + 1}\\sqrt{{{m}}}", f"{k}\\sqrt{{{m + 1}}}", f"\\sqrt{{{k * m}}}", f"{k * k}\\sqrt{{{m}}}")
        )

    return _Problem("root", right[0], right, wrong)


def _interval(rng: random.Random) -> _Problem:
    a = rng.randint(-9, 9)
    b = a + rng.randint(1, 8)
    shape = rng.choice(("left_inf", "right_inf", "half_open"))
    if shape == "left_inf":
        gold = f"(-\\infty, {a}]"
        right = [gold, f"(-\\infty,{a}]", f"\\left(-\\infty, {a}\\right]"]
        wrongs = [f"(-\\infty, {a})", f"[{a}, \\infty)", f"(-\\infty, {a + 1}]"]
    elif shape == "right_inf":
        gold = f"[{a}, \\infty)"
        right = [gold, f"[{a},\\infty)", f"\\left[{a}, \\infty\\right)"]
        wrongs = [f"({a}, \\infty)", f"(-\\infty, {a}]", f"[{a - 1}, \\infty)"]
    else:
        gold = f"[{a}, {b})"
        right = [gold, f"[{a},{b})", f"\\left[{a}, {b}\\right)"]
        wrongs = [f"[{a}, {b}]", f"({a}, {b})", f"[{a}, {b + 1})"]
    return _Problem("interval", gold, right, lambda: rng.choice(wrongs))


def _polynomial(rng: random.Random) -> _Problem:
    r, s = rng.choice([v for v in range(-6, 7) if v]), rng.choice([v for v in range(-6, 7) if v])

    def expanded(r: int, s: int) -> str:
        return "x^2" + _signed(r + s, "x") + _signed(r * s, "")

    def factored(r: int, s: int) -> str:
        return f"(x{_signed(r, '')})^2" if r == s else f"(x{_signed(r, '')})(x{_signed(s, '')})"

    gold = expanded(r, s)
    reordered = _signed(r * s, "", first=True) + _signed(r + s, "x") + "+x^2"
    right = [gold, factored(r, s), factored(s, r), reordered]

    def wrong() -> str:
        return rng.choice((expanded(r, -s), factored(-r, s), "x^2" + _signed(r + s, "x") + _signed(-r * s, "")))

    return _Problem("polynomial", gold, right, wrong)


def _pi_multiple(rng: random.Random) -> _Problem:
    b = rng.choice((1, 2, 3, 4, 6))
    a = rng.choice([k for k in range(1, 12) if gcd(k, b) == 1])
    if b == 1:
        right = [f"{a}\\pi", f"{a} \\pi", f"\\pi \\cdot {a}"]
    else:
        right = [f"\\frac{{{a}\\pi}}{{{b}}}", f"\\frac{{{a}}}{{{b}}}\\pi", f"\\dfrac{{{a} \\pi}}{{{b}}}"]
        if b in (2, 4):
            right.append(f"{a / b:g}\\pi")
    value = a / b * 3.141592653589793

    def wrong() -> str:
        return rng.choice(
            (f"\\frac{{{b}\\pi}}{{{a + b}}}", f"{a + 1}\\pi", f"{value:.2f}", f"\\frac{{{a}\\pi}}{{{b + 1}}}")
        )

    return _Problem("pi", right[0], right, wrong)


def _tuple(rng: random.Random) -> _Problem:
    a, b = rng.randint(-9, 9), rng.randint(-9, 9)
    while b == a:
        b = rng.randint(-9, 9)
    right = [f"({a}, {b})", f"({a},{b})", f"\\left({a}, {b}\\right)"]
    return _Problem(
        "tuple", right[0], right, lambda: rng.choice((f"({b}, {a})", f"({a}, {-b if b else b + 1})", f"({a + 1}, {b})"))
    )


_FAMILIES: dict[Callable[[random.Random], _Problem], float] = {
    _integer: 0.20,
    _fraction: 0.20,
    _root: 0.12,
    _interval: 0.12,
    _polynomial: 0.12,
    _pi_multiple: 0.12,
    _tuple: 0.12,
}


def _math_lines(rng: random.Random, count: int) -> list[str]:
    """Intermediate LaTeX steps with random numbers, as a model's reasoning would have them."""
    lines = []
    for _ in range(count):
        a, b, c, n = rng.randint(2, 9), rng.randint(1, 20), rng.randint(1, 40), rng.randint(2, 15)
        lines.append(
            rng.choice(
                (
                    f"We have ${a}x + {b} = {c}$, so $x = \\frac{{{c - b}}}{{{a}}}$.",
                    f"Squaring both sides gives ${n}^2 = {n * n}$.",
                    f"By the quadratic formula, $x = \\frac{{-{b} \\pm \\sqrt{{{b * b} - {4 * a * c}}}}}{{{2 * a}}}$.",
                    f"The area is $\\pi r^2 = {n * n}\\pi$ when $r = {n}$.",
                    f"Note that ${a} \\cdot {b} = {a * b}$ and ${a} + {b} = {a + b}$.",
                    f"Substituting $n = {n}$ gives $n^2 + n = {n * n + n}$.",
                    f"Since $\\gcd({a * n}, {b * n}) = {gcd(a * n, b * n)}$, the fraction simplifies.",
                    f"Then $\\sin^2\\theta + \\cos^2\\theta = 1$, so "
                    f"$\\cos\\theta = \\pm\\sqrt{{1 - \\frac{{1}}{{{n}}}}}$.",
                )
            )
        )
    return lines


def _math_answer(rng: random.Random, answer: str) -> str:
    return rng.choice(
        (
            f"Therefore, the answer is $\\boxed{{{answer}}}$.",
            f"The final answer is $\\boxed{{{answer}}}$.",
            f"$$\\boxed{{{answer}}}$$",
            f"**Final Answer**\n\n\\[\n\\boxed{{{answer}}}\n\\]",
        )
    )


def _math_sample(rng: random.Random, prompt: int, gold: str, reasoning: str, intent: str, answer: str) -> Sample:
    if intent == "malformed:truncated":
        return Sample(prompt, gold, _truncate(rng, reasoning), intent, "-")
    if intent == "malformed:truncated_after_guess":
        text = f"<think>\n{reasoning}\nSo tentatively $\\boxed{{{answer}}}$. Hmm, wait, let me verify the sec"
        return Sample(prompt, gold, text, intent, "-")
    head = f"<think>\n{reasoning}\n</think>\n\n"
    if intent == "malformed:no_answer":
        tail = rng.choice(("I was unable to simplify this further.", "", "This requires more information."))
        return Sample(prompt, gold, head + tail, intent, "-")
    if intent == "malformed:words":
        tail = rng.choice(("The answer is one half.", "$\\boxed{\\text{undefined}}$", "The answer is x squared."))
        return Sample(prompt, gold, head + tail, intent, "words")
    if intent == "malformed:empty":
        tail = rng.choice(("The answer is $\\boxed{}$.", f"The answer is $\\boxed{{{answer}$"))  # unbalanced
        return Sample(prompt, gold, head + tail, intent, "empty")
    return Sample(prompt, gold, head + _math_answer(rng, answer), intent, "boxed")


def _math_group(rng: random.Random, prompt: int, size: int) -> list[Sample]:
    family = rng.choices(list(_FAMILIES), weights=list(_FAMILIES.values()))[0]
    problem = family(rng)
    answers = _group_answers(rng, problem.right, problem.wrong, rng.randint(1, 2))
    samples = []
    for intent in _intents(rng, size, right=0.45, malformed=0.15):
        if intent == "right" or (intent.startswith("malformed") and rng.random() < 0.5):
            answer = _choose_right(rng, answers, len(problem.right))  # a malformed one may still state it
        else:
            answer = _choose_wrong(rng, answers, len(problem.right), problem.wrong)
        lines = [*_math_lines(rng, rng.randint(3, 8)), f"So the answer should be ${answer}$."]
        reasoning = _pad_reasoning(rng, lines, rng.randint(300, 1500), lambda: _math_lines(rng, 1)[0])
        samples.append(_math_sample(rng, prompt, problem.gold, reasoning, intent, answer))
    return samples


def math_step(seed: int, prompts: int = 64, group_size: int = 8) -> list[Sample]:
    """One training step of MATH-shaped samples: `prompts` groups of `group_size`, deterministic in `seed`."""
    rng = random.Random(f"math-{seed}")
    return [s for p in range(prompts) for s in _math_group(rng, p, group_size)]


WORKLOADS: dict[str, Callable[[int, int, int], list[Sample]]] = {"gsm8k": gsm8k_step, "math": math_step}
