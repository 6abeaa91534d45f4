"""The local backend: the same resident runner, in bubblewrap jails on this host (or, without bubblewrap, in plain
processes with rlimits only, which it says loudly).

With bubblewrap each sandbox is a jail with its own user, PID, network, IPC, UTS and cgroup namespaces: no network,
/usr read-only and nothing else of the host's files, a private size-capped /tmp and /dev/shm, no capabilities, no new
privileges, no nested user namespaces, and the runner as PID 1 (nothing inside can signal it). When the service runs
as root, each jail runs as its own unprivileged uid (uid_base + slot), never as root.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import logging
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import zipapp
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sandbox import pch
from sandbox.api import SandboxConfig
from sandbox.executor import PooledExecutor
from sandbox.runner import native, proc_pids

log = logging.getLogger(__name__)

RUNNER = Path(__file__).with_name("runner")  # the package; it runs as a zipapp, as in the image
IN_JAIL_RUNNER = "/opt/sandbox/runner.pyz"
ENV = {"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8"}
PROBE = "import ctypes, json, resource, select, socket; print('ok')"
WEAK = (
    "local sandbox WITHOUT ISOLATION (bubblewrap is missing or cannot run here): untrusted code runs as plain "
    "processes with rlimits only; it can reach the network, read what this host lets its uid read{extra}. "
    "Install bubblewrap (apt-get install bubblewrap) or use the docker backend."
)


@dataclass(frozen=True)
class Plan:
    """How sandboxes are started: the interpreter, and bubblewrap or not."""

    python: str
    bwrap: str | None
    disable_userns: bool = False
    runner: bytes = b""  # the runner's zipapp, built once: every sandbox of an executor runs the same code
    pch: Path | None = None  # the host's directory for the precompiled bits/stdc++.h (sandbox/pch.py), if any


class ProcessChannel:
    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        assert proc.stdin is not None and proc.stdout is not None
        self._stdin, self._stdout = proc.stdin, proc.stdout

    async def send(self, *parts: bytes) -> None:
        for part in (*parts, b"\n"):  # a line in parts: none is copied into one line
            self._stdin.write(part)
        await self._stdin.drain()

    async def recv(self) -> bytes:
        line = await self._stdout.readline()
        if not line.endswith(b"\n"):
            raise EOFError("the runner exited")
        return line[:-1]


class LocalSandbox:
    def __init__(self, slot: int, proc: asyncio.subprocess.Process, scratch: str | None, uid: int | None) -> None:
        self.slot, self.proc, self.channel = slot, proc, ProcessChannel(proc)
        self._scratch, self._uid = scratch, uid
        self._stderr = asyncio.ensure_future(_log_lines(proc.stderr, slot))

    async def destroy(self) -> None:
        if self.proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):  # bwrap's death takes its whole PID namespace along
                os.killpg(self.proc.pid, signal.SIGKILL)
            await self.proc.wait()
        self._stderr.cancel()
        if self._uid is not None and self._scratch is not None:  # no namespace: find leftovers by their uid
            await asyncio.to_thread(kill_uid, self._uid)
        if self._scratch is not None:
            await asyncio.to_thread(shutil.rmtree, self._scratch, True)


async def _log_lines(stream: asyncio.StreamReader | None, slot: int) -> None:
    while stream is not None and (line := await stream.readline()):
        log.warning("sandbox %d: %s", slot, line.decode(errors="replace").rstrip())


def kill_uid(uid: int) -> None:
    """SIGKILL every process of `uid` (a uid used by one sandbox only), until none is left."""
    for _ in range(100):
        found = [p for p in proc_pids() if real_uid(p) == uid]
        if not found:
            return
        for pid in found:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)


def real_uid(pid: int) -> int | None:
    """The real uid (/proc/PID itself belongs to root when the process is not dumpable)."""
    try:
        with open(f"/proc/{pid}/status") as f:
            return next(int(line.split()[1]) for line in f if line.startswith("Uid:"))
    except (OSError, StopIteration, ValueError, IndexError):
        return None


class LocalExecutor(PooledExecutor):
    """Executor on this host. `start()` picks bubblewrap when it works here, else rlimits only (see status())."""

    name = "local"

    def __init__(self, config: SandboxConfig | None = None, *, use_bwrap: bool = True) -> None:
        super().__init__(config)
        self._use_bwrap = use_bwrap
        self.plan: Plan | None = None
        self.warnings: list[str] = []

    @property
    def _root(self) -> bool:
        return os.geteuid() == 0

    def needs_uids(self) -> bool:
        return self._root  # not root: the sandboxes run as the service's own uid

    def _uid(self, slot: int) -> int | None:
        return self.uid(slot) if self._root else None

    async def start(self) -> None:
        try:
            self.plan = await asyncio.to_thread(self._choose_plan)
        except RuntimeError as exc:
            self.pool.last_error = str(exc)
            log.error("%s", exc)
            return
        if self.plan.pch is not None and self.plan.bwrap is None:
            self.pch_dir = str(self.plan.pch)  # no jail: the runner reads it where it is
        if self.plan.bwrap is None:
            extra = "" if self._root else " and signal or kill any process of the service's own uid"
            self.warnings.append(WEAK.format(extra=extra))
            log.warning("%s", self.warnings[-1])
            self.runner_killable = not self._root
            if self.config.require_isolation:
                self.pool.last_error = "bubblewrap is required (require_isolation) but cannot run here"
                return
        await super().start()

    async def prepare_pch(self) -> None:
        """Build the host's .gch if the install did not (sandboxes bind its directory already, and pick it up)."""
        if self.plan is not None and self.plan.pch is not None and not pch.present(self.plan.pch):
            problem = await asyncio.to_thread(pch.ensure, self.plan.pch)
            if problem is not None:
                log.warning("%s", problem)

    def status(self) -> dict[str, Any]:
        isolation = "none" if self.plan is None else ("bubblewrap" if self.plan.bwrap else "rlimits")
        return {**super().status(), "isolation": isolation, "warnings": list(self.warnings)}

    def _choose_plan(self) -> Plan:
        pythons = [self.config.local_python] if self.config.local_python else _python_candidates()
        bwrap = shutil.which("bwrap") if self._use_bwrap else None
        runner = runner_archive()
        pch_dir = _pch_dir()
        if bwrap:
            disable_userns = _bwrap_version(bwrap) >= (0, 8)
            for python in pythons:
                plan = Plan(python, bwrap, disable_userns, runner, pch_dir)
                if self._probe(self._argv(plan, 0, scratch=None, runner_fd=None, probe=True), 0):
                    return plan
            log.warning("bubblewrap is installed but cannot run a sandbox here (no unprivileged user namespaces?)")
        for python in pythons:
            if self._probe([python, "-I", "-c", PROBE], 0):
                return Plan(python, None, runner=runner, pch=pch_dir)
        raise RuntimeError(f"no Python interpreter runs for the sandbox user: tried {pythons}")

    def _probe(self, argv: list[str], slot: int) -> bool:
        try:
            done = subprocess.run(argv, capture_output=True, timeout=30, env=ENV, **self._user_kwargs(slot))
        except (OSError, subprocess.TimeoutExpired):
            return False
        return done.returncode == 0 and done.stdout.strip() == b"ok"

    def _cpu(self, slot: int) -> list[str]:
        """Sandbox i gets CPU i (round robin): a neighbour's threads can never slow an honest program down."""
        cpus = sorted(os.sched_getaffinity(0))
        return ["--cpu", str(cpus[slot % len(cpus)])]

    def _user_kwargs(self, slot: int) -> dict[str, Any]:
        uid = self._uid(slot)
        return {} if uid is None else {"user": uid, "group": uid, "extra_groups": []}

    def _argv(
        self, plan: Plan, slot: int, scratch: str | None, runner_fd: int | None, probe: bool = False
    ) -> list[str]:
        if plan.bwrap is None:
            uid = self._uid(slot)
            drop = [] if uid is None else ["--drop-uid", str(uid), "--drop-gid", str(uid)]
            nproc = ["--nproc-base", "1" if uid is not None else "0"]  # as root, S and Z are not of the uid: T is
            archive = f"/proc/self/fd/{runner_fd}"  # no jail to bind the archive into: its memfd, by its /proc path
            serve = [plan.python, "-I", "-B", archive, "--serve", "--scratch", str(scratch), *self._cpu(slot)]
            pch_arg = [] if plan.pch is None else ["--pch", str(plan.pch)]
            return [*serve, *drop, *nproc, *pch_arg]
        if probe:
            return [plan.bwrap, *_jail_args(plan, self.config.scratch_mb, []), "--", plan.python, "-I", "-c", PROBE]
        runner = ["--ro-bind-data", str(runner_fd), IN_JAIL_RUNNER]
        if plan.pch is not None:  # the precompiled bits/stdc++.h, read-only, where the image has its own
            runner += ["--ro-bind-try", str(plan.pch), native.PCH_DIR]
        serve = [plan.python, "-I", "-B", IN_JAIL_RUNNER, "--serve", "--scratch", "/tmp", *self._cpu(slot)]
        return [plan.bwrap, *_jail_args(plan, self.config.scratch_mb, runner), "--", *serve]

    async def create_sandbox(self, slot: int) -> LocalSandbox:
        assert self.plan is not None
        scratch = None
        if self.plan.bwrap is None:
            scratch = tempfile.mkdtemp(prefix=f"verifier-sandbox-{slot}-")
            if self._uid(slot) is not None:
                os.chown(scratch, self._uid(slot) or 0, self._uid(slot) or 0)
        runner_fd = os.memfd_create("runner.pyz")
        os.write(runner_fd, self.plan.runner)
        os.lseek(runner_fd, 0, os.SEEK_SET)
        try:
            proc = await asyncio.create_subprocess_exec(
                *self._argv(self.plan, slot, scratch, runner_fd),
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                env=ENV,
                pass_fds=(runner_fd,),
                start_new_session=True,
                limit=8 * self.config.max_limits.max_output_bytes + (1 << 20),
                **(self._user_kwargs(slot) if self.plan.bwrap else {}),  # without: the runner drops C and T itself
            )
        finally:
            os.close(runner_fd)
        sandbox = LocalSandbox(slot, proc, scratch, self._uid(slot) if self.plan.bwrap is None else None)
        try:
            self.hello(await asyncio.wait_for(_expect_ready(sandbox), self.config.start_timeout_s))
        except BaseException:
            await sandbox.destroy()
            raise
        return sandbox


def _pch_dir() -> Path | None:
    """The host's directory for the precompiled bits/stdc++.h, made ready to bind, or None. Only a speed-up: nothing
    that goes wrong here may keep a sandbox from starting."""
    try:
        directory = pch.local_dir()
        problem = None if directory is None else pch.prepare(directory)
    except Exception as exc:  # whatever it is, C++ compiles without it
        problem, directory = f"{type(exc).__name__}: {exc}", None
    if problem is not None:
        log.warning("no precompiled bits/stdc++.h for C++ programs (about 1 s more a compile): %s", problem)
        return None
    return directory


async def _expect_ready(sandbox: LocalSandbox) -> dict[str, Any]:
    hello = json.loads(await sandbox.channel.recv())
    if not hello.get("ready"):
        raise RuntimeError(f"the runner did not start: {hello}")
    return dict(hello)


def _jail_args(plan: Plan, scratch_mb: int, extra: list[str]) -> list[str]:
    args = [
        "--unshare-all", "--unshare-user", "--uid", "10001", "--gid", "10001", "--hostname", "sandbox",
        "--die-with-parent", "--new-session", "--as-pid-1", "--cap-drop", "ALL", "--clearenv",
        *[a for k, v in ENV.items() for a in ("--setenv", k, v)],
        *(["--disable-userns"] if plan.disable_userns else []),
        "--ro-bind", "/usr", "/usr",
    ]  # fmt: skip
    for top in ("bin", "sbin", "lib", "lib32", "lib64", "libx32"):
        path = Path("/", top)
        if path.is_symlink():
            args += ["--symlink", os.readlink(path), str(path)]
        elif path.is_dir():
            args += ["--ro-bind", str(path), str(path)]
    prefix = Path(plan.python).resolve().parents[1]
    if not str(prefix).startswith("/usr"):
        args += ["--ro-bind", str(prefix), str(prefix)]
    return [
        *args,
        "--ro-bind-try", "/etc/ld.so.cache", "/etc/ld.so.cache",
        "--proc", "/proc", "--dev", "/dev",
        "--size", str(scratch_mb << 20), "--perms", "1777", "--tmpfs", "/tmp",
        "--size", str(64 << 20), "--perms", "1777", "--tmpfs", "/dev/shm",
        *extra,
        "--chdir", "/",
        "--remount-ro", "/dev", "--remount-ro", "/",  # last: bubblewrap's own root and /dev are writable tmpfs
    ]  # fmt: skip


def runner_archive() -> bytes:
    """The runner package as a zipapp, built in memory: what the image's Dockerfile builds with `python -m zipapp`.
    A jail gets it as one read-only file, through a memfd: a snapshot of the runner and nothing else of the host."""
    archive = io.BytesIO()
    zipapp.create_archive(RUNNER.parent, archive, main="runner.__main__:main", filter=_in_runner)
    return archive.getvalue()


def _in_runner(path: Path) -> bool:
    return path.parts[0] == RUNNER.name and path.suffix == ".py"  # no __pycache__, nothing else of sandbox/


def _python_candidates() -> list[str]:
    found = [os.path.realpath(sys.executable), "/usr/local/bin/python3", "/usr/bin/python3"]
    return [p for i, p in enumerate(found) if os.path.exists(p) and p not in found[:i]]


def _bwrap_version(bwrap: str) -> tuple[int, ...]:
    try:
        out = subprocess.run([bwrap, "--version"], capture_output=True, text=True, timeout=10).stdout
        return tuple(int(x) for x in out.split()[-1].split("."))
    except (OSError, ValueError, IndexError, subprocess.TimeoutExpired):
        return (0,)
