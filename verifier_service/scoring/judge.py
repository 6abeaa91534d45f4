"""The `judge` component: a generative judge (verifier_service/judges.py) asked whether the answer matches the
reference, read strictly (scoring/judge_prompts.py).

On the event loop an item becomes a job: the judge's name, the filled prompt (and its swapped twin) and how to read
the reply. An answer that is empty or only punctuation, markup (`\\boxed{}`, `\\text{}`, tags), reasoning openers
and step headings ("Thought process:", "Step 1:", "解题思路") is 0 (no_answer) without asking: the "master keys" that
judges accept (arXiv 2507.08794); what is checked is what would be sent (with `full`, the end that fits). Equal jobs
of a request are asked once, and finished verdicts are kept across requests (a bounded LRU, as math's, keyed by a
digest of the prompts sent: an entry's size does not grow with the answer's): the same (question, reference, answer)
is never asked twice.
What the judge could not say is null, never 0: a reply with no label or two (judge_unparseable), a timeout
(judge_timeout), an error, a refused connection or a malformed body (judge_error), a call not done by the batch
deadline (deadline_exceeded). With `when: "rule_miss"` the engine prepares the judge in its second round, after the
rule: `JudgeSpec.settled_by_gate` scores an answer the rule calls right 1 without a job.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import re
import threading
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from verifier_service.judges import Failure, JudgeClient, Judges
from verifier_service.schema import ComponentResult, JudgeSpec, ScoreItem, Verdict
from verifier_service.scoring.extract import extract_candidate, final_answer_region
from verifier_service.scoring.judge_prompts import Label, fill, labels_of, parse_label, prompt_of
from verifier_service.scoring.pooled import ITEM_FAILED, Resources, deadline_exceeded, finished_by

log = logging.getLogger(__name__)

# Reasoning openers and answer words: an answer made only of these (and step headings, markup, punctuation) says
# nothing. Matched as whole words, after the same normalisation as the answer (lower case, punctuation as spaces).
OPENERS = frozenset({
    "thought process", "thoughts", "thinking", "reasoning", "let me think", "let me think step by step",
    "let's think", "let's think step by step", "let us think step by step", "let me solve this step by step",
    "let's solve this step by step", "let's solve this problem step by step", "step by step", "solution",
    "answer", "final answer", "the answer is", "the final answer is",
    "解", "解答", "答案", "思考过程", "思路", "解题思路", "思考", "解题过程", "分析", "解析", "步骤",
})  # fmt: skip
# Markup around an answer that is not its content: tags (<think>), the LaTeX wrappers of text and boxes, braces,
# dollars. Content commands (\pi, \infty, \frac) stay.
_MARKUP = re.compile(
    r"</?[A-Za-z_][\w-]*>|\\(?:boxed|fbox|mbox|text[a-z]*|math(?:rm|bf|it|sf|tt|normal)|operatorname|displaystyle"
    r"|textstyle|left|right|quad|qquad)(?![A-Za-z])|[{}$]"
)
_STEP = re.compile(r"(?<!\w)step\s*\d+(?!\w)|第\s*[\d一二三四五六七八九十]+\s*步")
# A step written as a heading (a colon after it, markup aside): "Step 1:", "**第一步**："
_HEADING = re.compile(r"(?<!\w)step\s*\d+[\s*_]*[:：]|第\s*[\d一二三四五六七八九十]+\s*步[\s*_]*[:：]")
_PUNCTUATION = re.compile(r"[\W_]+")


def _normalised(text: str) -> str:
    return " ".join(_PUNCTUATION.sub(" ", _MARKUP.sub(" ", text).lower()).split())


_OPENER_WORDS = re.compile(
    "|".join(
        re.escape(words) if not words.isascii() else rf"(?<!\w){re.escape(words)}(?!\w)"  # CJK: no spaces to bound
        for words in sorted({_normalised(opener) for opener in OPENERS}, key=len, reverse=True)
    )
)
_LABEL_RESULTS: dict[Label, tuple[float, Verdict]] = {
    "correct": (1.0, Verdict.CORRECT),
    "incorrect": (0.0, Verdict.INCORRECT),
    "invalid": (0.0, Verdict.INVALID),
}


def says_nothing(answer: str) -> bool:
    """Whether an answer is empty or only punctuation, markup, reasoning openers and step headings: never sent to a
    judge (the "master keys" judges accept).

    >>> [says_nothing(text) for text in ("", " : ", "Thought process:", "Let me think...", "\\\\boxed{}", "思路：")]
    [True, True, True, True, True, True]
    >>> says_nothing("\\\\boxed{\\\\text{Thought process:}}"), says_nothing("Thought process:\\n\\nStep 1:")
    (True, True)
    >>> [says_nothing(text) for text in ("42", "x = 3", "\\\\boxed{\\\\pi}", "The answer is 7", "Step 2: 9")]
    [False, False, False, False, False]

    A step named alone, not as a heading, is an answer ("which step is wrong?"), and is sent:

    >>> [says_nothing(text) for text in ("Step 3", "第3步", "**Step 1:**", "第一步：", "Thought process: Step 1")]
    [False, False, True, True, True]
    """
    if not any(char.isalnum() for char in answer):
        return True
    normalised = _normalised(answer)
    rest = _OPENER_WORDS.sub(" ", normalised)
    stepless = _STEP.sub(" ", rest)
    if any(char.isalnum() for char in stepless):
        return False
    # only markup, openers and steps: a master key, unless it names steps and no more (no opener, no heading's colon)
    named_steps = stepless != rest and rest == normalised
    return not named_steps or _HEADING.search(_MARKUP.sub(" ", answer).lower()) is not None


@dataclass(frozen=True)
class JudgeJob:
    """One question to one judge: the prompt, its swapped twin (swap) and how the reply reads."""

    judge: str
    prompt: str
    swapped: str | None
    preset: str
    labels: tuple[str | None, str | None, str | None]
    on_disagree: str


def job_key(job: JudgeJob) -> bytes:
    """The cache's key for a job: a 32-byte digest of everything that decides its verdict (the judge, the prompts
    sent, which hold the question, the reference and the answer, and how the reply reads), never the texts
    themselves: an entry costs the same for a 2 MB answer as for "42"."""
    digest = hashlib.sha256()
    fields = (job.judge, job.prompt, job.swapped, job.preset, *job.labels, job.on_disagree)
    for field in fields:
        data = b"\xff" if field is None else field.encode("utf-8", "surrogatepass")
        digest.update(len(data).to_bytes(8, "little") + data)  # length first: no two tuples give one stream
    return digest.digest()


class VerdictCache:
    """A bounded LRU of finished judge verdicts, keyed by `job_key` (fixed-size keys: its memory is bounded by its
    entry count, whatever the answers' size); null ones are not kept (a retry may get an answer). Equal results are
    kept once."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._data: OrderedDict[bytes, ComponentResult] = OrderedDict()
        self._results: dict[str, ComponentResult] = {}
        self._lock = threading.Lock()

    def get(self, job: JudgeJob) -> ComponentResult | None:
        key = job_key(job)
        with self._lock:
            found = self._data.get(key)
            if found is not None:
                self._data.move_to_end(key)
            return found

    def put(self, job: JudgeJob, result: ComponentResult) -> None:
        if self.size <= 0 or result.score is None:
            return
        key = job_key(job)
        with self._lock:  # a handful of distinct results (verdict, detail naming the judge): one object each
            self._data[key] = self._results.setdefault(result.model_dump_json(), result)
            self._data.move_to_end(key)
            while len(self._data) > self.size:
                self._data.popitem(last=False)


def answer_text(item: ScoreItem, spec: JudgeSpec, window: int) -> str | None:
    """What the judge is shown as the answer: the extracted final answer, or the whole completion (`full`); None
    when the reasoning was opened and never closed (input answer)."""
    if spec.input == "full":
        return item.completion
    region = final_answer_region(item.completion)
    if region is None:
        return None
    return extract_candidate(region[-window:]).text


def fitted(template: str, question: str, gold: str, answer: str, context_chars: int) -> tuple[str, str, str]:
    """The texts cut to fit the judge's context: the question and the reference each to a quarter of it (the
    question keeps its end, where it asks), the answer to what is left, keeping its end (where the answer is)."""
    quarter = context_chars // 4
    question, gold = question[-quarter:], gold[:quarter]
    room = max(200, context_chars - len(template) - len(question) - len(gold))
    return question, gold, answer[-room:]


def no_answer(detail: str) -> ComponentResult:
    return ComponentResult(score=0.0, verdict=Verdict.NO_ANSWER.value, detail=detail)


class JudgeComponent:
    """judge as a pooled component: jobs made on the loop, asked over HTTP, each judge at its max_concurrency."""

    name = "judge"

    def __init__(self, resources: Resources) -> None:
        self.settings = resources.settings
        self.judges: Judges | None = resources.part("judges")
        self.cache = VerdictCache(resources.settings.judge_cache_size)

    def reads(self, item: ScoreItem, spec: JudgeSpec) -> int:
        return len(item.completion) + len(item.prompt or "") + len(spec.gold)

    def prepare(self, item: ScoreItem, spec: JudgeSpec) -> ComponentResult | JudgeJob:
        answer = answer_text(item, spec, self.settings.answer_window_chars)
        if answer is None:
            return no_answer("the reasoning was opened and never closed")
        template = prompt_of(spec)
        context = self.settings.judges[spec.judge].context_chars
        question, gold, answer = fitted(template, item.prompt or "", spec.gold, answer, context)
        if says_nothing(answer):  # what is sent: with `full`, the end of the completion that fits
            return no_answer("the answer is empty, only punctuation or a reasoning opener: the judge was not asked")
        swapped = fill(template, question, answer, gold) if spec.swap else None
        job = JudgeJob(spec.judge, fill(template, question, gold, answer), swapped, spec.preset, labels_of(spec),
                       spec.on_disagree)  # fmt: skip
        return self.cache.get(job) or job

    async def run(
        self, jobs: Mapping[JudgeJob, Sequence[int]], deadline: float, owner: object
    ) -> dict[JudgeJob, ComponentResult]:
        futures = {asyncio.ensure_future(self._judged(job)): job for job in jobs}
        done = await finished_by(futures, deadline)
        results: dict[JudgeJob, ComponentResult] = {}
        for future, job in futures.items():
            if future not in done:
                results[job] = deadline_exceeded(self.settings)
            elif (failure := future.exception()) is not None:
                log.error("judge job failed", exc_info=failure)
                results[job] = ComponentResult(score=None, verdict=Verdict.INTERNAL_ERROR.value, detail=ITEM_FAILED)
            else:
                results[job] = future.result()
                self.cache.put(job, results[job])
        return results

    def _client(self, name: str) -> JudgeClient:
        if self.judges is None or name not in self.judges.clients:  # checked against VERIFIER_JUDGES: not reached
            raise RuntimeError(f"no judge {name!r}")
        return self.judges.clients[name]

    async def _judged(self, job: JudgeJob) -> ComponentResult:
        client = self._client(job.judge)
        first = await self._label(client, job, job.prompt)
        if isinstance(first, ComponentResult) or first != "correct" or job.swapped is None:
            return first if isinstance(first, ComponentResult) else labelled(first, client.name)
        second = await self._label(client, job, job.swapped)
        if isinstance(second, ComponentResult):
            return second
        if second == "correct":
            return labelled("correct", client.name, "in both orders")
        detail = f"the judge said correct, then {second} with the reference and the answer swapped"
        score = 0.0 if job.on_disagree == "zero" else None
        return ComponentResult(score=score, verdict=Verdict.JUDGE_DISAGREE.value, detail=detail)

    async def _label(self, client: JudgeClient, job: JudgeJob, prompt: str) -> Label | ComponentResult:
        reply = await client.ask(prompt)
        if isinstance(reply, Failure):
            return ComponentResult(score=None, verdict=reply.verdict, detail=reply.reason)
        label = parse_label(job.preset, reply, job.labels)
        if label is None:
            detail = f"the judge's reply holds no {job.preset} label, or more than one"
            return ComponentResult(score=None, verdict=Verdict.JUDGE_UNPARSEABLE.value, detail=detail)
        return label


def labelled(label: Label, judge: str, how: str = "") -> ComponentResult:
    score, verdict = _LABEL_RESULTS[label]
    detail = f"decided by the judge ({judge}{', ' + how if how else ''})"
    return ComponentResult(score=score, verdict=verdict.value, detail=detail)
