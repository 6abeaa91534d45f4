"""The sandbox runner: the trusted half of the sandbox, running inside the isolation (a container or bubblewrap).

A stdlib-only package (Python 3.9+) that imports nothing else of this project. The sandbox image packs it into a
zipapp, /opt/sandbox/runner.pyz; the local backend builds the same archive in memory and binds it there. The host
imports it as `sandbox.runner` for the value encoding (importing it has no side effects).

Processes inside one sandbox instance (THREAT-MODEL.md in the folder above says what each one stops):
  S  supervisor (`--serve`, supervisor.py, one test's event loop in testrun.py, the clean-up in wipe.py): reads jobs
     as JSON lines on stdin, answers on stdout, enforces wall time and output caps, and after each test kills every
     other process but Z and wipes every writable place (finishing that while the host reads the test's facts, which
     are final once every process has a SIGKILL pending). Non-dumpable, so nothing of its uid can ptrace it, read
     its memory or open its fds through /proc; PID 1 of the sandbox's PID namespace where there is one, so nothing
     inside can signal it either.
  Z  zygote (zygote.py): forked by S before the first job, so its memory holds no program, test or expected value;
     each test process is a fork of Z (no interpreter start, no earlier submission in memory). Child subreaper:
     whatever a test starts stays below it, however it daemonises. Reports the exit status of the processes it
     forks. Forks the next test's processes as soon as the last test is cleaned up, ahead of the next job.
  C  candidate, one per test (candidate.py): rlimits, a new session, a fresh scratch dir, a clean environment
     (confine.py), then the program. It reports data, never a verdict: stdout, or values encoded as plain JSON types
     by exact type (values.py).
  T  tester, one per `assert` test (tester.py): runs the test code with the program's names bound to proxies that
     call into C. The asserts run in T's own address space: C can stop or kill T, never change what it computes or
     reports.
Host <-> S: {"job", "program", "tests": [{"kind": "stdio"|"call"|"assert", ...}], "limits"} in; per test
{"job", "i", "facts"} (or {"job", "compile_error"}), then {"job", "done"}, then {"job", "clean"} once S is ready
for the next job, out; {"job", "fatal"} before S gives up (after "done", in place of "clean", when the clean-up after
a job's last test fails). A binary's job ("binary": true, the program its base64) is S's to keep until the next: a
job with "same_program" (program null) runs the binary S last got. Between S, Z, C and T: frames (frames.py) over
socket pairs; a native test's binary follows C's first frame as raw bytes.
"""

from __future__ import annotations

from .procs import KILL_TIMEOUT_S, proc_pids
from .values import Malformed, Unserializable, decode, encode

__all__ = ["KILL_TIMEOUT_S", "Malformed", "Unserializable", "decode", "encode", "proc_pids"]
