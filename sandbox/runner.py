"""The sandbox runner: the trusted half of the sandbox, running inside the isolation (a container or bubblewrap).

One stdlib-only file (Python 3.9+): the image copies it to /opt/sandbox/runner.py, the local backend binds it there,
and the host imports it as `sandbox.runner` for the value encoding (importing it has no side effects).

Processes inside one sandbox instance (THREAT-MODEL.md in this folder says what each one stops):
  S  supervisor (`--serve`): reads jobs as JSON lines on stdin, answers on stdout, enforces wall time and output caps,
     and after each test kills every other process but Z and wipes every writable place (finishing that while the
     host reads the test's facts, which are final once every process has a SIGKILL pending). Non-dumpable, so
     nothing of its uid can ptrace it, read its memory or open its fds through /proc; PID 1 of the sandbox's PID
     namespace where there is one, so nothing inside can signal it either.
  Z  zygote: forked by S before the first job, so its memory holds no program, test or expected value; each test
     process is a fork of Z (no interpreter start, no earlier submission in memory). Child subreaper: whatever a
     test starts stays below it, however it daemonises. Reports the exit status of the processes it forks. Forks
     the next test's processes as soon as the last test is cleaned up, ahead of the next job.
  C  candidate, one per test: rlimits, a new session, a fresh scratch dir, a clean environment, then the program.
     It reports data, never a verdict: stdout, or values encoded as plain JSON types by exact type.
  T  tester, one per `assert` test: runs the test code with the program's names bound to proxies that call into C.
     The asserts run in T's own address space: C can stop or kill T, never change what it computes or reports.
Host <-> S: {"job", "program", "tests": [{"kind": "stdio"|"call"|"assert", ...}], "limits"} in; per test
{"job", "i", "facts"} (or {"job", "compile_error"}), then {"job", "done"}, then {"job", "clean"} once S is ready
for the next job, out; {"job", "fatal"} before S gives up (after "done", in place of "clean", when the clean-up after
a job's last test fails).
"""

from __future__ import annotations

import argparse
import atexit
import base64
import builtins
import contextlib
import ctypes
import fcntl
import gc
import importlib
import json
import math
import os
import pkgutil
import resource
import select
import selectors
import signal
import socket
import stat
import struct
import sys
import tempfile
import time
import types
from collections.abc import Callable
from typing import Any

PROTOCOL = 1
MAX_DEPTH = 100  # nesting of an encoded value
FRAME_MAX = 256 << 20
BIG_INT_BITS = 4096  # larger ints travel as hex: str(int) is capped at 4300 digits
KILL_TIMEOUT_S = 5.0
LINGER_S = 0.2  # after a program vanished mid-call: wait this long for its exit status
PR_SET_PDEATHSIG, PR_SET_DUMPABLE, PR_SET_SECCOMP, PR_SET_CHILD_SUBREAPER, PR_SET_NO_NEW_PRIVS = 1, 4, 22, 36, 38
SYS_KEYCTL = {"x86_64": 250, "aarch64": 219}
# Kept from programs (EPERM): sched_setaffinity (a sandbox's CPU pinning holds), keyctl, add_key, request_key
# (keyrings outlive processes), ptrace, process_vm_readv/writev, unshare, setns. Also every non-native ABI.
DENIED_SYSCALLS = {
    "x86_64": (0xC000003E, (203, 250, 248, 249, 101, 310, 311, 272, 308)),
    "aarch64": (0xC00000B7, (122, 219, 217, 218, 117, 270, 271, 97, 268)),
}
RERAISABLE = ("ValueError", "TypeError", "KeyError", "IndexError", "ZeroDivisionError", "ArithmeticError",
              "OverflowError", "AttributeError", "LookupError", "NotImplementedError")  # fmt: skip
UNARY_OPS: dict[str, Callable[[Any], object]] = {"iter": list, "len": len, "bool": bool, "str": str, "repr": repr}
CHILD_ENV = {"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8", "PYTHONDONTWRITEBYTECODE": "1"}


# ---------------------------------------------------------------- values: plain JSON types, by exact type


class Unserializable(Exception):
    """The value is not made of plain data (None, bool, int, float, str, bytes, list, tuple, dict, set)."""


class Malformed(ValueError):
    """An encoded value or a frame that does not follow the protocol."""


def _items(base, value, remote, depth):
    return [encode(v, remote, depth) for v in base.__iter__(value)]


_ENCODERS = (  # subclasses are read through the base type's own slots: no overridden method ever runs
    (int, lambda v, r, d: _int(int.__int__(v))),
    (float, lambda v, r, d: float.__float__(v)),
    (str, lambda v, r, d: str.__str__(v)),
    (list, lambda v, r, d: _items(list, v, r, d)),
    (tuple, lambda v, r, d: {"$t": _items(tuple, v, r, d)}),
    (dict, lambda v, r, d: {"$d": [[encode(k, r, d), encode(x, r, d)] for k, x in dict.items(v)]}),
    (set, lambda v, r, d: {"$s": _items(set, v, r, d)}),
    (frozenset, lambda v, r, d: {"$f": _items(frozenset, v, r, d)}),
    (bytes, lambda v, r, d: {"$b": base64.b64encode(bytes.__getitem__(v, slice(None))).decode()}),
)


def _int(n):
    return n if n.bit_length() <= BIG_INT_BITS else {"$i": hex(n)}


def encode(value, remote=None, depth=0):
    """Plain JSON for `value`; with `remote`, other objects become {"$r": remote(obj)}, else Unserializable."""
    if depth > MAX_DEPTH:
        raise Unserializable("value nested too deeply")
    if value is None or value is True or value is False:
        return value
    kind = type(value)
    for base, enc in _ENCODERS:
        if kind is base or issubclass(kind, base):
            return enc(value, remote, depth + 1)
    if kind is complex:
        return {"$c": [value.real, value.imag]}
    if remote is not None:
        return {"$r": remote(value)}
    raise Unserializable(kind.__name__)


def decode(data, remote=None, depth=0):
    """The value `encode` produced; Malformed for anything else (with `remote`, {"$r": id} -> remote(id))."""
    try:
        return _decode(data, remote, depth)
    except Malformed:
        raise
    except (ValueError, TypeError, RecursionError, OverflowError) as exc:
        raise Malformed(f"malformed value: {type(exc).__name__}") from None


def _decode(data, remote, depth):
    kind = type(data)
    if depth > MAX_DEPTH + 1:
        raise Malformed("value nested too deeply")
    if data is None or kind in (bool, int, float, str):
        return data
    if kind is list:
        return [_decode(v, remote, depth + 1) for v in data]
    if kind is not dict or len(data) != 1:
        raise Malformed("malformed value")
    ((tag, v),) = data.items()
    if tag in ("$t", "$s", "$f") and type(v) is list:
        return {"$t": tuple, "$s": set, "$f": frozenset}[tag](_decode(x, remote, depth + 1) for x in v)
    if tag == "$d" and type(v) is list and all(type(p) is list and len(p) == 2 for p in v):
        return {_decode(k, remote, depth + 1): _decode(x, remote, depth + 1) for k, x in v}
    if tag == "$b" and type(v) is str:
        return base64.b64decode(v, validate=True)
    if tag == "$i" and type(v) is str and len(v) < 1 << 20:
        return int(v, 16)
    if tag == "$c" and type(v) is list and len(v) == 2 and all(type(x) in (int, float) for x in v):
        return complex(v[0], v[1])
    if tag == "$r" and remote is not None and type(v) is int:
        return remote(v)
    raise Malformed("malformed value")


# ---------------------------------------------------------------- frames: 4-byte length + JSON


def pack(obj):
    data = json.dumps(obj, separators=(",", ":")).encode()
    return struct.pack(">I", len(data)) + data


def send_frame(sock, obj):
    sock.sendall(pack(obj))


def recv_frame(sock):
    """The next frame from a blocking socket; None at EOF. Malformed for a bad frame."""
    head = _recv_exact(sock, 4)
    if head is None:
        return None
    size = struct.unpack(">I", head)[0]
    if size > FRAME_MAX:
        raise Malformed("frame too large")
    body = _recv_exact(sock, size)
    if body is None:
        return None
    return _loads(body)


def _recv_exact(sock, size):
    buf = bytearray()
    while len(buf) < size:
        chunk = sock.recv(min(size - len(buf), 1 << 20))
        if not chunk:
            return None
        buf += chunk
    return bytes(buf)


def _loads(body):
    try:
        obj = json.loads(body)
    except (ValueError, RecursionError) as exc:
        raise Malformed("frame is not JSON") from exc
    if type(obj) is not dict:
        raise Malformed("frame is not an object")
    return obj


class Frames:
    """Frames from a non-blocking stream, fed as bytes arrive."""

    def __init__(self):
        self.buf = bytearray()

    def feed(self, data):
        self.buf += data
        out = []
        while len(self.buf) >= 4:
            size = struct.unpack(">I", self.buf[:4])[0]
            if size > FRAME_MAX:
                raise Malformed("frame too large")
            if len(self.buf) < 4 + size:
                break
            out.append(_loads(bytes(self.buf[4 : 4 + size])))
            del self.buf[: 4 + size]
        return out


def describe(exc):
    """`Type: message`, one line, bounded: what a detail may say about an exception."""
    try:
        text = f"{type(exc).__name__}: {exc}".splitlines()[0] if str(exc) else type(exc).__name__
    except BaseException:  # a hostile __str__
        text = "exception"
    return text[:200]


# ---------------------------------------------------------------- process plumbing

_libc = ctypes.CDLL(None, use_errno=True)


def prctl(option, value):
    if _libc.prctl(option, ctypes.c_ulong(value), 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), f"prctl({option})")


def proc_pids():
    return [int(n) for n in os.listdir("/proc") if n.isdigit()]


def parent_of(pid):
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return int(f.read().rsplit(b")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return None


OOM_COUNTERS = ("/sys/fs/cgroup/memory.events", "/sys/fs/cgroup/memory/memory.oom_control")  # cgroup v2, v1


class OomKills:
    """How many processes the kernel's OOM killer has killed in this container's cgroup (0 without one). The
    counter file stays open: reading it again is much cheaper than opening it, twice per test."""

    def __init__(self):
        self.fd = None
        for path in OOM_COUNTERS:
            with contextlib.suppress(OSError):
                self.fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
                break

    def __call__(self):
        try:
            data = os.pread(self.fd, 4096, 0) if self.fd is not None else b""
            return sum(int(line.split()[1]) for line in data.splitlines() if line.startswith(b"oom_kill "))
        except (OSError, ValueError, IndexError):
            return 0


def children_of(pid):
    found = []
    try:
        for tid in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{tid}/children", "rb") as f:
                found += [int(c) for c in f.read().split()]
    except OSError:  # it just exited
        pass
    return found


def place_fds(fds):
    """Make `fds` (target -> source) the process's only open descriptors."""
    high = {target: fcntl.fcntl(src, fcntl.F_DUPFD, 64) for target, src in fds.items()}
    for target, src in high.items():
        os.dup2(src, target)
    os.closerange(len(fds), 1 << 20)


def apply_limits(limits, nproc):
    mib = 1 << 20
    cpu = max(1, math.ceil(limits["cpu_s"]))
    for res, value in (
        (resource.RLIMIT_AS, limits["memory_mb"] * mib),
        (resource.RLIMIT_CPU, (cpu, cpu + 1)),
        (resource.RLIMIT_FSIZE, limits["max_file_mb"] * mib),
        (resource.RLIMIT_CORE, 0),
        (resource.RLIMIT_MSGQUEUE, 0),
        (resource.RLIMIT_NOFILE, 1024),
        (resource.RLIMIT_NPROC, (limits["max_processes"] + nproc) if nproc else None),
    ):
        if value is not None:
            resource.setrlimit(res, value if isinstance(value, tuple) else (value, value))


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
    if _libc.prctl(PR_SET_SECCOMP, 2, ctypes.byref(bpf[1]), 0, 0) != 0:  # SECCOMP_MODE_FILTER
        raise OSError(ctypes.get_errno(), "seccomp")


def drop_privileges(opts):
    if opts.drop_uid is not None and os.geteuid() == 0:
        os.setgroups([])
        os.setgid(opts.drop_gid)
        os.setuid(opts.drop_uid)


# ---------------------------------------------------------------- C: the candidate program


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
    apply_limits(job["limits"], opts.nproc_base)
    prctl(PR_SET_DUMPABLE, 1)  # its own /proc is the program's business; S, Z and T stay non-dumpable
    sys.stdin = open(0, encoding="utf-8", errors="surrogateescape", closefd=False)  # noqa: SIM115
    sys.stdout = open(1, "w", encoding="utf-8", closefd=False)  # noqa: SIM115
    sys.stderr = open(2, "w", encoding="utf-8", errors="backslashreplace", closefd=False)  # noqa: SIM115
    sys.argv = ["main.py"]
    try:
        code = compile(job["program"], "main.py", "exec", dont_inherit=True)
    except BaseException as exc:
        send_frame(sock, {"compile_error": describe(exc)})
        return
    send_frame(sock, {"compiled": True})  # the first frame, before any of the program runs: a later one is forged
    if job["mode"] == "stdio":
        os._exit(run_main(code, sock))
    serve_calls(code, sock)


def run_main(code, sock):
    """Run the program as __main__ the way `python main.py` does; return its exit status."""
    status = 0
    try:
        exec(code, {"__name__": "__main__", "__builtins__": builtins})
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


def serve_calls(code, sock):
    """Load the program, announce its names, then answer requests from the driver (S or T) until EOF."""
    ns = {"__name__": "__sandbox__", "__builtins__": builtins}
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


# ---------------------------------------------------------------- T: the test code, against proxies


class ProgramError(BaseException):
    """The program raised (an exception the test code does not get to catch, unless a plain builtin one)."""


class ProgramGone(BaseException):
    """The program exited, died or broke the protocol in the middle of a call."""


class BoundaryError(BaseException):
    """The test passes the program a value that cannot cross the sandbox boundary."""


class Remote:
    """An object that lives in the program's process. Equality is identity: a remote value never equals data."""

    __slots__ = ("_conn", "_fn", "_id")

    def __init__(self, conn, rid, fn):
        object.__setattr__(self, "_conn", conn)
        object.__setattr__(self, "_id", rid)
        object.__setattr__(self, "_fn", fn)

    def _ask(self, op, **fields):
        return self._conn.ask(op, self._id, **fields)

    def __call__(self, *args, **kwargs):
        return self._ask("call", args=list(args), kwargs=kwargs)

    def __getattr__(self, name):
        if self._fn or name.startswith("__"):  # a function proxy has no attributes: `def math(): ...` fakes nothing
            raise AttributeError(name)
        return self._ask("getattr", name=name)

    def __setattr__(self, name, value):
        if self._fn:
            raise AttributeError(name)
        self._ask("setattr", name=name, value=value)

    def __iter__(self):
        return iter(self._typed("iter", list))

    def __len__(self):
        return self._typed("len", int)

    def __bool__(self):
        return True if self._fn else self._typed("bool", bool)

    def __str__(self):
        return self._typed("str", str)

    def __repr__(self):
        return self._typed("repr", str)

    def __getitem__(self, key):
        return self._ask("getitem", key=key)

    def __contains__(self, item):
        return self._typed("contains", bool, item=item)

    def _typed(self, op, kind, **fields):
        value = self._ask(op, **fields)
        if type(value) is not kind:
            raise TypeError(f"{op} on a program object returned no {kind.__name__}")
        return value


class Conn:
    """T's side of the RPC channel to C."""

    def __init__(self, sock):
        self.sock, self.proxies = sock, {}

    def remote(self, spec, fn=False):
        if type(spec) is not int or spec < 0:
            raise Malformed("bad reference")
        if (spec, fn) not in self.proxies:  # keyed by kind too: an object proxy never stands in for a function one
            self.proxies[spec, fn] = Remote(self, spec, fn)
        return self.proxies[spec, fn]

    def _encode(self, value):
        def ref(obj):
            if type(obj) is Remote:
                return obj._id
            raise BoundaryError(f"the test passes a {type(obj).__name__} to the program")

        try:
            return encode(value, ref)
        except Unserializable as exc:
            raise BoundaryError(str(exc)) from None

    def ask(self, op, rid, **fields):
        req = {"op": op, "target": rid, **{k: self._encode(v) for k, v in fields.items()}}
        try:
            send_frame(self.sock, req)
            resp = recv_frame(self.sock)
            if resp is None:
                raise ProgramGone("the program exited or died during a call")
            if "value" in resp:
                return decode(resp["value"], self.remote)
        except (OSError, Malformed) as exc:
            raise ProgramGone(describe(exc)) from None
        exc_name, text = resp.get("exc"), str(resp.get("raised", "protocol error"))[:200]
        if exc_name in RERAISABLE:
            raise getattr(builtins, exc_name)(text.split(": ", 1)[-1])
        raise ProgramError(exc_name if type(exc_name) is str else "Error", text)


def tester_main(opts):
    ctl, rpc = socket.socket(fileno=3), socket.socket(fileno=4)
    drop_privileges(opts)
    deny_syscalls(opts.bpf)
    os.chdir("/")
    job = recv_frame(ctl)
    if job is None:
        return
    apply_limits(job["limits"], 0)
    send_frame(ctl, run_asserts(job, Conn(rpc)))


def run_asserts(job, conn):
    try:
        send_frame(conn.sock, {"mode": "rpc", "program": job["program"], "limits": job["limits"]})
        compiled = recv_frame(conn.sock)  # sent before the program runs: trusted
        if compiled is not None and "compile_error" in compiled:
            return {"compile_error": str(compiled["compile_error"])[:200]}
        first = recv_frame(conn.sock) if compiled is not None else None
    except (OSError, Malformed):
        first = None
    if first is None:
        return {"outcome": "error", "origin": "program", "gone": True, "detail": "the program exited while loading"}
    if type(first.get("ready")) is not dict:
        exc = first.get("exc")
        return {"outcome": "error", "origin": "program", "exc": exc if type(exc) is str else None,
                "detail": str(first.get("load_error", "protocol error"))[:200]}  # fmt: skip
    try:
        namespace = bind(first["ready"], conn)
        exec(compile(job["code"], "test.py", "exec", dont_inherit=True), namespace)
    except AssertionError as exc:
        return {"outcome": "failed", "detail": describe(exc)}
    except ProgramError as exc:
        return {"outcome": "error", "origin": "program", "exc": exc.args[0], "detail": exc.args[1]}
    except ProgramGone as exc:
        return {"outcome": "error", "origin": "program", "gone": True, "detail": str(exc)[:200]}
    except BoundaryError as exc:
        return {"outcome": "unsupported", "detail": str(exc)[:200]}
    except BaseException as exc:
        return {"outcome": "error", "origin": "test", "exc": type(exc).__name__, "detail": describe(exc)}
    return {"outcome": "passed"}


def bind(names, conn):
    """The test's namespace: the program's names as proxies or copies, never shadowing builtins; a name that is an
    importable module is the real module unless the program bound it to a plain function."""
    ns = {"__name__": "__test__", "__builtins__": builtins}
    for name, spec in names.items():
        if not (name.isidentifier() and not name.startswith("__") and not hasattr(builtins, name)):
            continue
        if type(spec) is not list or len(spec) != 2:
            raise ProgramGone("malformed names")
        kind, payload = spec
        module = _real_module(name) if kind != "function" else None
        if module is None and kind == "module" and type(payload) is str:
            module = _real_module(payload)
        if module is not None:
            ns[name] = module
        elif kind == "value":
            ns[name] = decode(payload, conn.remote)
        elif kind in ("function", "object"):
            ns[name] = conn.remote(payload, fn=kind == "function")
    return ns


def _real_module(name):
    if not IMPORTABLE:  # Z lists them before forking anything (no file system work per test)
        IMPORTABLE.update(sys.builtin_module_names, (m.name for m in pkgutil.iter_modules()))
    if name not in IMPORTABLE:
        return None
    try:
        return importlib.import_module(name)
    except Exception:
        return None


IMPORTABLE: set[str] = set()  # top-level module names on sys.path


# ---------------------------------------------------------------- Z: the zygote


def zygote_main(sock, opts):
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1):
        os.dup2(null, fd)
    prctl(PR_SET_CHILD_SUBREAPER, 1)
    prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    wake_r, wake_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    _warm_up(opts)
    mine: set[int] = set()
    while True:
        ready, _, _ = select.select([sock, wake_r], [], [])
        if wake_r in ready:
            while _read_nonblocking(wake_r):
                pass
            _reap(sock, mine)
        if sock in ready:
            try:
                request = sock.recv(16)
            except OSError:
                request = b""
            if not request:
                os._exit(0)
            mine.update(_spawn(sock, request == b"A", null, opts))


def _warm_up(opts):
    """Do once here what every fork would otherwise do first: the compiler's and codecs' lazy set-up. Then freeze
    the heap out of the GC's sight, so a collection in a child does not copy every page on write. And cap glibc's
    malloc arenas: each reserves 64 MB of address space, so a few threads would exhaust RLIMIT_AS for nothing."""
    with contextlib.suppress(AttributeError):  # not glibc
        _libc.mallopt(-8, 2)  # M_ARENA_MAX
    _real_module("math")
    opts.bpf = seccomp_filter()
    code = compile("def f(x, *a, **k):\n    return [x, 1.5, 'é', (1,), {2}, {'k': None}]\n", "w.py", "exec")
    ns: dict[str, Any] = {"__builtins__": builtins}
    exec(code, ns)
    decode(json.loads(json.dumps(encode(ns["f"](1)))))
    gc.collect()
    gc.freeze()


def _read_nonblocking(fd):
    try:
        return os.read(fd, 4096)
    except BlockingIOError:
        return b""


def _recv_nonblocking(sock):
    try:
        return sock.recv(1 << 20, socket.MSG_DONTWAIT)
    except OSError:  # BlockingIOError: nothing more; else the peer is gone
        return b""


def _reap(sock, mine):
    while True:
        try:
            pid, status, usage = os.wait4(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        if pid in mine:
            mine.discard(pid)
            code = os.waitstatus_to_exitcode(status)
            sock.send(json.dumps({"exit": pid, "code": code, "cpu_s": usage.ru_utime + usage.ru_stime}).encode())


def _spawn(sock, with_tester, null, opts):
    """Fork C (and T): C's stdio are pipes to S; its socket goes to its driver, S or T. Send S its ends."""
    in_r, in_w = os.pipe()
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    c_end, drv = (s.detach() for s in socket.socketpair())
    pids = [_fork(candidate_main, opts, {0: in_r, 1: out_w, 2: err_w, 3: c_end})]
    for fd in (in_r, out_w, err_w, c_end):
        os.close(fd)
    if with_tester:  # created after C's fork: C never held T's channel, not even before closing its fds
        t_end, s_end = (s.detach() for s in socket.socketpair())
        pids.append(_fork(tester_main, opts, {0: null, 1: null, 2: null, 3: t_end, 4: drv}))
        os.close(t_end)
        os.close(drv)
        drv = s_end
    fds = [in_w, out_r, err_r, drv]
    socket.send_fds(sock, [json.dumps({"spawned": pids[0], "tester": pids[1] if with_tester else None}).encode()], fds)
    for fd in fds:
        os.close(fd)
    return pids


def _fork(main, opts, fds):
    pid = os.fork()
    if pid:
        return pid
    try:
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        place_fds(fds)
        main(opts)
    finally:
        os._exit(0)


# ---------------------------------------------------------------- S: the supervisor


class Broken(Exception):
    """The sandbox can no longer guarantee a clean next run; S stops and the host replaces it."""


class Zygote:
    """S's handle on Z: spawn requests out, fds and exit notices in (a SEQPACKET socket: one message each)."""

    def __init__(self, opts):
        mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.pid = os.fork()
        if self.pid == 0:
            mine.close()
            try:
                zygote_main(theirs, opts)
            finally:
                os._exit(1)
        theirs.close()
        self.sock, self.exits, self.ahead = mine, {}, None

    def fork_ahead(self, with_tester):
        """Have Z fork the next test's processes now, while S waits for its job: they set themselves up and wait
        for their first frame. Called only once everything of the last test is killed and wiped."""
        self._request(with_tester)
        self.ahead = with_tester

    def spawn(self, with_tester):
        """A test's processes: those forked ahead (the caller checks they are of the kind it needs), else new ones."""
        if self.ahead is None:
            self._request(with_tester)
        self.ahead = None
        return self._spawned()

    def doomed(self):
        """Is Z exiting, stopped or gone, or is a signal pending for it (a SIGCHLD aside)? A program that could
        signal Z (it has the same uid in a container) did so before it sent what S read last. A signal sent with
        kill() stays in Z's shared pending set until Z is reaped; one sent to Z's thread alone leaves that set
        when Z takes it, and Z is marked exiting (PF_EXITING) a few instructions later: only a Z preempted
        between the two looks well. Then the clean-up finds it dead, and the sandbox is replaced."""
        try:
            with open(f"/proc/{self.pid}/status", "rb") as f:
                status = dict(line.split(b":", 1) for line in f.read().splitlines() if b":" in line)
            with open(f"/proc/{self.pid}/stat", "rb") as f:
                flags = int(f.read().rsplit(b")", 1)[1].split()[6])  # field 9 of proc(5)
            state = status[b"State"].split()[0]
            pending = int(status[b"ShdPnd"], 16) | int(status[b"SigPnd"], 16)
        except (OSError, KeyError, IndexError, ValueError):
            return True
        exiting = flags & 0x4  # PF_EXITING
        return bool(exiting) or state not in (b"R", b"S", b"D") or bool(pending & ~(1 << (signal.SIGCHLD - 1)))

    def _request(self, with_tester):
        try:
            self.sock.send(b"A" if with_tester else b"C")
        except OSError as exc:
            raise Broken(f"the zygote is unreachable: {exc}") from None

    def _spawned(self):
        try:
            while True:
                msg, fds, _, _ = socket.recv_fds(self.sock, 4096, 8)
                if not msg:
                    raise Broken("the zygote died")
                info = json.loads(msg)
                if "spawned" not in info:
                    self.exits[info["exit"]] = info
                elif len(fds) == 4:
                    return info["spawned"], info["tester"], fds
                else:
                    raise Broken("the zygote sent no descriptors")
        except OSError as exc:
            raise Broken(f"the zygote is unreachable: {exc}") from None

    def pump(self, wait_for=(), timeout=0.0):
        """Take the exit notices that are waiting (and wait up to `timeout` for those of `wait_for`)."""
        end = time.monotonic() + timeout
        while True:
            missing = [pid for pid in wait_for if pid not in self.exits]
            left = end - time.monotonic()
            try:
                if missing and left > 0:
                    self.sock.settimeout(left)
                    msg = self.sock.recv(4096)
                else:
                    msg = self.sock.recv(4096, socket.MSG_DONTWAIT)
            except (BlockingIOError, TimeoutError):
                return
            except OSError:
                msg = b""
            finally:
                self.sock.settimeout(None)
            if not msg:
                raise Broken("the zygote died")
            info = json.loads(msg)
            self.exits[info["exit"]] = info


class Supervisor:
    def __init__(self, opts):
        prctl(PR_SET_DUMPABLE, 0)
        self.pidns = os.getpid() == 1
        if not self.pidns:
            prctl(PR_SET_CHILD_SUBREAPER, 1)
            prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
        if (
            opts.cpu is not None
        ):  # every process of this sandbox shares one CPU (seccomp keeps programs from undoing it)
            os.sched_setaffinity(0, {opts.cpu})
        self.opts = opts
        self.zygote = Zygote(opts)  # first of all: its memory must hold no job
        self.oom_kills = OomKills()
        self.known, self.last_kind_assert = [], True  # the last test's C and T; was it an assert test?
        self.wipe_roots = [opts.scratch] + (["/dev/shm", "/dev/mqueue"] if self.pidns else [])

    def serve(self):
        self.zygote.fork_ahead(True)  # HumanEval/MBPP-style assert tests are the common case
        self.emit({"ready": True, "protocol": PROTOCOL, "pidns": self.pidns, "python": sys.version.split()[0]})
        for line in sys.stdin.buffer:
            job = json.loads(line)
            try:
                self.run_job(job)
            except Broken as exc:
                self.emit({"job": job["job"], "fatal": str(exc)})
                return

    def emit(self, obj):
        sys.stdout.buffer.write(json.dumps(obj, separators=(",", ":")).encode() + b"\n")
        sys.stdout.buffer.flush()

    def run_job(self, job):
        """A test's facts go out as soon as they are final, and the last one's "done" with them: the clean-up after
        the last test runs while the host reads its facts, and "clean" (or "fatal") says how it went."""
        tests = job["tests"]
        for i, test in enumerate(tests):
            facts, broken = self.run_test(job["program"], test, job["limits"])
            compile_error = "compile_error" in facts and broken is None
            if compile_error:
                self.emit({"job": job["job"], "compile_error": facts["compile_error"]})
            else:
                self.emit({"job": job["job"], "i": i, "facts": facts})
            if broken is not None:
                raise broken
            last = compile_error or i == len(tests) - 1
            if last:
                self.emit({"job": job["job"], "done": True})
            self.clean_up()
            if last:
                self.emit({"job": job["job"], "clean": True})
                return
        self.emit({"job": job["job"], "done": True})  # no tests
        self.emit({"job": job["job"], "clean": True})

    def run_test(self, program, spec, limits):
        """Run one test; return its facts and the Broken that ended this sandbox, if one did. On return, SIGKILL
        is pending for every process the test left (none can add to what it wrote), but `clean_up` must run
        before the next test."""
        with_tester = spec["kind"] == "assert"
        c_pid, t_pid, fds = self.spawn(with_tester)  # Broken here: nothing ran, the host retries elsewhere
        self.last_kind_assert, self.known = with_tester, [p for p in (c_pid, t_pid) if p]
        run = TestRun(self, spec, limits, c_pid, *fds)
        ooms = self.oom_kills()
        first = {"program": program, "code": spec.get("code"), "limits": limits}
        broken = None
        try:
            run.start(first if with_tester else dict(first, mode=spec["kind"]))
            run.loop()
        except Broken as exc:
            broken = exc
        self.kill_once()
        if broken is None and self.zygote.doomed():
            broken = Broken("the zygote was killed")
        run.finish(drain=broken is None)
        if self.oom_kills() > ooms:
            run.facts["oom_killed"] = True
        if broken is not None:
            run.facts.update(status="broken", detail=str(broken))
        return run.facts, broken

    def spawn(self, with_tester):
        """C (and T) for a test. Those Z forked ahead are of the wrong kind when the test kind changes: they go,
        with their scratch dir, before others come (a test finds nothing but its own in the sandbox)."""
        ahead = self.zygote.ahead
        if ahead is not None and ahead != with_tester:
            c_pid, t_pid, fds = self.zygote.spawn(ahead)
            for fd in fds:
                os.close(fd)
            self.known = [p for p in (c_pid, t_pid) if p]
            self.clean_up(fork_ahead=False)
        return self.zygote.spawn(with_tester)

    def clean_up(self, fork_ahead=True):
        """After a test: wait until every process it left is gone, empty every writable place, and have Z fork
        the next test's processes (guessing it is of the same kind) while S waits for its job."""
        self.kill_all(known=self.known)
        self.wipe()
        self.zygote.exits.clear()
        if fork_ahead:
            self.zygote.fork_ahead(self.last_kind_assert)

    def victims(self):
        """Every process a test may have left: all but S and Z in a PID namespace, else all below S but Z."""
        if self.pidns:
            return {p for p in proc_pids() if p not in (1, self.zygote.pid)}
        found, stack = set(), [self.zygote.pid, os.getpid()]
        while stack:
            for child in children_of(stack.pop()):
                if child != self.zygote.pid and child not in found:
                    found.add(child)
                    stack.append(child)
        return found

    def kill_once(self):
        """SIGKILL every process of the test without waiting for any to die. A process with a SIGKILL pending
        cannot fork, so scanning again until no new one appears leaves none that can still run."""
        killed: set[int] = set()
        while new := (victims := self.victims()) - killed:
            for pid in new:
                self._kill(pid, victims)
            killed |= new

    def kill_all(self, known=()):
        """SIGKILL them until none is left, zombies included (they must be reaped before the next test).
        `known`: Z's children (C, T), whose exit notices say when Z has reaped them."""
        deadline = time.monotonic() + KILL_TIMEOUT_S
        while victims := self.victims():
            for pid in victims:
                self._kill(pid, victims)
            while True:  # orphans whose subreaper died come to S
                try:
                    if os.waitpid(-1, os.WNOHANG)[0] == 0:
                        break
                except ChildProcessError:
                    break
            waiting = [pid for pid in known if pid in victims]
            self.zygote.pump(wait_for=waiting, timeout=0.5 if waiting else 0.0)
            if time.monotonic() > deadline:
                raise Broken(f"{len(victims)} processes survived SIGKILL")
            if not waiting:
                time.sleep(0.0005)

    def _kill(self, pid, victims):
        try:
            if self.pidns:
                os.kill(pid, signal.SIGKILL)
                return
            fd = os.pidfd_open(pid)  # pins the process: a recycled pid is never signalled
            try:
                if parent_of(pid) in victims | {self.zygote.pid, os.getpid()}:
                    signal.pidfd_send_signal(fd, signal.SIGKILL)
            finally:
                os.close(fd)
        except (ProcessLookupError, PermissionError):
            pass

    def wipe(self):
        for root in self.wipe_roots:
            if os.path.isdir(root) and os.access(root, os.W_OK):
                wipe_dir(root)
        if self.pidns:
            clear_ipc_and_keys()


class TestRun:
    """One test's event loop in S: feeds C (or T), drains and caps output, enforces the wall clock."""

    def __init__(self, sup, spec, limits, c_pid, stdin_w, out_r, err_r, drv):
        self.sup, self.zsock, self.spec, self.kind, self.c_pid = sup, sup.zygote.sock, spec, spec["kind"], c_pid
        self.cap = limits["max_output_bytes"]
        self.start_t = time.monotonic()
        self.deadline = self.start_t + limits["wall_s"]
        self.drv = socket.socket(fileno=drv)
        self.drv.setblocking(False)
        self.out_r, self.err_r, self.stdin_w = out_r, err_r, stdin_w
        self.stdout, self.counts = bytearray(), {out_r: 0, err_r: 0}
        self.frames, self.pending = Frames(), {}
        self.facts, self.status, self.called, self.compiled = {}, None, False, False
        self.sel = selectors.DefaultSelector()

    def start(self, first):
        self.pending[self.drv.fileno()] = bytearray(pack(first))
        self.pending[self.stdin_w] = bytearray(self.spec.get("stdin", "").encode())
        for fd in (self.stdin_w, self.out_r, self.err_r):
            os.set_blocking(fd, False)
        for fd in (self.out_r, self.err_r, self.zsock.fileno()):
            self.sel.register(fd, selectors.EVENT_READ)
        self.sel.register(self.drv.fileno(), selectors.EVENT_READ | selectors.EVENT_WRITE)
        self.sel.register(self.stdin_w, selectors.EVENT_WRITE)

    def loop(self):
        while self.status is None:
            left = self.deadline - time.monotonic()
            if left <= 0:
                self.status = "timeout"
                break
            for key, events in self.sel.select(left):
                self.on_event(key.fd, events)
                if self.status is not None:
                    break
        if self.status == "ok" and (self.facts.get("gone") or (self.facts.get("assert") or {}).get("gone")):
            self.sup.zygote.pump(wait_for=[self.c_pid], timeout=LINGER_S)  # how did it end: CPU limit? killed?
        self.facts["wall_s"] = round(time.monotonic() - self.start_t, 4)
        self.facts["exited"] = self.c_pid in self.sup.zygote.exits  # on its own, before S killed anything

    def on_event(self, fd, events):
        if fd == self.zsock.fileno():
            self.sup.zygote.pump()
            if self.kind == "stdio" and self.c_pid in self.sup.zygote.exits:
                self.status = "ok"
        elif fd in self.counts:
            self.read_output(fd)
        elif events & selectors.EVENT_WRITE:
            self.write_pending(fd)
        else:
            self.read_driver()

    def read_output(self, fd):
        data = _read_nonblocking(fd)
        if not data:
            self.sel.unregister(fd)
            return
        self.counts[fd] += len(data)
        if self.counts[fd] > self.cap:
            self.status = "output_limit"
        elif fd == self.out_r:
            self.stdout += data

    def write_pending(self, fd):
        buf = self.pending[fd]
        try:
            sent = os.write(fd, buf[: 1 << 16]) if buf else 0
        except BlockingIOError:
            return
        except OSError:  # the reader is gone
            sent = len(buf)
        del buf[:sent]
        if buf:
            return
        if fd == self.stdin_w:
            self.sel.unregister(fd)
            os.close(fd)
            self.stdin_w = -1
        else:
            self.sel.modify(fd, selectors.EVENT_READ)

    def read_driver(self):
        try:
            data = self.drv.recv(1 << 20)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if not data:
            self.sel.unregister(self.drv.fileno())
            if self.kind != "stdio":
                self.facts["gone"] = True
                self.status = "ok"
            return
        self.feed(data)

    def feed(self, data):
        try:
            for frame in self.frames.feed(data):
                self.on_frame(frame)
        except Malformed:
            self.facts.update(gone=True, raised="the program broke the result protocol")
            self.status = "ok"

    def on_frame(self, frame):
        if self.kind != "assert" and not self.compiled:  # C's first frame comes before the program runs
            self.compiled = "compiled" in frame
            if not self.compiled:
                self.facts["compile_error"] = str(frame.get("compile_error"))[:200]
                self.status = "ok"
        elif "compile_error" in frame and self.kind == "assert":  # relayed by T, which had it first from C
            self.facts["compile_error"] = str(frame["compile_error"])[:200]
            self.status = "ok"
        elif self.kind == "assert":
            self.facts["assert"] = {k: frame.get(k) for k in ("outcome", "origin", "exc", "detail", "gone")}
            self.status = "ok"
        elif self.kind == "stdio":
            if "raised" in frame and "raised" not in self.facts:
                self.facts.update(raised=str(frame["raised"])[:200], exc=str(frame.get("exc"))[:100])
        elif "ready" in frame and not self.called:
            self.call(frame["ready"])
        else:
            for key in ("value", "unserializable", "raised", "load_error", "exc"):
                if key in frame:
                    self.facts[key] = frame[key] if key == "value" else str(frame[key])[:200]
            self.status = "ok"

    def call(self, names):
        entry = names.get(self.spec["fn"]) if type(names) is dict else None
        if type(entry) is not list or len(entry) != 2 or entry[0] not in ("function", "object"):
            self.facts.update(raised=f"NameError: the program defines no function {self.spec['fn']!r}")
            self.status = "ok"
            return
        self.called = True
        req = {"op": "call", "target": entry[1], "args": self.spec["args"], "kwargs": self.spec["kwargs"], "plain": 1}
        self.pending[self.drv.fileno()] = bytearray(pack(req))
        self.sel.modify(self.drv.fileno(), selectors.EVENT_READ | selectors.EVENT_WRITE)

    def finish(self, drain):
        """After the SIGKILLs: read what is in the pipes (no writer can add to it), close everything."""
        self.sel.close()
        for fd in (self.out_r, self.err_r):
            while drain and self.counts[fd] <= self.cap and (data := _read_nonblocking(fd)):
                self.counts[fd] += len(data)
                if fd == self.out_r and self.counts[fd] <= self.cap:
                    self.stdout += data
            if self.counts[fd] > self.cap and self.status == "ok":
                self.status = "output_limit"
            os.close(fd)
        while drain and self.kind == "stdio" and (data := _recv_nonblocking(self.drv)):
            self.feed(data)  # C's report of how it ended may trail its exit notice
        for fd in (self.stdin_w,):
            if fd >= 0:
                os.close(fd)
        self.drv.close()
        self.facts.update(status=self.status or "ok", output_bytes=self.counts[self.out_r])
        if self.kind == "stdio":
            self.facts["stdout"] = self.stdout.decode("utf-8", "replace")
        notice = self.sup.zygote.exits.get(self.c_pid)
        if notice is not None:
            self.facts.update(code=notice["code"], cpu_s=round(notice["cpu_s"], 4))


# ---------------------------------------------------------------- cleanup of writable places


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
    for kind, fn, args in (("shm", _libc.shmctl, (0, None)), ("msg", _libc.msgctl, (0, None))):
        _ipc_rmid(kind, lambda ident, fn=fn, args=args: fn(ident, *args))
    _ipc_rmid("sem", lambda ident: _libc.semctl(ident, 0, 0))
    nr = SYS_KEYCTL.get(os.uname().machine)
    if nr is not None:
        for keyring in (-4, -5):  # KEY_SPEC_USER_KEYRING, KEY_SPEC_USER_SESSION_KEYRING; ENOSYS under seccomp
            _libc.syscall(nr, 7, keyring)  # KEYCTL_CLEAR


def _ipc_rmid(kind, remove):
    try:
        with open(f"/proc/sysvipc/{kind}") as f:
            lines = f.read().splitlines()[1:]
    except OSError:
        return
    for line in lines:
        remove(int(line.split()[1]))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--serve", action="store_true", help="handle jobs from stdin until EOF")
    parser.add_argument("--scratch", default="/tmp", help="where per-test scratch dirs go (wiped after each test)")
    parser.add_argument("--drop-uid", type=int, help="if root: run the program (and tests) as this uid")
    parser.add_argument("--drop-gid", type=int, default=65534)
    parser.add_argument("--cpu", type=int, help="pin the sandbox to this CPU")
    parser.add_argument("--nproc-base", type=int, default=6, help="tasks of the uid besides the program; 0: no limit")
    opts = parser.parse_args(argv)
    if not opts.serve:
        parser.error("nothing to do: pass --serve")
    Supervisor(opts).serve()


if __name__ == "__main__":
    main()
