"""Connections as `python -m verifier_service` (and a Ray Serve replica's own listener) serves them: bounded in number,
in time and in header size, answered after a half-close, and said in the log at most once a second.

uvicorn alone holds a connection that sends nothing for as long as it stays open (its only timer is the keep-alive
one, after a response), and accepts connections until the process runs out of file descriptors: then nobody is
served, and asyncio logs a traceback for every failed accept. Here (`BoundedProtocol`, uvicorn's httptools protocol
with a few hooks):

- a request's headers must arrive within `VERIFIER_HEADER_TIMEOUT_S` of the connection (or of the request's first
  byte, on a kept-alive one), its body within `VERIFIER_BODY_TIMEOUT_S` of its headers: else 408 and closed;
- its request line and headers must stay within `VERIFIER_MAX_HEADER_BYTES` (httptools holds them all, however many,
  until they end): else 431 and closed;
- a request httptools cannot parse is answered 400 and closed, as uvicorn does;
- at most `VERIFIER_MAX_CONNECTIONS` are open (fewer where the open-file limit allows fewer): past it, a new
  connection closes the one that has waited longest with no request in flight, or, when every one has a request in
  flight, is answered 503 and closed;
- an answer given before the client has sent its whole request (all of the above) lingers (`_answer_and_linger`):
  what the client still sends is read and dropped until it closes, for LINGER_S at most, since a connection closed
  with unread data is reset, and a client still sending then sees the reset, not the answer;
- the open-file limit is raised to its hard limit at start (`raise_open_file_limit`);
- what the limits did is one log line a second at most (`LimitsReport`), malformed requests included (uvicorn's own
  line for each is dropped, `MalformedRequests`), and asyncio's failed accepts, should the process run out of
  descriptors anyway, too (`AcceptErrors`).

A client that half-closes (`shutdown(SHUT_WR)`) after its request still gets its answer. An end of input looks the
same whether the client half-closed or went away; only writing tells them apart. So the connection stays open for
the answer, and an interim `100 Continue` (which HTTP/1.1 clients skip, RFC 9110 15.2) is written every
`PROBE_EVERY_S` while the answer is being made: to a client that has gone away the second one fails, the
connection is lost, and the request's work is cancelled as for any client that hangs up (routes.until_disconnected).
HTTP/1.0 has no interim answers: there an end of input is the client gone, as uvicorn takes it.
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
import math
import resource
import time
from collections import Counter, OrderedDict
from typing import Any, ClassVar

from uvicorn.protocols.http.httptools_impl import STATUS_LINE, HttpToolsProtocol

from verifier_service.settings import VerifierSettings

log = logging.getLogger(__name__)

PROBE_EVERY_S = 0.5  # after a half-close: how often the connection is checked by writing to it
PROBE = b"HTTP/1.1 100 Continue\r\n\r\n"
OWN_FILES = 128  # descriptors the service holds apart from connections: its listener, logs, forkserver, imports
FILES_PER_WORKER = 8  # each math worker and each sandbox: pipes, sentinels, the sandbox's own channel (measured: ~6)
REPORT_EVERY_S = 1.0
LINGER_S = 2.0  # after an early answer, what the client still sends is read and dropped for this long at most
MIN_BACKLOG, MAX_BACKLOG = 16, 2048  # uvicorn's default listen backlog is the most
ACCEPT_ROUNDS = 3  # descriptors kept free for this many backlogs of connections accepted and not yet let go


class Connections:
    """What one server's connections share: the limits, the open ones, and which of those wait with no request."""

    def __init__(
        self, cap: int, header_timeout_s: float, body_timeout_s: float, max_header_bytes: int, refused_lingering: int
    ) -> None:
        self.cap = cap
        self.header_timeout_s = header_timeout_s
        self.body_timeout_s = body_timeout_s
        self.max_header_bytes = max_header_bytes
        self.open: set[BoundedProtocol] = set()
        self.waiting: OrderedDict[BoundedProtocol, None] = OrderedDict()  # no request in flight; longest first
        # Connections refused past the cap and lingering: they hold descriptors outside the cap, so a few at most
        # (the listen backlog: one of the ACCEPT_ROUNDS kept free); past that a refused one closes at once.
        self.refused_lingering = refused_lingering
        self.refused: set[BoundedProtocol] = set()
        self.report = LimitsReport(self)

    def admit(self, conn: BoundedProtocol) -> bool:
        """Room for a new connection, made by closing the longest waiting one if need be; False if there is none."""
        if len(self.open) >= self.cap:
            if not self.waiting:
                self.report.count("refused")
                return False
            oldest, _ = self.waiting.popitem(last=False)
            self.open.discard(oldest)
            oldest.transport.close()
            self.report.count("closed_waiting")
        self.open.add(conn)
        self.waiting[conn] = None
        return True

    def busy(self, conn: BoundedProtocol) -> None:
        self.waiting.pop(conn, None)

    def idle(self, conn: BoundedProtocol) -> None:
        if conn in self.open:
            self.waiting[conn] = None
            self.waiting.move_to_end(conn)

    def lingering(self, conn: BoundedProtocol) -> bool:
        """Whether `conn`, answered early, may linger: an open one may (first to be closed to make room, as it waits
        for nothing); a refused one while few others do."""
        if conn in self.open:
            self.waiting[conn] = None
            self.waiting.move_to_end(conn, last=False)
            return True
        if len(self.refused) < self.refused_lingering:
            self.refused.add(conn)
            return True
        return False

    def forget(self, conn: BoundedProtocol) -> None:
        self.open.discard(conn)
        self.waiting.pop(conn, None)
        self.refused.discard(conn)


class LimitsReport:
    """Counts what the limits did and logs it as one line, at most once every REPORT_EVERY_S."""

    LINES: ClassVar[dict[str, str]] = {
        "closed_waiting": "closed {n} connections that had no request in flight, to make room "
        "(VERIFIER_MAX_CONNECTIONS: {cap} open at most)",
        "refused": "refused {n} connections with 503: all {cap} open ones have a request in flight "
        "(VERIFIER_MAX_CONNECTIONS)",
        "headers_late": "closed {n} connections with 408: no complete request headers within {header}s "
        "(VERIFIER_HEADER_TIMEOUT_S)",
        "body_late": "closed {n} connections with 408: the request body did not arrive within {body}s "
        "(VERIFIER_BODY_TIMEOUT_S)",
        "headers_over": "closed {n} connections with 431: request headers over {header_bytes} bytes "
        "(VERIFIER_MAX_HEADER_BYTES)",
        "malformed": "closed {n} connections with 400: a request that is not HTTP/1.1 as the parser reads it",
    }

    def __init__(self, connections: Connections) -> None:
        self.connections = connections
        self.counts: Counter[str] = Counter()
        self.last = -math.inf
        self.pending: asyncio.TimerHandle | None = None

    def count(self, event: str) -> None:
        self.counts[event] += 1
        if self.pending is None:
            delay = max(0.0, self.last + REPORT_EVERY_S - time.monotonic())
            self.pending = asyncio.get_running_loop().call_later(delay, self.flush)

    def flush(self) -> None:
        self.pending, self.last = None, time.monotonic()
        c = self.connections
        values = {
            "cap": c.cap,
            "header": f"{c.header_timeout_s:g}",
            "body": f"{c.body_timeout_s:g}",
            "header_bytes": c.max_header_bytes,
        }
        lines = [self.LINES[event].format(n=n, **values) for event, n in self.counts.items()]
        self.counts.clear()
        log.warning("connections: %s", "; ".join(lines))


class BoundedProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol with header and body deadlines, a header size cap, a connection cap and half-close
    handling."""

    def __init__(self, *args: Any, connections: Connections, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.limits = connections
        self.deadline: asyncio.TimerHandle | None = None
        self.probe: asyncio.TimerHandle | None = None
        self.half_closed = False
        # The request line and headers being read (None when none are): the bytes the parser has handed over (the
        # URL and whole header lines), and the bytes of the reads that fell wholly within them (a header line still
        # arriving is held by httptools, unseen). Both fall short of the true size, so neither refuses headers under
        # the cap; the read a request begins in, which may end the one before, counts by the parser's share only.
        self.head: int | None = None
        self.head_received = 0
        self.heads_begun = 0
        self.head_over = False  # headers over the cap: no app for them, and what follows them is dropped
        self.lingering = False  # answered early and half-closed: until the client closes, or LINGER_S

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        if not self.limits.admit(self):
            self._answer_and_linger(503, "too many connections; retry shortly", retry_after=True)
            return
        self._expect_headers()

    def connection_lost(self, exc: Exception | None) -> None:
        for timer in (self.deadline, self.probe):
            if timer is not None:
                timer.cancel()
        self.deadline = self.probe = None
        self.limits.forget(self)
        super().connection_lost(exc)

    # Deadlines: headers from the connection or the request's first byte; the body from the headers.
    # The size of the headers: counted as they come, checked after each read and once they are whole.

    def data_received(self, data: bytes) -> None:
        if self.head_over or self.lingering:
            return
        continued, begun = self.head is not None, self.heads_begun  # headers that began before this read
        super().data_received(data)
        if self.transport.is_closing() or self.lingering:
            return
        if self.head is not None and continued and self.heads_begun == begun:
            self.head_received += len(data)  # all of this read is of headers that still go on
        if self.head_over or max(self.head or 0, self.head_received) > self.limits.max_header_bytes:
            self._headers_over()

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self.head, self.head_received = 0, 0
        self.heads_begun += 1
        self._expect_headers()

    def on_url(self, url: bytes) -> None:
        super().on_url(url)
        self.head = (self.head or 0) + len(url)

    def on_header(self, name: bytes, value: bytes) -> None:
        super().on_header(name, value)
        self.head = (self.head or 0) + len(name) + len(value) + 4  # ": " and the line's end

    def on_headers_complete(self) -> None:
        if self.head_over:
            return  # a request pipelined behind the one refused, in the same read
        if (self.head or 0) > self.limits.max_header_bytes:
            self.head_over = True  # refused once the parser has returned (data_received): start no app for it
            return
        self.head, self.head_received = None, 0
        self._cancel_deadline()
        super().on_headers_complete()
        self.limits.busy(self)
        self.deadline = self.loop.call_later(self.limits.body_timeout_s, self._body_late)

    def on_body(self, body: bytes) -> None:
        if not self.head_over:
            super().on_body(body)

    def on_message_complete(self) -> None:
        if self.head_over:
            return
        self._cancel_deadline()
        super().on_message_complete()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if self.head_over and not self.transport.is_closing():  # the answer the refusal waited for is out
            self._unset_keepalive_if_required()
            self._refuse_headers()
        elif not self.transport.is_closing() and not self.pipeline:
            self.limits.idle(self)

    def _expect_headers(self) -> None:
        if self.deadline is None:
            self.deadline = self.loop.call_later(self.limits.header_timeout_s, self._headers_late)

    def _cancel_deadline(self) -> None:
        if self.deadline is not None:
            self.deadline.cancel()
            self.deadline = None

    def _in_flight(self) -> bool:
        return self.cycle is not None and not self.cycle.response_complete

    def _headers_late(self) -> None:
        self.deadline = None
        if self.transport.is_closing():
            return
        if self._in_flight():  # a pipelined request's headers, behind one still being answered: wait for that one
            self._expect_headers()
            return
        self.limits.report.count("headers_late")
        self._answer_and_linger(408, f"no complete request headers within {self.limits.header_timeout_s:g}s")

    def _headers_over(self) -> None:
        self.head_over = True
        self.limits.report.count("headers_over")
        if self._in_flight():  # behind a request still being answered: refused after its answer (on_response_complete)
            self.flow.pause_reading()
            return
        self._refuse_headers()

    def _refuse_headers(self) -> None:
        self._answer_and_linger(431, f"request headers over {self.limits.max_header_bytes} bytes")

    def _body_late(self) -> None:
        self.deadline = None
        if self.transport.is_closing():
            return
        if self.flow.read_paused:  # we stopped reading (the app has not taken what came): not the client's fault
            self.deadline = self.loop.call_later(self.limits.body_timeout_s, self._body_late)
            return
        self.limits.report.count("body_late")
        if self.cycle is not None and not self.cycle.response_started:
            self._answer_and_linger(408, f"the request body did not arrive within {self.limits.body_timeout_s:g}s")
        else:
            self.transport.close()

    def send_400_response(self, msg: str) -> None:
        """uvicorn's answer to a request httptools cannot parse (after its own log line, which `MalformedRequests`
        drops): counted in the report, and lingering, as the client may still be sending the rest."""
        self.limits.report.count("malformed")
        self._answer_and_linger(400, "invalid HTTP request")

    def _answer_and_linger(self, status: int, detail: str, retry_after: bool = False) -> None:
        """Answer and end our side, but read and drop what the client still sends, until it closes or LINGER_S:
        closed with its data unread, the connection would be reset, and a client still sending would see the reset,
        not the answer. An app waiting for the request's body is told the client is gone (a 499), and nothing more it
        sends is written."""
        self.transport.write(closing_answer(status, detail, retry_after))
        self._cancel_deadline()
        if self.cycle is not None and not self.cycle.response_complete:
            self.cycle.disconnected = True
            self.cycle.message_event.set()
        if not self.transport.can_write_eof() or not self.limits.lingering(self):  # TLS: no half-close
            self.transport.close()
            return
        self.lingering = True
        self.transport.write_eof()
        self.deadline = self.loop.call_later(LINGER_S, self.transport.close)

    # A half-close after a whole request: answer it, then close.

    def eof_received(self) -> bool | None:  # type: ignore[override]  # uvicorn says None; asyncio takes a bool
        if self.lingering:
            return None  # the client has read its answer and closed: close
        if self.half_closed:
            return True
        cycle = self.cycle
        if cycle is None or cycle.response_complete or cycle.more_body:
            return None  # nothing waits for an answer, or the request was cut short: close, as uvicorn does
        if self.scope.get("http_version") == "1.0":
            # No interim responses to HTTP/1.0 clients (RFC 9110 15.2), so no probe could tell a half-close from a
            # client gone away: take it as gone, as uvicorn does, and its work is cancelled.
            return None
        self.half_closed = True
        cycle.keep_alive = False  # the answer says `Connection: close`, and the connection ends after it
        self._probe()
        return True  # keep the transport open for writing

    def _probe(self) -> None:
        """Write an interim response while the answer is being made; a client that has gone away answered the last
        one with a reset, so this write fails and the connection is lost (`connection_lost`)."""
        self.probe = None
        if self.transport.is_closing() or not self._in_flight():
            return
        if not self.pipeline and not self.cycle.response_started:  # nothing of an answer on the wire yet
            self.transport.write(PROBE)
        self.probe = self.loop.call_later(PROBE_EVERY_S, self._probe)


def closing_answer(status: int, detail: str, retry_after: bool = False) -> bytes:
    """A whole HTTP answer with a JSON `detail`, which says the connection closes after it."""
    body = json.dumps({"detail": detail}).encode()
    head = [
        STATUS_LINE[status],
        b"content-type: application/json\r\n",
        b"content-length: %d\r\n" % len(body),
        b"connection: close\r\n",
        b"retry-after: 1\r\n" if retry_after else b"",
        b"\r\n",
    ]
    return b"".join(head) + body


class AcceptErrors(logging.Filter):
    """On the `asyncio` logger: a failed accept() (the process is out of file descriptors) is said at most once a
    second, in one line with no traceback. asyncio logs one with a traceback for every connection waiting to be
    accepted, on every try, and tries again for each of them a second later: thousands of lines a second."""

    MESSAGES = ("socket.accept() out of system resource", "Exception in callback BaseSelectorEventLoop._start_serving")

    def __init__(self) -> None:
        super().__init__()
        self.last = -math.inf
        self.held = 0

    def filter(self, record: logging.LogRecord) -> bool:
        if not str(record.msg).startswith(self.MESSAGES):
            return True
        now = time.monotonic()
        if now - self.last < REPORT_EVERY_S:
            self.held += 1
            return False
        error = record.exc_info[1] if record.exc_info else None
        record.args = (error or record.msg, open_file_limit(), self.held)
        record.msg = "cannot accept connections: %s (open-file limit %d); %d more such errors since the last line"
        record.exc_info, record.exc_text = None, None
        self.last, self.held = now, 0
        return True


class MalformedRequests(logging.Filter):
    """On the `uvicorn.error` logger: uvicorn's line for each request it cannot parse is dropped, since
    `BoundedProtocol` counts them in the report's line a second instead; a flood of them would flood the log."""

    MESSAGE = "Invalid HTTP request received."

    def filter(self, record: logging.LogRecord) -> bool:
        return record.msg != self.MESSAGE


def open_file_limit() -> int:
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


def raise_open_file_limit() -> int:
    """Raise this process's soft limit on open files to its hard limit (many hosts start services at 1024 of a
    hard 524288); the limit now."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = hard if hard != resource.RLIM_INFINITY else 1 << 20  # Linux refuses an infinite one
    if soft != resource.RLIM_INFINITY and soft < target:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
        except (ValueError, OSError) as exc:
            log.warning("could not raise the open-file limit from %d to %d: %s", soft, target, exc)
            return soft
        log.info("open-file limit raised from %d to %d (the hard limit)", soft, target)
        return target
    return soft


def connection_budget(settings: VerifierSettings, file_limit: int) -> tuple[int, int]:
    """(connections at most, listen backlog) that fit in the open-file limit beside the service's own files.

    asyncio accepts up to `backlog` connections in one go, before any of them can be turned away or make room; a
    connection that is closed gives its descriptor back an iteration later. So a few backlogs' worth of descriptors
    stay free beyond the cap, and the backlog is smaller where the limit is small.
    """
    sandboxes = settings.sandbox.pool_size if settings.code_enabled else 0
    own = OWN_FILES + FILES_PER_WORKER * (settings.math_workers + sandboxes)
    room = file_limit - own
    backlog = min(MAX_BACKLOG, max(MIN_BACKLOG, room // 8))
    cap = max(1, min(settings.max_connections, room - ACCEPT_ROUNDS * backlog))
    if cap < settings.max_connections:
        log.warning(
            "at most %d connections at once, not VERIFIER_MAX_CONNECTIONS=%d: the open-file limit is %d, and the "
            "service keeps about %d for itself and %d for connections being accepted; raise the limit (ulimit -n, or "
            "the container's nofile) to serve more",
            cap,
            settings.max_connections,
            file_limit,
            own,
            ACCEPT_ROUNDS * backlog,
        )
    return cap, backlog


def bounded_protocol(settings: VerifierSettings, cap: int, backlog: int) -> Any:
    """The `http` of a uvicorn.Config: a factory of BoundedProtocol sharing one server's Connections."""
    timeouts = (settings.header_timeout_s, settings.body_timeout_s)
    shared = Connections(cap, *timeouts, settings.max_header_bytes, refused_lingering=backlog)
    return functools.partial(BoundedProtocol, connections=shared)
