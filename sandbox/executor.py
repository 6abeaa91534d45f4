"""What both backends share: validating a submission, driving a runner through a job, turning facts into a result.

A backend only says how to start and destroy one sandbox (a container, a bubblewrap jail, a process); the runner
inside speaks the same JSON-lines protocol everywhere (see runner/__init__.py).
"""

from __future__ import annotations

import asyncio
import base64
import itertools
import json
import logging
import re
import weakref
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import asdict, dataclass, field
from functools import partial
from typing import Any, Generic, TypeVar

from sandbox.api import (
    CPP_FLAGS,
    AssertTest,
    CallTest,
    Limits,
    RunResult,
    RunVerdict,
    SandboxConfig,
    StdioTest,
    Submission,
    Test,
    TestOutcome,
)
from sandbox.compare import CannotJudge, checker_outcome, outcome, output_to_check
from sandbox.compiled import NO_COMPILER, BinaryCache, Built, as_json, binary_key, built
from sandbox.pool import Channel, Pool, Sandbox, SandboxUnavailable
from sandbox.runner import KILL_TIMEOUT_S, Unserializable, encode, native
from sandbox.uids import UidRange, UidsInUse
from sandbox.uids import claim as claim_uids

log = logging.getLogger(__name__)
T = TypeVar("T")

GRACE_S = 2 * KILL_TIMEOUT_S + 5  # beyond a test's wall limit: spawning, killing and wiping before its facts come
SETTLE_TIMEOUT_S = 4 * KILL_TIMEOUT_S + 5  # the clean-up after a job: killing, then wiping three places
STDIO_MODES = ("tokens", "exact", "float")
MIN_TESTS_PER_PART = 8  # a submission with fewer tests runs in one sandbox
LANGUAGES = ("python", "cpp")
CHECKER_ARGV = ("input", "output", "answer")  # testlib's order: the program's output, then the expected answer
RESERVED_FILES = {*CHECKER_ARGV, "main", "main.py", "main.cpp", "diagnostics.txt"}  # the runner writes these


Judge = Callable[[Test, dict[str, Any]], T]  # a test and its facts -> what the caller keeps of them


@dataclass
class JobReport(Generic[T]):
    judged: dict[int, T] = field(default_factory=dict)  # by index in the job's tests
    received: int = 0  # tests whose facts came
    compile_error: str | None = None
    lost_at: int | None = None  # the runner died or hung during this test
    hung: bool = False
    fatal: str | None = None  # the runner reported itself broken (after the facts of the test that broke it)
    invalid: str | None = None  # a test the host cannot judge (CannotJudge)
    # A healthy report ends at "done": the runner still cleans up after the job, and says "clean" (see `settle`).

    @property
    def healthy(self) -> bool:
        return self.lost_at is None and self.fatal is None


Program = str | bytes  # a Python source; or a binary, as its job's JSON value (`as_json`: encoded once per binary)
BIG_LINE = 1 << 20  # a line longer than this is encoded or decoded in a thread, not on the event loop


async def run_job(
    channel: Channel,
    job_id: int,
    program: Program,
    specs: list[dict[str, Any]],
    limits: Limits,
    judge: Callable[[int, dict[str, Any]], T],
    same_program: bool = False,
) -> JobReport[T]:
    """Send one job; judge each test's facts as they come, keeping only the judgement (a test's facts may hold
    megabytes of output: a thousand of them must never be held at once), until the runner says done (or dies, or
    stops answering). A binary (bytes) is the runner's to keep until the next binary: `same_program` says it is the
    one this runner last got, and it is not sent again."""
    report: JobReport[T] = JobReport()
    # the line goes in parts: a binary's JSON (megabytes) is written as it is, never copied into a new line
    binary = isinstance(program, bytes)
    head = json.dumps(
        {"job": job_id, "tests": specs, "limits": asdict(limits), "binary": binary, "same_program": same_program}
    ).encode()
    value = b"null" if same_program else program if isinstance(program, bytes) else json.dumps(program).encode()
    try:
        await channel.send(head[:-1], b',"program":', value, b"}")
    except (OSError, EOFError):  # it died since its last job
        report.lost_at, report.fatal = 0, "the runner was gone"
        return report
    while True:
        try:
            line = await asyncio.wait_for(channel.recv(), limits.wall_s + GRACE_S)
        except TimeoutError:
            report.lost_at, report.hung = report.received, True
            return report
        except (EOFError, ConnectionError):
            done = report.compile_error is not None or report.received == len(specs)
            report.lost_at = None if done else report.received
            report.fatal = report.fatal or "the runner exited"
            return report
        try:
            msg = json.loads(line) if len(line) <= BIG_LINE else await asyncio.to_thread(json.loads, line)
        except (ValueError, RecursionError):  # the runner never sends such a line: it is broken
            report.lost_at, report.fatal = report.received, "the runner sent a line that is not JSON"
            return report
        del line
        if msg.get("job") != job_id:
            continue
        if "facts" in msg:
            report.received += 1
            try:
                report.judged[int(msg["i"])] = judge(int(msg["i"]), msg.pop("facts"))
            except CannotJudge as exc:
                report.invalid = report.invalid or str(exc)
        elif "compile_error" in msg:
            report.compile_error = str(msg["compile_error"])
        elif "fatal" in msg:
            report.fatal = str(msg["fatal"])
        if "done" in msg or "fatal" in msg:
            return report


async def settle(channel: Channel, job_id: int) -> bool:
    """Wait for the runner's word that it has cleaned up after job `job_id` (it answers first and cleans up while
    the host reads the answer); False if it broke instead, died, or did not say."""
    while True:
        try:
            msg = json.loads(await asyncio.wait_for(channel.recv(), SETTLE_TIMEOUT_S))
        except (TimeoutError, EOFError, ConnectionError, ValueError):
            return False
        if msg.get("job") == job_id and msg.get("clean") is True:
            return True
        if "fatal" in msg:
            return False


def _facts(test: Test, facts: dict[str, Any]) -> dict[str, Any]:
    return facts


def _checked_outcome(points: bool, test: Test, facts: dict[str, Any]) -> TestOutcome:
    return checker_outcome(facts, points)


def _encoded(files: dict[str, str | bytes]) -> dict[str, str]:
    """Files as the runner takes them: base64 of their bytes (text as UTF-8)."""
    raw = {name: d.encode("utf-8", "surrogatepass") if isinstance(d, str) else d for name, d in files.items()}
    return {name: base64.b64encode(data).decode("ascii") for name, data in raw.items()}


def checker_spec(test: StdioTest, output: bytes, native: bool) -> dict[str, Any]:
    """A checker's run on one test: testlib's `checker input output answer`, the three as files."""
    files = _encoded({"input": test.stdin, "output": output, "answer": test.stdout})
    return {"kind": "stdio", "stdin": "", "files": files, "argv": list(CHECKER_ARGV), "native": native}


def unusable_checker(result: RunResult) -> RunResult:
    """A checker that does not compile cannot judge anything: the test's fault, never the program's (null)."""
    if result.verdict == RunVerdict.COMPILE_ERROR:
        return RunResult(RunVerdict.INVALID_TEST, detail=f"the checker does not compile: {result.detail}")
    return result


def _judge(tests: list[Test], judge: Judge[T], index: int, facts: dict[str, Any]) -> T:
    return judge(tests[index], facts)


def test_spec(test: Test) -> dict[str, Any]:
    if isinstance(test, StdioTest):
        return {"kind": "stdio", "stdin": test.stdin}
    if isinstance(test, CallTest):
        return {"kind": "call", "fn": test.fn, "args": encode(list(test.args)), "kwargs": encode(dict(test.kwargs))}
    return {"kind": "assert", "code": test.code}


def invalid_test(test: Test) -> str | None:
    """Why a test cannot be run (the tests are trusted input: checking them on the host is safe)."""
    try:
        if isinstance(test, AssertTest):
            compile(test.code, "test.py", "exec", dont_inherit=True)
        elif isinstance(test, CallTest):
            if not test.fn.isidentifier():
                return f"not a function name: {test.fn[:50]!r}"
            encode([list(test.args), dict(test.kwargs)])
        elif test.mode not in STDIO_MODES:
            return f"unknown stdio mode {test.mode!r}"
    except (SyntaxError, ValueError) as exc:
        return f"test code does not compile: {exc}"
    except Unserializable as exc:
        return f"arguments are not plain data: {exc}"
    return None


def invalid_submission(submission: Submission) -> str | None:
    """Why a submission cannot be run: an unknown language, a test the language cannot take, a malformed test."""
    if submission.language not in LANGUAGES:
        return f"unknown language {submission.language[:20]!r}: use one of {', '.join(LANGUAGES)}"
    checker = submission.checker
    if checker is not None:
        if checker.language not in LANGUAGES:
            return f"unknown checker language {checker.language[:20]!r}: use one of {', '.join(LANGUAGES)}"
        for name, _ in checker.files:
            if not re.fullmatch(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}", name) or name in RESERVED_FILES:
                return f"a checker's file needs a plain name, none of {', '.join(sorted(RESERVED_FILES))}"
    for test in submission.tests:
        if (submission.language == "cpp" or checker is not None) and not isinstance(test, StdioTest):
            return "a C++ program, or a checker, takes stdio tests only"
        problem = invalid_test(test)
        if problem:
            return problem
    return None


class PooledExecutor:
    """An Executor over a pool of sandboxes. Subclasses set `name` and implement `create_sandbox`."""

    name = "pooled"
    runner_killable = False  # can a program kill the runner? (only without namespaces); see _collect

    def __init__(self, config: SandboxConfig | None = None) -> None:
        self.config = config or SandboxConfig()
        self.pool = Pool(self.create_sandbox, self.config.pool_size, self.config.jobs_per_sandbox, self.name)
        self.uids: UidRange | None = None  # claimed at start, where sandboxes run as uids of their own
        self._job_ids = itertools.count(1)
        self._cleaning: weakref.WeakKeyDictionary[Sandbox, int] = weakref.WeakKeyDictionary()  # its last job
        # the last binary its runner got, and keeps: a job of the same binary does not send it again
        self._last_binary: weakref.WeakKeyDictionary[Sandbox, bytes] = weakref.WeakKeyDictionary()
        self.binaries = BinaryCache(self.config.compile_cache_mb << 20)  # C++ binaries (compiled.py)
        self.cpp: bool | None = None  # does the sandbox have a C++ compiler? (its runner's hello says)
        self.cpp_pch: bool | None = None  # does its g++ use the precompiled bits/stdc++.h? (None: not known yet)
        self.pch_dir = native.PCH_DIR  # where the runner finds it, in the sandbox's file system
        self._pch_check: asyncio.Future[None] | None = None

    async def create_sandbox(self, slot: int) -> Sandbox:
        raise NotImplementedError

    def needs_uids(self) -> bool:
        """Do the sandboxes run as uids of their own (uid_base + slot)? Then a range is claimed (sandbox/uids.py)."""
        return True

    def uids_seen_in_use(self) -> dict[int, str]:
        """uid -> who runs as it, as far as the backend sees beyond this host's processes (Docker: its engine)."""
        return {}

    def uid(self, slot: int) -> int:
        return (self.uids.first if self.uids is not None else self.config.uid_base) + slot

    async def start(self) -> None:
        if self.needs_uids() and self.uids is None:
            try:
                self.uids = await asyncio.to_thread(self._claim_uids)
            except UidsInUse as exc:
                self.pool.last_error = str(exc)
                log.error("%s", exc)
                return
        await self.pool.start()
        if self._pch_check is None:
            self._pch_check = asyncio.ensure_future(self._check_pch())

    async def prepare_pch(self) -> None:
        """Before the check: the local backend builds the .gch here if the install did not (sandbox/pch.py)."""

    async def _check_pch(self, attempts: int = 3) -> None:
        """Compile one program that includes bits/stdc++.h in a sandbox, with -H and -Winvalid-pch, and read from
        g++'s messages whether it used the precompiled header (cpp_pch, for /readyz). Without it C++ still
        compiles, about 1 s slower a program: said in the log."""
        spec = {"kind": "compile", "flags": [*CPP_FLAGS, *native.PCH_PROBE_FLAGS], "files": {}}
        limits = self.config.compile_limits
        for attempt in range(attempts):
            try:
                if attempt == 0:
                    await self.prepare_pch()
                facts = await self._collect_part(native.PCH_PROBE, (StdioTest("", ""),), [spec], [0], limits, _facts)
                break
            except Exception as exc:  # a speed-up's check: nothing here may fail the executor
                if attempt == attempts - 1:
                    log.warning("could not check the precompiled bits/stdc++.h: %s", exc)
                    return
                await asyncio.sleep(2)
        assert not isinstance(facts, str)
        if facts[0].get("no_compiler"):
            return
        diagnostics = str(facts[0].get("diagnostics") or "")
        used = native.pch_used(diagnostics, self.pch_dir)
        self.cpp_pch = used is True
        if not self.cpp_pch:
            why = next((line for line in diagnostics.splitlines() if "not used because" in line), None)
            log.warning(
                "C++ programs compile without a precompiled bits/stdc++.h (about 1 s more each): %s",
                why or f"there is none at {self.pch_dir} (rebuild the sandbox image; local: make install)",
            )

    def _claim_uids(self) -> UidRange:
        seen = self.uids_seen_in_use()

        def in_use(uids: range) -> str | None:
            return next((f"{seen[uid]} runs as uid {uid}" for uid in uids if uid in seen), None)

        return claim_uids(self.config.uid_base, self.config.pool_size, in_use)

    async def close(self) -> None:
        if self._pch_check is not None:
            self._pch_check.cancel()
        await self.pool.close()
        if self.uids is not None:
            self.uids.release()
            self.uids = None

    def status(self) -> dict[str, Any]:
        uids = None if self.uids is None else str(self.uids)
        return {"backend": self.name, **self.pool.status(), "uids": uids, "cpp": self.cpp, "cpp_pch": self.cpp_pch,
                "binaries": self.binaries.status()}  # fmt: skip

    def hello(self, hello: dict[str, Any]) -> None:
        """What a runner says as it starts: whether its sandbox can compile C++."""
        self.cpp = bool(hello.get("cpp"))

    async def run(self, submission: Submission) -> RunResult:
        if not submission.program.strip():
            return RunResult(RunVerdict.NO_CODE, detail="no code to run")
        problem = invalid_submission(submission)
        if problem:
            return RunResult(RunVerdict.INVALID_TEST, detail=problem)
        limits = submission.limits.capped(self.config.max_limits)
        native = submission.language == "cpp"
        try:
            program = await self._program(submission.language, submission.program)
            if isinstance(program, RunResult):  # a compile error, or no compiler here
                return program
            if submission.checker is None:
                judge = partial(outcome, limits=limits)
                outcomes = await self._collect(program, submission.tests, limits, judge, native)
            else:
                checker = submission.checker
                checker_program = await self._program(checker.language, checker.source, checker.files)
                if isinstance(checker_program, RunResult):
                    return unusable_checker(checker_program)
                outcomes = await self._checked(program, submission, limits, checker_program, checker.language == "cpp")
        except SandboxUnavailable as exc:
            return RunResult(RunVerdict.SANDBOX_UNAVAILABLE, detail=str(exc))
        except CannotJudge as exc:
            return RunResult(RunVerdict.INVALID_TEST, detail=str(exc))
        except Exception:  # a bug of ours, never the program's doing: cannot judge
            log.exception("the %s executor failed", self.name)
            return RunResult(RunVerdict.SANDBOX_UNAVAILABLE, detail="internal error in the sandbox executor")
        if isinstance(outcomes, str):
            return RunResult(RunVerdict.COMPILE_ERROR, detail=outcomes)
        return RunResult(RunVerdict.OK, tuple(outcomes[i] for i in range(len(submission.tests))))

    async def _program(self, language: str, source: str, files: tuple[tuple[str, str], ...] = ()) -> Built:
        """What runs: a Python source as it is, a C++ source's binary (its jobs' JSON), or why there is none."""
        return await self._binary(source, files) if language == "cpp" else source

    async def _binary(self, source: str, files: tuple[tuple[str, str], ...] = ()) -> Built:
        """A C++ source's binary (its jobs' JSON: `as_json`), compiled in a sandbox once per source, files and flags,
        or why there is none."""
        if self.cpp is False:
            return RunResult(RunVerdict.SANDBOX_UNAVAILABLE, detail=NO_COMPILER)
        return await self.binaries.get(binary_key(source, CPP_FLAGS, files), partial(self._compile, source, files))

    async def _compile(self, source: str, files: tuple[tuple[str, str], ...]) -> tuple[Built, bool]:
        limits = self.config.compile_limits
        spec = {"kind": "compile", "flags": list(CPP_FLAGS), "files": _encoded(dict(files))}
        facts = await self._collect_part(source, (StdioTest("", ""),), [spec], [0], limits, _facts)
        assert not isinstance(facts, str)  # a compile job's facts never say compile_error: they say diagnostics
        binary, keep = built(facts[0], limits)
        if isinstance(binary, str):  # encoded for its jobs once, here, and off the event loop
            try:
                return await asyncio.to_thread(as_json, binary), keep
            except ValueError as exc:
                return RunResult(RunVerdict.SANDBOX_UNAVAILABLE, detail=str(exc)), False
        return binary, keep

    async def _checked(
        self, program: Program, submission: Submission, limits: Limits, checker: Program, checker_native: bool
    ) -> dict[int, TestOutcome] | str:
        """Run the program on each test, and the checker on each test the program ran to a clean end as soon as it
        did, as `checker input output answer` in a sandbox (files in its fresh scratch dir). The tests are split
        over parts as `_collect` splits them; each part takes its tests one by one, program then checker, so the
        host holds at most one program output per part (per sandbox) at a time: verdicts, not outputs."""
        tests = submission.tests
        specs = _test_specs(tests, submission.language == "cpp")
        points = submission.checker is not None and submission.checker.points
        check = partial(self._check_one, checker, tests, checker_native, points)
        return await self._over_parts(
            len(specs), lambda part: self._checked_part(program, tests, specs, part, limits, check)
        )

    async def _checked_part(
        self,
        program: Program,
        tests: tuple[Test, ...],
        specs: list[dict[str, Any]],
        indices: list[int],
        limits: Limits,
        check: Callable[[int, bytes], Awaitable[TestOutcome]],
    ) -> dict[int, TestOutcome] | str:
        """One part's tests in order: the program's run, then (a clean run) the checker's, before the next test."""
        outcomes: dict[int, TestOutcome] = {}
        for i in indices:
            ran = await self._collect_part(program, tests, specs, [i], limits, partial(output_to_check, limits=limits))
            if isinstance(ran, str):
                return ran
            result = ran.pop(i)
            outcomes[i] = await check(i, result) if isinstance(result, bytes) else result
            del ran, result  # the output goes as soon as the checker has it
        return outcomes

    async def _check_one(
        self, checker: Program, tests: tuple[Test, ...], checker_native: bool, points: bool, i: int, output: bytes
    ) -> TestOutcome:
        """The checker's verdict on test i's output."""
        test = tests[i]
        assert isinstance(test, StdioTest)  # invalid_submission: a checker takes stdio tests only
        spec = checker_spec(test, output, checker_native)
        del output
        judge = partial(_checked_outcome, points)
        checked = await self._collect_part(checker, (test,), [spec], [0], self.config.checker_limits, judge)
        if isinstance(checked, str):  # a Python checker that does not compile
            raise CannotJudge(f"the checker does not compile: {checked}")
        return checked[0]

    async def _collect(
        self,
        program: Program,
        tests: tuple[Test, ...],
        limits: Limits,
        judge: Judge[T],
        native: bool = False,
        specs: list[dict[str, Any]] | None = None,
    ) -> dict[int, T] | str:
        """What `judge` makes of every test's facts (`outcome`: its verdict), or the compile error. Many tests are
        split over several sandboxes at once (a long CodeContests suite with timeouts should not run serially when
        sandboxes sit idle). A test's facts are judged as they arrive and then dropped."""
        specs = _test_specs(tests, native) if specs is None else specs
        return await self._over_parts(
            len(specs), lambda part: self._collect_part(program, tests, specs, part, limits, judge)
        )

    async def _over_parts(
        self, count: int, run_part: Callable[[list[int]], Coroutine[Any, Any, dict[int, T] | str]]
    ) -> dict[int, T] | str:
        """Tests 0..count-1 split into parts (at most one per sandbox, each of at least MIN_TESTS_PER_PART tests),
        every part run at once by `run_part`; the parts' results merged, or the first compile error a part gives."""
        n = min(self.pool.size, max(1, count // MIN_TESTS_PER_PART))
        parts = [list(range(count))[p::n] for p in range(n)]
        try:
            async with asyncio.TaskGroup() as group:  # a part that fails cancels the others (their sandboxes go)
                tasks = [group.create_task(run_part(part)) for part in parts]
        except* SandboxUnavailable as failed:
            raise failed.exceptions[0] from None
        except* CannotJudge as invalid:
            raise invalid.exceptions[0] from None
        judged: dict[int, T] = {}
        for task in tasks:
            part = task.result()
            if isinstance(part, str):
                return part
            judged.update(part)
        return judged

    async def _collect_part(
        self,
        program: Program,
        tests: tuple[Test, ...],
        specs: list[dict[str, Any]],
        indices: list[int],
        limits: Limits,
        judge: Judge[T],
    ) -> dict[int, T] | str:
        """What `judge` makes of these tests' facts, moving on to a fresh sandbox whenever one breaks.

        A runner that dies mid-test with no explanation gets that test one more try on a fresh sandbox: in a PID
        namespace the runner is PID 1 and nothing inside can kill it, so that is the infrastructure. A second death
        is SandboxUnavailable there, and a failed test where the program itself can kill the runner. A runner that
        stops answering fails the test as a timeout. A sandbox whose clean-up after its last job failed is
        replaced before this job starts there, and that counts against nobody.
        """
        judged: dict[int, T] = {}
        retried: set[int] = set()
        while todo := [i for i in indices if i not in judged]:
            async with self.pool.lease() as sandbox:
                last = self._cleaning.pop(sandbox, None)
                if last is not None and not await settle(sandbox.channel, last):
                    log.info("replacing a %s sandbox: it broke cleaning up after its last job", self.name)
                    self.pool.retire(sandbox)
                    continue
                job_id = next(self._job_ids)
                job, job_tests = [specs[i] for i in todo], [tests[i] for i in todo]
                same = isinstance(program, bytes) and self._last_binary.get(sandbox) is program
                if isinstance(program, bytes):
                    self._last_binary[sandbox] = program
                judging = partial(_judge, job_tests, judge)
                report = await run_job(sandbox.channel, job_id, program, job, limits, judging, same)
                if report.healthy:
                    self._cleaning[sandbox] = job_id
                else:
                    log.info("replacing a %s sandbox: %s", self.name, report.fatal or "it stopped answering")
                    self.pool.retire(sandbox)
            if report.compile_error is not None:
                return report.compile_error
            if report.invalid is not None:
                raise CannotJudge(report.invalid)
            if report.fatal is not None and not report.received and report.lost_at is None:
                report.lost_at = 0  # broken before its first test ran: count it, or a broken host loops forever
            judged.update((todo[i], j) for i, j in report.judged.items())
            if report.lost_at is not None and report.lost_at < len(todo):
                lost = todo[report.lost_at]
                if report.hung:
                    judged[lost] = judge(tests[lost], {"status": "timeout"})
                elif lost in retried and self.runner_killable:
                    judged[lost] = judge(tests[lost], {"status": "broken", "detail": "the program killed its sandbox"})
                elif lost in retried:
                    raise SandboxUnavailable(f"the {self.name} sandbox died twice while running this submission")
                retried.add(lost)
        return judged


def _test_specs(tests: tuple[Test, ...], native: bool) -> list[dict[str, Any]]:
    """Each test's spec for the runner; native: the program is a binary (a compiled C++ program)."""
    return [dict(test_spec(t), native=True) if native else test_spec(t) for t in tests]
