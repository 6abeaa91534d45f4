"""The `answer` component: a short free-form answer (QA, trivia, search agents) against a gold and its aliases.

The answer is the last `<answer>` block after the reasoning (blocks that say different things are a hedge), else the
last `\\boxed{}`, else the last "Answer:" line; never the whole text. Both sides are normalised as SQuAD does (NFKC,
case, punctuation, the articles a/an/the, spaces); when both read as numbers (thousands commas, a leading `$` and a
trailing `%` allowed) they are compared as numbers, to a relative 1e-6. There is no credit for a substring: "Paris
or London" for the gold "Paris" is `hedged` (0), in `f1` mode as well, where a plain answer gets word-overlap F1.

>>> spec = AnswerSpec(gold=("Eiffel Tower", "the tower"))
>>> [score(ScoreItem(completion=c, answer=spec), spec).verdict for c in (
...     "<answer>The Eiffel tower.</answer>", "<answer>Eiffel Tower or Louvre</answer>", "It is the Eiffel Tower.")]
['correct', 'hedged', 'no_answer']
"""

from __future__ import annotations

import functools
import math
import re
import unicodedata
from collections import Counter

from verifier_service.schema import AnswerSpec, ComponentResult, ScoreItem, Verdict
from verifier_service.scoring.extract import boxed_spans, final_answer_region
from verifier_service.scoring.text import result, without_punctuation

# The <answer> and </answer> tags, paired up by `answer_blocks`: a regex for whole blocks, `<answer>(.*?)</answer>`,
# scans to the end of the text from every opening tag never closed (quadratic in a text of repeated opening tags).
_TAG = re.compile(r"<(/?)answer>", re.IGNORECASE)
_LINE = re.compile(r"(?im)\banswer\s*:[\s*]*([^\n]{1,300})")
_WRAPPER = re.compile(r"^\\(?:text|textbf|mathrm|mbox)\s*\{(.*)\}$", re.DOTALL)
_ARTICLES = re.compile(r"\b(?:a|an|the)\b")
_SPACES = re.compile(r"\s+")
_NUMBER = re.compile(r"^[-+]?\$?(?:\d{1,3}(?:,\d{3})+|\d+)?(?:\.\d+)?%?$")
# Separators of several candidates: "X or Y", "X; Y", "X / Y" (not 1/2), "X and/or Y". Read with every run of
# whitespace made one space: on a long run, `\s+` and `\s*` would scan the rest of it from each of its characters.
_CANDIDATES = re.compile(r"(?i)\s+(?:and/)?or\s+|;|(?<!\d)\s*/\s*(?!\d)")


def normalise(text: str) -> str:
    """SQuAD's normalisation, after NFKC.

    >>> normalise("The  Eiffel-Tower!")
    'eiffeltower'
    """
    text = without_punctuation(unicodedata.normalize("NFKC", text).casefold())
    return _SPACES.sub(" ", _ARTICLES.sub(" ", text)).strip()


def number(text: str) -> float | None:
    """The value of a plain number ("1,234.5", "$7", "12%"), else None: also for one too large for a float, which
    would read as infinity and equal any other such number (such numbers are compared as text).

    >>> number("1,234.5"), number("9" * 400)
    (1234.5, None)
    """
    bare = text.strip().rstrip(".").strip()
    if not bare or not _NUMBER.match(bare) or not any(c.isdigit() for c in bare):
        return None
    value = float(bare.replace(",", "").replace("$", "").replace("%", ""))
    return value if math.isfinite(value) else None


def forms(text: str) -> tuple[float | None, str]:
    """(the text as a plain number or None, the text normalised): what a comparison reads of it."""
    return number(text), normalise(text)


# A batch's items mostly share a few golds: each is read once (NFKC and a pass per character cost about 2 us). Only
# golds up to this long are kept (a gold may have 10,000 characters): the cache holds at most a few MB.
_CACHED_GOLD_CHARS = 500
_cached_forms = functools.lru_cache(maxsize=4096)(forms)


def _gold_forms(gold: str) -> tuple[float | None, str]:
    return _cached_forms(gold) if len(gold) <= _CACHED_GOLD_CHARS else forms(gold)


def _same(answer: tuple[float | None, str], gold: str) -> bool:
    (a, normal), (g, gold_normal) = answer, _gold_forms(gold)
    if a is not None and g is not None:
        return math.isclose(a, g, rel_tol=1e-6)
    return normal == gold_normal


def f1(answer: str, gold: str) -> float:
    ours, theirs = normalise(answer).split(), normalise(gold).split()
    common = sum((Counter(ours) & Counter(theirs)).values())
    if common == 0:
        return 0.0
    precision, recall = common / len(ours), common / len(theirs)
    return 2 * precision * recall / (precision + recall)


def _unwrap(text: str) -> str:
    text = text.strip().strip("$").strip()
    wrapped = _WRAPPER.match(text)
    return wrapped.group(1).strip() if wrapped else text


def answer_blocks(region: str) -> list[str]:
    """The text of each `<answer>...</answer>` block, left to right: from an opening tag to the first closing tag
    after it (as the lazy regex `<answer>(.*?)</answer>` reads them), in one pass over the tags.

    >>> answer_blocks("<answer>a</answer> </answer> <Answer>b <answer>c</ANSWER> <answer>d")
    ['a', 'b <answer>c']
    """
    found, start = [], -1
    for tag in _TAG.finditer(region):
        if not tag.group(1):
            start = tag.end() if start < 0 else start
        elif start >= 0:
            found.append(region[start : tag.start()])
            start = -1
    return found


def candidates(answer: str) -> list[str]:
    """The candidates an answer lists ("X or Y", "X; Y", "X / Y"), without blank ones.

    >>> candidates("Paris  or\\n London"), candidates("1/2")
    (['Paris', 'London'], ['1/2'])
    """
    return [part.strip() for part in _CANDIDATES.split(_SPACES.sub(" ", answer)) if part.strip()]


def extract(region: str) -> tuple[str | None, bool]:
    """(the answer, whether several <answer> blocks disagree)."""
    blocks = [block.strip() for block in answer_blocks(region)]
    if blocks:
        return blocks[-1], len({normalise(block) for block in blocks}) > 1
    spans = boxed_spans(region)
    if spans:
        start, end = spans[-1]
        return _unwrap(region[region.index("{", start) + 1 : end - 1]), False
    lines = _LINE.findall(region)
    return (lines[-1].strip().removesuffix(".") if lines else None), False


def score(item: ScoreItem, spec: AnswerSpec) -> ComponentResult:
    """The `answer` component of an item."""
    golds = [spec.gold] if isinstance(spec.gold, str) else list(spec.gold)
    golds = [gold for gold in golds if (read := _gold_forms(gold))[1] or read[0] is not None]
    if not golds:
        return result(None, Verdict.BAD_GOLD, "No gold answer is left after normalisation.")
    region = final_answer_region(item.completion, spec.think_tag)
    if region is None:
        return result(0.0, Verdict.NO_ANSWER, "The reasoning was opened and never closed.")
    answer, disagree = extract(region)
    extracted = answer[:200] if answer else None
    read = forms(answer) if answer is not None else (None, "")
    if answer is None or not (read[1] or read[0] is not None):
        return result(0.0, Verdict.NO_ANSWER, "No answer block, boxed answer or answer line.", extracted)
    if disagree:
        return result(0.0, Verdict.HEDGED, "The <answer> blocks say different things.", extracted)
    if any(_same(read, gold) for gold in golds):
        return result(1.0, Verdict.CORRECT, None, extracted)
    if len(candidates(answer)) > 1:
        return result(0.0, Verdict.HEDGED, "The answer lists several candidates.", extracted)
    if spec.match == "f1":
        best = max(f1(answer, gold) for gold in golds)
        if best > 0:
            return result(best, Verdict.PARTIAL, f"Word-overlap F1 {best:.2f} with the closest gold.", extracted)
    return result(0.0, Verdict.WRONG, None, extracted)
