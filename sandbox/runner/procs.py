"""Process plumbing shared by the runner's processes: prctl, /proc, descriptors, the OOM counter."""

from __future__ import annotations

import contextlib
import ctypes
import fcntl
import os
import socket

KILL_TIMEOUT_S = 5.0
PR_SET_PDEATHSIG, PR_SET_DUMPABLE, PR_SET_SECCOMP, PR_SET_CHILD_SUBREAPER, PR_SET_NO_NEW_PRIVS = 1, 4, 22, 36, 38


libc = ctypes.CDLL(None, use_errno=True)


def prctl(option, value):
    if libc.prctl(option, ctypes.c_ulong(value), 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), f"prctl({option})")


def proc_pids():
    return [int(n) for n in os.listdir("/proc") if n.isdigit()]


def parent_of(pid):
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return int(f.read().rsplit(b")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return None


CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def usage(pids):
    """(CPU seconds, seconds waiting for a CPU) of these live processes: each one's user and system time and its
    reaped children's (/proc/PID/stat), and the time it sat runnable on a run queue (/proc/PID/schedstat's
    run_delay; 0 where the kernel does not keep it). A process gone meanwhile counts for nothing."""
    cpu = wait = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat", "rb") as f:
                fields = f.read().rsplit(b")", 1)[1].split()
            cpu += sum(int(n) for n in fields[11:15])  # utime, stime, cutime, cstime
        except (OSError, IndexError, ValueError):
            continue
        try:
            with open(f"/proc/{pid}/schedstat", "rb") as f:
                wait += int(f.read().split()[1])
        except (OSError, IndexError, ValueError):
            pass
    return cpu / CLOCK_TICKS, wait / 1e9


OOM_COUNTERS = ("/sys/fs/cgroup/memory.events", "/sys/fs/cgroup/memory/memory.oom_control")  # cgroup v2, v1


class OomKills:
    """How many processes the kernel's OOM killer has killed in this container's cgroup (0 without one). The
    counter file stays open: reading it again is much cheaper than opening it, twice per test."""

    def __init__(self):
        self.fd = None
        for path in OOM_COUNTERS:
            with contextlib.suppress(OSError):
                self.fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
                break

    def __call__(self):
        try:
            data = os.pread(self.fd, 4096, 0) if self.fd is not None else b""
            return sum(int(line.split()[1]) for line in data.splitlines() if line.startswith(b"oom_kill "))
        except (OSError, ValueError, IndexError):
            return 0


def children_of(pid):
    found = []
    try:
        for tid in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{tid}/children", "rb") as f:
                found += [int(c) for c in f.read().split()]
    except OSError:  # it just exited
        pass
    return found


def place_fds(fds):
    """Make `fds` (target -> source) the process's only open descriptors."""
    high = {target: fcntl.fcntl(src, fcntl.F_DUPFD, 64) for target, src in fds.items()}
    for target, src in high.items():
        os.dup2(src, target)
    os.closerange(len(fds), 1 << 20)


def read_nonblocking(fd):
    try:
        return os.read(fd, 4096)
    except BlockingIOError:
        return b""


def recv_nonblocking(sock):
    try:
        return sock.recv(1 << 20, socket.MSG_DONTWAIT)
    except OSError:  # BlockingIOError: nothing more; else the peer is gone
        return b""


class Broken(Exception):
    """The sandbox can no longer guarantee a clean next run; S stops and the host replaces it."""
