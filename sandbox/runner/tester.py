"""T, the tester: one process per `assert` test. It runs the test code in its own address space, with the program's
names bound to proxies that call into C, so the program can stop or kill T but never change what it computes."""

from __future__ import annotations

import builtins
import importlib
import os
import pkgutil
import socket
import sys

from .confine import apply_limits, deny_syscalls, drop_privileges
from .frames import describe, recv_frame, send_frame
from .values import Malformed, Unserializable, decode, encode

RERAISABLE = ("ValueError", "TypeError", "KeyError", "IndexError", "ZeroDivisionError", "ArithmeticError",
              "OverflowError", "AttributeError", "LookupError", "NotImplementedError")  # fmt: skip


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
    apply_limits(job["limits"], None)  # the test code is trusted: no process limit of its own
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
        module = real_module(name) if kind != "function" else None
        if module is None and kind == "module" and type(payload) is str:
            module = real_module(payload)
        if module is not None:
            ns[name] = module
        elif kind == "value":
            ns[name] = decode(payload, conn.remote)
        elif kind in ("function", "object"):
            ns[name] = conn.remote(payload, fn=kind == "function")
    return ns


def real_module(name):
    if not IMPORTABLE:  # Z lists them before forking anything (no file system work per test)
        IMPORTABLE.update(sys.builtin_module_names, (m.name for m in pkgutil.iter_modules()))
    if name not in IMPORTABLE:
        return None
    try:
        return importlib.import_module(name)
    except Exception:
        return None


IMPORTABLE: set[str] = set()  # top-level module names on sys.path
