"""Z, the zygote: forked by S before the first job, it forks every test's processes (C, and T for `assert` tests)
and reports how they end. Also `Zygote`, S's handle on it."""

from __future__ import annotations

import builtins
import contextlib
import gc
import json
import os
import select
import signal
import socket
import time
from typing import Any

from .candidate import candidate_main
from .confine import seccomp_filter, small_thread_stacks
from .procs import PR_SET_CHILD_SUBREAPER, PR_SET_PDEATHSIG, Broken, libc, place_fds, prctl, read_nonblocking
from .tester import real_module, tester_main
from .values import decode, encode


def zygote_main(sock, opts):
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1):
        os.dup2(null, fd)
    prctl(PR_SET_CHILD_SUBREAPER, 1)
    prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    wake_r, wake_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    _warm_up(opts)
    mine: set[int] = set()
    while True:
        ready, _, _ = select.select([sock, wake_r], [], [])
        if wake_r in ready:
            while read_nonblocking(wake_r):
                pass
            _reap(sock, mine)
        if sock in ready:
            try:
                request = sock.recv(16)
            except OSError:
                request = b""
            if not request:
                os._exit(0)
            mine.update(_spawn(sock, request == b"A", null, opts))


def _warm_up(opts):
    """Do once here what every fork would otherwise do first: the compiler's and codecs' lazy set-up. Then freeze
    the heap out of the GC's sight, so a collection in a child does not copy every page on write. And cap glibc's
    malloc arenas: each reserves 64 MB of address space, so a few threads would exhaust RLIMIT_AS for nothing (as
    would threads' default stacks: see small_thread_stacks)."""
    with contextlib.suppress(AttributeError):  # not glibc
        libc.mallopt(-8, 2)  # M_ARENA_MAX
    small_thread_stacks()
    real_module("math")
    opts.bpf = seccomp_filter()
    code = compile("def f(x, *a, **k):\n    return [x, 1.5, 'é', (1,), {2}, {'k': None}]\n", "w.py", "exec")
    ns: dict[str, Any] = {"__builtins__": builtins}
    exec(code, ns)
    decode(json.loads(json.dumps(encode(ns["f"](1)))))
    gc.collect()
    gc.freeze()


def _reap(sock, mine):
    while True:
        try:
            pid, status, usage = os.wait4(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        if pid in mine:
            mine.discard(pid)
            code = os.waitstatus_to_exitcode(status)
            sock.send(json.dumps({"exit": pid, "code": code, "cpu_s": usage.ru_utime + usage.ru_stime}).encode())


def _spawn(sock, with_tester, null, opts):
    """Fork C (and T): C's stdio are pipes to S; its socket goes to its driver, S or T. Send S its ends."""
    in_r, in_w = os.pipe()
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    c_end, drv = (s.detach() for s in socket.socketpair())
    pids = [_fork(candidate_main, opts, {0: in_r, 1: out_w, 2: err_w, 3: c_end})]
    for fd in (in_r, out_w, err_w, c_end):
        os.close(fd)
    if with_tester:  # created after C's fork: C never held T's channel, not even before closing its fds
        t_end, s_end = (s.detach() for s in socket.socketpair())
        pids.append(_fork(tester_main, opts, {0: null, 1: null, 2: null, 3: t_end, 4: drv}))
        os.close(t_end)
        os.close(drv)
        drv = s_end
    fds = [in_w, out_r, err_r, drv]
    socket.send_fds(sock, [json.dumps({"spawned": pids[0], "tester": pids[1] if with_tester else None}).encode()], fds)
    for fd in fds:
        os.close(fd)
    return pids


def _fork(main, opts, fds):
    pid = os.fork()
    if pid:
        return pid
    try:
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        place_fds(fds)
        main(opts)
    finally:
        os._exit(0)


class Zygote:
    """S's handle on Z: spawn requests out, fds and exit notices in (a SEQPACKET socket: one message each)."""

    def __init__(self, opts):
        mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.pid = os.fork()
        if self.pid == 0:
            mine.close()
            try:
                zygote_main(theirs, opts)
            finally:
                os._exit(1)
        theirs.close()
        self.sock, self.exits, self.ahead = mine, {}, None

    def fork_ahead(self, with_tester):
        """Have Z fork the next test's processes now, while S waits for its job: they set themselves up and wait
        for their first frame. Called only once everything of the last test is killed and wiped."""
        self._request(with_tester)
        self.ahead = with_tester

    def spawn(self, with_tester):
        """A test's processes: those forked ahead (the caller checks they are of the kind it needs), else new ones."""
        if self.ahead is None:
            self._request(with_tester)
        self.ahead = None
        return self._spawned()

    def doomed(self):
        """Is Z exiting, stopped or gone, or is a signal pending for it (a SIGCHLD aside)? A program that could
        signal Z (it has the same uid in a container) did so before it sent what S read last. A signal sent with
        kill() stays in Z's shared pending set until Z is reaped; one sent to Z's thread alone leaves that set
        when Z takes it, and Z is marked exiting (PF_EXITING) a few instructions later: only a Z preempted
        between the two looks well. Then the clean-up finds it dead, and the sandbox is replaced."""
        try:
            with open(f"/proc/{self.pid}/status", "rb") as f:
                status = dict(line.split(b":", 1) for line in f.read().splitlines() if b":" in line)
            with open(f"/proc/{self.pid}/stat", "rb") as f:
                flags = int(f.read().rsplit(b")", 1)[1].split()[6])  # field 9 of proc(5)
            state = status[b"State"].split()[0]
            pending = int(status[b"ShdPnd"], 16) | int(status[b"SigPnd"], 16)
        except (OSError, KeyError, IndexError, ValueError):
            return True
        exiting = flags & 0x4  # PF_EXITING
        return bool(exiting) or state not in (b"R", b"S", b"D") or bool(pending & ~(1 << (signal.SIGCHLD - 1)))

    def _request(self, with_tester):
        try:
            self.sock.send(b"A" if with_tester else b"C")
        except OSError as exc:
            raise Broken(f"the zygote is unreachable: {exc}") from None

    def _spawned(self):
        try:
            while True:
                msg, fds, _, _ = socket.recv_fds(self.sock, 4096, 8)
                if not msg:
                    raise Broken("the zygote died")
                info = json.loads(msg)
                if "spawned" not in info:
                    self.exits[info["exit"]] = info
                elif len(fds) == 4:
                    return info["spawned"], info["tester"], fds
                else:
                    raise Broken("the zygote sent no descriptors")
        except OSError as exc:
            raise Broken(f"the zygote is unreachable: {exc}") from None

    def pump(self, wait_for=(), timeout=0.0):
        """Take the exit notices that are waiting (and wait up to `timeout` for those of `wait_for`)."""
        end = time.monotonic() + timeout
        while True:
            missing = [pid for pid in wait_for if pid not in self.exits]
            left = end - time.monotonic()
            try:
                if missing and left > 0:
                    self.sock.settimeout(left)
                    msg = self.sock.recv(4096)
                else:
                    msg = self.sock.recv(4096, socket.MSG_DONTWAIT)
            except (BlockingIOError, TimeoutError):
                return
            except OSError:
                msg = b""
            finally:
                self.sock.settimeout(None)
            if not msg:
                raise Broken("the zygote died")
            info = json.loads(msg)
            self.exits[info["exit"]] = info
