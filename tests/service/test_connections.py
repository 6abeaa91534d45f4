"""Connections a real server does not let exhaust it: idle ones past the cap and past the open-file limit, ones that
send nothing or trickle, and what the log says about them (at most a line a second). Small numbers throughout."""

from __future__ import annotations

import contextlib
import re
import resource
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest

from tests.conftest import ROOT, Server, free_port, running_server

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="reads /proc and sets Linux resource limits")

ITEM = {"completion": "The answer is \\boxed{7}.", "math": {"gold": "7"}}
SMALL = {"math_workers": 1, "code_enabled": "false", "log_level": "info"}


def open_files(soft: int, hard: int) -> Callable[[], None]:
    """A preexec_fn: the server process starts with this open-file limit."""
    return lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


@contextlib.contextmanager
def idle_connections(port: int, count: int) -> Iterator[list[socket.socket]]:
    """`count` connections that send nothing, all asked for at once (non-blocking: past the listen backlog the
    kernel retries them, and the test does not wait for each)."""
    conns = []
    try:
        for _ in range(count):
            conn = socket.socket()
            conn.setblocking(False)
            conn.connect_ex(("127.0.0.1", port))
            conns.append(conn)
        yield conns
    finally:
        for conn in conns:
            conn.close()


def report_lines(log: str) -> list[str]:
    return [line for line in log.splitlines() if "connections: " in line or "cannot accept connections" in line]


@pytest.mark.timeout(120)
def test_idle_connections_past_the_cap_and_the_file_limit_leave_a_client_served(tmp_path: Path) -> None:
    """300 connections that send nothing, against a server allowed 200 open files and 8 connections: the longest
    idle ones are closed to make room, the process never runs out of descriptors, a client is served, and the log
    says what happened at most once a second."""
    limits = open_files(200, 200)
    with running_server(tmp_path, preexec_fn=limits, max_connections=8, header_timeout_s=60, **SMALL) as server:
        port = int(server.url.rsplit(":", 1)[1])
        started = time.monotonic()
        with idle_connections(port, 300):
            time.sleep(2)
            scored = httpx.post(f"{server.url}/v1/score", json={"items": [ITEM]}, timeout=30)
            assert scored.status_code == 200 and scored.json()["results"][0]["reward"] == 1.0
            fds = len(list(Path(f"/proc/{server.process.pid}/fd").iterdir()))
        elapsed = time.monotonic() - started
        log = server.output()
    assert fds < 200
    assert "Too many open files" not in log and "Traceback" not in log, log[-3000:]
    reports = report_lines(log)
    assert reports and all("VERIFIER_MAX_CONNECTIONS" in line for line in reports), reports
    assert len(reports) <= elapsed + 2, reports


def wait_for_line(server: Server, text: str, timeout: float = 10) -> None:
    deadline = time.monotonic() + timeout
    while text not in server.output():
        assert time.monotonic() < deadline, f"{text!r} not in the log:\n{server.output()[-3000:]}"
        time.sleep(0.1)


def trickle(conn: socket.socket, data: bytes, every_s: float) -> None:
    """Send `data` a byte at a time until it is sent or the server closes the connection."""
    with contextlib.suppress(OSError):
        for byte in data:
            conn.send(bytes([byte]))
            time.sleep(every_s)


def answer(conn: socket.socket) -> bytes:
    """All the server sends until it closes the connection (a timeout fails the test)."""
    received = b""
    while chunk := conn.recv(65536):
        received += chunk
    return received


@pytest.mark.timeout(120)
def test_a_connection_that_sends_nothing_trickles_or_stalls_its_body_is_answered_408_and_closed(
    tmp_path: Path,
) -> None:
    with running_server(tmp_path, header_timeout_s=1, body_timeout_s=1, **SMALL) as server:
        port = int(server.url.rsplit(":", 1)[1])
        silent, trickling, stalled = (socket.create_connection(("127.0.0.1", port), timeout=20) for _ in range(3))
        headers = b"POST /v1/score HTTP/1.1\r\nHost: x\r\n" + b"X-Padding: y\r\n" * 100
        sender = threading.Thread(target=trickle, args=(trickling, headers, 0.05), daemon=True)
        sender.start()  # a header line every ~0.75 s: never a gap past the timeout, never done within it
        stalled.sendall(b'POST /v1/score HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{"items"')
        answers = {
            name: answer(conn) for name, conn in [("silent", silent), ("trickling", trickling), ("stalled", stalled)]
        }
        for conn in (silent, trickling, stalled):
            conn.close()
        assert httpx.post(f"{server.url}/v1/score", json={"items": [ITEM]}).status_code == 200
        wait_for_line(server, "(VERIFIER_BODY_TIMEOUT_S)")  # said with the next line a second later, at most
        log = server.output()
    for name, received in answers.items():
        assert received.startswith(b"HTTP/1.1 408 "), (name, received)
        assert b"connection: close" in received.lower(), (name, received)
    assert b"no complete request headers within 1s" in answers["silent"]
    assert b"no complete request headers within 1s" in answers["trickling"]
    assert b"the request body did not arrive within 1s" in answers["stalled"]
    assert "(VERIFIER_HEADER_TIMEOUT_S)" in log and "(VERIFIER_BODY_TIMEOUT_S)" in log
    assert "Traceback" not in log, log


def send_repeatedly(conn: socket.socket, data: bytes, count: int, every_s: float) -> None:
    """Send `data` `count` times, one send each, until sent or the server closes the connection."""
    with contextlib.suppress(OSError):
        for _ in range(count):
            conn.sendall(data)
            time.sleep(every_s)


@pytest.mark.timeout(120)
def test_request_headers_past_the_cap_are_answered_431_and_closed(tmp_path: Path) -> None:
    """httptools keeps a request's headers until they end, however long: past VERIFIER_MAX_HEADER_BYTES the answer is
    431 and the connection closes, whether the headers came whole in one read, in many at once, or one line of them
    keeps coming (the header timeout is a minute away); headers under the cap are served, however long the body after
    them."""
    with running_server(tmp_path, max_header_bytes=4096, header_timeout_s=60, **SMALL) as server:
        port = int(server.url.rsplit(":", 1)[1])
        with (
            socket.create_connection(("127.0.0.1", port), timeout=30) as whole,
            socket.create_connection(("127.0.0.1", port), timeout=30) as flood,
            socket.create_connection(("127.0.0.1", port), timeout=30) as endless,
            socket.create_connection(("127.0.0.1", port), timeout=30) as pipelined,
        ):
            whole_request = b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Padding: " + b"y" * 5000 + b"\r\n\r\n"
            whole.sendall(whole_request)
            # Still sending when refused: closed with that unread, the connection would be reset, the answer lost.
            flood.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Padding: " + b"y" * 2**20 + b"\r\n\r\n")
            endless.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Padding: ")
            sender = threading.Thread(target=send_repeatedly, args=(endless, b"y" * 500, 200, 0.05), daemon=True)
            sender.start()  # one header line, 10 KB a second, never ending: past the cap within a second
            # Behind a request being answered: that one's answer first, then the 431.
            pipelined.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n" + whole_request)
            answers = {name: answer(conn) for name, conn in [("whole", whole), ("flood", flood), ("endless", endless)]}
            first, _, second = answer(pipelined).partition(b"HTTP/1.1 431 ")
        long_body = {"items": [{**ITEM, "completion": "x" * 100_000 + ITEM["completion"]}]}
        under = httpx.post(f"{server.url}/v1/score", json=long_body, headers={"X-Padding": "y" * 3500}, timeout=30)
        wait_for_line(server, "(VERIFIER_MAX_HEADER_BYTES)")
        log = server.output()
    for name, received in answers.items():
        assert received.startswith(b"HTTP/1.1 431 "), (name, received[:200])
        assert b"connection: close" in received.lower(), (name, received[:200])
        assert b"request headers over 4096 bytes" in received, (name, received[:200])
    assert first.startswith(b"HTTP/1.1 200 ") and first.endswith(b'{"status":"ok"}'), first
    assert b"request headers over 4096 bytes" in second, second
    assert under.status_code == 200 and under.json()["results"][0]["reward"] == 1.0, under.text
    assert "Traceback" not in log, log


def test_the_open_file_limit_is_raised_to_the_hard_limit(tmp_path: Path) -> None:
    with running_server(tmp_path, preexec_fn=open_files(256, 4096), **SMALL) as server:
        limits = Path(f"/proc/{server.process.pid}/limits").read_text()
        log = server.output()
    assert re.search(r"^Max open files\s+4096\s+4096\s", limits, re.M), limits
    assert "open-file limit raised from 256 to 4096" in log


ACCEPTING = """
import asyncio, logging, resource, sys
from verifier_service.__main__ import install_log_filters

resource.setrlimit(resource.RLIMIT_NOFILE, (64, 64))
logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
install_log_filters()

async def main() -> None:
    await asyncio.start_server(lambda reader, writer: None, "127.0.0.1", int(sys.argv[1]))  # keeps every connection
    print("listening", flush=True)
    await asyncio.sleep(float(sys.argv[2]))

asyncio.run(main())
"""


@pytest.mark.timeout(60)
def test_out_of_file_descriptors_the_failed_accepts_are_a_line_a_second(tmp_path: Path) -> None:
    """Past the cap's safety margin (descriptors taken by something else), asyncio fails every accept and logs a
    traceback for each, thousands a second; `python -m verifier_service`'s log filters make that a line a second."""
    port, seconds = free_port(), 3.0
    script = tmp_path / "accepting.py"
    script.write_text(ACCEPTING)
    log = tmp_path / "accepting.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            [sys.executable, str(script), str(port), str(seconds)], cwd=ROOT, stdout=subprocess.PIPE, stderr=out
        )
    try:
        assert process.stdout is not None and process.stdout.readline() == b"listening\n"
        with idle_connections(port, 200):
            process.wait(timeout=30)
    finally:
        process.kill()
        process.wait()
        if process.stdout is not None:
            process.stdout.close()
    lines = log.read_text().splitlines()
    refused = [line for line in lines if "cannot accept connections: [Errno 24] Too many open files" in line]
    assert 1 <= len(refused) <= seconds + 2, lines[:20]
    assert "Traceback" not in log.read_text() and len(lines) <= seconds + 2, lines[:20]


@pytest.mark.timeout(120)
def test_a_flood_of_malformed_requests_is_answered_400_and_said_a_line_a_second(tmp_path: Path) -> None:
    """uvicorn logs a line for every request it cannot parse: a few hundred of them, as fast as they come, are
    answered 400 each and counted in the connections' report, a line a second at most."""
    count = 300
    with running_server(tmp_path, **SMALL) as server:
        port = int(server.url.rsplit(":", 1)[1])
        started = time.monotonic()
        answers = []
        for index in range(count):
            with socket.create_connection(("127.0.0.1", port), timeout=20) as conn:
                conn.sendall([b"NOT HTTP\r\n\r\n", b"GET / HTTP/1.1\r\nNo colon here\r\n\r\n"][index % 2])
                answers.append(answer(conn))
        elapsed = time.monotonic() - started
        deadline = time.monotonic() + 10  # the last count is said a second after the line before it, at most
        while sum(said_400(server.output())) < count and time.monotonic() < deadline:
            time.sleep(0.2)
        log = server.output()
    assert all(received.startswith(b"HTTP/1.1 400 ") for received in answers), {a[:40] for a in answers}
    assert b"invalid http request" in answers[0].lower() and b"connection: close" in answers[0].lower()
    assert "Invalid HTTP request received." not in log
    lines = [line for line in log.splitlines() if "with 400" in line]
    assert sum(said_400(log)) == count, lines
    assert len(lines) <= elapsed + 3, lines
    assert len(log.splitlines()) < 50, log[-3000:]


def said_400(log: str) -> list[int]:
    return [int(n) for n in re.findall(r"closed (\d+) connections with 400", log)]


def upload_slowly(conn: socket.socket, seconds: float, every_s: float = 0.05) -> OSError | None:
    """Send a body a KB at a time for `seconds`; the error a send met (a reset, a broken pipe), if any."""
    until = time.monotonic() + seconds
    try:
        while time.monotonic() < until:
            conn.sendall(b"x" * 1024)
            time.sleep(every_s)
    except OSError as exc:
        return exc
    return None


@pytest.mark.timeout(120)
def test_a_client_still_uploading_when_the_body_times_out_reads_the_408_not_a_reset(tmp_path: Path) -> None:
    """The body is late after 1 s, and the client goes on sending for a second more before it reads, as HTTP clients
    do (the whole request, then the answer). Closed with the client's data still coming, the connection would be
    reset: its sends fail, and what it reads may be a reset. Lingering, the server reads and drops what comes."""
    with running_server(tmp_path, body_timeout_s=1, **SMALL) as server:
        port = int(server.url.rsplit(":", 1)[1])
        with socket.create_connection(("127.0.0.1", port), timeout=20) as conn:
            conn.sendall(b"POST /v1/score HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n")
            conn.sendall(b"Content-Length: 10000000\r\n\r\n")
            error = upload_slowly(conn, seconds=2.0)
            received = answer(conn)
        assert httpx.post(f"{server.url}/v1/score", json={"items": [ITEM]}).status_code == 200
        wait_for_line(server, "(VERIFIER_BODY_TIMEOUT_S)")
        log = server.output()
    assert error is None, f"the upload met {error!r}"
    assert received.startswith(b"HTTP/1.1 408 "), received[:200]
    assert b"the request body did not arrive within 1s" in received
    assert "Traceback" not in log, log[-3000:]


@pytest.mark.timeout(120)
def test_a_client_refused_past_the_cap_while_uploading_reads_the_503_not_a_reset(tmp_path: Path) -> None:
    """Both connections the cap allows have a request in flight (bodies still to come): a third is refused with 503
    as it connects, and a client already sending its request reads that, not a reset."""
    with running_server(tmp_path, max_connections=2, body_timeout_s=60, **SMALL) as server:
        port = int(server.url.rsplit(":", 1)[1])
        head = b"POST /v1/score HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n"
        busy = [socket.create_connection(("127.0.0.1", port), timeout=20) for _ in range(2)]
        for conn in busy:
            conn.sendall(head + b'{"items": ')
        time.sleep(0.5)  # both read as requests in flight
        with socket.create_connection(("127.0.0.1", port), timeout=20) as refused:
            refused.sendall(head)
            error = upload_slowly(refused, seconds=1.0)
            received = answer(refused)
        for conn in busy:
            conn.close()
        wait_for_line(server, "refused 1 connections with 503")
    assert error is None, f"the upload met {error!r}"
    assert received.startswith(b"HTTP/1.1 503 "), received[:200]
    assert b"retry-after: 1" in received.lower()
