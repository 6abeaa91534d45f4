"""Run as a script by tests/unit/test_forked.py: a process set up as the pool sets up its workers (`--dumpable`: then
made dumpable again, as they were before) runs a call in a throwaway fork that tries to rewrite a buffer of the
process through /proc/<pid>/mem; prints what the call got and the buffer afterwards."""

from __future__ import annotations

import ctypes
import os
import sys

from verifier_service import pool
from verifier_service.scoring.forked import run_forked


def attempt(address: int) -> str:
    try:
        with open(f"/proc/{os.getppid()}/mem", "r+b", buffering=0) as mem:
            mem.seek(address)
            mem.write(b"guard=off")
    except OSError as exc:
        return type(exc).__name__
    return "wrote"


def main() -> None:
    pool._die_with_parent()  # what a worker does first: its parent's death kills it, and it is not dumpable
    if "--dumpable" in sys.argv:
        ctypes.CDLL(None).prctl(pool._PR_SET_DUMPABLE, 1, 0, 0, 0)
    flag = bytearray(b"guard=on ")
    address = ctypes.addressof((ctypes.c_char * len(flag)).from_buffer(flag))
    print(run_forked(lambda: attempt(address), 5.0), bytes(flag).decode())


if __name__ == "__main__":
    main()
