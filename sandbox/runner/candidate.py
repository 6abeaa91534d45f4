"""C, the candidate: one process per test that runs the program. It reports data, never a verdict: its stdout (S
reads it from a pipe), or the values its functions return, encoded as plain JSON types by exact type.

The program is a real module, from a real file, main.py in its scratch dir (first on sys.path), as `python main.py`
would make it: pickle, multiprocessing (fork, spawn or forkserver), dataclasses and typing find its functions and
classes through sys.modules. A stdio test runs it as `__main__`; call and assert tests import it as `main`, as a
harness importing a solution would, so its `if __name__ == "__main__":` block (a demo, or code reading stdin that
the test does not give) does not run there.
"""

from __future__ import annotations

import atexit
import base64
import builtins
import contextlib
import importlib.machinery
import importlib.util
import json
import os
import signal
import socket
import sys
import tempfile
import types
from collections.abc import Callable
from typing import Any

from .confine import apply_limits, deny_syscalls, drop_privileges
from .frames import describe, recv_frame, send_frame
from .native import compile_cpp, run_binary
from .procs import PR_SET_DUMPABLE, PR_SET_PDEATHSIG, prctl
from .values import Malformed, Unserializable, decode, encode

UNARY_OPS: dict[str, Callable[[Any], object]] = {"iter": list, "len": len, "bool": bool, "str": str, "repr": repr}
CHILD_ENV = {"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8", "PYTHONDONTWRITEBYTECODE": "1"}


def candidate_main(opts):
    sock = socket.socket(fileno=3)
    # What needs no job is done before it comes: C is forked ahead of its test, while S waits for the next job.
    os.setsid()
    drop_privileges(opts)
    work = tempfile.mkdtemp(prefix="run-", dir=opts.scratch)
    os.chdir(work)
    deny_syscalls(opts.bpf)
    os.environ.clear()
    os.environ.update(CHILD_ENV, HOME=work, TMPDIR=work)
    prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the file-size limit fails with EFBIG instead
    try:
        with open("/proc/self/oom_score_adj", "w") as f:
            f.write("1000")  # if memory runs out, the program goes first
    except OSError:
        pass
    job = recv_frame(sock)
    if job is None:
        return
    write_files(work, job.get("files"))  # a checker's input, output and answer; testlib.h for a compile
    if job["mode"] in ("compile", "native"):  # C++: compile a source, or run a binary (native.py)
        nproc = opts.nproc_base - 1 if opts.nproc_base else None
        env = dict(CHILD_ENV, HOME=work, TMPDIR=work)
        (compile_cpp if job["mode"] == "compile" else run_binary)(job, work, sock, nproc, env)
        return
    path = os.path.join(work, "main.py")
    with open(path, "w", encoding="utf-8", errors="surrogatepass") as f:  # before the file-size limit: ours to write
        f.write(job["program"])
    sys.path.insert(0, work)
    tester = job["mode"] == "rpc"  # an assert test: T, another task of the uid, is there while the program runs
    apply_limits(job["limits"], opts.nproc_base - (0 if tester else 1) if opts.nproc_base else None)
    prctl(PR_SET_DUMPABLE, 1)  # its own /proc is the program's business; S, Z and T stay non-dumpable
    sys.stdin = open(0, encoding="utf-8", errors="surrogateescape", closefd=False)  # noqa: SIM115
    sys.stdout = open(1, "w", encoding="utf-8", closefd=False)  # noqa: SIM115
    sys.stderr = open(2, "w", encoding="utf-8", errors="backslashreplace", closefd=False)  # noqa: SIM115
    sys.argv = ["main.py", *(job.get("argv") or ())]
    try:
        code = compile(job["program"], "main.py", "exec", dont_inherit=True)
    except BaseException as exc:
        send_frame(sock, {"compile_error": describe(exc)})
        return
    send_frame(sock, {"compiled": True})  # the first frame, before any of the program runs: a later one is forged
    if job["mode"] == "stdio":
        os._exit(run_main(code, program_module("__main__", path), sock))
    serve_calls(code, program_module("main", path), sock)


def write_files(work, files):
    """Files the host sends with a test (names it checked: plain names, none of the runner's own), base64."""
    for name, data in (files or {}).items():
        with open(os.path.join(work, os.path.basename(name)), "wb") as f:
            f.write(base64.b64decode(data))


def program_module(name, path):
    """An empty module for the program, in sys.modules: `__main__` as `python main.py` makes it (no spec, so that a
    process multiprocessing spawns runs the file again, as __mp_main__), or `main` as `import main` would."""
    loader = importlib.machinery.SourceFileLoader(name, path)
    if name == "__main__":
        module = types.ModuleType(name)
        module.__dict__.update(__file__=path, __cached__=None, __loader__=loader, __package__=None, __spec__=None)
    else:
        spec = importlib.util.spec_from_file_location(name, path, loader=loader)
        assert spec is not None  # a file location always makes one
        module = importlib.util.module_from_spec(spec)
    module.__dict__["__builtins__"] = builtins
    sys.modules[name] = module
    return module


def run_main(code, module, sock):
    """Run the program as __main__ the way `python main.py` does; return its exit status."""
    status = 0
    try:
        exec(code, module.__dict__)
    except SystemExit as exc:
        status = exc.code if type(exc.code) is int else (0 if exc.code is None else 1)
        if exc.code is not None and type(exc.code) is not int:
            print(exc.code, file=sys.stderr)
    except BaseException as exc:
        status = 1
        _report(sock, {"raised": describe(exc), "exc": type(exc).__name__})
        try:
            import traceback

            traceback.print_exception(type(exc), exc, exc.__traceback__, limit=5)
        except BaseException:
            pass
    try:
        if "threading" in sys.modules:
            sys.modules["threading"]._shutdown()
        atexit._run_exitfuncs()
        sys.stdout.flush()
        sys.stderr.flush()
    except BaseException:
        status = status or 1
    return status & 0xFF


def _report(sock, obj):
    with contextlib.suppress(OSError):
        send_frame(sock, obj)


def serve_calls(code, module, sock):
    """Load the program, announce its names, then answer requests from the driver (S or T) until EOF."""
    ns = module.__dict__
    try:
        exec(code, ns)
    except BaseException as exc:
        send_frame(sock, {"load_error": describe(exc), "exc": type(exc).__name__})
        return
    objects: list[object] = []
    ids: dict[int, int] = {}

    def register(obj):
        if id(obj) not in ids:
            ids[id(obj)] = len(objects)
            objects.append(obj)
        return ids[id(obj)]

    send_frame(sock, {"ready": exports(ns, register)})
    while True:
        try:
            req = recv_frame(sock)
        except Malformed:
            return
        if req is None:
            return
        send_frame(sock, answer(req, objects, register))


def exports(ns, register):
    out = {}
    for name, value in list(ns.items())[:10000]:
        if name.startswith("__"):
            continue
        if isinstance(value, types.ModuleType):
            out[name] = ["module", str(value.__name__)]
        elif isinstance(value, (types.FunctionType, types.BuiltinFunctionType)):
            out[name] = ["function", register(value)]
        elif callable(value):
            out[name] = ["object", register(value)]
        else:
            try:
                data = encode(value)
                out[name] = ["value", data] if len(json.dumps(data)) < 1 << 16 else ["object", register(value)]
            except (Unserializable, ValueError):
                out[name] = ["object", register(value)]
    return out


def answer(req, objects, register):
    try:
        rid, op = req["target"], req["op"]
        target = objects[rid] if type(rid) is int and 0 <= rid < len(objects) else None
        if target is None:
            raise Malformed("unknown target")
        arg = lambda key: decode(req[key], objects.__getitem__)  # noqa: E731
        if op == "call":
            result = target(*arg("args"), **arg("kwargs"))
        elif op == "getattr":
            result = getattr(target, req["name"])
        elif op == "setattr":
            setattr(target, req["name"], arg("value"))
            result = None
        elif op == "getitem":
            result = target[arg("key")]
        elif op == "contains":
            result = arg("item") in target
        else:
            result = UNARY_OPS[op](target)
        return {"value": encode(result, None if req.get("plain") else register)}
    except Unserializable as exc:
        return {"unserializable": str(exc)[:100]}
    except BaseException as exc:
        return {"raised": describe(exc), "exc": type(exc).__name__}
