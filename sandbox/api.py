"""The sandbox's interface: what an executor is asked to run, and what it reports.

The sandbox knows nothing about HTTP or rewards. It runs an untrusted program against tests under limits and
returns one outcome per test. Verdicts are decided on the trusted side (the host process, from facts the in-sandbox
supervisor and tester report), never from exit status or output that the untrusted code controls.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field, fields, replace
from enum import StrEnum
from typing import Any, Protocol

from sandbox.runner import native


class TestVerdict(StrEnum):
    __test__ = False  # not a pytest test class, though tests import it

    PASSED = "passed"
    WRONG_ANSWER = "wrong_answer"
    RUNTIME_ERROR = "runtime_error"
    TIMEOUT = "timeout"
    MEMORY_LIMIT = "memory_limit"
    OUTPUT_LIMIT = "output_limit"


class RunVerdict(StrEnum):
    OK = "ok"  # the program ran; see the per-test outcomes
    NO_CODE = "no_code"  # the program is empty: score 0, nothing ran
    COMPILE_ERROR = "compile_error"  # the program does not compile (or its compiler overran its limits): score 0
    SANDBOX_UNAVAILABLE = "sandbox_unavailable"  # cannot judge: the executor could not run it (score null)
    INVALID_TEST = "invalid_test"  # cannot judge: a test is malformed or needs what cannot cross the boundary (null)

    @property
    def judged(self) -> bool:
        """False where the verifier cannot judge: the score must be null, never 0."""
        return self not in (RunVerdict.SANDBOX_UNAVAILABLE, RunVerdict.INVALID_TEST)


@dataclass(frozen=True)
class Limits:
    """Per-test limits. The wall clock starts when the test starts running, not when it is queued."""

    wall_s: float = 5.0
    cpu_s: float = 5.0
    memory_mb: int = 512  # address space of the program's process (RLIMIT_AS)
    max_processes: int = 128  # processes and threads of the program, zombies included: room for ordinary pools
    max_file_mb: int = 16  # largest file it may write
    max_output_bytes: int = 4 * 1024 * 1024  # stdout, and stderr, each

    def capped(self, maxima: Limits) -> Limits:
        """These limits, each no higher than the server's maximum."""
        return replace(self, **{f.name: min(getattr(self, f.name), getattr(maxima, f.name)) for f in fields(self)})


@dataclass(frozen=True)
class StdioTest:
    stdin: str
    stdout: str
    mode: str = "tokens"  # "tokens" (whitespace-separated), "exact", or "float" (tokens, numbers with tolerance)
    tolerance: float = 1e-6
    hidden: bool = False  # a detail never shows the expected output, nor where the output differs from it


@dataclass(frozen=True)
class CallTest:
    """`fn(*args, **kwargs)` must return `expected` (JSON semantics: a tuple equals a list, 240.0 equals 240, True
    is not 1). With `tolerance` > 0, numbers match when math.isclose(rel_tol=abs_tol=tolerance)."""

    fn: str
    args: tuple[Any, ...] = ()
    kwargs: dict[str, Any] = field(default_factory=dict)
    expected: Any = None
    tolerance: float = 0.0
    hidden: bool = False  # a detail never shows the expected value


@dataclass(frozen=True)
class AssertTest:
    code: str  # HumanEval/MBPP style: run after the program, against the program's names
    hidden: bool = False  # a detail never quotes what the test's code raised (its message may hold expected values)


Test = StdioTest | CallTest | AssertTest


@dataclass(frozen=True)
class Checker:
    """A program that judges each stdio test's output in place of the comparison (testlib's convention): run in a
    sandbox as `checker input output answer` (the test's stdin, the program's stdout, the expected stdout); exit 0
    accepted, 1 wrong answer, 2 presentation error; anything else is the checker's failure (invalid_test, null)."""

    source: str
    language: str = "python"  # or "cpp"
    files: tuple[tuple[str, str], ...] = ()  # (name, text) next to the source when it compiles: testlib.h
    # partial credit (CMS style): an accepting checker's first stdout line is the test's score, in [0, 1]
    points: bool = False


@dataclass(frozen=True)
class Submission:
    program: str
    tests: tuple[Test, ...]
    limits: Limits = Limits()
    language: str = "python"  # or "cpp": compiled in the sandbox (CPP_FLAGS), then run on stdio tests only
    checker: Checker | None = None  # judges stdio tests in place of the comparison


def encodable(text: str | None) -> str | None:
    """`text` with whatever UTF-8 cannot encode (lone surrogates) escaped: `\\ud800`.

    A detail may quote what the program controls (an exception message, a value, a file name), and Python's text
    can hold lone surrogates that no UTF-8 JSON can: one such detail would fail the whole batch's response.
    """
    return None if text is None else text.encode("utf-8", "backslashreplace").decode("utf-8")


@dataclass(frozen=True)
class TestOutcome:
    __test__ = False  # not a pytest test class, though tests import it

    verdict: TestVerdict
    detail: str | None = None  # short, human, never the submitted code or a traceback longer than a line
    wall_s: float | None = None
    points: float | None = None  # a checker's partial credit, in [0, 1] (Checker.points); None: 1 if passed, else 0

    @property
    def score(self) -> float:
        """The test's share of credit: the checker's points where it gave some, else 1 for a pass and 0 otherwise."""
        return self.points if self.points is not None else float(self.verdict == TestVerdict.PASSED)

    def __post_init__(self) -> None:  # the one place every detail passes, whichever fact it quotes: see encodable
        object.__setattr__(self, "detail", encodable(self.detail))


@dataclass(frozen=True)
class RunResult:
    verdict: RunVerdict
    tests: tuple[TestOutcome, ...] = ()
    detail: str | None = None  # a compile error quotes the program's own text

    def __post_init__(self) -> None:
        object.__setattr__(self, "detail", encodable(self.detail))

    @property
    def passed(self) -> int:
        return sum(t.verdict == TestVerdict.PASSED for t in self.tests)

    @property
    def score(self) -> float | None:
        """The mean of the tests' scores (passed / total, where no checker gives partial credit); 0.0 for no code or
        a compile error; None where the verifier cannot judge."""
        if not self.verdict.judged:
            return None
        return (
            sum(t.score for t in self.tests) / len(self.tests) if self.verdict == RunVerdict.OK and self.tests else 0.0
        )


CPP_FLAGS = native.CPP_FLAGS  # -O2 -std=gnu++17 -DONLINE_JUDGE -pipe, as Codeforces and open-r1 compile

# A Docker backend names its sandbox containers `<pool name>-sandbox-<slot>`, and Docker takes a container name only
# when it matches [a-zA-Z0-9][a-zA-Z0-9_.-]+ (ASCII): a pool name is such a name itself, 64 characters at most.

POOL_NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$"


def pool_name(text: str) -> str:
    """A pool name (POOL_NAME_PATTERN) made from any text: other characters become '-', the first is a letter or
    digit ('v' is put before one that is not), at most 64.

    >>> pool_name("proj-verifier-1"), pool_name("stack_verifier.2"), pool_name("café-1"), pool_name("_x")
    ('proj-verifier-1', 'stack_verifier.2', 'caf--1', 'v_x')
    """
    name = re.sub(r"[^A-Za-z0-9_.-]", "-", text)
    return (name if name[:1].isascii() and name[:1].isalnum() else f"v{name}")[:64]


@dataclass(frozen=True)
class SandboxConfig:
    """How an executor is set up; per-request limits are capped at `max_limits`."""

    pool_size: int = field(default_factory=lambda: os.cpu_count() or 1)  # sandboxes running tests at once
    max_limits: Limits = Limits(wall_s=60, cpu_s=60, memory_mb=8192, max_processes=256, max_file_mb=256,
                                max_output_bytes=64 * 1024 * 1024)  # fmt: skip
    jobs_per_sandbox: int = 1000  # a sandbox is replaced after this many submissions (defence in depth)
    start_timeout_s: float = 60.0  # for one sandbox to come up
    scratch_mb: int = 256  # size of each sandbox's tmpfs (/tmp), where scratch dirs live
    image: str = "verifier-sandbox:latest"  # docker: the sandbox image (sandbox/image/Dockerfile)
    pool_name: str = "default"  # docker: containers are labelled with it; leftovers with this name are removed
    uid_base: int = 10001  # sandbox i runs as uid_base + i (docker; local as root); distinct per service on a host
    require_isolation: bool = False  # local: refuse to start without bubblewrap instead of warning
    local_python: str | None = None  # local: the interpreter in the sandbox (default: the first that works)
    # C++: the compiler's limits (max_file_mb caps the binary and every file it writes), and the host's cache of
    # binaries (by the hash of source and flags, across requests), in MB.
    compile_limits: Limits = Limits(wall_s=30, cpu_s=20, memory_mb=1024, max_processes=16, max_file_mb=16,
                                    max_output_bytes=1 << 20)  # fmt: skip
    compile_cache_mb: int = 256
    checker_limits: Limits = Limits(wall_s=10, cpu_s=10, memory_mb=1024, max_output_bytes=1 << 20)


class Executor(Protocol):
    """Runs submissions. `run` never raises for anything the untrusted code does; infrastructure failures
    come back as `RunVerdict.SANDBOX_UNAVAILABLE`."""

    name: str

    async def start(self) -> None: ...

    async def run(self, submission: Submission) -> RunResult: ...

    async def close(self) -> None: ...

    def status(self) -> dict[str, Any]:
        """For /readyz: {"ready": bool, "isolation": "...", "warnings": [...], ...}."""
        ...
