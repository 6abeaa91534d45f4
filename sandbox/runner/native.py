"""C's two jobs for compiled languages (C++): compile a source with the sandbox's g++, or run a binary.

Compiling runs g++ as C's child under the compile limits the host sends (C's rlimits, inherited): no program runs,
only the compiler, on text. The binary goes back to the host, which caches it by the hash of source and flags and
sends it with each test: every test gets its own copy, in a sealed memfd, so no submission can ever write the binary
another run executes. Running sets the limits (the stack as large as the memory limit, as Codeforces gives) and execs
the binary in C's place: its exit status is C's, as Z's wait4 reports it.
"""

from __future__ import annotations

import base64
import fcntl
import os
import resource
import shutil
import subprocess

from .confine import apply_limits
from .frames import send_frame

COMPILER = "g++"
MFD_ALLOW_SEALING = getattr(os, "MFD_ALLOW_SEALING", 2)
F_ADD_SEALS = getattr(fcntl, "F_ADD_SEALS", 1033)
F_SEAL_SEAL, F_SEAL_SHRINK, F_SEAL_GROW, F_SEAL_WRITE = 1, 2, 4, 8
DIAGNOSTICS_BYTES = 8192  # what C reads of the compiler's messages: the host shows the first lines


def compiler():
    """The path of the sandbox's C++ compiler, or None."""
    return shutil.which(COMPILER, path="/usr/local/bin:/usr/bin:/bin")


def compile_cpp(job, work, sock, nproc, env):
    """Compile job["program"] (C++ source) with job["flags"]; send the binary, or the compiler's messages."""
    gxx = compiler()
    if gxx is None:
        send_frame(sock, {"no_compiler": True})
        return
    with open(os.path.join(work, "main.cpp"), "w", encoding="utf-8", errors="surrogatepass") as f:
        f.write(job["program"])
    apply_limits(job["limits"], nproc)  # the compiler's processes inherit them
    log = os.path.join(work, "diagnostics.txt")
    with open(log, "wb") as out:
        try:
            status = subprocess.call(
                [gxx, *job["flags"], "-o", "main", "main.cpp"], stdin=subprocess.DEVNULL, stdout=out, stderr=out,
                cwd=work, env=env,
            )  # fmt: skip
        except OSError as exc:
            send_frame(sock, {"diagnostics": f"the compiler did not start: {exc}", "status": -1})
            return
    with open(log, "rb") as f:
        diagnostics = f.read(DIAGNOSTICS_BYTES).decode("utf-8", "replace")
    binary = os.path.join(work, "main")
    if status != 0 or not os.path.isfile(binary):
        send_frame(sock, {"diagnostics": diagnostics, "status": status})
        return
    size, cap = os.path.getsize(binary), job["limits"]["max_file_mb"] << 20
    if size > cap:
        send_frame(sock, {"diagnostics": f"the binary is {size} bytes, over the {cap} byte cap", "status": 0})
        return
    with open(binary, "rb") as f:
        send_frame(sock, {"binary_b64": base64.b64encode(f.read()).decode("ascii")})


def run_binary(job, work, sock, nproc, env):
    """Exec the binary (base64 in job["program"]) under the test's limits, from a sealed memfd: the scratch dir may
    be mounted noexec (Docker's tmpfs is), and nothing, the program included, can change the binary it runs."""
    fd = os.memfd_create("main", os.MFD_CLOEXEC | MFD_ALLOW_SEALING)
    os.write(fd, base64.b64decode(job["program"]))  # before the file-size limit: ours to write
    fcntl.fcntl(fd, F_ADD_SEALS, F_SEAL_SEAL | F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE)
    limits = job["limits"]
    apply_limits(limits, nproc)
    stack = limits["memory_mb"] << 20
    resource.setrlimit(resource.RLIMIT_STACK, (stack, stack))
    send_frame(sock, {"compiled": True})  # the first frame, before the program runs
    os.set_inheritable(sock.fileno(), False)  # the program gets stdin, stdout and stderr only
    try:
        os.execve(fd, [os.path.join(work, "main"), *(job.get("argv") or ())], env)
    except OSError as exc:
        send_frame(sock, {"raised": f"the program did not start: {exc.strerror}", "exc": "OSError"})
