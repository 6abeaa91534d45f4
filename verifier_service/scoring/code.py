"""Code answers: find the program in a completion, turn the request's tests into a sandbox submission, and the
sandbox's result into a component (pure functions); `CodeComponent` is code as the engine drives it, a pooled
component (scoring/pooled.py) whose jobs the executor runs.
"""

from __future__ import annotations

import asyncio
import bisect
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from sandbox import AssertTest, CallTest, Checker, Limits, RunResult, RunVerdict, StdioTest, Submission, Test
from verifier_service.schema import AssertTest as AssertTestSpec  # the request's test models, named apart
from verifier_service.schema import CallTest as CallTestSpec  # from the sandbox's classes of the same names
from verifier_service.schema import CodeSpec, ComponentResult, ScoreItem, TestVerdict, Verdict
from verifier_service.schema import StdioTest as StdioSpec
from verifier_service.scoring.extract import final_answer_region
from verifier_service.scoring.pooled import Resources, deadline_exceeded, finished_by

# A line that opens a fenced block: ``` or ~~~ (or longer), an optional language word, anything after it.
_OPENING = re.compile(r"[ \t]*(?P<fence>`{3,}|~{3,})[ \t]*(?P<lang>[\w+-]*)")
_PYTHON_LANGS = {"", "python", "py", "python3", "py3"}
_CPP_LANGS = {"cpp", "c++"}

_RUN_VERDICTS = {
    RunVerdict.COMPILE_ERROR: Verdict.COMPILE_ERROR,
    RunVerdict.NO_CODE: Verdict.NO_CODE,
    RunVerdict.SANDBOX_UNAVAILABLE: Verdict.SANDBOX_UNAVAILABLE,
    RunVerdict.INVALID_TEST: Verdict.INVALID_TEST,
}


@dataclass(frozen=True)
class Program:
    """The program found in a completion; `fenced` False when the answer had no Python block and is taken whole."""

    text: str
    fenced: bool


def extract_program(completion: str, think_tag: str = "think", language: str = "python") -> Program | None:
    """The last fenced Python block after the reasoning, else the whole answer; None when there is none. C++: the
    last ```cpp or ```c++ block, and no whole answer (prose is no program, and a compiler cannot tell it apart).

    The whole answer is a program only if it compiles: the sandbox compiles it, and `code_component` turns its
    compile error into `no_code` (an explanation in prose is no program; a bare program with no fence still runs).

    >>> extract_program("<think>```python\\nx = 1\\n```</think>Here:\\n```python\\nprint(2)\\n```\\nDone.")
    Program(text='print(2)\\n', fenced=True)
    """
    region = final_answer_region(completion, think_tag)
    if region is None:
        return None
    langs = _CPP_LANGS if language == "cpp" else _PYTHON_LANGS
    blocks = [code for lang, code in fenced_blocks(region) if lang.lower() in langs]
    if not blocks and language == "cpp":
        return None
    program = Program(blocks[-1], True) if blocks else Program(region, False)
    return program if program.text.strip() else None


def fenced_blocks(text: str) -> list[tuple[str, str]]:
    """(language word, code) of each fenced block, left to right: from a line opening a fence to the first later
    line holding the same fence alone (spaces and tabs aside); an opening line never closed is not a block.

    In time linear in the text (up to a log factor): model output that repeats an opening line thousands of times
    must not hold the event loop, as a backtracking regex for the same blocks would (quadratically).

    >>> fenced_blocks("```py\\nx = 1\\n```\\n~~~~\\n```\\n~~~~\\n```python\\nopen")
    [('py', 'x = 1\\n'), ('', '```\\n')]
    """
    lines = text.split("\n")
    closing: dict[str, list[int]] = {}  # fence -> the lines that hold it alone, in order
    for index, line in enumerate(lines):
        bare = line.strip(" \t")
        if len(bare) >= 3 and bare[0] in "`~" and bare == bare[0] * len(bare):
            closing.setdefault(bare, []).append(index)
    blocks, index = [], 0
    while index < len(lines) - 1:  # an opening line needs a line break after it
        opening = _OPENING.match(lines[index])
        if opening is not None:
            later = closing.get(opening["fence"], [])
            position = bisect.bisect_right(later, index)
            if position < len(later):
                end = later[position]
                blocks.append((opening["lang"], "".join(line + "\n" for line in lines[index + 1 : end])))
                index = end + 1
                continue
        index += 1
    return blocks


def _test(spec: StdioSpec | CallTestSpec | AssertTestSpec) -> Test:
    if isinstance(spec, StdioSpec):
        return StdioTest(stdin=spec.stdin, stdout=spec.stdout, mode=spec.compare, tolerance=spec.tolerance,
                         hidden=spec.hidden)  # fmt: skip
    if isinstance(spec, AssertTestSpec):
        return AssertTest(code=spec.code, hidden=spec.hidden)
    return CallTest(fn=spec.fn, args=tuple(spec.args), kwargs=dict(spec.kwargs), expected=spec.expected,
                    tolerance=spec.tolerance, hidden=spec.hidden)  # fmt: skip


def submission(program: str, spec: CodeSpec) -> Submission:
    """The sandbox job for a program and the request's code spec (the executor caps limits at server maxima)."""
    defaults = Limits()
    limits = Limits(
        wall_s=spec.timeout_s,
        cpu_s=spec.cpu_s or spec.timeout_s,
        memory_mb=spec.memory_mb,
        max_processes=spec.max_processes or defaults.max_processes,
        max_file_mb=spec.max_file_mb or defaults.max_file_mb,
        max_output_bytes=spec.max_output_bytes or defaults.max_output_bytes,
    )
    tests = tuple(_test(t) for t in spec.tests)
    checker = None
    if spec.checker is not None:
        files = tuple(sorted(spec.checker.files.items()))
        checker = Checker(spec.checker.source, spec.checker.language, files, spec.checker.points)
    return Submission(program=program, tests=tests, limits=limits, language=spec.language, checker=checker)


def code_component(result: RunResult, total: int, fenced: bool = True) -> ComponentResult:
    """Score = passed / total (with a checker's partial credit, the mean of the tests' points); compile errors and
    missing code score 0; an unjudgeable run is null. An answer with no
    code block that does not compile is prose, not a program: `no_code`, not `compile_error`."""
    if not fenced and result.verdict == RunVerdict.COMPILE_ERROR:
        return no_code(total, f"no code block, and the answer is not a Python program ({result.detail})")
    score = result.score
    if result.verdict == RunVerdict.OK:
        verdict = Verdict.PASSED if result.passed == len(result.tests) else Verdict.FAILED
    else:
        verdict = _RUN_VERDICTS[result.verdict]
    tests = [TestVerdict(verdict=t.verdict.value, detail=t.detail) for t in result.tests] or None
    passed = result.passed if score is not None else None
    return ComponentResult(
        score=score, verdict=verdict.value, detail=result.detail, passed=passed, total=total, tests=tests
    )


def no_code(total: int, detail: str) -> ComponentResult:
    return ComponentResult(score=0.0, verdict=Verdict.NO_CODE.value, detail=detail, passed=0, total=total)


# --- In the service: the pooled component (scoring/pooled.py) -------------------------------------------------------


@dataclass(frozen=True)
class CodeJob:
    """A program and its tests as the sandbox runs them; equal (run once) for the same program, found the same way,
    under the same spec."""

    key: str
    submission: Submission = field(compare=False)
    total: int = field(compare=False)
    fenced: bool = field(compare=False)  # False: the whole answer, no code block (not compiling, it is prose: no_code)


class CodeComponent:
    """Code as a pooled component: the program found on the loop, run in the sandbox (the executor caps what runs
    at once), one job per distinct program."""

    def __init__(self, resources: Resources) -> None:
        sandbox = resources.part("sandbox")
        self.settings, self.executor = resources.settings, sandbox.executor if sandbox is not None else None

    def reads(self, item: ScoreItem, spec: CodeSpec) -> int:
        return len(item.completion)

    def prepare(self, item: ScoreItem, spec: CodeSpec) -> ComponentResult | CodeJob:
        program = extract_program(item.completion, spec.think_tag, spec.language)
        if program is None:
            where = "no ```cpp block" if spec.language == "cpp" else "no program"
            return no_code(len(spec.tests), f"{where} after the reasoning")
        key = f"{program.fenced:d}{program.text}\0{spec.model_dump_json()}"
        return CodeJob(key, submission(program.text, spec), len(spec.tests), program.fenced)

    async def run(
        self, jobs: Mapping[CodeJob, Sequence[int]], deadline: float, owner: object
    ) -> dict[CodeJob, ComponentResult]:
        runs = {asyncio.ensure_future(self._run(job.submission)): job for job in jobs}
        done = await finished_by(runs, deadline)
        late = deadline_exceeded(self.settings)
        return {job: code_component(run.result(), job.total, job.fenced) if run in done else late
                for run, job in runs.items()}  # fmt: skip

    async def _run(self, job: Submission) -> RunResult:
        if self.executor is None:
            return RunResult(RunVerdict.SANDBOX_UNAVAILABLE, detail="this server runs no sandbox")
        return await self.executor.run(job)
