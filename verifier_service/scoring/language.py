"""The `language` component: DeepSeek-R1's language-consistency reward, the share of the scope's words that are in
the target language.

What counts as a word. Each Han, kana, Hangul or Thai character counts one (the characters `repetition`'s units
"auto" take one by one, and Hangul); any other run of two or more letters (with their combining marks) is one word.
LaTeX math (`$...$`, `$$...$$`, `\\(...\\)`, `\\[...\\]`, `\\begin{...}...\\end{...}`), LaTeX commands, fenced and
inline code, URLs and the reasoning tags are cut out first, and what is left that holds a digit or an underscore
(`x2`, `my_var`, `3rd`), a lone letter (a variable: `x`, `A`) or no letter at all (numbers, symbols) counts neither
way.

Whose language a word is in. Han characters are Japanese in a sentence that has kana, Korean in one that has Hangul
(and no kana), else Chinese; kana are Japanese, Hangul Korean, Thai Thai. A word is in the target language when it
is written in the target's script and, where several of the languages this component targets share that script
(Latin, Cyrillic, Arabic, Devanagari), when the language identifier (`langid.identify`) gives the target for the
sentence it is in: the target-script words of each sentence are identified together, a sentence of fewer than
`WINDOW_WORDS` such words together with the next ones. A sentence the identifier cannot decide on is not in the
target language (fail closed).

Score: target-language words / words, in [0, 1]; verdicts consistent (1), mixed, other_language (0), and no_text
(null) when the scope has no words at all.

>>> spec = LanguageSpec(target="zh")
>>> score(ScoreItem(completion="<think>先算 $3 \\\\times 4 = 12$，再加 5。</think>17", language=spec), spec).verdict
'consistent'
>>> score(ScoreItem(completion="<think>先算 the product</think>12", language=spec), spec).score
0.5
"""

from __future__ import annotations

import functools
import re
import unicodedata

import numpy as np
import numpy.typing as npt

from verifier_service.schema import ComponentResult, LanguageSpec, ScoreItem, Verdict
from verifier_service.scoring import langid
from verifier_service.scoring.ngrams import HAN_RANGES, KANA_RANGES, THAI_RANGES
from verifier_service.scoring.text import result, scoped

WINDOW_WORDS = 8  # a sentence with fewer target-script words is identified together with the next ones
HANGUL_RANGES = ((0x1100, 0x11FF), (0x3130, 0x318F), (0xA960, 0xA97F), (0xAC00, 0xD7AF), (0xD7B0, 0xD7FF))

# The script each other target is written in (the first word of its letters' Unicode names).
_LATIN = ("en", "es", "pt", "fr", "de", "it", "pl", "vi", "sw", "fi", "nl", "sv", "da", "no", "tr", "id", "ms", "cs",
          "ro", "hu", "ca", "sk", "hr", "sl", "lt", "lv", "et")  # fmt: skip
UNITS = ("zh", "ja", "ko", "th")  # the targets counted by character
SCRIPTS: dict[str, str] = {
    **dict.fromkeys(_LATIN, "LATIN"),
    **dict.fromkeys(("ru", "uk", "bg"), "CYRILLIC"),
    **dict.fromkeys(("ar", "ur", "fa"), "ARABIC"),
    **dict.fromkeys(("hi", "ne", "mr"), "DEVANAGARI"),
    "bn": "BENGALI", "ta": "TAMIL", "te": "TELUGU", "kn": "KANNADA", "ml": "MALAYALAM", "gu": "GUJARATI",
    "pa": "GURMUKHI", "el": "GREEK", "he": "HEBREW",
}  # fmt: skip
_SHARED = {script for script in SCRIPTS.values() if list(SCRIPTS.values()).count(script) > 1}

# Character classes (one byte per code point of the Basic Multilingual Plane; above it, all separators).
_SEP, _END, _DIGIT, _MARK, _HAN, _KANA, _HANGUL, _THAI, _OTHER_LETTER = range(9)
_SCRIPT_IDS = {script: _OTHER_LETTER + 1 + index for index, script in enumerate(sorted(set(SCRIPTS.values())))}
_SENTENCE_ENDS = ".!?;\n。！？；…\u061f\u06d4\u0964\u0965"  # Arabic ?, Urdu full stop, Devanagari dandas

# Cut before counting: tags, math, code, URLs. Each pattern is linear (negated classes, no nested quantifiers); the
# delimited spans whose ends are strings (\(...\), \[...\], \begin...\end) are cut by `_cut_between`.
_FENCE = re.compile(r"^[ \t]*(?:`{3,}|~{3,})", re.MULTILINE)
_INLINE = re.compile(r"\$\$[^$]*\$\$|\$[^$\n]+\$|`[^`\n]*`|https?://\S+|www\.\S+|\\[A-Za-z]+")


@functools.cache
def _classes() -> npt.NDArray[np.uint8]:
    """Code point -> class, built on first use."""
    table = np.zeros(0x10000, dtype=np.uint8)
    for ranges, kind in ((HAN_RANGES, _HAN), (KANA_RANGES, _KANA), (HANGUL_RANGES, _HANGUL), (THAI_RANGES, _THAI)):
        for low, high in ranges:
            table[low : high + 1] = kind
    for code in np.flatnonzero(table == _SEP).tolist():  # the others: by Unicode category, letters by script
        char = chr(code)
        category = unicodedata.category(char)[0]
        if category == "L":
            table[code] = _SCRIPT_IDS.get(unicodedata.name(char, "").split(" ")[0], _OTHER_LETTER)
        elif category == "M":
            table[code] = _MARK
        elif category == "N" or char == "_":
            table[code] = _DIGIT
    table[[ord(char) for char in _SENTENCE_ENDS]] = _END
    table[0xFFFF] = _SEP  # where every code point above the plane is looked up
    return table


def _cut_between(text: str, opening: str, closing: str) -> str:
    """The text without each span from `opening` to the next `closing` (an unclosed one runs to the end)."""
    parts, position = [], 0
    while (start := text.find(opening, position)) >= 0:
        parts.append(text[position:start])
        end = text.find(closing, start + len(opening))
        position = len(text) if end < 0 else end + len(closing)
        parts.append("\n")
    parts.append(text[position:])
    return "".join(parts)


def prose(text: str, think_tag: str = "think") -> str:
    """The text without its reasoning tags, code, math, LaTeX commands and URLs: what is counted. A fence opens code
    until the next fence (or the end: a truncated completion's last block is code too).

    >>> prose("Use `x` and $y$:\\n```py\\nprint(1)\\n```\\nsee https://a.b/c \\\\(z\\\\) \\\\textbf{ok}").split()
    ['Use', 'and', ':', 'see', '{ok}']
    """
    text = text.replace(f"<{think_tag}>", "\n").replace(f"</{think_tag}>", "\n")
    if "```" in text or "~~~" in text:
        text = "\n".join(part for index, part in enumerate(_FENCE.split(text)) if index % 2 == 0)
    for opening, closing in (("\\begin{", "\\end{"), ("\\[", "\\]"), ("\\(", "\\)")):
        if opening in text:
            text = _cut_between(text, opening, closing)
    return _INLINE.sub(" ", text)


def counts(text: str, target: str) -> tuple[int, int]:
    """(words in the target language, words) of a text already cut to its prose."""
    codes = np.frombuffer(text.encode("utf-32-le", "surrogatepass"), dtype=np.uint32)
    if not len(codes):
        return 0, 0
    kind = _classes()[np.minimum(codes, 0xFFFF)]
    sentence = np.cumsum(kind == _END)
    in_target, total = _unit_counts(kind, sentence, target)
    tokens = np.flatnonzero(np.diff(np.concatenate(([False], _in_token(kind), [False])).astype(np.int8)))
    if not len(tokens):
        return in_target, total
    starts, ends = tokens[0::2], tokens[1::2]
    digits = np.add.reduceat((kind == _DIGIT).astype(np.int32), starts)
    letters = np.add.reduceat((kind >= _OTHER_LETTER).astype(np.int32), starts)
    script = kind[starts]
    word = (digits == 0) & (letters >= 2) & (script >= _OTHER_LETTER)
    total += int(word.sum())
    own = SCRIPTS.get(target)
    if own is None:
        return in_target, total
    mine = word & (script == _SCRIPT_IDS[own])
    if own not in _SHARED:
        return in_target + int(mine.sum()), total
    picked = np.flatnonzero(mine)
    words = [text[start:end] for start, end in zip(starts[picked].tolist(), ends[picked].tolist(), strict=True)]
    return in_target + _identified(words, sentence[starts[picked]], target), total


def _in_token(kind: npt.NDArray[np.uint8]) -> npt.NDArray[np.bool_]:
    return (kind == _DIGIT) | (kind == _MARK) | (kind >= _OTHER_LETTER)


def _unit_counts(kind: npt.NDArray[np.uint8], sentence: npt.NDArray[np.int64], target: str) -> tuple[int, int]:
    """(characters in the target language, characters) among the Han, kana, Hangul and Thai ones."""
    han, kana, hangul = kind == _HAN, kind == _KANA, kind == _HANGUL
    thai = int((kind == _THAI).sum())
    kana_count, hangul_count, han_count = int(kana.sum()), int(hangul.sum()), int(han.sum())
    total = kana_count + hangul_count + han_count + thai
    if target == "th":
        return thai, total
    if target not in UNITS or not han_count:
        return {"ja": kana_count, "ko": hangul_count}.get(target, 0), total
    sentences = int(sentence[-1]) + 1
    han_sentences = sentence[han]
    japanese = np.bincount(sentence[kana], minlength=sentences)[han_sentences] > 0
    korean = ~japanese & (np.bincount(sentence[hangul], minlength=sentences)[han_sentences] > 0)
    japanese_han, korean_han = int(japanese.sum()), int(korean.sum())
    if target == "ja":
        return kana_count + japanese_han, total
    if target == "ko":
        return hangul_count + korean_han, total
    return han_count - japanese_han - korean_han, total


def _identified(words: list[str], sentences: npt.NDArray[np.int64], target: str) -> int:
    """How many of `words` are in `target`: each sentence's words identified together, a sentence of fewer than
    `WINDOW_WORDS` with the next ones (`sentences`: each word's sentence, in order)."""
    found, begin = 0, 0
    for end in [*(np.flatnonzero(np.diff(sentences)) + 1).tolist(), len(words)]:
        if end - begin >= WINDOW_WORDS or end == len(words):
            if langid.identify(" ".join(words[begin:end])) == target:
                found += end - begin
            begin = end
    return found


def score(item: ScoreItem, spec: LanguageSpec) -> ComponentResult:
    """The `language` component of an item."""
    in_target, total = counts(prose(scoped(item.completion, spec.scope, spec.think_tag), spec.think_tag), spec.target)
    if not total:
        return result(None, Verdict.NO_TEXT, "No words to judge in the scope (math, code and numbers aside).")
    share = in_target / total
    detail = f"{in_target} of {total} words are in {spec.target}."
    if in_target == total:
        return result(1.0, Verdict.CONSISTENT, detail)
    return result(share, Verdict.MIXED if in_target else Verdict.OTHER_LANGUAGE, detail)
