"""Arithmetic claims in text, found and checked exactly: the work behind the `steps` component.

A claim is `left = right` where both sides are arithmetic on written numbers (`48 / 2 = 24`, `$12 × 4 = $48`,
`\\frac{48}{2} = 24`, GSM8K's `<<48/2=24>>`); a chain `2 + 3 = 5 + 4 = 9` is one claim per `=`, read as running
totals where the plain reading fails. Values are exact (scoring/exact.py: ints and Fractions), so `0.1 + 0.2 = 0.3`
is right and `1/3` is a third. A lone number after an `=` ends the result where a space and another number follow
(`12 * 4 = 50 5 boxes` claims 50), so a wrong result cannot hide behind one; `= 12 000` may group thousands and holds
if either reading is right, as does the mixed number `= 3 1/2` (or `= 3 \\frac{1}{2}`).

Only text around an `=` (or `≈`, `~`, `<<`) is read, a bounded window on its own line, by one regex whose
alternatives each match one token and whose repetitions cannot match the same text two ways (nothing to backtrack
into), so the cost is linear in the text whatever it holds. A claim past the bounds (a number of more than 100 digits,
a value of more than 4,096 bits, nesting deeper than 64) is not a step: it is skipped, never computed at length.

This module is the reference reader. Where a C compiler built it (setup.py), `_arithmetic.c` does the same reading
of text (LaTeX and digits outside ASCII too) with values within 128 bits, some 50 times faster (0.3 ms for 8,000
tokens of dense arithmetic, against 24 ms here), and hands each window it does not read (longer values) to `_read`, so
the claims are the same either way; tests/unit/test_arithmetic_compiled.py compares the two.

>>> text = "So 48 / 2 = 24 and 3 x 4 = 13."
>>> [(text[start:end], right) for start, end, right in claims(text)]
[('48 / 2 = 24', True), ('3 x 4 = 13', False)]
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction

from verifier_service.scoring.exact import MAX_DIGITS, Number, Skip, Tok, divide, evaluate, tight

WINDOW = 300  # characters read before an `=`, and after the last one of a chain
MAX_TOKENS = 50_000  # tokens read in one text (a dense 8,000-token completion has some 5,000): claims past them are
# not checked, so a megabyte of arithmetic holds the service's loop for a bounded time
_FLOAT_NOISE_DIGITS = 15  # a result written with this many significant digits may carry a calculator's float error

_W = r"(?:\\(?:text|mathrm|textrm|mbox)\s*\{[^{}\n]{0,40}\}|[A-Za-z]+)"  # a word, or LaTeX text (a unit)
_TOKEN = re.compile(
    r"[ \t]*(?:"  # the spaces before a token go with it: half as many matches to look at
    r"(?P<ann><<[^<>\n]{1,300}>>)"
    r"|(?P<num>\d+(?:(?:,\d{3})+(?!\d)(?:\.\d+)?|[.,]\d+)?|\.\d+)"
    r"|(?P<tag></?[A-Za-z][\w-]{0,20}>|\\(?:begin|end)\{[A-Za-z*]{1,20}\}|\\[()\[\]]|\$\$"  # a clean edge: HTML,
    # LaTeX's blocks and math delimiters,
    r"|(?<![\d)])\*\*|\*\*(?![\d(]))"  # markdown's bold (`2**10` is a power)
    r"|(?P<sup>[⁰¹²³⁴⁵⁶⁷⁸⁹]+)"
    r"|(?P<eq>==?|≈|≃|\\approx|~)"
    r"|(?P<op>(?<=[\d)])\*\*(?=[\d(])|[-+*/×÷·⋅∗^−–]|\\times|\\cdot|\\div(?![A-Za-z]))"
    r"|(?P<frac>\\[dt]?frac(?![A-Za-z]))"
    r"|(?P<open>\\left\s*[(\[]|\\\{|[(\[{])"
    r"|(?P<close>\\right\s*[)\]]|\\\}|[)\]}])"
    r"|(?P<pct>\\?%)"
    rf"|(?P<words>{_W}(?:[ \t]+{_W})*)"
    r"|(?P<skip>[ \t$€£¥&]+|\\\\|\\[,;:! $]|\\left\.|\\right\."
    r"|\\(?:q?quad|boxed|mathbf|textbf|displaystyle)(?![A-Za-z]))"
    r"|(?P<other>\\[A-Za-z]+|.))",
    re.DOTALL,
)
Found = list[tuple[int, int, bool]]  # claims: (start, end, right)
_ANCHOR = re.compile(r"=|≈|≃|~|\\approx|<<")
_SUPERSCRIPT = str.maketrans("⁰¹²³⁴⁵⁶⁷⁸⁹", "0123456789")
_OPS = {"**": "^", "×": "*", "·": "*", "⋅": "*", "∗": "*", "−": "-", "–": "-", "÷": "/", "\\times": "*", "\\cdot": "*"}
_OPS["\\div"] = "/"
_REMAINDER = {"remainder", "rem", "r"}
_LATEX_TEXT = re.compile(r"\\[A-Za-z]+\s*\{|\}")
_TIMES_WORDS = {"x", "X", "of"}  # `3 x 4`, `20% of 50`: multiplication between two operands
_CLEAN_BEFORE = frozenset(",;.?\"'")  # punctuation a number may touch and still end a claim ("= 8.")
_OPERAND_END = {"num", "close", "pct", "sup"}
_MIXED = re.compile(r"/(\d{1,9})(?![\d.,/])")  # `3 1/2`: a whole number and a fraction, one mixed number
_MIXED_LATEX = re.compile(r"\{(\d{1,9})\}\{(\d{1,9})\}")  # `3 \frac{1}{2}`: the same, in LaTeX
_GROUP = re.compile(r"\d{1,3} \d{3}")  # `$12 000`: thousands grouped by a space (GSM8K writes some)


@dataclass(slots=True)
class _Part:
    """One side of an `=`: its value (percent as /100), its value reading `%` as a unit, where it lies, and when it is
    one written number, the unit of its last digit."""

    value: Number
    as_unit: Number
    start: int
    end: int
    unit: Number | None  # a lone number: how precisely it is written
    digits: int  # a lone number: its significant digits
    lead: Tok | None  # a compound side that starts with a number: that number (for running totals)
    percent: bool
    labelled: bool = False  # a lone number with a unit word: `6 nephews = 96 / 6` names, it does not claim


def _compiled() -> Callable[[str, Callable[[str, int, int, bool, int], tuple[int, int, Found]]], Found] | None:
    """`claims(text, fallback)` in C (`_arithmetic.c`: this module's reading, some 1 us a claim instead of 20-60 of
    Python), where a C compiler built it (setup.py); it hands each window it does not read itself (a value past 128
    bits, a tag named outside ASCII) to `fallback`."""
    try:
        from verifier_service.scoring._arithmetic import claims as compiled
    except ImportError:
        return None
    return compiled


READ_CLAIMS = _compiled()  # tests set it to None to run the Python reader


def claims(text: str) -> list[tuple[int, int, bool]]:
    """Each arithmetic claim in `text`, in order: (start, end, right)."""
    if READ_CLAIMS is not None:
        return READ_CLAIMS(text, _read_window)
    found: Found = []
    budget = [MAX_TOKENS]
    pos = 0
    while budget[0] > 0 and (anchor := _ANCHOR.search(text, pos)) is not None:
        line_start = text.rfind("\n", 0, anchor.start()) + 1
        start = max(line_start, pos, anchor.start() - WINDOW)
        end = len(text) if (line_end := text.find("\n", anchor.end())) < 0 else line_end
        pos = max(anchor.end(), _read(text, start, end, start > line_start, found, budget))
    found.sort()
    return found


def _read_window(text: str, start: int, end: int, cut: bool, budget: int) -> tuple[int, int, Found]:
    """`_read` of one window, for the C reader: (where it stopped, tokens left, the claims found)."""
    found: Found = []
    left = [budget]
    stop = _read(text, start, end, cut, found, left)
    return stop, left[0], found


def _read(text: str, start: int, end: int, cut: bool, found: Found, budget: list[int], sure: bool = False) -> int:
    """Reads the claims of text[start:end] into `found`; returns where it stopped (a window's length past the last
    `=`). `cut`: the window starts inside a line, so its first part may be the tail of something longer. `sure`: a
    calculator annotation, where every `=` is a calculation (`<<100=100>>` too). `budget`: tokens left to read."""
    reader = _Reader(cut, sure, budget)
    for match in _TOKEN.finditer(text, start, end):
        budget[0] -= 1
        kind = match.lastgroup or "other"
        if budget[0] < 0 or not reader.feed(kind, match[kind], match.start(kind), match.end(), text, found):
            end = match.start()  # a window's length of text past the last `=`, or out of budget: what was read counts
            break
    reader.close(found)
    return end


class _Reader:
    """Cuts a window's tokens into runs of arithmetic, each ended by prose. Words right after a number and before an
    operator or `=` are its unit (`16 eggs - 3 eggs`); other words end the run. A run's first part is *tainted*
    (not a step) where it may continue something before it: after a word, a sign or bracket (`x + 3`, `f(2)`), or
    anything touching what ended the last run (`3:2`, `\\sqrt{4}`); its last part likewise (`2x`, `5!`)."""

    def __init__(self, cut: bool, sure: bool, budget: list[int]) -> None:
        self.sure, self.budget = sure, budget
        self.segments: list[tuple[list[Tok], bool, bool, Tok | None]] = []
        self.tokens: list[Tok] = []
        self.tainted = cut
        self.soft = False  # the taint came from a spaced word: a number after it starts clean
        self.last_eq = -1
        self.prev_end = -1
        self.pending_unit = False  # words after a number: a unit if an operator or `=` follows
        self.pending_times = False  # `x` after a number: times if a number follows, else a variable
        self.joined: Tok | None = None  # a result cut at a space that may group thousands: the number read whole

    def feed(self, kind: str, piece: str, at: int, stop: int, text: str, found: Found) -> bool:
        if self.last_eq >= 0 and at > self.last_eq + WINDOW and not self.tokens:
            return False
        if kind == "skip":
            return True
        if kind == "tag":  # `<think>`, `</answer>`: a clean edge, as a line's end is
            self.cut(False, False)
            self.pending_unit = self.pending_times = False
            return True
        if kind == "ann":
            self.last_eq = at
            if "=" in piece:
                _read(text, at + 2, stop - 2, False, found, self.budget, sure=True)
            return True
        spaced = at > self.prev_end
        self.prev_end = stop
        if self.pending_times:
            self.pending_times = False
            if kind not in ("num", "open", "frac"):
                self.tokens.pop()  # `2x = 10`: a variable
                self.cut(True, True)
        if self.pending_unit:
            self.pending_unit = False
            if kind == "op" and not spaced and piece != "/":
                kind = "other"  # `Post-it`: a hyphen inside words
            if kind not in ("op", "eq", "close", "pct"):
                self.cut(False, True, soft=True)
            elif self.tokens and self.tokens[-1].kind == "num":
                self.tokens[-1].labelled = True
        if kind == "words":
            self.word(piece, at, stop, spaced)
        elif kind == "other":
            ratio = piece == ":" and not spaced and bool(self.tokens) and self.tokens[-1].kind == "num"
            touching = ratio or piece == "_" or piece[0] == "\\"  # `3:2`, `a_{37}`, `\sqrt{4}`
            self.cut(not spaced and piece not in _CLEAN_BEFORE, touching, soft=True)
        else:
            if kind == "eq":
                self.last_eq = at
            if kind in ("num", "frac") and spaced and self.result_number():
                self.end_result(kind, piece, at, stop, text)
            elif kind == "open" and spaced and self.result_number():
                self.cut(False, False)  # `= 50 (5 boxes)`: an aside after the result, not a product with it
            if self.tainted and self.soft and not self.tokens and spaced and kind in ("num", "eq", "open", "frac"):
                self.tainted = False
            self.tokens.append(_token(kind, piece, at, stop))
        return True

    def result_number(self) -> bool:
        """Whether the run so far ends `= <number>`: a number after it, with only a space between, cannot continue
        that side (`2 + 2 = 5 3 + 3 = 6`), so the result ends there and is checked."""
        return len(self.tokens) > 1 and self.tokens[-1].kind in ("num", "big") and self.tokens[-2].kind == "eq"

    def end_result(self, kind: str, piece: str, at: int, stop: int, text: str) -> None:
        """`= 50 5 boxes`: the result is 50; `= 3 1/2`, `= 3 \\frac{1}{2}` (a mixed number) and `= 12 000` may also
        read whole. A LaTeX fraction after a result ends it only as a mixed number's part (`= 50 \\frac{m}{s}` is
        no claim, as before)."""
        first = self.tokens[-1]
        whole = first.kind == "num" and first.unit == 1
        if kind == "frac":
            if whole and (over := _MIXED_LATEX.match(text, stop)):
                self.mixed(first, over[1], over[2], over.end())
                self.cut(False, False)
            return
        if _GROUP.fullmatch(text, first.start, stop):  # `= $12 000`: the claim holds if either reading is right
            self.joined = _number(first.text + piece, first.start, stop)
        elif (over := _MIXED.match(text, stop)) and whole and piece.isdigit():
            self.mixed(first, piece, over[1], over.end())
        self.cut(False, False)

    def mixed(self, first: Tok, numerator: str, denominator: str, stop: int) -> None:
        """`= 3 1/2`: the result read either way, as 3 or as 7/2, where the fraction is a proper one."""
        if 0 < int(numerator) < int(denominator):
            value = first.value + Fraction(int(numerator), int(denominator))
            self.joined = Tok("num", f"{first.value} {numerator}/{denominator}", first.start, stop, value, Fraction(1))

    def word(self, piece: str, at: int, stop: int, spaced: bool) -> None:
        last = self.tokens[-1] if self.tokens else None
        operand = last is not None and last.kind in _OPERAND_END
        words = piece.split()
        unit_like = len(words) <= 3 and min(map(len, words)) > 1
        per = last is not None and last.text == "/" and len(self.tokens) > 1 and self.tokens[-2].kind in _OPERAND_END
        if per and (unit_like or (len(words) > 1 and words[-1] in ("x", "X"))):
            self.tokens.pop()  # `$30/packet`, `kg/day`: the unit's denominator
            operand, spaced = True, True
        if operand and _first_word(piece) in _REMAINDER:
            self.cut(True, True)  # `1121 ÷ 3 = 373 remainder 2`: a division with remainder, not an equality
        elif piece in _TIMES_WORDS and operand:
            self.tokens.append(Tok("op", "*", at, stop))
            self.pending_times = piece in ("x", "X")
        elif operand and spaced and len(words) <= 4 and words[-1] in ("x", "X"):
            self.tokens.append(Tok("op", "*", at, stop))  # `15 pages x 1/3`
            self.pending_times = True
        elif operand and spaced and unit_like:
            self.pending_unit = True
        else:
            # `2y + 3`: a variable touching its number; `¾ x 3/3`: a product of something unread
            self.cut(not spaced and operand, True, soft=words[-1] not in ("x", "X"))

    def cut(self, last_tainted: bool, next_tainted: bool, soft: bool = False) -> None:
        if self.tokens and self.tokens[-1].kind == "op":
            soft = False  # `25 classmates + his 1 teacher + 1 himself`: the sum runs on through the prose
        if self.tokens:
            self.segments.append((self.tokens, self.tainted, last_tainted, self.joined))
        self.tokens, self.tainted, self.soft, self.joined = [], next_tainted, soft, None

    def close(self, found: Found) -> None:
        if self.pending_times:
            self.tokens.pop()
            self.cut(True, False)
        self.cut(False, False)
        inside = False  # the last run's result may have gone on into this run (`= 12 000`, `= 3 1/2`)
        for tokens, first_tainted, last_tainted, joined in self.segments:
            plain = _chain(tokens, first_tainted or inside, last_tainted, found, self.sure, joined)
            inside = joined is not None and not plain


def _first_word(piece: str) -> str:
    """The first word of a run of words, lowercase, LaTeX's `\\text{...}` read as its text."""
    words = _LATEX_TEXT.sub(" ", piece).split()
    return words[0].lower() if words else ""


def _token(kind: str | None, piece: str, at: int, stop: int) -> Tok:
    if kind == "num":
        return _number(piece, at, stop)
    if kind == "op":
        return Tok("op", _OPS.get(piece, piece), at, stop)
    if kind == "sup":
        return Tok("sup", piece, at, stop, int(piece.translate(_SUPERSCRIPT)))
    if kind == "eq":
        return Tok("eq", "=", at, stop, approx=piece not in ("=", "=="))
    return Tok(kind or "other", piece, at, stop)


def _number(piece: str, at: int, stop: int) -> Tok:
    """A written number: `1,500` groups thousands (a comma and exactly three digits), `2,5` is a decimal comma."""
    if len(piece) > MAX_DIGITS or (len(piece) > 1 and piece[0] == "0" and piece[1].isdigit()):
        return Tok("big", piece, at, stop)  # too long to check, or `0130 hours`: a clock time or a code
    if "," in piece and "." not in piece and not re.fullmatch(r"\d+(?:,\d{3})+", piece):
        piece = piece.replace(",", ".")
    plain = piece.replace(",", "")
    decimals = len(plain) - plain.index(".") - 1 if "." in plain else 0
    if not decimals:
        return Tok("num", plain, at, stop, int(plain), 1)  # whole numbers stay ints: 30x cheaper than Fractions
    return Tok("num", plain, at, stop, Fraction(plain), Fraction(1, 10**decimals))


def _chain(
    tokens: list[Tok], first_tainted: bool, last_tainted: bool, found: Found, sure: bool, joined: Tok | None = None
) -> bool:
    """The claims of one run of arithmetic: `p0 = p1 = ... = pn`, each `=` a claim. `joined`: the last result read
    with the numbers after it (`= 12 000`, `= 3 1/2`); returns whether the last claim held without them and not
    with them (else the next run starts inside this one's last number)."""
    if not any(token.kind == "eq" for token in tokens):
        return False
    groups: list[list[Tok]] = [[]]
    approx: list[bool] = []
    for token in tokens:
        if token.kind != "eq":
            groups[-1].append(token)
        elif groups[-1]:
            groups.append([])
            approx.append(token.approx)
        elif approx:
            approx[-1] = approx[-1] or token.approx  # `==`, `=~`: one relation
        else:
            first_tainted = False  # `x = 5 + 3 = 8`: nothing before the first `=`; the claim starts after it
    if len(groups) < 2:
        return False
    groups[0] = _strip(groups[0], "open")
    groups[-1] = _strip(groups[-1], "close")
    parts = [_part(group) for group in groups]
    if first_tainted:
        parts[0] = None
    if last_tainted:
        parts[-1] = None
    compound = any(part is not None and part.unit is None for part in parts)
    plain = False
    for index, (left, right, loose) in enumerate(zip(parts, parts[1:], approx, strict=False)):
        if left is None or right is None:
            continue
        if sure:
            pass
        elif not compound and not (left.percent or right.percent):
            continue  # `n = 12`, `1 hour = 60 minutes`: a lone number on each side says no arithmetic
        elif left.labelled or (left.unit is not None and right.unit is None):
            continue  # `Drop 8 degrees = 2 - 8`, `48 = 100% + 20%`: a label for the sum that follows
        end, right_ok = right.end, _agree(left, right, loose)
        if not right_ok and right.lead is not None:  # running total: `2 + 3 = 5 + 4 = 9`
            lead = _lone(right.lead)
            if _agree(left, lead, loose):
                end, right_ok = right.lead.end, True
        plain = right_ok
        if joined is not None and index == len(parts) - 2 and _agree(left, _lone(joined), loose):
            end, right_ok, plain = joined.end, True, False  # `7/2 = 3 1/2`: both hold (3 rounds 3.5); it is one
        found.append((left.start, end, right_ok))
    return plain


def _strip(group: list[Tok], kind: str) -> list[Tok]:
    """Brackets left open at the start (or closed at the end) of a run belong to the prose around it: `(2 + 3 = 5)`,
    `= 8 (since`; so do a list's marks before the first side: `- 30 + 12 = 42`, `1) 30 + 12 = 42`."""
    depth = 0
    for token in group:
        depth += (token.kind == "open") - (token.kind == "close")
    if kind == "open":
        if len(group) > 1 and group[0].kind == "op" and group[0].text in "-+*" and group[1].start > group[0].end:
            group = group[1:]  # a bullet: a sign apart from its number
        if len(group) > 2 and group[0].kind == "num" and group[1].text == ")" and depth < 0:
            group, depth = group[2:], depth + 1  # `1)`
        while depth > 0 and group and group[0].kind == "open":
            group, depth = group[1:], depth - 1
    else:
        while depth < 0 and group and group[-1].kind == "close":
            group, depth = group[:-1], depth + 1
        while depth > 0 and group and group[-1].kind == "open":
            group, depth = group[:-1], depth - 1
    return group


def _range(group: list[Tok]) -> bool:
    """`Weeks 1-2`, `pages 3-4`: two whole numbers joined by a touching hyphen, the first smaller, read as a range."""
    if len(group) != 3 or group[1].text != "-" or not tight(group, 1):
        return False
    low, high = group[0].value, group[2].value
    return group[0].kind == group[2].kind == "num" and low.denominator == high.denominator == 1 and low < high


def _lone(token: Tok) -> _Part:
    digits = _significant(token.text)
    return _Part(token.value, token.value, token.start, token.end, token.unit, digits, None, False, token.labelled)


def _significant(digits: str) -> int:
    return len(digits.replace(".", "").lstrip("0"))


def _part(group: list[Tok]) -> _Part | None:
    """One side's value, or None where it is not arithmetic (a word inside, a bracket left open, past the bounds)."""
    if len(group) == 1 and group[0].kind == "num":  # the commonest side, a lone number: no parsing
        return _lone(group[0])
    if not group or any(token.kind in ("big", "other") for token in group) or _range(group):
        return None
    percent = any(token.kind == "pct" for token in group)
    try:
        value = evaluate(group, 100)
        as_unit = evaluate(group, 1) if percent else value
    except (Skip, ZeroDivisionError):
        return None
    body = [token for token in group if token.kind != "pct"]
    signs = body[:-1]
    lone = (
        body[-1].kind == "num" and all(token.kind == "op" and token.text in "+-" for token in signs) and len(signs) < 2
    )
    unit = digits = None
    if lone:
        unit = divide(body[-1].unit, 100 if percent else 1)
        digits = _significant(body[-1].text)
    lead = group[0] if not lone and group[0].kind == "num" and len(group) > 1 and group[1].kind == "op" else None
    labelled = lone and body[-1].labelled
    return _Part(value, as_unit, group[0].start, group[-1].end, unit, digits or 0, lead, percent, labelled)


def _agree(left: _Part, right: _Part, loose: bool) -> bool:
    """Whether the two sides are equal: exactly, or as a lone number written to fewer decimals rounds it, or (`≈`)
    within one unit of its last digit or 1%; a side with `%` is also read with `%` as a unit (`100 - 20 = 80%`)."""
    pairs = [(left.value, right.value, False)]
    if left.percent or right.percent:
        pairs.append((left.as_unit, right.as_unit, True))
    for a, b, as_unit in pairs:
        if a == b:
            return True
        for exact, written, side in ((a, b, right), (b, a, left)):
            if side.unit is not None and _rounds_to(
                exact, written, side, loose, 100 if as_unit and side.percent else 1
            ):
                return True
        if loose and 100 * abs(Fraction(a) - b) <= abs(Fraction(a)):
            return True
    return False


def _rounds_to(exact: Number, written: Number, side: _Part, loose: bool, scale: int) -> bool:
    assert side.unit is not None
    unit = Fraction(side.unit) * scale
    error = abs(Fraction(exact) - written)
    if loose:
        return error <= unit
    if side.digits >= _FLOAT_NOISE_DIGITS and error <= abs(Fraction(exact)) / 10**12:
        return True  # a calculator's float: `0.1 + 0.2 = 0.30000000000000004`
    fewer = divide(exact, unit).denominator != 1  # the exact value needs more decimals than were written
    return fewer and 2 * error <= unit
