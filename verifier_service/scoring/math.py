"""Math answers: extraction in the service process, symbolic comparison (math-verify) in a worker process.

`prepare_math` is cheap and runs for every item; it either settles the item (no answer, plain numbers) or
returns the key the engine dedupes on. `verify_math` does the sympy work and runs only in worker processes.
`score_math` chains both in-process, for tests and for callers that need no pool. `MathComponent` is math as the
engine drives it, a pooled component (scoring/pooled.py): the cache of verdicts, the groups, the pool.
"""

from __future__ import annotations

import asyncio
import logging
import re
import threading
from collections import OrderedDict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from verifier_service.pool import TaskTimeout, WorkerCrashed
from verifier_service.schema import ComponentResult, MathOptions, MathSpec, ScoreItem, Verdict
from verifier_service.scoring import numbers
from verifier_service.scoring.extract import extract_candidate, final_answer_region
from verifier_service.scoring.pooled import Resources, deadline_exceeded, finished_by
from verifier_service.scoring.texts import ITEM_FAILED

log = logging.getLogger(__name__)

_DELIMITED = re.compile(r"\$|\\\(|\\\[|\\boxed|\\fbox")
_LATEX_LOOKING = re.compile(r"\\|\^|_|\{|, ")  # `, ` separates a list; `1,22` is a decimal comma
_MAX_NESTING = 40
_EMPTY = re.compile(r"^(?:\s|\$|,|\\boxed\s*\{\s*\})*$")  # nothing, or only empty boxes


@dataclass(frozen=True)
class MathResult:
    score: float | None
    verdict: Verdict
    extracted: str | None = None
    detail: str | None = None


@dataclass(frozen=True)
class MathTask:
    """One unit of sympy work: everything a worker needs, hashable so the engine can dedupe on it."""

    gold: str
    answer: str
    options: MathOptions


def _nesting_depth(text: str) -> int:
    depth = deepest = 0
    for ch in text:
        if ch in "{([":
            depth += 1
            deepest = max(deepest, depth)
        elif ch in "})]":
            depth = max(0, depth - 1)
    return deepest


def prepare_math(
    completion: str, gold: str, options: MathOptions, *, window: int = 20_000, max_answer: int = 2_000
) -> MathResult | MathTask:
    """Extract the answer; settle the item when no sympy is needed, else return the task for a worker."""
    region = final_answer_region(completion, options.think_tag)
    if region is None:
        return MathResult(0.0, Verdict.NO_ANSWER, detail="the reasoning was opened and never closed")
    region = region[-window:]
    use_boxed = "latex" in options.extraction and options.boxed_priority >= 0
    candidate = extract_candidate(region, use_boxed=use_boxed, language=options.language)
    answer = numbers.rewrite(candidate.text, latex=candidate.source == "boxed")
    if _EMPTY.match(answer):
        return MathResult(0.0, Verdict.NO_ANSWER, detail="no answer after the reasoning")
    if len(answer) > max_answer:
        return MathResult(0.0, Verdict.ANSWER_TOO_LONG, detail=f"the answer is longer than {max_answer} characters")
    if _nesting_depth(answer) > _MAX_NESTING:
        return MathResult(0.0, Verdict.ANSWER_TOO_LONG, detail=f"the answer nests deeper than {_MAX_NESTING}")
    fast = _compare_plain(gold, answer, options)
    if fast is not None:
        return fast
    return MathTask(gold=gold, answer=answer, options=options)


def _compare_plain(gold: str, answer: str, options: MathOptions) -> MathResult | None:
    """Settle plain numbers and integer fractions without sympy, where math-verify would read them the same way:
    numbers are what the `expr` target reads, `\\frac{a}{b}` what the `latex` target reads."""
    targets = set(options.extraction) & set(options.gold_extraction or options.extraction)
    if "expr" not in targets:
        return None
    gold_value = numbers.plain_number(_gold_text(gold))
    if gold_value is None:
        return None
    if "string" not in options.extraction and numbers.has_no_number(answer):
        return MathResult(0.0, Verdict.NO_ANSWER, detail="the answer holds no number")
    answer_value = numbers.plain_number(answer)
    if answer_value is None:
        return None
    if (gold_value.latex or answer_value.latex) and "latex" not in targets:
        return None
    same = numbers.compare_plain(gold_value, answer_value, options.float_rounding)
    if same is None:
        return None
    return _verdict(same, answer_value.text)


def _verdict(correct: bool, extracted: str | None) -> MathResult:
    return MathResult(1.0 if correct else 0.0, Verdict.CORRECT if correct else Verdict.WRONG, extracted)


def _gold_text(gold: str) -> str:
    """The gold answer narrowed like a completion (a full GSM8K solution ends with `#### N`)."""
    if "####" in gold or "\\boxed" in gold or "\\fbox" in gold:
        return extract_candidate(gold).text
    return gold


def _targets(kinds: tuple[str, ...], options: MathOptions) -> list[Any]:
    from math_verify import ExprExtractionConfig, LatexExtractionConfig, StringExtractionConfig

    made: list[Any] = []
    for kind in kinds:
        if kind == "latex":
            made.append(LatexExtractionConfig(boxed_match_priority=options.boxed_priority))
        elif kind == "expr":
            made.append(ExprExtractionConfig())
        else:
            made.append(StringExtractionConfig(strings=options.string_choices))
    return made


def _parse(text: str, kinds: tuple[str, ...], options: MathOptions) -> list[Any]:
    from math_verify import parse

    # Timeouts are enforced by the worker pool, from outside: math-verify's signal.alarm is off.
    return parse(text, _targets(kinds, options), parsing_timeout=None)


@lru_cache(maxsize=4096)
def parse_gold(gold: str, options: MathOptions) -> tuple[Any, ...]:
    """Parse a gold answer once per worker. Bare LaTeX (`\\dfrac{1}{3}`, `2\\pi`) is parsed as one expression."""
    kinds = options.gold_extraction or options.extraction
    text = numbers.rewrite(_gold_text(gold), latex=True)
    wrapped = f"${text}$"
    if "latex" in kinds and not _DELIMITED.search(text) and _LATEX_LOOKING.search(text):
        attempts = [wrapped, text]
    else:
        attempts = [text, wrapped] if "latex" in kinds and not _DELIMITED.search(text) else [text]
    for attempt in attempts:
        parsed = _parse(attempt, kinds, options)
        if parsed:
            return tuple(parsed)
    return ()


def verify_math(task: MathTask) -> MathResult:
    """The sympy half: parse gold and answer with math-verify and compare them. Runs in a worker process."""
    from math_verify import verify

    options = task.options
    gold = parse_gold(task.gold, options)
    if not gold:
        return MathResult(None, Verdict.GOLD_UNPARSEABLE, detail="the gold answer could not be parsed")
    answer = _parse(task.answer, options.extraction, options)
    if not answer:
        return MathResult(0.0, Verdict.NO_ANSWER, detail="no parseable answer found")
    extracted = str(answer[-1]) if isinstance(answer[-1], str) else str(answer[0])
    if _exactly_different(gold[0], answer[0]):
        return _verdict(False, extracted)
    hedge = _hedge(gold[0], answer[0])
    if hedge is not None:
        return MathResult(0.0, Verdict.HEDGED if hedge else Verdict.WRONG, extracted, _HEDGE_DETAIL[hedge])
    correct = verify(
        list(gold),
        answer,
        float_rounding=options.float_rounding,
        numeric_precision=options.numeric_precision,
        strict=options.strict,
        allow_set_relation_comp=options.allow_set_relation_comp,
        timeout_seconds=None,
    )
    if not correct and _text_only(gold, options):
        return MathResult(
            None,
            Verdict.GOLD_UNPARSEABLE,
            extracted,
            "the gold answer is not parseable math; only an exact text match can be judged",
        )
    return _verdict(bool(correct), extracted)


def _text_only(gold: tuple[Any, ...], options: MathOptions) -> bool:
    """math-verify fell back to the raw text for every part of the gold (and text answers were not asked for)."""
    kinds = options.gold_extraction or options.extraction
    return "string" not in kinds and all(isinstance(part, str) for part in gold)


_HEDGE_DETAIL = {
    True: "the answer states several different values",
    False: "an equation is not an answer to a question whose answer is a value",
}


def _hedge(gold: Any, answer: Any) -> bool | None:
    """True for a hedge (`x = 5 = 6`), False for an equation given where a value is asked; else None."""
    from math_verify.grader import is_assignment_relation, is_equation
    from sympy import And, Eq, Number

    if is_equation(gold):
        return None  # math-verify's own rules for equations (chains keep their last value) apply
    if isinstance(answer, And) and all(isinstance(a, Eq) for a in answer.args):
        sides = [side for eq in answer.args for side in (eq.lhs, eq.rhs)]
        values = [side for side in sides if isinstance(side, Number)]
        if len(values) >= 2 and len(values) >= len(sides) // 2 + 1 and _distinct_numbers(set(values)):
            return True  # `x = 5 = 6`, `5 = 6`: a chain of different plain values
    if is_equation(answer) and not is_assignment_relation(answer) and _has_unknowns(answer):
        return False  # `3x + 4y + 14 = 0` is not the value 0
    return None


def _exactly_different(gold: Any, answer: Any) -> bool:
    """Two exact rationals that differ: math-verify's numeric check chops `1/2^99 - 1/2^98` to zero."""
    from sympy import Expr, Float, Pow

    if not (isinstance(gold, Expr) and isinstance(answer, Expr)):
        return False
    for value in (gold, answer):
        if value.is_rational is not True or value.has(Float):
            return False
        if any(abs(p.exp) > 4096 for p in value.atoms(Pow) if p.exp.is_Integer):
            return False  # exact arithmetic could take forever; math-verify's rules decide
    try:
        return bool((gold - answer).doit() != 0)
    except Exception:  # no exact answer: leave it to math-verify
        return False


def _has_unknowns(relation: Any) -> bool:
    try:
        return bool(relation.lhs.free_symbols)
    except AttributeError:
        return False


def _distinct_numbers(values: set[Any]) -> bool:
    from sympy import nsimplify

    seen = []
    for v in values:
        try:
            seen.append(nsimplify(v))
        except Exception:  # an odd value is no evidence of a hedge
            return False
    return any((a - b) != 0 for a in seen for b in seen)


def score_math(completion: str, gold: str, options: MathOptions | None = None) -> MathResult:
    """Score one completion in this process, without a deadline (tests and small scripts).

    >>> score_math("<think>2+2</think>The answer is \\\\boxed{4}.", "4").verdict
    <Verdict.CORRECT: 'correct'>
    """
    prepared = prepare_math(completion, gold, options or MathOptions())
    if isinstance(prepared, MathResult):
        return prepared
    return verify_math(prepared)


# --- In the service: the pooled component (scoring/pooled.py) -------------------------------------------------------

GROUP_SIZE = 8  # math tasks sent to a worker at once
# What the cache may keep: verdicts that a healthy worker gives again for the same (gold, answer, options), because
# they come from a comparison that ran to its end. Never `timeout` (a worker that was stopped, starved or slowed
# by a busy host says it as well as one given an absurd expression), nor any verdict that scores null
# (`worker_crashed`, `deadline_exceeded`, `internal_error`, and `gold_unparseable`, which a worker in trouble can
# also give): those are computed again next time.
CACHEABLE = frozenset({Verdict.CORRECT, Verdict.WRONG, Verdict.NO_ANSWER, Verdict.HEDGED, Verdict.ANSWER_TOO_LONG})


class ResultCache:
    """A bounded LRU of finished math results, keyed by task (gold, answer, options); only `CACHEABLE` verdicts.

    Read and written on the event loop (extraction runs there); the lock keeps it safe for any other thread.
    """

    def __init__(self, size: int) -> None:
        self.size = size
        self._data: OrderedDict[MathTask, MathResult] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, task: MathTask) -> MathResult | None:
        with self._lock:
            result = self._data.get(task)
            if result is not None:
                self._data.move_to_end(task)
            return result

    def put(self, task: MathTask, result: MathResult) -> None:
        if self.size <= 0 or result.verdict not in CACHEABLE:  # a retry may judge it otherwise
            return
        with self._lock:
            self._data[task] = result
            self._data.move_to_end(task)
            while len(self._data) > self.size:
                self._data.popitem(last=False)


def math_component(result: MathResult) -> ComponentResult:
    return ComponentResult(
        score=result.score, verdict=result.verdict.value, detail=result.detail, extracted=result.extracted
    )


class MathComponent:
    """Math as a pooled component: the answer extracted on the loop (plain numbers and cached verdicts settled
    there), the sympy work in the worker pool, tasks with the same gold grouped on one worker."""

    def __init__(self, resources: Resources) -> None:
        self.settings, self.pool, self.metrics = resources.settings, resources.pool, resources.metrics
        self.cache = ResultCache(resources.settings.math_cache_size)

    def reads(self, item: ScoreItem, spec: MathSpec) -> int:
        return len(item.completion) + len(spec.gold)

    def prepare(self, item: ScoreItem, spec: MathSpec) -> ComponentResult | MathTask:
        settings = self.settings
        prepared = prepare_math(item.completion, spec.gold, spec.options, window=settings.answer_window_chars,
                                max_answer=settings.max_answer_chars)  # fmt: skip
        if not isinstance(prepared, MathTask):
            return math_component(prepared)
        if (cached := self.cache.get(prepared)) is not None:
            self.metrics.cache_hits.inc()
            return math_component(cached)
        return prepared

    async def run(
        self, jobs: Mapping[MathTask, Sequence[int]], deadline: float, owner: object
    ) -> dict[MathTask, ComponentResult]:
        self.metrics.math_tasks.inc(len(jobs))
        self.metrics.deduplicated.inc(sum(len(indexes) for indexes in jobs.values()) - len(jobs))
        groups = {asyncio.ensure_future(self._run_group(group, owner)): group for group in _groups(jobs)}
        done = await finished_by(groups, deadline)
        results: dict[MathTask, ComponentResult] = {}
        for future, group in groups.items():
            if future not in done:
                outcomes = [deadline_exceeded(self.settings)] * len(group)
            elif (failure := future.exception()) is not None:
                log.error("math group failed", exc_info=failure)
                outcomes = [math_component(self._result(failure, 0))] * len(group)
            else:
                outcomes = future.result()
            results.update(zip(group, outcomes, strict=True))
        return results

    async def _run_group(self, group: list[MathTask], owner: object) -> list[ComponentResult]:
        timeout = self.settings.math_timeout_s
        outcomes = await self.pool.run_group(group, timeout_s=timeout, owner=owner)
        results = []
        for task, outcome in zip(group, outcomes, strict=True):
            result = self._result(outcome, timeout)
            self.cache.put(task, result)
            results.append(math_component(result))
        return results

    def _result(self, outcome: object, timeout: float) -> MathResult:
        if isinstance(outcome, MathResult):
            return outcome
        if isinstance(outcome, TaskTimeout):
            self.metrics.timeouts.inc()
            return MathResult(0.0, Verdict.TIMEOUT, detail=f"comparing the answer took longer than {timeout}s")
        if isinstance(outcome, WorkerCrashed):
            self.metrics.worker_crashes.inc()
            return MathResult(None, Verdict.WORKER_CRASHED, detail="the worker scoring this item died")
        log.error("math task failed: %s", outcome)
        return MathResult(None, Verdict.INTERNAL_ERROR, detail=ITEM_FAILED)


def _groups(tasks: Iterable[MathTask], size: int = GROUP_SIZE) -> list[list[MathTask]]:
    """Tasks with the same gold go to one worker together, so it parses the gold once; groups stay small
    enough to spread over every worker."""
    by_gold: dict[tuple[str, object], list[MathTask]] = {}
    for task in tasks:
        by_gold.setdefault((task.gold, task.options), []).append(task)
    return [same[i : i + size] for same in by_gold.values() for i in range(0, len(same), size)]
