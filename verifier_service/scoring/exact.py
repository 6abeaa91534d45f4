"""Exact values of the sides of written arithmetic: a side's tokens (found by scoring/arithmetic.py) evaluated as
ints while they stay whole and Fractions otherwise, within bounds that keep every claim cheap: a side past them raises
`Skip` and is no step.

>>> evaluate([Tok("num", "48", 0, 2, 48), Tok("op", "/", 3, 4), Tok("num", "5", 5, 6, 5)], 100)
Fraction(48, 5)
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

Number = int | Fraction  # a value: an int while it is whole (much cheaper), else a Fraction
MAX_DIGITS = 100  # a longer number is not arithmetic anyone checks by hand
MAX_BITS = 4096  # the largest numerator or denominator computed
MAX_DEPTH = 64  # the deepest nesting of brackets and signs parsed


def divide(a: Number, b: Number) -> Number:
    """a / b exactly; an int while it divides evenly."""
    if isinstance(a, int) and isinstance(b, int):
        whole, rest = divmod(a, b)
        return whole if rest == 0 else Fraction(a, b)
    return Fraction(a) / b


class Skip(Exception):
    """The claim is past the bounds, or not arithmetic after all: it is not a step."""


@dataclass(slots=True)
class Tok:
    kind: str  # num, op, open, close, pct, sup, frac, eq
    text: str
    start: int
    end: int
    value: Number = 0
    unit: Number = 1  # num: one unit of its last written digit
    labelled: bool = False  # num: a unit word follows it before an operator or `=` ("1.5 quarts = 4 * 1.5")
    approx: bool = False  # eq: ≈


def evaluate(group: list[Tok], percent: int) -> Number:
    """A side's value, `%` dividing by `percent` (100, or 1 to read it as a unit); raises Skip past the bounds or for a
    side that is not arithmetic, ZeroDivisionError for a division by zero."""
    value = flat(group) if percent == 100 or not any(token.kind == "pct" for token in group) else None
    return Parser(group, percent).parse() if value is None else value


def tight(tokens: list[Tok], at: int) -> bool:
    """Whether the operator at `at` touches both its neighbours: `1/3` in `25 / 1/3`."""
    return (
        0 < at < len(tokens) - 1 and tokens[at - 1].end == tokens[at].start and tokens[at].end == tokens[at + 1].start
    )


def flat(group: list[Tok]) -> Number | None:
    """`a op b op c ...` with + - * / only and no touching fraction (`25 / 1/3`), in one pass; None for any other
    shape, which the parser reads. Most written steps have this shape."""
    if len(group) % 2 == 0 or len(group) > 2 * MAX_DEPTH:
        return None
    for at in range(1, len(group), 2):
        token = group[at]
        if token.kind != "op" or token.text not in "+-*/" or group[at - 1].kind != "num":
            return None
        if token.text == "/" and tight(group, at) and at >= 3 and not tight(group, at - 2):
            return None
    if group[-1].kind != "num":
        return None
    total: Number = 0
    sign, term = 1, group[0].value
    for at in range(1, len(group), 2):
        operator, operand = group[at].text, group[at + 1].value
        if operator == "*":
            term = term * operand
        elif operator == "/":
            term = divide(term, operand)
        else:
            total, sign, term = total + sign * term, (1 if operator == "+" else -1), operand
        bounded(term)
    return total + sign * term


class Parser:
    """Recursive descent over one side's tokens: + - (binary and unary), * / (also `x`, `of`), ^ and superscripts
    (right-assoc), postfix %, brackets and `\\frac{a}{b}`. The whole side must parse."""

    def __init__(self, tokens: list[Tok], percent: int) -> None:
        self.tokens, self.at, self.percent, self.depth = tokens, 0, percent, 0

    def parse(self) -> Number:
        value = self.sum()
        if self.at != len(self.tokens):
            raise Skip
        return value

    def peek(self) -> Tok | None:
        return self.tokens[self.at] if self.at < len(self.tokens) else None

    def take(self, kind: str, text: str | None = None) -> bool:
        token = self.peek()
        if token is not None and token.kind == kind and (text is None or token.text == text):
            self.at += 1
            return True
        return False

    def sum(self) -> Number:
        value = self.product()
        while (token := self.peek()) is not None and token.kind == "op" and token.text in "+-":
            self.at += 1
            other = self.product()
            value = value + other if token.text == "+" else value - other
            bounded(value)
        return value

    def product(self) -> Number:
        value = self.unary()
        while (token := self.peek()) is not None and token.kind == "op" and token.text in "*/":
            spaced = not tight(self.tokens, self.at)
            self.at += 1
            other = self.fraction() if spaced else None
            other = self.unary() if other is None else other
            value = value * other if token.text == "*" else divide(value, other)
            bounded(value)
        return value

    def fraction(self) -> Number | None:
        """A touching `b/c` after a spaced operator is one number: `25 / 1/3` is 25 divided by a third."""
        tokens, at = self.tokens, self.at
        shaped = at + 2 < len(tokens) and tokens[at].kind == tokens[at + 2].kind == "num" and tokens[at + 1].text == "/"
        if shaped and tight(tokens, at + 1) and (at + 3 == len(tokens) or tokens[at + 3].kind in ("op", "close")):
            self.at += 3
            return divide(tokens[at].value, tokens[at + 2].value)
        return None

    def unary(self) -> Number:
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise Skip
        if self.take("op", "-"):
            value = -self.unary()
        elif self.take("op", "+"):
            value = self.unary()
        else:
            value = self.power()
        self.depth -= 1
        return value

    def power(self) -> Number:
        base = self.postfix()
        if self.take("op", "^"):
            return power(base, self.unary())
        return base

    def postfix(self) -> Number:
        value = self.atom()
        while (token := self.peek()) is not None and token.kind in ("pct", "sup"):
            self.at += 1
            value = divide(value, self.percent) if token.kind == "pct" else power(value, token.value)
        return value

    def atom(self) -> Number:
        token = self.peek()
        if token is None:
            raise Skip
        self.at += 1
        if token.kind == "num":
            return token.value
        if token.kind == "frac":
            return divide(self.braced(), self.braced())
        if token.kind == "open":
            self.at -= 1
            return self.braced()
        raise Skip

    def braced(self) -> Number:
        if not self.take("open"):
            raise Skip
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise Skip
        value = self.sum()
        if not self.take("close"):
            raise Skip
        self.depth -= 1
        return value


def bounded(value: Number) -> None:
    if value.numerator.bit_length() > MAX_BITS or value.denominator.bit_length() > MAX_BITS:
        raise Skip


def power(base: Number, exponent: Number) -> Number:
    """base ** exponent for an integer exponent whose result stays within `MAX_BITS`; anything else is no step."""
    if exponent.denominator != 1 or (base == 0 and exponent < 0):
        raise Skip
    size = max(base.numerator.bit_length(), base.denominator.bit_length(), 1)
    if abs(exponent.numerator) * (size - 1) > MAX_BITS:
        raise Skip
    power = exponent.numerator
    value: Number = base**power if isinstance(base, int) and power >= 0 else Fraction(base) ** power
    bounded(value)
    return value
