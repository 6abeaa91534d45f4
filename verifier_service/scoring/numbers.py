"""Plain numbers without sympy: the fast path, and rewrites math-verify 0.9.0 gets wrong.

The fast path decides only what it can decide exactly as math-verify would: both sides are one plain number
(thousands separators, decimal comma, signs, `$`/`\\boxed{}` wrappers and trailing punctuation allowed). When the
values are equal, or both are integers, the verdict is final; anything else (percentages, inexact decimals that
math-verify rounds) goes to the sympy path.
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from fractions import Fraction
from functools import lru_cache

# math-verify's own number grammar (parser.py, lazy_expr_regex), anchored to the whole string.
_NUMBER = re.compile(
    r"^(?:(?P<int1>[-+]?[1-9]\d{0,2}(?:[ ,]\d{3})+)(?P<dec1>\.\d+)?"
    r"|(?P<int2>[-+]?\d+)(?P<dec2>[.,]\d+)"
    r"|(?P<dec3>[-+]?\.\d+)"
    r"|(?P<int3>[-+]?\d+))$"
)
_WRAPPERS = re.compile(
    r"^(?:\\boxed\{(?P<boxed>.*)\}|\$\$(?P<dd>.*)\$\$|\$(?P<d>[^$\n]*)\$|\*\*(?P<bold>[^*]*)\*\*)$", re.S
)
_CURRENCY = re.compile(r"^(?:\\\$|\$(?=\s*\d[^$]*$)|[€£¥₹])\s*")  # `\$58`, `$576` (a lone dollar sign), `€5`
_NUMBERLESS = re.compile(r"^[^\d$\\]*$")
# An integer fraction: `\frac{3}{4}`, `\dfrac{-3}{4}`, `-\tfrac34`, `3/4`.
_FRACTION = re.compile(
    r"^(?P<sign>[-+]?)\s*(?:(?P<latex>\\[dt]?frac)\s*(?:\{\s*(?P<n1>-?\d+)\s*\}|(?P<n2>\d))\s*(?:\{\s*(?P<d1>\d+)\s*\}|(?P<d2>\d))"
    r"|(?P<n3>-?\d+)\s*/\s*(?P<d3>\d+))$"
)
_TRAILING = re.compile(r"(?<![\s.,;:!*])[\s.,;:!*]+$")  # from the start of a run only: see _TEXT_AND
_LEADING = re.compile(r"^(?:(?i:(?:the\s+)?(?:final\s+)?answer(?:\s+is)?\s*:?)|=|\s|\*\*)+")

# `4 4/9` is 40/9; `1 000 4/9` is 9004/9. Not inside a longer number or fraction, and not from a group of digits
# inside a run of groups (`1 000 000 ...`, from where it would scan the rest of the run again, once per group).
MIXED_NUMBER = re.compile(
    r"(?<![\d.,/\w])(?P<sign>[-+]?)(?!(?<=\d )\d{3} \d{3})"
    r"(?P<whole>\d{1,3}(?: \d{3})+|\d+)[ \t]+(?P<num>\d+)/(?P<den>\d+)"
    r"(?![\d/.]\d|\d|/)(?P<pct>\s*(?:%|[Pp]ercentage|[Pp]ercent|[Pp]ct))?"
)
_SCIENTIFIC = re.compile(r"(?<![\w\\.])(?P<mant>\d+(?:\.\d+)?)[eE](?P<exp>[-+]?\d+)(?![\w.])")
_MATHRM_E = re.compile(r"\\(?:mathrm|text|operatorname)\s*\{\s*e\s*\}|\\mathrm\s+e\b")
# Leading whitespace is taken only from the start of its run (`(?<!\s)`), where the first match starts anyway: tried
# from each character of a long run, `\s*` would scan the rest of the run each time.
_TEXT_AND = re.compile(r"(?:(?<!\s)\s+)?\\q?quad\s*\\text\s*\{\s*(?:and|or)\s*\}\s*\\q?quad\s*")
_SQRT_PAREN = re.compile(r"\\sqrt\s*\(([^()\\]{1,40})\)")
# A full stop or comma that ends the math, inside the math: `$\frac{1}{3}.$`, `\boxed{5.}`. Its leading whitespace is
# taken from the start of its run (after a backslash, from the run's second character: `(?<!\\)` allows no earlier).
_PUNCT_BEFORE_CLOSE = re.compile(r"(?:(?<![\\\s])|(?<=\\\s))\s*[.,;](\s*)(?=\$|\\\]|\\\)|\}\s*$)")

INVALID = "\\text{invalid}"
# The most digits a number converted here may have. Past Python's limit (4,300 digits by default, at least this many
# whatever the process sets) int() and str() raise, and below it conversion still costs time quadratic in the digits:
# a longer mixed number is left as written, and a longer plain number is left to math-verify.
MAX_DIGITS = sys.int_info.str_digits_check_threshold  # 640
_PLAIN_CHARS = 4 * MAX_DIGITS  # the longest text read as a plain number: words, wrappers and separators around it


def _mixed_to_fraction(m: re.Match[str]) -> str:
    if len(m["whole"]) + len(m["num"]) + len(m["den"]) > MAX_DIGITS:
        return m[0]
    whole, num, den = int(m["whole"].replace(" ", "")), int(m["num"]), int(m["den"])
    if den == 0 or num >= den:
        return INVALID  # `4 4/0`, `11 6/6`: not a number anyone means
    value = whole * den + num
    if m["pct"]:
        den *= 100
    return f"{'-' if m['sign'] == '-' else ''}{value}/{den}"


def rewrite(text: str, *, latex: bool) -> str:
    """Rewrite forms math-verify 0.9.0 misreads into forms it reads right.

    >>> rewrite("The answer is 4 4/9.", latex=False)
    'The answer is 40/9.'
    """
    text = MIXED_NUMBER.sub(_mixed_to_fraction, text)
    text = _MATHRM_E.sub("e", text)
    text = _TEXT_AND.sub("; ", text)
    text = _SQRT_PAREN.sub(r"\\sqrt{\1}", text)
    sci = r"\g<mant>\\cdot 10^{\g<exp>}" if latex else r"\g<mant>*10^(\g<exp>)"
    text = _SCIENTIFIC.sub(sci, text)
    return _PUNCT_BEFORE_CLOSE.sub(r"\1", text)


@dataclass(frozen=True)
class PlainNumber:
    value: Fraction
    decimal: bool  # written with a decimal point: math-verify rounds it (float_rounding), so inequality is not final
    latex: bool  # written as `\frac{a}{b}`: only the latex target reads it
    text: str  # as written, without wrappers


@lru_cache(maxsize=8192)  # golds repeat for every completion of a prompt, answers within a group
def plain_number(text: str) -> PlainNumber | None:
    """The value of text when it is exactly one plain number or integer fraction (possibly wrapped), else None.

    >>> [plain_number(t).value for t in ("$1,234$.", "\\\\boxed{-0.5}", "\\\\dfrac{6}{8}", "-3/4")]
    [Fraction(1234, 1), Fraction(-1, 2), Fraction(3, 4), Fraction(-3, 4)]
    >>> plain_number("x = 3") is None
    True
    """
    if len(text) > _PLAIN_CHARS:
        return None  # not a number this path converts (its digits, or its wrapping, are too long)
    s = _unwrap(text)
    if len(s) > MAX_DIGITS:
        return None
    if (frac := _FRACTION.match(s)) is not None:
        num, den = int(frac["n1"] or frac["n2"] or frac["n3"]), int(frac["d1"] or frac["d2"] or frac["d3"])
        if den == 0:
            return None
        sign = -1 if frac["sign"] == "-" else 1
        return PlainNumber(Fraction(sign * num, den), False, frac["latex"] is not None, s)
    m = _NUMBER.match(s)
    if m is None:
        return None
    if m["int1"] is not None:
        digits = m["int1"].replace(",", "").replace(" ", "") + (m["dec1"] or "")
    elif m["int2"] is not None:
        digits = m["int2"] + m["dec2"].replace(",", ".")
    else:
        digits = m["dec3"] or m["int3"]
    try:
        return PlainNumber(Fraction(Decimal(digits)), "." in digits, False, s)
    except (InvalidOperation, ValueError):
        return None


def _unwrap(text: str) -> str:
    """Strip answer words, wrappers (`$..$`, `\\boxed{}`, `**..**`), trailing punctuation and a currency sign."""
    s = text.strip()
    for _ in range(4):
        s = _CURRENCY.sub("", _LEADING.sub("", _TRAILING.sub("", s)))
        m = _WRAPPERS.match(s)
        if m is None:
            break
        s = next(g for g in m.groups() if g is not None).strip()
    return s


def has_no_number(text: str) -> bool:
    """No digit, and no LaTeX (`$e^{i\\pi}$` is -1): nothing math-verify's number and LaTeX targets could read."""
    return _NUMBERLESS.match(text) is not None


def compare_plain(gold: PlainNumber, answer: PlainNumber, float_rounding: int = 6) -> bool | None:
    """True/False when exact arithmetic settles it as math-verify would; None to defer to sympy."""
    if gold.value == answer.value:
        return True
    if not (gold.decimal or answer.decimal):
        return False  # integers and integer fractions: math-verify compares them exactly
    # math-verify rounds both to `float_rounding` places; each moves by at most half a unit in the last place,
    # so values two units apart stay apart. Closer ones are left to its own rounding.
    if abs(gold.value - answer.value) >= Fraction(2, 10**float_rounding):
        return False
    return None
