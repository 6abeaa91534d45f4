"""HTTP as a client meets it, through a real server: paths with a trailing slash, the bare address, a connection
kept alive past a 500, a client that half-closes its connection after its request."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import httpx
import uvicorn
from fastapi import FastAPI

from tests.conftest import Server, free_port
from verifier_service.__main__ import server_config
from verifier_service.app import create_app
from verifier_service.settings import VerifierSettings

ITEM = {"completion": "The answer is \\boxed{7}.", "math": {"gold": "7"}}


def test_a_trailing_slash_serves_the_route_itself(server: Server) -> None:
    scored = httpx.post(f"{server.url}/v1/score/", json={"items": [ITEM]})
    assert scored.status_code == 200, scored.text
    assert scored.json()["results"][0]["reward"] == 1.0
    assert httpx.get(f"{server.url}/v1/components/").json()["components"]
    assert httpx.get(f"{server.url}/readyz/").status_code == 200
    assert httpx.post(f"{server.url}/v1/compat/openrlhf/", json={"query": ["\\boxed{7}"], "labels": ["7"]}).json()[
        "rewards"
    ] == [1.0]
    refused = httpx.post(f"{server.url}/v1/score/", json={"items": []})
    assert refused.status_code == 422 and refused.json()["detail"].startswith("invalid request")


def test_the_bare_address_points_to_the_docs(server: Server) -> None:
    root = httpx.get(server.url)
    assert root.status_code == 200
    links = root.json()
    assert links["docs"] == "/docs" and links["openapi"] == "/openapi.json"
    assert links["routes"]["score"] == "POST /v1/score"
    assert httpx.get(f"{server.url}{links['docs']}").status_code == 200


@contextmanager
def served_in_process(app: FastAPI, settings: VerifierSettings) -> Iterator[str]:
    """`app` served by uvicorn as `python -m verifier_service` configures it, in a thread of this process (so a test
    can add a route to it); its address."""
    server = uvicorn.Server(server_config(app, settings))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 60
    while not server.started:
        assert thread.is_alive() and time.monotonic() < deadline, "the in-process server did not start"
        time.sleep(0.05)
    try:
        yield f"{settings.host}:{settings.port}"
    finally:
        server.should_exit = True
        thread.join(timeout=30)


def read_response(conn: socket.socket) -> tuple[int, dict[str, str], bytes]:
    """One HTTP/1.1 response with a Content-Length, read off a raw socket: status, headers (lower-case), body."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = conn.recv(65536)
        assert chunk, f"the connection closed with no answer: {data!r}"
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    status_line, *lines = head.decode("latin-1").split("\r\n")
    headers = {name.strip().lower(): value.strip() for name, _, value in (line.partition(":") for line in lines)}
    while len(body) < int(headers["content-length"]):
        chunk = conn.recv(65536)
        assert chunk, "the connection closed in the middle of the answer"
        body += chunk
    return int(status_line.split()[1]), headers, body


def request(path: str) -> bytes:
    return f"GET {path} HTTP/1.1\r\nHost: verifier\r\n\r\n".encode()


def test_a_client_that_keeps_its_connection_alive_past_a_500_is_not_reset() -> None:
    """The answer to a request that fails says whether the connection lives on; a client that believes it and sends
    its next request (on the same connection, or on a new one when told `Connection: close`) gets its answer."""
    settings = VerifierSettings(port=free_port(), math_workers=1, code_enabled=False, log_level="critical")
    app = create_app(settings)

    async def broken() -> None:  # a route with a bug: how else a request ends in a 500 is what the bug fixes forbid
        raise RuntimeError("a bug")

    app.add_api_route("/broken", broken)
    with served_in_process(app, settings) as address:
        host, port = address.split(":")
        conn = socket.create_connection((host, int(port)), timeout=10)
        try:
            conn.sendall(request("/broken"))
            status, headers, body = read_response(conn)
            assert status == 500 and b"internal error (request id" in body and b"a bug" not in body
            if "close" in headers.get("connection", "").lower():
                conn.close()
                conn = socket.create_connection((host, int(port)), timeout=10)
            conn.sendall(request("/healthz"))
            status, _, body = read_response(conn)
        finally:
            conn.close()
    assert status == 200 and json.loads(body) == {"status": "ok"}


def final_response(received: bytes) -> tuple[int, bytes, bytes]:
    """The final response in all a connection received (interim 1xx responses skipped): status, head, body."""
    while True:
        head, _, rest = received.partition(b"\r\n\r\n")
        status = int(head.split(b" ", 2)[1])
        if status >= 200:
            return status, head, rest
        received = rest


def test_a_client_that_half_closes_after_its_request_gets_its_answer(server: Server) -> None:
    """`shutdown(SHUT_WR)` once the request is sent: the end of input is not the client going away. The item takes
    the shared server's math timeout (3 s), so the half-close arrives long before the answer is ready."""
    body = json.dumps({"items": [{"completion": "\\boxed{9^{9^{9^{9}}}}", "math": {"gold": "5"}}]}).encode()
    host, port = server.url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=60) as conn:
        conn.sendall(
            b"POST /v1/score HTTP/1.1\r\nHost: verifier\r\nContent-Type: application/json\r\n"
            + b"Content-Length: %d\r\n\r\n" % len(body)
            + body
        )
        conn.shutdown(socket.SHUT_WR)
        received = b""
        while chunk := conn.recv(65536):
            received += chunk
    assert received, "the connection closed with no answer"
    status, head, answer = final_response(received)
    assert status == 200, received[:500]
    assert b"connection: close" in head.lower()
    assert json.loads(answer)["results"][0]["components"]["math"]["verdict"] == "timeout"
