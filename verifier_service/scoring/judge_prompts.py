"""The judge's presets: each a prompt (with {question}, {gold} and {answer}) and a strict reader of the reply's label.

The label formats are the verifiers' own; the prompts follow their structure, written here (their texts are under
their own licences: to use a checkpoint with the exact prompt it was trained on, pass it as `prompt_template`, the
preset still reads the reply):

- compass: CompassVerifier (open-compass/CompassVerifier, src/prompts.py, `CV_PROMPT`; CC BY-SA 4.0): the
  candidate graded A (CORRECT), B (INCORRECT) or C (INVALID: cut off, looping, a refusal); its COT variant ends in
  `Final Judgment: \\boxed{A} - CORRECT`.
- general_verifier: TIGER-Lab General-Verifier (General-Reasoner; as called in NovaSky-AI/SkyRL's STEM judge): `###
  Question`, `### Ground Truth Answer`, `### Student Answer`, then "Final Decision: Yes" or "Final Decision: No".
- equivalence: NeMo-Gym's equivalence_llm_judge and math_with_judge (resources_servers/equivalence_llm_judge):
  `[[A=B]]` for equal, `[[A!=B]]` for not equal.

Strict: a reply is read only when it holds exactly one label of the preset's format (said once or several times);
none, or two different ones, is None (judge_unparseable). NeMo-Gym takes the first label and General-Verifier any
"Final Decision: Yes" substring; here "Yes ... No" is neither. A label quoted or escaped in the reasoning (`\\boxed{B}`
in backticks or quotes, `\\\\boxed{B}`) is not said; a compass letter with a label word next to it that contradicts
it (`\\boxed{A} - INCORRECT`) is two labels; custom labels are whole words ("No" is not read in "Nonetheless").
"""

from __future__ import annotations

import bisect
import re
from typing import Literal

from verifier_service.schema import JudgeSpec

Label = Literal["correct", "incorrect", "invalid"]

COMPASS = """You grade answers. Decide whether the candidate's final answer agrees with the standard answer.
- The standard answer is correct and the question is valid; do not solve the question again.
- Compare only the final answer; ignore the reasoning.
- An answer may be written in another form (an expression, words) and still mean the same.
- An answer of several parts is correct only when every part matches.
- Ignore a \\boxed{} around the answer.
- An answer cut off, looping, off the question or refusing to answer is invalid.
Grade it as one of:
A: CORRECT
B: INCORRECT
C: INVALID
Reply with the letter "A", "B" or "C" only.
<Original Question Begin>:
{question}
<Original Question End>
<Standard Answer Begin>:
{gold}
<Standard Answer End>
<Candidate's Answer Begin>:
{answer}
<Candidate's Answer End>
Judging the correctness of the candidate's answer:
"""

GENERAL_VERIFIER = """User: ### Question: {question}

### Ground Truth Answer: {gold}

### Student Answer: {answer}

For the question above, check whether the student's answer is equivalent to the ground truth answer; do not solve \
the question yourself.
If the student's answer is correct, output "Final Decision: Yes". If it is incorrect, output "Final Decision: No". \
Assistant:"""

EQUIVALENCE = """Judge whether two answers to the question below are equivalent: the same final result, in any \
form. Ignore reasoning, formatting and wording.

Question:
{question}

Answer A (the reference):
{gold}

Answer B (to check):
{answer}

End your reply with exactly one label: [[A=B]] if they are equivalent, [[A!=B]] if they are not."""

PROMPTS = {"compass": COMPASS, "general_verifier": GENERAL_VERIFIER, "equivalence": EQUIVALENCE}
_PLACEHOLDER = re.compile(r"\{(question|gold|answer)\}")

_COMPASS_LETTERS: dict[str, Label] = {"A": "correct", "B": "incorrect", "C": "invalid"}
_COMPASS_WORDS: dict[str, Label] = {"CORRECT": "correct", "INCORRECT": "incorrect", "INVALID": "invalid"}
_WORD = r"(CORRECT|INCORRECT|INVALID)\b"
# one way to read any run of spaces and marks (a `\s*x?\s*` reads n spaces n ways: quadratic backtracking where no
# box follows, and parse_label runs on the event loop)
_BETWEEN = r"[\s*`]*(?:[-:–—][\s*`]*)?"
# A boxed letter with the word written next to it, before or after (`\boxed{A} - CORRECT`, `INCORRECT: \boxed{B}`).
_COMPASS_BOXED = re.compile(rf"(?<![\w\\]){_WORD}{_BETWEEN}\\boxed\{{\s*([ABC])\s*\}}|\\boxed\{{\s*([ABC])\s*\}}"
                            rf"(?:{_BETWEEN}{_WORD})?", re.IGNORECASE)  # fmt: skip
# The whole reply: a letter, a word, or both ("A: CORRECT", "B - INCORRECT"), in any case, markup and a stop around.
_COMPASS_WHOLE = re.compile(
    r"(?:(?P<letter>[ABC])(?:\s*[:.)\-]\s*(?P<named>CORRECT|INCORRECT|INVALID))?|(?P<word>CORRECT|INCORRECT|INVALID))",
    re.IGNORECASE,
)
_DECISION = re.compile(r"Final\s+Decision\s*:\s*(?:\*\*\s*)?(?:\\boxed\{\s*)?(Yes|No)\b", re.IGNORECASE)
_BOXED_YES_NO = re.compile(r"\\boxed\{\s*(Yes|No)\s*\}", re.IGNORECASE)
_EQUIVALENCE = re.compile(r"\[\[A!=B\]\]|\[\[A=B\]\]")
_QUOTES = frozenset("`\"'“‘«\\")


def _said(pattern: re.Pattern[str], reply: str) -> list[re.Match[str]]:
    """The pattern's matches that the reply says, not quotes: none right after a quote mark, a backslash (an escaped
    `\\\\boxed{B}`) or inside a `code span`.

    >>> [m[0] for m in _said(_BOXED_YES_NO, "`\\\\boxed{No}` or '\\\\boxed{No}', so \\\\boxed{Yes}")]
    ['\\\\boxed{Yes}']
    """
    ticks = [tick.start() for tick in re.finditer("`", reply)]
    return [  # inside a code span: an odd number of backticks before it (counted by bisection: linear in all)
        found
        for found in pattern.finditer(reply)
        if not (found.start() and reply[found.start() - 1] in _QUOTES)
        and bisect.bisect_left(ticks, found.start()) % 2 == 0
    ]


def fill(template: str, question: str, gold: str, answer: str) -> str:
    """The template with its placeholders filled in one pass: a brace in the texts is never read as one.

    >>> fill("Q {question} / {gold} / {answer} {x}", "{answer}", "2", "3")
    'Q {answer} / 2 / 3 {x}'
    """
    values = {"question": question, "gold": gold, "answer": answer}
    return _PLACEHOLDER.sub(lambda found: values[found[1]], template)


def prompt_of(spec: JudgeSpec) -> str:
    if spec.prompt_template is not None:
        return spec.prompt_template
    return PROMPTS[spec.preset]


def labels_of(spec: JudgeSpec) -> tuple[str | None, str | None, str | None]:
    """custom: the (correct, incorrect, invalid) labels; (None, None, None) for the other presets."""
    return spec.correct_label, spec.incorrect_label, spec.invalid_label


def parse_label(preset: str, reply: str, custom: tuple[str | None, str | None, str | None]) -> Label | None:
    """The one label in the reply, in the preset's format (custom: the `custom` labels); None for none or two
    different ones.

    >>> parse_label("equivalence", "So [[A=B]].", (None, None, None))
    'correct'
    >>> parse_label("general_verifier", "Final Decision: Yes. Final Decision: No", (None, None, None)) is None
    True
    """
    if preset == "compass":
        return _compass(reply)
    found: set[Label]
    if preset == "general_verifier":
        said = {m[1].lower() for m in _said(_DECISION, reply)} | {m[1].lower() for m in _said(_BOXED_YES_NO, reply)}
        found = {"correct" if value == "yes" else "incorrect" for value in said}
    elif preset == "equivalence":
        found = {"correct" if m[0] == "[[A=B]]" else "incorrect" for m in _EQUIVALENCE.finditer(reply)}
    else:
        found = _custom(custom, reply)
    return found.pop() if len(found) == 1 else None


def _compass(reply: str) -> Label | None:
    """A boxed letter said (not quoted; the COT variant: `Final Judgment: \\boxed{A} - CORRECT`), with any label word
    next to it agreeing, else the whole reply as a letter, a word or both in agreement.

    >>> _compass("A"), _compass("**B: INCORRECT**"), _compass("Final Judgment: \\\\boxed{C} - REPETITIVE")
    ('correct', 'incorrect', 'invalid')
    >>> _compass("A: INCORRECT"), _compass("The answer is correct."), _compass("\\\\boxed{A} or \\\\boxed{B}")
    (None, None, None)
    >>> _compass("\\\\boxed{A} - INCORRECT"), _compass("It wrote `\\\\boxed{B}`. Final Judgment: \\\\boxed{A}")
    (None, 'correct')
    """
    boxed: set[Label] = set()
    for found in _said(_COMPASS_BOXED, reply):
        before, first, second, after = found.groups()  # a word before the box, its letter (either way), a word after
        boxed.add(_COMPASS_LETTERS[(first or second).upper()])
        boxed |= {_COMPASS_WORDS[word.upper()] for word in (before, after) if word}
    if boxed:
        return boxed.pop() if len(boxed) == 1 else None
    whole = _COMPASS_WHOLE.fullmatch(reply.strip().strip("*`'\" \n").rstrip(".").strip())
    if whole is None:
        return None
    if whole["word"]:
        return _COMPASS_WORDS[whole["word"].upper()]
    letter = _COMPASS_LETTERS[whole["letter"].upper()]
    if whole["named"] and _COMPASS_WORDS[whole["named"].upper()] != letter:
        return None  # "A: INCORRECT": two labels
    return letter


def _custom(custom: tuple[str | None, str | None, str | None], reply: str) -> set[Label]:
    """The custom labels the reply holds as whole words ("No" is not read in "Nonetheless"), each once.

    >>> sorted(_custom(("Yes", "No", None), "Nonetheless, Yes.")), sorted(_custom(("Yes", "No", None), "Yes/No"))
    (['correct'], ['correct', 'incorrect'])
    """
    kinds: tuple[Label, ...] = ("correct", "incorrect", "invalid")
    named = {text: kind for text, kind in zip(custom, kinds, strict=True) if text}
    # longest first: where one label holds another ("correct" in "incorrect") the longer is read; a label is a whole
    # word where it starts or ends with a word character
    pattern = re.compile("|".join(_whole(text) for text in sorted(named, key=len, reverse=True)))
    return {named[m[0]] for m in pattern.finditer(reply)}


def _whole(label: str) -> str:
    """A label's pattern: no word character may touch an end of it that is a word character ("[[YES]]" is read
    after "Verdict", "No" is not read in "Nonetheless")."""
    before = r"(?<!\w)" if re.match(r"\w", label[0]) else ""
    after = r"(?!\w)" if re.match(r"\w", label[-1]) else ""
    return f"{before}{re.escape(label)}{after}"
