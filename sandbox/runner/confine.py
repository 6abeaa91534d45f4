"""What a test's processes (C, T) do to confine themselves: rlimits, a seccomp filter, an unprivileged uid."""

from __future__ import annotations

import contextlib
import ctypes
import math
import os
import resource
import struct

from .procs import PR_SET_NO_NEW_PRIVS, PR_SET_SECCOMP, libc, prctl

# Kept from programs (EPERM): sched_setaffinity (a sandbox's CPU pinning holds), keyctl, add_key, request_key
# (keyrings outlive processes), ptrace, process_vm_readv/writev, unshare, setns. Also every non-native ABI.
DENIED_SYSCALLS = {
    "x86_64": (0xC000003E, (203, 250, 248, 249, 101, 310, 311, 272, 308)),
    "aarch64": (0xC00000B7, (122, 219, 217, 218, 117, 270, 271, 97, 268)),
}


THREAD_STACK = 4 << 20


def apply_limits(limits, nproc):
    """`nproc`: the runner's own tasks under the process's uid, on top of the program's `max_processes` (RLIMIT_NPROC
    counts every task of a uid); None: no process limit."""
    mib = 1 << 20
    cpu = max(1, math.ceil(limits["cpu_s"]))
    for res, value in (
        (resource.RLIMIT_AS, limits["memory_mb"] * mib),
        (resource.RLIMIT_CPU, (cpu, cpu + 1)),
        (resource.RLIMIT_FSIZE, limits["max_file_mb"] * mib),
        (resource.RLIMIT_CORE, 0),
        (resource.RLIMIT_MSGQUEUE, 0),
        (resource.RLIMIT_NOFILE, 1024),
        (resource.RLIMIT_NPROC, (limits["max_processes"] + nproc) if nproc is not None else None),
    ):
        if value is not None:
            resource.setrlimit(res, value if isinstance(value, tuple) else (value, value))


def small_thread_stacks():
    """Threads get 4 MB stacks by default, not the 8 MB of RLIMIT_STACK: RLIMIT_AS counts the address space a stack
    reserves, not what it uses, and 64 threads of 8 MB would exhaust the default 512 MB while using next to nothing.
    A program that needs a deeper stack in a thread asks for it (threading.stack_size), as past 8 MB it must anyway.
    Set once in Z: every fork of it inherits the default; a fresh interpreter (exec) starts from glibc's again."""
    attr = ctypes.create_string_buffer(128)  # a pthread_attr_t: 56 bytes on x86-64, 64 on arm64
    with contextlib.suppress(AttributeError):  # a libc without pthread_setattr_default_np keeps its own default
        if libc.pthread_attr_init(attr) == 0:
            libc.pthread_attr_setstacksize(attr, ctypes.c_size_t(THREAD_STACK))
            libc.pthread_setattr_default_np(attr)
            libc.pthread_attr_destroy(attr)


class _Fprog(ctypes.Structure):
    _fields_ = (("len", ctypes.c_ushort), ("filter", ctypes.c_void_p))


def seccomp_filter():
    """The BPF program for DENIED_SYSCALLS on this machine (None where the arch is unknown); built once, in Z."""
    arch = DENIED_SYSCALLS.get(os.uname().machine)
    if arch is None:
        return None
    audit, numbers = arch
    n, deny, allow = len(numbers), 0x00050000 | 1, 0x7FFF0000  # SECCOMP_RET_ERRNO | EPERM, SECCOMP_RET_ALLOW
    code = [(0x20, 0, 0, 4), (0x15, 1, 0, audit), (0x06, 0, 0, deny), (0x20, 0, 0, 0), (0x35, n + 1, 0, 0x40000000)]
    code += [(0x15, n - i, 0, nr) for i, nr in enumerate(numbers)] + [(0x06, 0, 0, allow), (0x06, 0, 0, deny)]
    program = ctypes.create_string_buffer(b"".join(struct.pack("HBBI", *op) for op in code))
    return program, _Fprog(len(code), ctypes.addressof(program))


def deny_syscalls(bpf):
    """Install the seccomp filter: irrevocable, inherited by every child."""
    if bpf is None:
        return
    prctl(PR_SET_NO_NEW_PRIVS, 1)
    if libc.prctl(PR_SET_SECCOMP, 2, ctypes.byref(bpf[1]), 0, 0) != 0:  # SECCOMP_MODE_FILTER
        raise OSError(ctypes.get_errno(), "seccomp")


def drop_privileges(opts):
    if opts.drop_uid is not None and os.geteuid() == 0:
        os.setgroups([])
        os.setgid(opts.drop_gid)
        os.setuid(opts.drop_uid)
