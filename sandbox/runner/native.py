"""C's two jobs for compiled languages (C++): compile a source with the sandbox's g++, or run a binary.

Compiling runs g++ as C's child under the compile limits the host sends (C's rlimits, inherited): no program runs,
only the compiler, on text. The binary goes back to the host, which caches it by the hash of source and flags and
sends it with each job (base64); S decodes it once and sends each test's C its raw bytes after the first frame: every
test gets its own copy, in a sealed memfd, so no submission can ever write the binary another run executes. Running
sets the limits (the stack as large as the memory limit, as Codeforces gives) and execs the binary in C's place: its
exit status is C's, as Z's wait4 reports it.

`bits/stdc++.h` is precompiled with exactly CPP_FLAGS (GCC uses a .gch only when the flags and macros match): the
image builds it with `--build-pch /opt/sandbox/pch`, the local backend into its cache (sandbox/pch.py) and binds that
directory at PCH_DIR. A compile puts `-I PCH_DIR` first when the .gch is there, so `#include <bits/stdc++.h>` finds
PCH_DIR/bits/stdc++.h.gch; where GCC cannot use it (another -std, a macro defined before the include, another
compiler build, an include before it), it goes on to the next directory and reads the real header: slower, the same
program.
"""

from __future__ import annotations

import base64
import fcntl
import os
import resource
import shutil
import subprocess
import tempfile

from .confine import apply_limits
from .frames import recv_bytes, send_frame

COMPILER = "g++"
CPP_FLAGS = ("-O2", "-std=gnu++17", "-DONLINE_JUDGE", "-pipe")  # as Codeforces and open-r1 compile
PCH_DIR = "/opt/sandbox/pch"  # where a sandbox finds bits/stdc++.h.gch (the runner's --pch may say elsewhere)
PCH_FILE = os.path.join("bits", "stdc++.h.gch")
PCH_PROBE = "#include <bits/stdc++.h>\n#error pch-probe\n"  # -H traces the .gch as "! DIR/bits/stdc++.h.gch"
PCH_PROBE_FLAGS = ("-H", "-Winvalid-pch")
MFD_ALLOW_SEALING = getattr(os, "MFD_ALLOW_SEALING", 2)
F_ADD_SEALS = getattr(fcntl, "F_ADD_SEALS", 1033)
F_SEAL_SEAL, F_SEAL_SHRINK, F_SEAL_GROW, F_SEAL_WRITE = 1, 2, 4, 8
DIAGNOSTICS_BYTES = 8192  # what C reads of the compiler's messages: the host shows the first lines


def compiler():
    """The path of the sandbox's C++ compiler, or None."""
    return shutil.which(COMPILER, path="/usr/local/bin:/usr/bin:/bin")


def pch_flags(directory=None):
    """["-I", DIR] when DIR holds the precompiled bits/stdc++.h, else []."""
    directory = directory or PCH_DIR
    return ["-I", directory] if os.path.isfile(os.path.join(directory, PCH_FILE)) else []


def build_pch(directory, gxx=None, flags=CPP_FLAGS):
    """Precompile bits/stdc++.h with `flags` into DIRECTORY/bits/stdc++.h.gch (built and checked aside, then renamed
    into place), and check that g++ uses it; return its path, or raise RuntimeError saying why not."""
    gxx = gxx or compiler()
    if gxx is None:
        raise RuntimeError(f"no {COMPILER} to precompile bits/stdc++.h with")
    os.makedirs(os.path.join(directory, "bits"), mode=0o755, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=".pch-", dir=directory) as tmp:
        header = os.path.join(tmp, "stdc++.h")  # includes the real one, wherever this compiler keeps it
        probe = os.path.join(tmp, "probe.cpp")
        with open(header, "w") as f:
            f.write("#include <bits/stdc++.h>\n")
        with open(probe, "w") as f:
            f.write("#include <bits/stdc++.h>\nint main() { std::vector<int> v{0}; return v[0]; }\n")
        built = os.path.join(tmp, PCH_FILE)
        os.mkdir(os.path.dirname(built))
        _gxx([gxx, *flags, "-x", "c++-header", header, "-o", built], "precompiling bits/stdc++.h")
        out = _gxx([gxx, *flags, "-I", tmp, *PCH_PROBE_FLAGS, "-fsyntax-only", probe], "checking the .gch")
        if pch_used(out, tmp) is not True:
            raise RuntimeError(f"g++ does not use the .gch it built: {out[:500]}")
        os.chmod(built, 0o644)
        target = os.path.join(directory, PCH_FILE)
        os.replace(built, target)
    return target


PCH_BUILD_TIMEOUT_S = 600  # precompiling bits/stdc++.h takes seconds; a hung g++ must not hold its thread forever


def _gxx(argv, what):
    try:
        done = subprocess.run(
            argv,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            env={"PATH": "/usr/bin:/bin"},
            timeout=PCH_BUILD_TIMEOUT_S,
        )
    except subprocess.TimeoutExpired:
        raise RuntimeError(f"{what} ran past {PCH_BUILD_TIMEOUT_S} s") from None
    out = (done.stdout + done.stderr).decode("utf-8", "replace")
    if done.returncode != 0:
        raise RuntimeError(f"{what} failed (exit status {done.returncode}): {out[:500]}")
    return out


def pch_used(diagnostics, directory=None):
    """What g++'s messages under PCH_PROBE_FLAGS say: True (it read DIR/bits/stdc++.h.gch), False (it found it and
    could not use it: -Winvalid-pch says why), None (it found none)."""
    marker = os.path.join(directory or PCH_DIR, PCH_FILE)
    for line in diagnostics.splitlines():
        if line.startswith("! ") and line[2:].strip() == marker:
            return True
        if marker in line and "not used because" in line:
            return False
    return None


def compile_cpp(job, work, sock, nproc, env):
    """Compile job["program"] (C++ source) with job["flags"]; send the binary, or the compiler's messages."""
    gxx = compiler()
    if gxx is None:
        send_frame(sock, {"no_compiler": True})
        return
    with open(os.path.join(work, "main.cpp"), "w", encoding="utf-8", errors="surrogatepass") as f:
        f.write(job["program"])
    include = [] if job.get("pch") is False else pch_flags()  # False: without it (tests and bench/cpp_compile.py)
    apply_limits(job["limits"], nproc)  # the compiler's processes inherit them
    log = os.path.join(work, "diagnostics.txt")
    with open(log, "wb") as out:
        try:
            status = subprocess.call(
                [gxx, *include, *job["flags"], "-o", "main", "main.cpp"], stdin=subprocess.DEVNULL, stdout=out,
                stderr=out, cwd=work, env=env,
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
    """Exec the binary (job["binary"] raw bytes after the job's frame, S decoded them) under the test's limits, from
    a sealed memfd: the scratch dir may be mounted noexec (Docker's tmpfs is), and nothing, the program included,
    can change the binary it runs. Every test writes its own memfd: no test's binary is another's."""
    binary = recv_bytes(sock, job["binary"])
    if binary is None:  # S is gone
        return
    fd = os.memfd_create("main", os.MFD_CLOEXEC | MFD_ALLOW_SEALING)
    view = memoryview(binary)
    while view:  # before the file-size limit: ours to write (one write may take less than all of it)
        view = view[os.write(fd, view) :]
    del view, binary
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
