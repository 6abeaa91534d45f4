"""Builds planted.jsonl: GSM8K reference solutions with one claimed result made wrong, for the `steps` catch rate.

    python tests/data/steps/plant.py        # rewrites tests/data/steps/planted.jsonl (deterministic: seed 24)

For each solution of gsm8k_test_300.jsonl, one calculation written as GSM8K writes them, `a op b = <<a op b=r>>r`
(an `=` before the annotation, so the claim is in the prose too), is picked at random and its result changed in both
places (the annotation and the prose), as a model that got it wrong would write it, by one of four errors drawn at
random among those that change it: off by one, two adjacent digits swapped, times ten, or the result of a wrong
operator (one `+ - * /` of the expression swapped for its partner). The built-in Fraction arithmetic here, on the
annotation's own expression, is independent of the scorer's parser. A solution with no such calculation is left out.
"""

from __future__ import annotations

import ast
import json
import random
import re
from fractions import Fraction
from pathlib import Path

HERE = Path(__file__).parent
SEED = 24
CALCULATION = re.compile(r"=[ \t$]*<<([^<>=]+)=([^<>]+)>>(\d[\d,]*(?:\.\d+)?)")
SWAPS = {"+": "-", "-": "+", "*": "/", "/": "*"}


def evaluate(expression: str) -> Fraction:
    """+ - * / and brackets over decimal numbers, exactly."""

    def walk(node: ast.AST) -> Fraction:
        if isinstance(node, ast.Constant) and isinstance(node.value, int | float):
            return Fraction(str(node.value))
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            return -walk(node.operand)
        if isinstance(node, ast.BinOp):
            left, right = walk(node.left), walk(node.right)
            ops = {ast.Add: left.__add__, ast.Sub: left.__sub__, ast.Mult: left.__mul__, ast.Div: left.__truediv__}
            return Fraction(ops[type(node.op)](right))
        raise ValueError("not arithmetic")

    return walk(ast.parse(expression, mode="eval").body)


def written(value: Fraction, like: str) -> str:
    """The value written as GSM8K writes results: a whole number plainly (with commas where `like` has them), else
    to two decimals at most."""
    if value.denominator == 1:
        return f"{value.numerator:,}" if "," in like else str(value.numerator)
    return f"{float(value):.2f}".rstrip("0").rstrip(".")


def wrong_results(expression: str, result: str, rng: random.Random) -> dict[str, str]:
    """Each kind of error that changes this result: kind -> the wrong result as written."""
    plain = result.replace(",", "")
    value = Fraction(plain)
    options = {"off_by_one": written(value + rng.choice((-1, 1)), result)}
    if value != 0:
        options["times_ten"] = written(value * 10, result)
    digits = [i for i in range(len(plain) - 1) if plain[i].isdigit() and plain[i + 1].isdigit()]
    swappable = [i for i in digits if plain[i] != plain[i + 1] and not (i == 0 and plain[1] == "0")]
    if swappable:
        i = rng.choice(swappable)
        options["digit_swap"] = plain[:i] + plain[i + 1] + plain[i] + plain[i + 2 :]
    operators = [m.start() for m in re.finditer(r"(?<=[\d)])\s*[-+*/]", expression)]
    if operators:
        at = rng.choice(operators)
        at += len(expression[at:]) - len(expression[at:].lstrip())
        try:
            swapped = evaluate(expression[:at] + SWAPS[expression[at]] + expression[at + 1 :])
        except (ValueError, ZeroDivisionError, SyntaxError):
            swapped = value
        if swapped != value:
            options["wrong_operator"] = written(swapped, result)
    return {kind: wrong for kind, wrong in options.items() if Fraction(wrong.replace(",", "")) != value}


def plant(row: int, solution: str, rng: random.Random) -> dict[str, object] | None:
    calculations = [m for m in CALCULATION.finditer(solution) if m[2].replace(",", "") == m[3].replace(",", "")]
    if not calculations:
        return None
    chosen = rng.choice(calculations)
    options = wrong_results(chosen[1], chosen[3], rng)
    if not options:
        return None
    kind = rng.choice(sorted(options))
    wrong = options[kind]
    replaced = chosen[0][: chosen.start(2) - chosen.start(0)] + f"{wrong.replace(',', '')}>>{wrong}"
    planted = solution[: chosen.start(0)] + replaced + solution[chosen.end(0) :]
    return {"row": row, "kind": kind, "claim": f"{chosen[1]}={chosen[3]}", "wrong": wrong, "solution": planted}


def main() -> None:
    rng = random.Random(SEED)
    rows = [json.loads(line) for line in (HERE / "gsm8k_test_300.jsonl").read_text().splitlines()]
    planted = [found for row, item in enumerate(rows) if (found := plant(row, item["answer"], rng)) is not None]
    with (HERE / "planted.jsonl").open("w") as out:
        for item in planted:
            out.write(json.dumps(item) + "\n")
    print(f"{len(planted)} planted errors from {len(rows)} solutions")


if __name__ == "__main__":
    main()
