"""Which answers may reach a reasoning-gym scorer that evaluates the answer's text (issue 24). Nine of the pinned
library's scorers run the model's answer as Python: four `eval` it to read a list or grid the model may write
instead of the plain answer (string_insertion, spiral_matrix, binary_matrix, n_queens), five hand it to sympy's
`parse_expr`, which evals it too (countdown, puzzle24, polynomial_multiplication, simple_integration,
intermediate_integration). An answer such as `__import__('os').system(...)` would run with the worker's rights.
`refusal` says why an answer must not reach its dataset's scorer, before the scorer is called:

- the `eval` scorers first compare the answer with the entry's (that path is kept) and only then eval it: an answer
  that is not the entry's must be a Python literal (`ast.literal_eval` reads it), which eval reads alike;
- the sympy scorers get only arithmetic: ASCII digits, whitespace, `+ - * / ^ ( ) ,`, a `.` only before a digit (no
  attribute access), and no names but the ones the task needs (its variables, `C`, elementary functions), so no
  string, call of a builtin or attribute can be written.

A refused answer is `wrong`, 0, with the reason as its detail: what the scorer gives nearly every innocent answer
refused here (eval raises on plain text; sympy cannot parse prose: 0, or countdown's and puzzle24's 0.01 floor).
What is lost: partial credit for a list written as an expression (`list('ABC')`) and, in the integration tasks, an
antiderivative written with a function outside `ELEMENTARY` that the gold does not use. No other dataset's scorer
compiles the answer (the library read for eval, exec, compile, sympify, parse_expr, pickle, subprocess and os.system;
tests/unit/test_procedural_guard.py watches compile() under every dataset). The entry (the trainer's own) is
trusted: some scorers eval or sympy-parse its fields (number_sorting, bitwise_arithmetic, the sympy ones).

The guard and the scorer run in a throwaway fork of the worker (procedural.py, scoring/forked.py): code that got past
them could forge its own item's score, write files or signal processes with the worker's rights, but what it changes
in memory dies with the fork, so later jobs in that worker are scored as before.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable, Collection
from typing import Any

# sympy's names for elementary functions and constants, which an integral may be written with.
ELEMENTARY = frozenset((
    "sin", "cos", "tan", "cot", "sec", "csc", "asin", "acos", "atan", "sinh", "cosh", "tanh", "exp", "log", "sqrt",
    "Abs", "pi", "E",
))  # fmt: skip
_ARITHMETIC = re.compile(r"[0-9A-Za-z_ \t\r\n+\-*/^(),.]*")
_ATTRIBUTE = re.compile(r"\.(?![0-9])")  # a dot that is not a decimal point
_NAME = re.compile(r"[A-Za-z_][A-Za-z_0-9]*")

Guard = Callable[[str, dict[str, Any]], str | None]


def is_literal(text: str) -> bool:
    """Whether `text` is a Python literal (numbers, strings, and lists, tuples, dicts, sets of them): `eval` reads it
    as `ast.literal_eval` does, running nothing.

    >>> is_literal("[['A', 'B'], (1, -2.5)]"), is_literal("list('AB')"), is_literal("A B")
    (True, False, False)
    """
    try:
        ast.literal_eval(text)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return False
    return True


def literal_unless(own: Callable[[str, dict[str, Any]], bool]) -> Guard:
    """The guard of a scorer that returns on `own(answer, entry)` (the entry's answer) and evals any other answer."""

    def guard(answer: str, entry: dict[str, Any]) -> str | None:
        if own(answer, entry) or is_literal(answer):
            return None
        return "not evaluated: the scorer evals an answer other than the entry's, and this one is not a Python literal"

    return guard


def arithmetic(names: Callable[[dict[str, Any]], Collection[str]]) -> Guard:
    """The guard of a scorer that sympy-parses the answer: arithmetic on numbers and `names(entry)` only."""

    def guard(answer: str, entry: dict[str, Any]) -> str | None:
        if not _ARITHMETIC.fullmatch(answer) or _ATTRIBUTE.search(answer):
            return "not evaluated: the scorer parses the answer as Python, and it holds more than arithmetic"
        allowed = names(entry)
        unknown = sorted({name for name in _NAME.findall(answer) if name not in allowed})
        if unknown:
            return f"not evaluated: the scorer parses the answer as Python, and it names {', '.join(unknown)[:100]}"
        return None

    return guard


def gold_names(entry: dict[str, Any]) -> set[str]:
    """The names the entry's own answer uses (its variables, functions): the scorer parses it too."""
    return set(_NAME.findall(str(entry["answer"])))


def integral_names(entry: dict[str, Any]) -> set[str]:
    """An antiderivative's names: the entry's variable, the constant `C`, elementary functions, and the gold's."""
    return {entry["metadata"]["variable"], "C"} | ELEMENTARY | gold_names(entry)


# Per dataset, what its scorer may be handed, with the line of reasoning_gym/ that evals the answer. `own` reads
# the entry as the scorer does, so that a broken entry raises alike (`scorer_error`).
GUARDS: dict[str, Guard] = {
    "string_insertion": literal_unless(lambda answer, entry: answer == entry["answer"]),  # string_insertion.py:88
    "binary_matrix": literal_unless(lambda answer, entry: answer == entry["answer"]),  # binary_matrix.py:111
    "spiral_matrix": literal_unless(  # algorithmic/spiral_matrix.py:143
        lambda answer, entry: answer.strip() == entry["answer"].strip()
    ),
    "n_queens": literal_unless(  # games/n_queens.py:155
        lambda answer, entry: answer in entry["metadata"]["valid_answers"]
    ),
    "countdown": arithmetic(lambda entry: ()),  # games/countdown.py:221
    "puzzle24": arithmetic(lambda entry: ()),  # games/puzzle24.py:119
    "polynomial_multiplication": arithmetic(gold_names),  # algebra/polynomial_multiplication.py:166
    "simple_integration": arithmetic(integral_names),  # algebra/simple_integration.py:107
    "intermediate_integration": arithmetic(integral_names),  # algebra/intermediate_integration.py:260
}


def refusal(dataset: str, answer: str, entry: dict[str, Any]) -> str | None:
    """Why `answer` must not reach `dataset`'s scorer, or None. Raises as the scorer would on a broken entry.

    >>> refusal("countdown", "__import__('os').getpid()", {}), refusal("countdown", "(8 - 2) * 4", {})
    ('not evaluated: the scorer parses the answer as Python, and it holds more than arithmetic', None)
    >>> refusal("chain_sum", "anything", {}) is None
    True
    """
    guard = GUARDS.get(dataset)
    return guard(answer, entry) if guard else None
