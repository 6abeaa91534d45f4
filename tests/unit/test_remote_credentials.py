"""An engine's URL may hold credentials (`http://user:password@gpu-3:8000`): the service sends them as basic auth, and
no log line shows them, httpx's own request lines (at INFO, the service's default level) included. The engine is a
real HTTP server on loopback; the tokenizer, which this does not exercise, is not loaded."""

from __future__ import annotations

import base64
import json
import logging
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

pytest.importorskip("httpx")

from reward_models import remote
from reward_models.spec import ModelSpec


@pytest.fixture
def engine() -> Iterator[tuple[str, list[str | None]]]:
    """A server answering GET /health and vLLM's POST /classify (one logit per row); the Authorization headers seen."""
    seen: list[str | None] = []

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            seen.append(self.headers.get("Authorization"))
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def do_POST(self) -> None:
            seen.append(self.headers.get("Authorization"))
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            data = [{"index": i, "probs": [0.5], "num_classes": 1} for i, _ in enumerate(body["input"])]
            answer = json.dumps({"data": data}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(answer)))
            self.end_headers()
            self.wfile.write(answer)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"127.0.0.1:{server.server_address[1]}", seen
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def test_the_credentials_go_in_a_header_and_never_in_a_log_line(
    engine: tuple[str, list[str | None]], monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    address, seen = engine
    monkeypatch.setattr(remote, "load_tokenizer", lambda name, spec: None)
    spec = ModelSpec(path="/tokenizer", backend="vllm", url=f"http://user:p%40ss-hunter2@{address}", max_tokens=8)
    caplog.set_level(logging.DEBUG)
    model = remote.VllmModel("rm", spec)
    try:
        assert model.reachable is True
        assert model.classify([[1, 2, 3], [4]]) == [0.5, 0.5]
    finally:
        model.close()
    expected = "Basic " + base64.b64encode(b"user:p@ss-hunter2").decode()
    assert seen == [expected, expected]  # the probe and the request, each with the credentials, decoded
    logged = "\n".join(record.getMessage() for record in caplog.records)
    assert "HTTP Request" in logged  # httpx logged the requests (so the check below looks at them)
    assert "hunter2" not in logged and "p%40ss" not in logged
