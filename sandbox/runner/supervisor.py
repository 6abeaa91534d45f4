"""S, the supervisor: talks to the host, runs each test through Z's processes, and cleans up after every test."""

from __future__ import annotations

import base64
import binascii
import json
import os
import signal
import sys
import time

from .native import compiler
from .procs import (
    KILL_TIMEOUT_S,
    PR_SET_CHILD_SUBREAPER,
    PR_SET_DUMPABLE,
    PR_SET_PDEATHSIG,
    Broken,
    OomKills,
    children_of,
    parent_of,
    prctl,
    proc_pids,
    usage,
)
from .testrun import TestRun
from .wipe import clear_ipc_and_keys, wipe_dir
from .zygote import Zygote

PROTOCOL = 1


class Supervisor:
    def __init__(self, opts):
        prctl(PR_SET_DUMPABLE, 0)
        self.pidns = os.getpid() == 1
        if not self.pidns:
            prctl(PR_SET_CHILD_SUBREAPER, 1)
            prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
        if (
            opts.cpu is not None
        ):  # every process of this sandbox shares one CPU (seccomp keeps programs from undoing it)
            os.sched_setaffinity(0, {opts.cpu})
        self.opts = opts
        self.zygote = Zygote(opts)  # first of all: its memory must hold no job
        self.oom_kills = OomKills()
        self.known, self.last_kind_assert = [], True  # the last test's C and T; was it an assert test?
        self.decoded = None  # (a job's base64 program, its bytes): the last binary, decoded once (see `binary`)
        self.binary_b64 = None  # the last job's binary ("binary": true): "same_program" runs it again, not sent twice
        self.wipe_roots = [opts.scratch] + (["/dev/shm", "/dev/mqueue"] if self.pidns else [])

    def serve(self):
        self.zygote.fork_ahead(True)  # HumanEval/MBPP-style assert tests are the common case
        python = sys.version.split()[0]
        self.emit({"ready": True, "protocol": PROTOCOL, "pidns": self.pidns, "python": python, "cpp": bool(compiler())})
        for line in sys.stdin.buffer:
            job = json.loads(line)
            try:
                self.run_job(job)
            except Broken as exc:
                self.emit({"job": job["job"], "fatal": str(exc)})
                return

    def emit(self, obj):
        sys.stdout.buffer.write(json.dumps(obj, separators=(",", ":")).encode() + b"\n")
        sys.stdout.buffer.flush()

    def run_job(self, job):
        """A test's facts go out as soon as they are final, and the last one's "done" with them: the clean-up after
        the last test runs while the host reads its facts, and "clean" (or "fatal") says how it went."""
        tests = job["tests"]
        if job.get("same_program"):
            if self.binary_b64 is None or not job.get("binary"):
                raise Broken("the job named the last binary, and there was none")
            job["program"] = self.binary_b64
        if job.get("binary"):
            self.binary_b64 = job["program"]
        for i, test in enumerate(tests):
            facts, broken = self.run_test(job["program"], test, job["limits"])
            compile_error = "compile_error" in facts and broken is None
            if compile_error:
                self.emit({"job": job["job"], "compile_error": facts["compile_error"]})
            else:
                self.emit({"job": job["job"], "i": i, "facts": facts})
            if broken is not None:
                raise broken
            last = compile_error or i == len(tests) - 1
            if last:
                self.emit({"job": job["job"], "done": True})
            self.clean_up()
            if last:
                self.emit({"job": job["job"], "clean": True})
                return
        self.emit({"job": job["job"], "done": True})  # no tests
        self.emit({"job": job["job"], "clean": True})

    def run_test(self, program, spec, limits):
        """Run one test; return its facts and the Broken that ended this sandbox, if one did. On return, SIGKILL
        is pending for every process the test left (none can add to what it wrote), but `clean_up` must run
        before the next test."""
        mode = "native" if spec.get("native") else spec["kind"]  # native: the program is a binary (native.py)
        # its bytes follow C's first frame as they are: C decodes no JSON or base64 of it (Broken here: nothing ran)
        raw = self.binary(program) if mode == "native" else b""
        with_tester = spec["kind"] == "assert"
        c_pid, t_pid, fds = self.spawn(with_tester)  # Broken here: nothing ran, the host retries elsewhere
        self.last_kind_assert, self.known = with_tester, [p for p in (c_pid, t_pid) if p]
        run = TestRun(self, spec, limits, c_pid, *fds)
        ooms = self.oom_kills()
        first = {
            "program": program,
            "limits": limits,
            **{k: spec.get(k) for k in ("code", "flags", "files", "argv", "pch")},
        }
        if mode == "native":
            first.update(program=None, binary=len(raw))
        broken = None
        try:
            run.start(first if with_tester else dict(first, mode=mode), raw)
            run.loop()
        except Broken as exc:
            broken = exc
        if run.status == "timeout" and spec["kind"] == "compile":
            # how the compiler spent its wall time, read before the kill: on CPU (a compile bomb), waiting for one
            # (the machine was loaded), or neither (blocked, as on a pipe it opened itself); compiled.py judges
            cpu_s, wait_s = usage(self.victims())
            run.facts.update(tree_cpu_s=round(cpu_s, 3), tree_wait_s=round(wait_s, 3))
        self.kill_once()
        if broken is None and self.zygote.doomed():
            broken = Broken("the zygote was killed")
        run.finish(drain=broken is None)
        if self.oom_kills() > ooms:
            run.facts["oom_killed"] = True
        if broken is not None:
            run.facts.update(status="broken", detail=str(broken))
        return run.facts, broken

    def binary(self, program):
        """A native job's binary (base64 in the job), decoded once per binary rather than once per test: the tests of
        a job, and the next jobs of the same program (a checker's one job per test), reuse it while it is the one
        the job names. S's memory is out of every test's reach (not dumpable, another process); each test still gets
        its own sealed memfd, written by C from these bytes (native.run_binary)."""
        if self.decoded is None or self.decoded[0] != program:
            self.decoded = None
            try:
                self.decoded = (program, base64.b64decode(program, validate=True))
            except (binascii.Error, TypeError, ValueError):
                raise Broken("the job's binary is not base64") from None
        return self.decoded[1]

    def spawn(self, with_tester):
        """C (and T) for a test. Those Z forked ahead are of the wrong kind when the test kind changes: they go,
        with their scratch dir, before others come (a test finds nothing but its own in the sandbox)."""
        ahead = self.zygote.ahead
        if ahead is not None and ahead != with_tester:
            c_pid, t_pid, fds = self.zygote.spawn(ahead)
            for fd in fds:
                os.close(fd)
            self.known = [p for p in (c_pid, t_pid) if p]
            self.clean_up(fork_ahead=False)
        return self.zygote.spawn(with_tester)

    def clean_up(self, fork_ahead=True):
        """After a test: wait until every process it left is gone, empty every writable place, and have Z fork
        the next test's processes (guessing it is of the same kind) while S waits for its job."""
        self.kill_all(known=self.known)
        self.wipe()
        self.zygote.exits.clear()
        if fork_ahead:
            self.zygote.fork_ahead(self.last_kind_assert)

    def victims(self):
        """Every process a test may have left: all but S and Z in a PID namespace, else all below S but Z."""
        if self.pidns:
            return {p for p in proc_pids() if p not in (1, self.zygote.pid)}
        found, stack = set(), [self.zygote.pid, os.getpid()]
        while stack:
            for child in children_of(stack.pop()):
                if child != self.zygote.pid and child not in found:
                    found.add(child)
                    stack.append(child)
        return found

    def kill_once(self):
        """SIGKILL every process of the test without waiting for any to die. A process with a SIGKILL pending
        cannot fork, so scanning again until no new one appears leaves none that can still run."""
        killed: set[int] = set()
        while new := (victims := self.victims()) - killed:
            for pid in new:
                self._kill(pid, victims)
            killed |= new

    def kill_all(self, known=()):
        """SIGKILL them until none is left, zombies included (they must be reaped before the next test).
        `known`: Z's children (C, T), whose exit notices say when Z has reaped them."""
        deadline = time.monotonic() + KILL_TIMEOUT_S
        while victims := self.victims():
            for pid in victims:
                self._kill(pid, victims)
            while True:  # orphans whose subreaper died come to S
                try:
                    if os.waitpid(-1, os.WNOHANG)[0] == 0:
                        break
                except ChildProcessError:
                    break
            waiting = [pid for pid in known if pid in victims]
            self.zygote.pump(wait_for=waiting, timeout=0.5 if waiting else 0.0)
            if time.monotonic() > deadline:
                raise Broken(f"{len(victims)} processes survived SIGKILL")
            if not waiting:
                time.sleep(0.0005)

    def _kill(self, pid, victims):
        try:
            if self.pidns:
                os.kill(pid, signal.SIGKILL)
                return
            fd = os.pidfd_open(pid)  # pins the process: a recycled pid is never signalled
            try:
                if parent_of(pid) in victims | {self.zygote.pid, os.getpid()}:
                    signal.pidfd_send_signal(fd, signal.SIGKILL)
            finally:
                os.close(fd)
        except (ProcessLookupError, PermissionError):
            pass

    def wipe(self):
        for root in self.wipe_roots:
            if os.path.isdir(root) and os.access(root, os.W_OK):
                wipe_dir(root)
        if self.pidns:
            clear_ipc_and_keys()
