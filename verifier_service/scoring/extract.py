"""Cheap answer extraction: find the final answer in a completion with regular expressions only.

This runs in the service process for every math item, before any sympy work, so it must stay linear and
cheap. It narrows a completion to a short *candidate*: the text math-verify will parse. Identical candidates
for the same gold are then scored once, and plain numbers are compared here without sympy (see `numbers.py`).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

_BOXED_OPEN = re.compile(r"\\(?:boxed|fbox)\s*\{")
_BRACE_OR_ESCAPE = re.compile(r"\\.|[{}]", re.DOTALL)
# Between two boxed answers that are read together as one multi-part answer: LaTeX spacing and delimiters,
# then either no words at all (`,`, `++`) or a short phrase ending in 'and'/'or' ("for part (a) and"),
# perhaps with the next part's label ("and y_2 =").
_LATEX_SPACING = re.compile(r"\\(?:q?quad|[,;:! ()\[\]]|text\s*\{|mathrm\s*\{)|[{}$]")
_JOIN_NO_WORDS = re.compile(r"^[^\w\n]*$")
_JOIN_PHRASE = re.compile(r"^[^\n]{0,40}?(?:\band|\bor|,)\s*(?:[A-Za-z]\w{0,3}(?:_\{?\w{1,3}\}?)?\s*=\s*)?$")
_GSM8K = re.compile(r"####[ \t]*([^\n]*)")
_ANSWER_ANCHOR = re.compile(r"(?i:(?:final\s+)?answer(?:\s+is|\s*:|\s+is\s*:))")
_BOLD = re.compile(r"\*\*([^*\n]{1,80})\*\*")
_DIGIT = re.compile(r"\d")

# Answer words of other languages, read as the English anchor ("answer is") by the extraction patterns.
_ANSWER_WORDS: dict[str, tuple[str, ...]] = {
    "zh": ("最终答案是", "最终答案为", "答案是", "答案为", "答案：", "答案:", "答案"),
    "ja": ("最終的な答えは", "答えは", "答え：", "答え:", "解答："),
    "fr": (
        "la réponse finale est",
        "la réponse est",
        "réponse finale :",
        "réponse :",
        "réponse est",
        "réponse:",
        "Réponse finale :",
        "Réponse :",
        "Réponse:",
        "réponse",
    ),
    "de": ("die endgültige Antwort ist", "die Antwort ist", "Antwort:", "Antwort"),
    "es": ("la respuesta final es", "la respuesta es", "Respuesta:", "respuesta"),
    "ru": ("окончательный ответ", "ответ:", "Ответ:", "ответ"),
    "ar": ("الإجابة النهائية هي", "الإجابة هي", "الإجابة:", "الإجابة", "الجواب"),
    "hi": ("अंतिम उत्तर है", "उत्तर है", "उत्तर:", "उत्तर"),
}
# Scripts written without spaces between words: numbers there have no space before them.
_UNSPACED = re.compile(r"(?<=[\u3040-\u30ff\u3400-\u9fff\uff00-\uffef\u3000-\u303f])(?=[-+\d.$\\])")


@dataclass(frozen=True)
class Candidate:
    """What the math scorer grades: the narrowed answer text and how it was found."""

    text: str
    source: str  # "boxed", "gsm8k", "anchor", "bold" or "tail"


def final_answer_region(completion: str, think_tag: str = "think") -> str | None:
    """The text after the last closing reasoning tag; None when reasoning was opened and never closed.

    >>> final_answer_region("<think>maybe \\\\boxed{1}</think>So \\\\boxed{2}")
    'So \\\\boxed{2}'
    """
    close = f"</{think_tag}>"
    cut = completion.rfind(close)
    if cut >= 0:
        return completion[cut + len(close) :]
    if f"<{think_tag}>" in completion:
        return None
    return completion


def _matching_brace(text: str, open_at: int) -> int:
    """Index just past the brace that closes text[open_at - 1] == '{', or -1. A backslash escapes the next character.
    The regex steps over the text between braces (a loop over every character costs 0.6 s per million)."""
    depth = 1
    for found in _BRACE_OR_ESCAPE.finditer(text, open_at):
        if found[0] == "{":
            depth += 1
        elif found[0] == "}":
            depth -= 1
            if depth == 0:
                return found.end()
    return -1


def boxed_spans(text: str) -> list[tuple[int, int]]:
    """(start, end) of every complete top-level `\\boxed{...}` / `\\fbox{...}` in text."""
    spans: list[tuple[int, int]] = []
    pos = 0
    while (m := _BOXED_OPEN.search(text, pos)) is not None:
        end = _matching_brace(text, m.end())
        if end < 0:
            break
        spans.append((m.start(), end))
        pos = end
    return spans


def _joins(between: str) -> bool:
    if len(between) > 80:
        return False
    cleaned = _LATEX_SPACING.sub(" ", between).strip(" .;")
    return bool(_JOIN_NO_WORDS.match(cleaned) or _JOIN_PHRASE.match(cleaned))


def last_boxed_run(text: str) -> tuple[int, str] | None:
    """The last boxed answer with the boxed answers right before it that are joined by ',', 'and', 'or'.

    A multi-part answer is often written `\\boxed{1}, \\boxed{2}`; boxes earlier in the text, separated by
    prose, are not part of the final answer.
    """
    spans = boxed_spans(text)
    if not spans:
        return None
    first = len(spans) - 1
    while first > 0 and _joins(text[spans[first - 1][1] : spans[first][0]]):
        first -= 1
    parts = [text[s:e] for s, e in spans[first:]]
    return spans[first][0], ", ".join("\\boxed" + p[p.index("{") :] for p in parts)


def _line_from(text: str, start: int, limit: int = 300) -> str:
    end = text.find("\n", start)
    end = len(text) if end < 0 else end
    return text[start : min(end, start + limit)]


def localize(text: str, language: str) -> str:
    """Rewrite another language's answer words as 'answer is' and space out numbers in unspaced scripts."""
    words = _ANSWER_WORDS.get(language)
    if words:
        for word in words:
            text = text.replace(word, " answer is ")
    if language in ("zh", "ja"):
        text = _UNSPACED.sub(" ", text)
    return text


def extract_candidate(region: str, *, use_boxed: bool = True, language: str = "en") -> Candidate:
    """Narrow the final-answer region to the text that holds the answer.

    The last stated answer wins: of the boxed answers, a GSM8K `#### N` line and an 'answer is' /
    'answer:' line, the one that starts last (a boxed answer inside an 'answer is' line starts after it).
    With none of them, a bold number near the end; else the whole region (math-verify then searches it).
    """
    if language != "en":
        region = localize(region, language)
    found: list[tuple[int, Candidate]] = []
    if use_boxed and (boxed := last_boxed_run(region)) is not None:
        found.append((boxed[0], Candidate(boxed[1], "boxed")))
    gsm = _last(_GSM8K.finditer(region))
    if gsm is not None and gsm.group(1).strip():
        found.append((gsm.start(), Candidate(gsm.group(1).strip(), "gsm8k")))
    anchor = _last(_ANSWER_ANCHOR.finditer(region))
    if anchor is not None:
        line = _line_from(region, anchor.start())
        if _DIGIT.search(line) or "$" in line or "\\" in line:
            found.append((anchor.start(), Candidate(line.strip(), "anchor")))
    if found:
        return max(found, key=lambda pair: pair[0])[1]
    bold = _last(_BOLD.finditer(region))
    if bold is not None and _DIGIT.search(bold.group(1)) and len(region) - bold.end() < 200:
        return Candidate(bold.group(0), "bold")
    return Candidate(region.strip(), "tail")


def _last(matches: Iterator[re.Match[str]]) -> re.Match[str] | None:
    last = None
    for last in matches:  # noqa: B007
        pass
    return last
