"""The sandbox runner: the trusted half of the sandbox, running inside the isolation (a container or bubblewrap).

`--serve` handles jobs from stdin until EOF; __init__.py says how. In a sandbox it runs as a zipapp whose own
__main__.py calls `main()`: `python3 -I -B /opt/sandbox/runner.pyz --serve`. `--build-pch DIR` precompiles
bits/stdc++.h for C++ programs into DIR (native.py; the image's build runs it) and exits.
"""

from __future__ import annotations

import argparse
import os
import sys

from . import native
from .supervisor import Supervisor


def main(argv=None):
    forget_archive()
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--serve", action="store_true", help="handle jobs from stdin until EOF")
    parser.add_argument("--scratch", default="/tmp", help="where per-test scratch dirs go (wiped after each test)")
    parser.add_argument("--drop-uid", type=int, help="if root: run the program (and tests) as this uid")
    parser.add_argument("--drop-gid", type=int, default=65534)
    parser.add_argument("--cpu", type=int, help="pin the sandbox to this CPU")
    parser.add_argument(
        "--nproc-base",
        type=int,
        default=3,
        help="the runner's own tasks under the program's uid: S, Z and T (3) in a container or jail, T alone (1) "
        "where S and Z run as root; 0: no process limit (S, Z and the program share a uid with other processes)",
    )
    parser.add_argument("--pch", default=native.PCH_DIR, help="where the precompiled bits/stdc++.h is, if anywhere")
    parser.add_argument("--build-pch", metavar="DIR", help="precompile bits/stdc++.h into DIR, then exit")
    opts = parser.parse_args(argv)
    if opts.build_pch:
        try:
            print(native.build_pch(opts.build_pch))
        except (OSError, RuntimeError) as exc:
            sys.exit(f"--build-pch: {exc}")
        return
    if not opts.serve:
        parser.error("nothing to do: pass --serve")
    native.PCH_DIR = opts.pch
    Supervisor(opts).serve()


def forget_archive():
    """Run as a zipapp, the runner's archive is sys.path[0]. Every module of the runner is imported by now: out of
    the path with it, so that neither the programs' imports nor the tester's list of importable modules find it (as
    with -I for a runner that was one script)."""
    archive = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    if archive in sys.path:
        sys.path.remove(archive)


if __name__ == "__main__":
    main()
