"""Frames between the runner's processes: a 4-byte length, then a JSON object."""

from __future__ import annotations

import json
import struct

from .values import Malformed

FRAME_MAX = 256 << 20


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


def recv_bytes(sock, size):
    """`size` raw bytes from a blocking socket (what a frame said follows it: a binary); None at EOF."""
    return _recv_exact(sock, size)


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
