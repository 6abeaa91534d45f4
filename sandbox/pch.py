"""The precompiled `bits/stdc++.h` of the local backend, on the host's side.

Compiling a program that includes bits/stdc++.h takes about 1 s at -O2, nearly all of it the header; with the header
precompiled (a .gch built with exactly the flags programs compile with: runner/native.py) about 0.3 s. The sandbox
image builds its own (sandbox/image/Dockerfile). The local backend uses the host's g++, so its .gch is built on the
host, once per compiler: `make install` builds it (`python -m sandbox.pch`), and a local executor that finds none
builds it as it starts, in the background (programs compile without it meanwhile). It lives in a cache directory of
the service's own, one subdirectory per compiler build and flags (a g++ upgrade gets a new one: GCC rejects a .gch of
another build), which each jail binds read-only at /opt/sandbox/pch (without bubblewrap the runner is told its path).
A service that is not root takes root's (/var/cache/verifier-sandbox/pch: the service image's build makes it when it
has g++) where it is there, else its own under ~/.cache.

    python -m sandbox.pch [--dir ROOT]    # build it if missing; print its directory
"""

from __future__ import annotations

import argparse
import fcntl
import hashlib
import logging
import os
import stat
import subprocess
import sys
from pathlib import Path

from sandbox.runner import native

log = logging.getLogger(__name__)

ENV = {"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8"}


SYSTEM_ROOT = Path("/var/cache/verifier-sandbox/pch")


def cache_root() -> Path:
    """Where the local backend keeps its .gch: /var/cache/verifier-sandbox/pch as root (readable by the sandbox
    uids: never under root's home), else $XDG_CACHE_HOME (~/.cache)/verifier-sandbox/pch."""
    if os.geteuid() == 0:
        return SYSTEM_ROOT
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base, "verifier-sandbox", "pch")


def compiler_key(gxx: str) -> str:
    """What a .gch depends on: the compiler's build (its version line, its cc1plus file) and the flags."""
    version = _output([gxx, "--version"]).partition("\n")[0]
    cc1plus = _output([gxx, "-print-prog-name=cc1plus"]).strip()
    try:
        st = os.stat(cc1plus)
        build = f"{st.st_size}:{st.st_mtime_ns}"
    except OSError:
        build = "?"
    what = repr((os.path.realpath(gxx), version, cc1plus, build, native.CPP_FLAGS))
    return hashlib.sha256(what.encode()).hexdigest()[:16]


def local_dir(root: Path | None = None) -> Path | None:
    """This host's directory for the .gch of its g++ (which may not hold it yet), or None without g++."""
    gxx = native.compiler()
    if gxx is None:
        return None
    try:
        key = compiler_key(gxx)
    except (OSError, subprocess.SubprocessError):
        return None
    if root is None and present(SYSTEM_ROOT / key):  # built by root (an image's build, `sudo make pch`): it will do
        return SYSTEM_ROOT / key
    return (root or cache_root()) / key


def prepare(directory: Path) -> str | None:
    """Make DIRECTORY (and its bits/) ours, 0755: a jail binds it at start, before any build. None, or why not."""
    try:
        directory.parents[1].parent.mkdir(mode=0o755, parents=True, exist_ok=True)
        for path in (*reversed(directory.parents[:2]), directory, directory / "bits"):
            path.mkdir(mode=0o755, exist_ok=True)
            st = path.lstat()
            if not stat.S_ISDIR(st.st_mode) or st.st_uid not in (0, os.geteuid()):
                return f"{path} is not a directory of this user's or root's"
            if st.st_mode & 0o022:  # the umask may have left it group-writable: nobody else may write a .gch
                if st.st_uid != os.geteuid():
                    return f"{path} is writable by others"
                os.chmod(path, 0o755)
    except OSError as exc:
        return f"cannot make {directory}: {exc.strerror}"
    if os.geteuid() == 0:  # the jails run as other uids, and bubblewrap binds the directory as theirs
        shut = next((p for p in directory.parents if not p.stat().st_mode & stat.S_IXOTH), None)
        if shut is not None:
            return f"{directory} is out of the sandbox users' reach ({shut} is closed to others)"
    return None


def present(directory: Path) -> bool:
    return (directory / native.PCH_FILE).is_file()


def ensure(directory: Path) -> str | None:
    """Build DIRECTORY/bits/stdc++.h.gch unless it is there (one build at a time per directory, across processes).
    None when it is there, or why it is not."""
    problem = prepare(directory)
    if problem is not None:
        return problem
    if present(directory):
        return None
    try:
        with open(directory / ".lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # another process may be building it: wait, then look again
            if not present(directory):
                log.info("precompiling bits/stdc++.h for C++ programs into %s (a few seconds, once)", directory)
                native.build_pch(str(directory))
    except (OSError, RuntimeError) as exc:
        return f"precompiling bits/stdc++.h failed: {exc}"
    return None


def _output(argv: list[str]) -> str:
    return subprocess.run(argv, capture_output=True, text=True, timeout=30, env=ENV, check=True).stdout


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Precompile bits/stdc++.h for the local sandbox backend.")
    parser.add_argument("--dir", type=Path, help=f"the cache root (default: {cache_root()})")
    opts = parser.parse_args(argv)
    directory = local_dir(opts.dir)
    if directory is None:
        print("no g++ here: nothing to precompile (C++ programs need it: make system-deps)", file=sys.stderr)
        return 0
    problem = ensure(directory)
    if problem is not None:
        print(f"warning: {problem}; C++ programs compile without it (about 1 s slower each)", file=sys.stderr)
        return 1
    print(directory)
    return 0


if __name__ == "__main__":
    sys.exit(main())
