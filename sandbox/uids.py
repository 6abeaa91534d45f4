"""The range of uids an executor's sandboxes run as, held for the executor's life: no two services share one.

RLIMIT_NPROC counts every process of a uid on the host, containers included (Docker maps no user namespace), so
two services whose sandboxes share uids share their process limits: a fork bomb in one fails honest programs in the
other. Before its first sandbox starts, an executor claims `pool_size` uids from `uid_base`, or from the next block
of 256 whose uids are all free, and says so when it moved. A range is free when

- no other executor holds a lock on its bytes in one file, /tmp/verifier-sandbox-uids.lock: an open file
  description lock, which covers exactly the range (overlaps conflict), conflicts with another executor of the same
  process too, and goes when the executor closes or its process dies;
- no process on this host runs as one of its uids (a service of an older version, or one whose /tmp is not this
  one, is still seen here when it shares the PID namespace);
- the backend sees no other user of it (Docker: no sandbox container of another pool runs as one of its uids, the
  check that reaches services in other containers, which share the engine but neither /tmp nor /proc).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import logging
import os
import struct
from collections.abc import Callable
from pathlib import Path

from sandbox.runner import proc_pids

log = logging.getLogger(__name__)

LOCK_PATH = Path("/tmp/verifier-sandbox-uids.lock")
# A range in use is skipped for the next block of this many uids. Also the uids each replica gets (deploy/entrypoint.py,
# verifier_service/ray_serve.py), so the most sandboxes a pool may have (VERIFIER_SANDBOX__POOL_SIZE).
BLOCK = 256
TRIES = 64  # blocks tried before giving up
MAX_UID = 2**31 - 2


class UidsInUse(RuntimeError):
    """No free range of sandbox uids was found."""


class UidRange:
    """`count` uids from `first`, held until `release()`."""

    def __init__(self, first: int, count: int, lock_fd: int | None) -> None:
        self.first, self.count, self._fd = first, count, lock_fd

    def uid(self, slot: int) -> int:
        return self.first + slot

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)  # its locks go with its open file description
            self._fd = None

    def __str__(self) -> str:
        return f"{self.first}-{self.first + self.count - 1}"


def claim(
    start: int,
    count: int,
    in_use: Callable[[range], str | None] = lambda uids: None,
    *,
    lock_path: Path = LOCK_PATH,
    tries: int = TRIES,
) -> UidRange:
    """The first free range of `count` uids from `start`, in steps of whole blocks; UidsInUse if none is.
    `in_use(uids)`: why the backend sees these uids in use, or None."""
    fd = _open_lock(lock_path)
    step = BLOCK * -(-count // BLOCK)
    taken: list[str] = []
    for first in range(start, min(start + tries * step, MAX_UID - count + 1), step):
        uids = range(first, first + count)
        if fd is not None and not _lock(fd, uids, fcntl.F_WRLCK):
            taken.append(f"{_name(uids)}: another verifier on this host holds them")
            continue
        reason = running_as(uids) or in_use(uids)
        if reason is None:
            if taken:
                log.warning("sandbox uids %s are in use (%s); using %s", _name(range(start, start + count)),
                            "; ".join(taken), _name(uids))  # fmt: skip
            return UidRange(first, count, fd)
        taken.append(f"{_name(uids)}: {reason}")
        if fd is not None:
            _lock(fd, uids, fcntl.F_UNLCK)
    if fd is not None:
        os.close(fd)
    raise UidsInUse(
        f"no free range of {count} sandbox uids from {start} (VERIFIER_SANDBOX__UID_BASE) in {tries} blocks of "
        f"{step}: {taken[0] if taken else 'none fits below the highest uid'} ... set another VERIFIER_SANDBOX__UID_BASE"
    )


def running_as(uids: range) -> str | None:
    """Why these uids are in use by processes on this host (one of them found running as one), or None."""
    for pid in proc_pids():
        found = _uids_of(pid)
        if any(uid in uids for uid in found):
            return f"process {pid} runs as uid {next(uid for uid in found if uid in uids)}"
    return None


def _uids_of(pid: int) -> list[int]:
    """A process's real, effective, saved and filesystem uids; [] if it is gone."""
    try:
        with open(f"/proc/{pid}/status") as status:
            return next([int(u) for u in line.split()[1:]] for line in status if line.startswith("Uid:"))
    except (OSError, StopIteration, ValueError):
        return []


def _name(uids: range) -> str:
    return f"{uids.start}-{uids.stop - 1}"


def _open_lock(path: Path) -> int | None:
    """The lock file, opened for writing (an fcntl write lock needs it), made by whoever comes first, writable by
    all: services of other users must lock it too. None (and a warning) if it cannot be had."""
    for flags in (os.O_RDWR, os.O_RDWR | os.O_CREAT):
        try:
            fd = os.open(path, flags | os.O_NOFOLLOW | os.O_CLOEXEC, 0o666)
        except FileNotFoundError:
            continue
        except OSError as exc:
            log.warning("cannot open %s (%s): sandbox uid ranges are checked against running processes only", path,
                        exc.strerror)  # fmt: skip
            return None
        if flags & os.O_CREAT:
            with contextlib.suppress(OSError):  # a file someone else made meanwhile
                os.fchmod(fd, 0o666)  # the umask took some bits away
        return fd
    return None


def _lock(fd: int, uids: range, kind: int) -> bool:
    """Lock (F_WRLCK) or unlock (F_UNLCK) the bytes numbered by `uids`, without waiting; False if another holds
    one of them. An open file description lock: this fd's, not this process's (F_OFD_SETLK, Linux 3.15+)."""
    record = struct.pack("@hhqqixxxx", kind, os.SEEK_SET, uids.start, len(uids), 0)  # struct flock; l_pid 0
    try:
        fcntl.fcntl(fd, fcntl.F_OFD_SETLK, record)
    except OSError as exc:
        if exc.errno in (errno.EAGAIN, errno.EACCES):
            return False
        raise
    return True
