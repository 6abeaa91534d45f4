"""C++ on the host's side: what a compile job's facts mean, and the cache of binaries.

A C++ program is compiled once per distinct source and flags, in a sandbox (runner/native.py: g++ under its own
limits; never in this process), and the binary comes back here. The cache holds it by the hash of flags and source,
across requests, up to a size; every test gets its own copy written into its own scratch dir, so no submission can
write a binary that another run executes. Compile errors are cached too; a compiler that overran its limits is not
(that may be the host's load, not the source), and one the sandbox could not run is null (see `built`).
"""

from __future__ import annotations

import asyncio
import hashlib
import re
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from typing import Any

from sandbox.api import Limits, RunResult, RunVerdict

DIAGNOSTIC_LINES = 12  # the compiler's first lines shown in a compile error's detail
DIAGNOSTIC_CHARS = 1500
NO_COMPILER = "this sandbox has no C++ compiler (g++): rebuild the sandbox image, or install g++ for the local backend"

Built = str | bytes | RunResult  # the binary: base64 from `built`, its job's JSON once cached (`as_json`); or why not
Build = Callable[[], Awaitable[tuple[Built, bool]]]  # -> (what it built, may it be cached)


def binary_key(source: str, flags: tuple[str, ...], files: tuple[tuple[str, str], ...] = ()) -> str:
    """The hash of what a compile reads: flags, the source, and the files beside it (a checker's testlib.h)."""
    digest = hashlib.sha256()
    for part in (*flags, source, *(p for file in sorted(files) for p in file)):
        data = part.encode("utf-8", "surrogatepass")
        digest.update(len(data).to_bytes(8, "big") + data)
    return digest.hexdigest()


def built(facts: dict[str, Any], limits: Limits) -> tuple[Built, bool]:
    """What a compile job's facts say: the binary, a compile error, or that the sandbox cannot compile; and whether
    the answer is the source's own (cacheable).

    Only what the source alone decides is cached: a binary, or the compiler's own diagnostics. A compiler that
    overran its limits (wall clock, CPU, memory, file size) is `compile_error` but not cached: near a limit the outcome
    depends on the machine and its load, and a cached 0 would stand for good; one that ran past its wall clock
    starved of CPU is null (`overran_wall_clock`). A compiler the sandbox could not run
    (it did not start, a fork failed, the kernel's OOM killer or a SIGKILL took it) is the infrastructure's failure:
    `sandbox_unavailable` (null), never cached."""
    if facts.get("no_compiler"):
        return RunResult(RunVerdict.SANDBOX_UNAVAILABLE, detail=NO_COMPILER), False
    status = facts.get("status")
    if status == "timeout":
        return overran_wall_clock(facts, limits), False
    if status not in ("ok", "output_limit"):
        detail = f"the compile sandbox broke: {facts.get('detail')}"
        return RunResult(RunVerdict.SANDBOX_UNAVAILABLE, detail=detail), False
    binary = facts.get("binary_b64")
    if isinstance(binary, str):
        return binary, True
    diagnostics = facts.get("diagnostics")
    if facts.get("oom_killed") is True:
        return RunResult(RunVerdict.SANDBOX_UNAVAILABLE, detail=OOM_KILLED), False
    if not isinstance(diagnostics, str):  # C died without a word: the compiler ran past its memory or CPU limit
        detail = f"the compiler was killed (limits: {limits.cpu_s:g} s of CPU, {limits.memory_mb} MB)"
        return RunResult(RunVerdict.COMPILE_ERROR, detail=detail), False
    lines = diagnostics.splitlines()
    if facts.get("compiler_status") == -1 or (lines and all(_infra(line) for line in lines)):
        # the compiler did not start (native.py says so in its status, which no source writes), or only the driver
        # spoke: a source's own diagnostic always comes with a line of its own (its place), so none is forged here
        detail = f"the sandbox could not run the compiler: {first_lines(diagnostics)}"
        return RunResult(RunVerdict.SANDBOX_UNAVAILABLE, detail=detail), False
    error = RunResult(RunVerdict.COMPILE_ERROR, detail=first_lines(diagnostics) or "the compiler failed")
    overran = any(_LIMIT_LINE.search(line) or _infra(line) for line in lines[-3:])
    return error, not overran  # a source could write such a line itself: it only goes uncached


# What the driver (g++) says when it could not run a compiler pass (a fork failed) or the pass was SIGKILLed (the OOM
# killer), and its closing line.
_INFRA_LINE = re.compile(
    r"[\w.+/-]*g\+\+[\w.+-]*: fatal error: (?:Killed signal terminated program \S+|cannot execute '[^']*': .+)"
    r"|compilation terminated\."
)
# What a compiler pass says when it overran its own limits: CPU (SIGXCPU), memory (RLIMIT_AS), file size (SIGXFSZ).
_LIMIT_LINE = re.compile(
    r"CPU time limit exceeded signal terminated|File size limit exceeded signal terminated|memory exhausted"
    r"|out of memory allocating|std::bad_alloc"
)


STARVED_SHARE = 0.5  # of the wall limit: less CPU than this, and at least this long waiting for one, is starved


def overran_wall_clock(facts: dict[str, Any], limits: Limits) -> RunResult:
    """A compiler past its wall clock: whose fault? S measured its processes as it stopped them (supervisor.py:
    `tree_cpu_s`, their CPU time; `tree_wait_s`, their time runnable but waiting for a CPU). A compile bomb burns
    CPU: at least half the wall limit on CPU is `compile_error`. Less CPU than that, and at least half the wall limit
    spent waiting for a CPU, is a machine too loaded to run it (a correct program's compile starved on a busy host):
    `sandbox_unavailable` (null). Neither (the compiler slept: a source can block it on a pipe it opens itself,
    `#include "/proc/self/fd/1"` under -pipe) is the source's: `compile_error`. No measurement (the runner stopped
    answering: it never enforced the wall clock) is the infrastructure's: null."""
    wall = f"{limits.wall_s:g} s wall-clock limit"
    cpu, wait = facts.get("tree_cpu_s"), facts.get("tree_wait_s")
    if not isinstance(cpu, int | float) or not isinstance(wait, int | float):
        return RunResult(RunVerdict.SANDBOX_UNAVAILABLE, detail=f"the compile sandbox stopped answering ({wall})")
    used = f"{cpu:.1f} s of CPU, {wait:.1f} s waiting for a CPU"
    if cpu < STARVED_SHARE * limits.wall_s <= wait:
        detail = f"the machine was too loaded to compile within the {wall} ({used})"
        return RunResult(RunVerdict.SANDBOX_UNAVAILABLE, detail=detail)
    return RunResult(RunVerdict.COMPILE_ERROR, detail=f"the compiler ran past its {wall} ({used})")


def _infra(line: str) -> bool:
    """A line of the driver's own (_INFRA_LINE). Those are short; a long line is the source's (a `#line` file name
    of "g++g++...": on it the pattern backtracks in quadratic time, on the event loop)."""
    return len(line) <= 512 and _INFRA_LINE.fullmatch(line) is not None


OOM_KILLED = "the compiler was killed by the sandbox's OOM killer (the machine's memory, not the source's)"


def first_lines(text: str) -> str:
    """The compiler's first lines, cut short."""
    head = "\n".join(text.splitlines()[:DIAGNOSTIC_LINES])
    return head if len(head) <= DIAGNOSTIC_CHARS else head[: DIAGNOSTIC_CHARS - 3] + "..."


class BinaryCache:
    """Built programs by key, least recently used first out past `max_bytes`; one build per key at a time (a GRPO
    group's identical completions wait for the same compile), stopped when every caller waiting for it gave up (an
    item's batch deadline passed: no compile runs on past the deadline of every item that wants it)."""

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes, self.size = max_bytes, 0
        self.hits = self.misses = 0
        self._items: OrderedDict[str, Built] = OrderedDict()
        self._pending: dict[str, asyncio.Future[tuple[Built, bool]]] = {}
        self._waiting: dict[asyncio.Future[tuple[Built, bool]], int] = {}  # callers waiting for each build

    async def get(self, key: str, build: Build) -> Built:
        if key in self._items:
            self.hits += 1
            self._items.move_to_end(key)
            return self._items[key]
        task = self._pending.get(key)
        if task is None:
            self.misses += 1
            task = asyncio.ensure_future(build())
            self._pending[key] = task
            task.add_done_callback(lambda done: self._done(key, done))
        else:
            self.hits += 1
        # shielded: a caller that gives up (its deadline) does not cancel the build the others wait for; when the
        # last one gives up, nobody wants it, and the build stops (its sandbox is replaced: the compiler dies)
        self._waiting[task] = self._waiting.get(task, 0) + 1
        try:
            return (await asyncio.shield(task))[0]
        finally:
            self._waiting[task] -= 1
            if not self._waiting[task]:
                del self._waiting[task]
                if not task.done():
                    task.cancel()
                    # the build ends a step or more later: a caller that asks for this key meanwhile starts its own
                    # build, and never waits on this one (its CancelledError would be that caller's, uncancelled)
                    if self._pending.get(key) is task:
                        del self._pending[key]

    def _done(self, key: str, task: asyncio.Future[tuple[Built, bool]]) -> None:
        if self._pending.get(key) is task:  # else a newer build of the key (this one was given up) holds the place
            del self._pending[key]
        if task.cancelled() or task.exception() is not None:
            return
        value, keep = task.result()
        if keep:
            self._put(key, value)

    def _put(self, key: str, value: Built) -> None:
        size = _size(value)
        if size > self.max_bytes:
            return
        self._items[key] = value
        self.size += size
        while self.size > self.max_bytes:
            _, old = self._items.popitem(last=False)
            self.size -= _size(old)

    def status(self) -> dict[str, int]:
        return {"entries": len(self._items), "bytes": self.size, "hits": self.hits, "misses": self.misses,
                "compiling": len(self._pending)}  # fmt: skip


def as_json(binary_b64: str) -> bytes:
    """The binary as its jobs' "program" value: a JSON string, encoded once per binary (not once per job: a 16 MB
    binary is 21 MB of base64, and its json.dumps takes ~0.1 s, on the event loop that every request shares).
    Base64's alphabet needs no escape in JSON; a string with anything else is not base64 and is refused."""
    if not binary_b64.isascii() or not _BASE64.fullmatch(binary_b64):
        raise ValueError("the compile job's binary_b64 is not base64")
    return b'"' + binary_b64.encode("ascii") + b'"'


_BASE64 = re.compile(r"[A-Za-z0-9+/]*={0,2}")


def _size(value: Built) -> int:
    return len(value) if isinstance(value, (str, bytes)) else len(value.detail or "") + 64
