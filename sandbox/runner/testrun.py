"""One test's event loop in S: it feeds C (or T) its job, drains and caps the output, and enforces the wall clock."""

from __future__ import annotations

import base64
import os
import selectors
import socket
import time

from .frames import Frames, pack
from .procs import read_nonblocking, recv_nonblocking
from .values import Malformed, too_deep

STDERR_HEAD = 1024  # what S keeps of a binary's stderr: the C++ runtime's last words (std::bad_alloc)
LINGER_S = 0.2  # after a program vanished mid-call: wait this long for its exit status


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
        self.native, self.stderr = bool(spec.get("native")), bytearray()  # a binary's stderr: its first bytes
        self.frames, self.pending = Frames(), {}
        self.facts, self.status, self.called, self.compiled = {}, None, False, False
        self.sel = selectors.DefaultSelector()

    def start(self, first, raw=b""):
        """`raw`: bytes that follow the first frame as they are (a native test's binary: `Supervisor.binary`)."""
        self.pending[self.drv.fileno()] = bytearray(pack(first)) + raw
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
            if self.kind in ("stdio", "compile") and self.c_pid in self.sup.zygote.exits:
                self.status = "ok"
        elif fd in self.counts:
            self.read_output(fd)
        elif events & selectors.EVENT_WRITE:
            self.write_pending(fd)
        else:
            self.read_driver()

    def read_output(self, fd):
        data = read_nonblocking(fd)
        if not data:
            self.sel.unregister(fd)
            return
        self.counts[fd] += len(data)
        if self.counts[fd] > self.cap:
            self.status = "output_limit"
        elif fd == self.out_r:
            self.stdout += data
        elif self.native and len(self.stderr) < STDERR_HEAD:
            self.stderr += data[:STDERR_HEAD]

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
        if self.kind == "compile":  # C's one frame (native.py), which may be read after its exit notice
            keep = ("binary_b64", "diagnostics", "no_compiler")
            if not any(key in self.facts for key in keep):
                self.facts.update({key: frame[key] for key in keep if key in frame})
                if type(frame.get("status")) is int:  # the compiler's exit status (-1: it did not start)
                    self.facts["compiler_status"] = frame["status"]
            self.status = self.status or "ok"
            return
        if self.status is not None and self.kind != "stdio":  # the test's answer came: frames after it are not read
            return
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
        elif too_deep(frame.get("value")):  # no encoding nests so deep: forged, and it could fail the host's parser
            self.facts.update(gone=True, raised="the program broke the result protocol")
            self.status = "ok"
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
            while drain and self.counts[fd] <= self.cap and (data := read_nonblocking(fd)):
                self.counts[fd] += len(data)
                if fd == self.out_r and self.counts[fd] <= self.cap:
                    self.stdout += data
            if self.counts[fd] > self.cap and self.status == "ok":
                self.status = "output_limit"
            os.close(fd)
        while drain and self.kind in ("stdio", "compile") and (data := recv_nonblocking(self.drv)):
            self.feed(data)  # C's report of how it ended may trail its exit notice
        for fd in (self.stdin_w,):
            if fd >= 0:
                os.close(fd)
        self.drv.close()
        self.facts.update(status=self.status or "ok", output_bytes=self.counts[self.out_r])
        if self.kind == "stdio":  # base64: JSON would escape each control byte into six
            self.facts["stdout_b64"] = base64.b64encode(self.stdout).decode("ascii")
            self.stdout = bytearray()
        if self.native:
            self.facts["stderr_head"] = self.stderr[:STDERR_HEAD].decode("utf-8", "replace")
        notice = self.sup.zygote.exits.get(self.c_pid)
        if notice is not None:
            self.facts.update(code=notice["code"], cpu_s=round(notice["cpu_s"], 4))
