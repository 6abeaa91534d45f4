"""One call in a throwaway fork of this process (the `procedural` scorers', in a worker): the child inherits all
that the worker has imported and built (reasoning-gym, the dataset's scorer), so it costs a fork, not a 2 s import;
it runs the call, writes the call's text to a pipe and `os._exit`s. Whatever the call changes in the child's memory
(a module patched, a cache poisoned, a global set) dies with it, and the next task, of any component, is scored as
before. Nor can it write the worker's memory from outside: the child knows every address in it, and as the same user
could write them through /proc/<worker>/mem, but the pool makes its workers non-dumpable (`PR_SET_DUMPABLE` 0, which
the fork inherits), so that takes CAP_SYS_PTRACE, which the image's user lacks (a service run as root keeps it).

What holds: the child never outlives its call (SIGKILLed at the timeout, or after its result, and reaped), nor its
worker (`PR_SET_PDEATHSIG`: the kernel kills it when the worker dies, as when the pool kills an overrunning worker);
it keeps only stdio and its result pipe of the descriptors it inherits, and the worker's channel to the service is a
socket, which /proc/<worker>/fd cannot reopen, so it cannot speak to the service; what it sends back is bounded text
that the caller parses as untrusted (JSON, never pickle). What does not: the child is the worker's user with the
worker's files and network, and code that runs in it can forge its own call's result, write files (a module on the
path, read by the next worker that imports it), write to the service's log (stdout), or signal the worker; a child
it forks itself is not killed with it. The container is the boundary for that.

Python 3.12 warns at `os.fork()` in a process with threads (a numpy worker has OpenBLAS's): a lock that another
thread held at the fork stays held in the child. The child takes none of the service's locks; one it waits on in a
library is a hang, which its timeout ends (`ChildOverrun`), never the worker's.
"""

from __future__ import annotations

import contextlib
import ctypes
import logging
import math
import os
import select
import signal
import time
import warnings
from collections.abc import Callable
from typing import NoReturn

log = logging.getLogger(__name__)

MAX_RESULT_BYTES = 65_536  # the most of a child's result that is read (a procedural result is ~300 bytes)
_END = b"\n"  # ends a whole result (the text is JSON on one line): a child cut off mid-write sent none
_PR_SET_PDEATHSIG = 1
_FAILED = 70  # the child's exit status when the call itself raised (EX_SOFTWARE)


class ChildOverrun(Exception):
    """The call did not return within its time; the child was killed."""


class ChildDied(Exception):
    """The child ended without a whole result; the message says how it ended."""


def run_forked(call: Callable[[], str], timeout_s: float) -> str:
    """call() run in a child of this process, its text back here; ChildOverrun after `timeout_s`, ChildDied if
    the child ends without a result (a signal, `os._exit`, a call that raised).

    >>> run_forked(lambda: str(os.getpid()), 5.0) != str(os.getpid())
    True
    """
    read_fd, write_fd = os.pipe()
    parent = os.getpid()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)  # threads at the fork: see the module's docstring
            pid = os.fork()
    except OSError:  # no process to be had (EAGAIN, ENOMEM): the caller's error, its item internal_error
        os.close(read_fd)
        os.close(write_fd)
        raise
    if pid == 0:
        _child(call, write_fd, parent)
    os.close(write_fd)
    try:
        sent = _received(read_fd, timeout_s)
    finally:
        os.close(read_fd)
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)  # it has sent all it will, or its time is up
        _, status = os.waitpid(pid, 0)
    if sent is None:
        raise ChildOverrun(f"no result within {timeout_s:g}s")
    if not sent.endswith(_END):
        raise ChildDied(_ended(status))
    return sent[: -len(_END)].decode("utf-8", "replace")


def _received(fd: int, timeout_s: float) -> bytes | None:
    """What the child wrote until it closed the pipe (its exit); None if it did not by `timeout_s`; ChildDied if it
    wrote more than MAX_RESULT_BYTES."""
    deadline = time.monotonic() + timeout_s
    poller = select.poll()
    poller.register(fd, select.POLLIN)
    chunks: list[bytes] = []
    size = 0
    while (left := deadline - time.monotonic()) > 0:
        if not poller.poll(math.ceil(left * 1000)):
            continue
        chunk = os.read(fd, MAX_RESULT_BYTES + 1)
        if not chunk:
            return b"".join(chunks)
        size += len(chunk)
        if size > MAX_RESULT_BYTES:
            raise ChildDied(f"it wrote more than {MAX_RESULT_BYTES} bytes")
        chunks.append(chunk)
    return None


def _ended(status: int) -> str:
    """How a child ended, from its wait status.

    >>> _ended(signal.SIGSEGV), _ended(9 << 8)
    ('killed by SIGSEGV', 'exit status 9')
    """
    if os.WIFSIGNALED(status):
        number = os.WTERMSIG(status)
        try:
            return f"killed by {signal.Signals(number).name}"
        except ValueError:
            return f"killed by signal {number}"
    code = os.waitstatus_to_exitcode(status)
    return "its call raised" if code == _FAILED else f"exit status {code}"


def _child(call: Callable[[], str], write_fd: int, parent: int) -> NoReturn:
    """The child's whole life: no return, no exception, no atexit handler or finaliser of the worker's runs here."""
    status = _FAILED
    try:
        _die_with(parent)
        _close_all_but(write_fd)  # the worker's pipe to the service, the pool's, the read end of its own
        view = memoryview(call().encode() + _END)
        while view:
            view = view[os.write(write_fd, view) :]
        status = 0
    except BaseException:
        with contextlib.suppress(BaseException):
            log.exception("a forked call raised")  # the call turns what it runs into a result: this is a bug
    finally:
        os._exit(status)


def _die_with(parent: int) -> None:
    """Ask Linux to SIGKILL this child when the process that forked it dies (the pool kills a worker that overruns
    its task: a child busy in C code would outlive it otherwise). prctl was looked up in the worker (`_PRCTL`): a
    dlopen here, after a fork of a process with threads, could wait forever on a lock another thread held."""
    if _PRCTL is None:  # not Linux: the timeout still ends it
        return
    _PRCTL(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent:  # the worker died before prctl took effect
        os._exit(1)


def _close_all_but(keep: int) -> None:
    """Close every descriptor but stdio and `keep`: those open, as /proc lists them (a range up to the descriptor
    limit is a close() per number where the kernel lacks close_range, and the limit may be a billion)."""
    try:
        open_fds = [int(name) for name in os.listdir("/proc/self/fd")]
    except OSError:  # no /proc: the range, up to a limit that cannot take long
        open_fds = list(range(3, min(os.sysconf("SC_OPEN_MAX"), 1 << 16)))
    for fd in open_fds:
        if fd > 2 and fd != keep:
            with contextlib.suppress(OSError):  # the listing's own descriptor, closed already
                os.close(fd)


def _libc_prctl() -> Callable[..., int] | None:
    try:
        return ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None


_PRCTL = _libc_prctl()
