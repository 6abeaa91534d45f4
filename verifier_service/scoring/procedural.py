"""reasoning-gym's own scorers (`procedural`): the answer is found on the event loop (`extract_answer`), and the
dataset's `score_answer(answer, entry)` runs in a worker process (`ProceduralJob.run`), since some scorers are slow,
one may loop, and some run the answer as code. Nine scorers `eval` or sympy-parse the model's text (n_queens,
countdown, puzzle24, ...): the job hands them only answers of the shape they read (procedural_guard.py: a Python
literal, or arithmetic), and scores any other answer 0 (`wrong`) without calling them; the other scorers run the
library's own code on the answer (none of them compiles it), and the answer is bounded (`MAX_ANSWER_CHARS`).
reasoning-gym is imported only in the workers, never in the service process.

Isolation: the worker builds the dataset's scorer (once: `dataset_scorer`). For the nine, it then forks
(scoring/forked.py); the fork applies the guard, runs the scorer (`scored`), sends its result back as JSON and exits.
Whatever such a scorer does to its process's memory (a module patched, a cache poisoned: code that got past the
guard) dies with the fork, so no job changes how a later one of any component is scored in that worker, and a
scorer that kills its process costs its item only (VERIFIER_PROCEDURAL_FORK=false turns the forks off: the guard
is then the only wall). The other 96 run in the worker itself: their scorers read the answer as data, and a fork
costs 4 to 25 ms (its page tables grow with the worker's memory) against their 0.1 to 1 ms. Still not a sandbox:
the fork has the worker's user, files and network, and code that ran in it could forge its own item's result
(`returned` takes only a scorer's verdicts and a score in [0, 1]), write files, or signal other processes; the entry
is trusted (some scorers eval or sympy-parse its fields).

Time: the scorer call itself is timed (`timed`: the import of reasoning-gym, about 1.5 s, and building a dataset's
scorer, up to 1 s, happen once per worker and are not the answer's fault; nor is the fork); the worker kills a fork
that overruns that by `KILL_AFTER_S` (a loop in C code, which no signal interrupts), and the pool kills a worker that
overruns it by `COLD_START_S` (a fork dies with it). All are `timeout`, null; a fork or a worker that dies without a
result is `worker_crashed`, null.

Where it differs from NeMo-Gym's reasoning_gym server: a scorer that raises is null (`scorer_error`), not 0; a
score below 1 is 0 unless the spec asks for partial credit; ARC grids are given back their tuples (`restored`); an
answer the guard refuses is 0 without its scorer.
"""

from __future__ import annotations

import functools
import json
import math
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from verifier_service.procedural_datasets import REASONING_GYM_VERSION, installed
from verifier_service.schema import ComponentResult, ProceduralSpec, ScoreItem, Verdict
from verifier_service.scoring.answer import answer_blocks
from verifier_service.scoring.extract import boxed_spans, final_answer_region
from verifier_service.scoring.forked import ChildDied, ChildOverrun, run_forked
from verifier_service.scoring.pooled import WorkerComponent
from verifier_service.scoring.procedural_guard import GUARDS, refusal
from verifier_service.scoring.text import result

COLD_START_S = 15.0  # the pool's allowance beyond the scorer's own time: importing and building it in a fresh worker
KILL_AFTER_S = 2.0  # a scorer that its timer does not stop (a loop in C code, a bare except) is killed this much later
MAX_ANSWER_CHARS = 10_000  # what a scorer may eval: far above any generated entry's answer (hanoi's: ~3,000)
_UNAVAILABLE = f"reasoning-gym {REASONING_GYM_VERSION} is not installed on this server (the `procedural` extra)"


def extract_answer(region: str) -> str:
    """The answer in the text after the reasoning: the last <answer> block, else the last \\boxed{}, else the whole
    text; stripped (NeMo-Gym's reasoning_gym server reads it so).

    >>> extract_answer("I think <answer>1</answer>, no: <answer> 2 </answer>"), extract_answer("so \\\\boxed{3}.")
    ('2', '3')
    >>> extract_answer("  4 5 6 ")
    '4 5 6'
    """
    blocks = answer_blocks(region)
    if blocks:
        return blocks[-1].strip()
    spans = boxed_spans(region)
    if spans:
        start, end = spans[-1]
        return region[region.index("{", start) + 1 : end - 1].strip()
    return region.strip()


def judged(value: Any, partial: bool, extracted: str | None = None) -> ComponentResult:
    """The component's result for the scorer's score: 1.0 is correct; below it wrong (0), or with `partial` the
    score itself (`partial`, or `wrong` at 0). Not a finite number: scorer_error.

    >>> judged(0.05, False).score, judged(0.05, True).score, judged(1.0, False).verdict
    (0.0, 0.05, 'correct')
    """
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return result(None, Verdict.SCORER_ERROR, "the scorer returned no finite number", extracted)
    if value >= 1.0:
        return result(1.0, Verdict.CORRECT, None, extracted)
    if partial and value > 0:
        return result(float(value), Verdict.PARTIAL, f"the scorer gave {value:.3g}", extracted)
    return result(0.0, Verdict.WRONG, f"the scorer gave {value:.3g}" if value > 0 else None, extracted)


@functools.cache
def dataset_scorer(name: str) -> Callable[[str | None, dict[str, Any]], float]:
    """The dataset's score_answer, built once per worker process: reasoning-gym's `get_score_answer_fn` builds the
    dataset (its default config) on every call, which takes up to a second for some."""
    from reasoning_gym.factory import get_score_answer_fn  # here only: a 2 s import, in the workers

    return get_score_answer_fn(name)


# Datasets whose scorers compare the answer with metadata that JSON turns from tuples into lists: ARC's grids
# (parse_board gives tuples of tuples). Stored as JSON, as every trainer keeps them, a right grid would score 0.05.
_TUPLE_GRIDS = {"arc_agi": ("input", "output"), "rearc": ("input", "output")}


def restored(dataset: str, entry: dict[str, Any]) -> dict[str, Any]:
    """The entry as the library made it, where its JSON lost what the scorer compares (see `_TUPLE_GRIDS`).

    >>> restored("rearc", {"metadata": {"output": [[1, 2]]}})["metadata"]["output"]
    ((1, 2),)
    """
    metadata = entry.get("metadata")
    for key in _TUPLE_GRIDS.get(dataset, ()):
        grid = metadata.get(key) if isinstance(metadata, dict) else None
        if isinstance(grid, list) and all(isinstance(row, list) for row in grid):
            metadata[key] = tuple(tuple(row) for row in grid)  # type: ignore[index]
    return entry


class _Overrun(BaseException):
    """The scorer's time is up. A BaseException, so that a scorer's `except Exception` does not swallow it."""


def _overrun(signum: int, frame: object) -> None:
    raise _Overrun


def timed(call: Callable[[], float], seconds: float) -> float:
    """call(), interrupted (_Overrun) after `seconds` by SIGALRM; an interval timer already set (pytest-timeout's)
    is set again afterwards. The main thread only: the fork's (`ProceduralJob.scored`)."""
    handler = signal.signal(signal.SIGALRM, _overrun)
    earlier, interval = signal.setitimer(signal.ITIMER_REAL, seconds)
    started = time.monotonic()
    try:
        return call()
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, handler)
        if earlier:
            signal.setitimer(signal.ITIMER_REAL, max(earlier - (time.monotonic() - started), 1e-3), interval)


@dataclass(frozen=True)
class ProceduralJob:
    """One answer to score against one entry, run in a worker (hashable: equal jobs of a request run once)."""

    dataset: str
    entry: str  # canonical JSON
    answer: str
    partial: bool
    timeout_s: float
    fork: bool = True  # VERIFIER_PROCEDURAL_FORK: the scorers that compile the answer run in a throwaway fork

    def run(self) -> ComponentResult:
        """In the worker: the dataset's scorer, built here once (forks inherit it), then `scored`: in a throwaway
        fork for the scorers that compile the answer (those procedural_guard.py guards; unless `fork` is off), so
        that nothing they do to their process reaches the worker; the others, which only read it as data, here."""
        extracted = self.answer[:200]
        try:
            scorer = dataset_scorer(self.dataset)
        except ImportError:
            return result(None, Verdict.SCORER_UNAVAILABLE, _UNAVAILABLE)
        except Exception as exc:  # the dataset's class cannot be built here
            return result(None, Verdict.SCORER_ERROR, f"building the scorer raised {type(exc).__name__}")
        if not self.fork or self.dataset not in GUARDS:  # one that reads the answer as data: a fork costs 4 to 25 ms
            return self.scored(scorer)
        try:
            sent = run_forked(lambda: self.scored(scorer).model_dump_json(), self.timeout_s + KILL_AFTER_S)
        except ChildOverrun:
            detail = f"the scorer took longer than {self.timeout_s:g}s (its process was killed)"
            return result(None, Verdict.TIMEOUT, detail, extracted)
        except ChildDied as died:
            detail = f"the scorer's process ended without a result ({died})"
            return result(None, Verdict.WORKER_CRASHED, detail, extracted)
        return returned(sent, extracted, self.partial)

    def scored(self, scorer: Callable[[str | None, dict[str, Any]], float]) -> ComponentResult:
        """The guard, then the scorer (in the fork, or in the worker: `run`); what it raises is a verdict."""
        extracted = self.answer[:200]
        entry = restored(self.dataset, json.loads(self.entry))
        try:
            refused = refusal(self.dataset, self.answer, entry)
            if refused:
                return result(0.0, Verdict.WRONG, refused, extracted)
            value = timed(lambda: scorer(self.answer, entry), self.timeout_s)
        except _Overrun:
            return result(None, Verdict.TIMEOUT, f"the scorer took longer than {self.timeout_s:g}s", extracted)
        except (Exception, SystemExit) as exc:  # eval'd text may raise anything, exit() included
            return result(None, Verdict.SCORER_ERROR, f"the scorer raised {type(exc).__name__}", extracted)
        return judged(value, self.partial, extracted)


def returned(sent: str, extracted: str, partial: bool) -> ComponentResult:
    """The fork's result, read as untrusted text (a scorer that ran the answer's code may have written it), rebuilt
    from its verdict, score and detail where they agree as `scored` makes them: correct 1, wrong 0, partial strictly
    between (only when the spec asked for partial credit), scorer_error and timeout null; anything else is no result
    (worker_crashed). Nothing else it sent is kept, so no outcome is mixed with another.

    >>> returned('{"score": 1.0, "verdict": "correct"}', "4", False).verdict, returned("{}", "4", False).verdict
    ('correct', 'worker_crashed')
    >>> returned('{"score": 0.7, "verdict": "timeout"}', "4", False).verdict
    'worker_crashed'
    """
    try:
        back = ComponentResult.model_validate_json(sent)
    except ValueError:
        back = None
    if back is not None:
        verdict, score = back.verdict, back.score
        agrees = (
            (verdict == Verdict.CORRECT and score == 1.0)
            or (verdict == Verdict.WRONG and score == 0.0)
            or (verdict == Verdict.PARTIAL and partial and score is not None and 0.0 < score < 1.0)
            or (verdict in (Verdict.SCORER_ERROR, Verdict.TIMEOUT) and score is None)
        )
        if agrees:
            return result(score, Verdict(verdict), back.detail[:200] if back.detail else None, extracted)
    return result(None, Verdict.WORKER_CRASHED, "the scorer's process sent back no valid result", extracted)


class ProceduralComponent(WorkerComponent):
    """The `procedural` component as the engine drives it (scoring/pooled.py)."""

    name = "procedural"

    def reads(self, item: ScoreItem, spec: ProceduralSpec) -> int:
        return len(item.completion)  # the entry's JSON was made when the spec was validated

    def prepare(self, item: ScoreItem, spec: ProceduralSpec) -> ComponentResult | ProceduralJob:
        if not installed():
            return result(None, Verdict.SCORER_UNAVAILABLE, _UNAVAILABLE)
        region = final_answer_region(item.completion, spec.think_tag)
        if region is None:
            return result(0.0, Verdict.NO_ANSWER, "The reasoning was opened and never closed.")
        answer = extract_answer(region)
        if not answer:
            return result(0.0, Verdict.NO_ANSWER, "The answer is empty.")
        if len(answer) > MAX_ANSWER_CHARS:
            detail = f"The answer is longer than {MAX_ANSWER_CHARS} characters."
            return result(0.0, Verdict.ANSWER_TOO_LONG, detail, answer[:200])
        fork = self.settings.procedural_fork
        return ProceduralJob(spec.dataset, spec.entry_json(), answer, spec.partial, spec.timeout_s, fork)

    def timeout_s(self, job: ProceduralJob) -> float:
        return job.timeout_s + COLD_START_S  # the job times its scorer itself; this is the backstop

    def timed_out(self, job: ProceduralJob, timeout_s: float) -> ComponentResult:
        detail = f"the scorer took longer than {job.timeout_s:g}s (its worker was stopped)"
        return result(None, Verdict.TIMEOUT, detail, job.answer[:200])
