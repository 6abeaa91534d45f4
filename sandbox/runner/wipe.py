"""The clean-up of writable places after each test: files, however deep, without following links; SysV IPC objects
and the uid's keyrings, which outlive processes."""

from __future__ import annotations

import os
import stat
import time

from .procs import KILL_TIMEOUT_S, Broken, libc

SYS_KEYCTL = {"x86_64": 250, "aarch64": 219}


def wipe_dir(root):
    """Empty `root` without following symlinks, however deep the tree: grandchildren move up a level per pass."""
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    try:
        deadline = time.monotonic() + KILL_TIMEOUT_S
        while (names := os.listdir(fd)) and time.monotonic() < deadline:
            for name in names:
                st = os.stat(name, dir_fd=fd, follow_symlinks=False)
                if not stat.S_ISDIR(st.st_mode):
                    os.unlink(name, dir_fd=fd)
                    continue
                os.chmod(name, 0o700, dir_fd=fd)
                sub = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=fd)
                try:
                    for child in os.listdir(sub):
                        os.rename(child, f".wipe-{os.urandom(8).hex()}", src_dir_fd=sub, dst_dir_fd=fd)
                finally:
                    os.close(sub)
                os.rmdir(name, dir_fd=fd)
        if os.listdir(fd):
            raise Broken(f"could not empty {root}")
    except OSError as exc:
        raise Broken(f"could not empty {root}: {exc}") from None
    finally:
        os.close(fd)


def clear_ipc_and_keys():
    """SysV IPC objects and the uid's keyrings outlive processes: remove them (IPC_RMID, KEYCTL_CLEAR)."""
    for kind, fn, args in (("shm", libc.shmctl, (0, None)), ("msg", libc.msgctl, (0, None))):
        _ipc_rmid(kind, lambda ident, fn=fn, args=args: fn(ident, *args))
    _ipc_rmid("sem", lambda ident: libc.semctl(ident, 0, 0))
    nr = SYS_KEYCTL.get(os.uname().machine)
    if nr is not None:
        for keyring in (-4, -5):  # KEY_SPEC_USER_KEYRING, KEY_SPEC_USER_SESSION_KEYRING; ENOSYS under seccomp
            libc.syscall(nr, 7, keyring)  # KEYCTL_CLEAR


def _ipc_rmid(kind, remove):
    try:
        with open(f"/proc/sysvipc/{kind}") as f:
            lines = f.read().splitlines()[1:]
    except OSError:
        return
    for line in lines:
        remove(int(line.split()[1]))
