"""How the service speaks to an engine's server: an engine URL's credentials (`http://user:password@gpu-3:8000`) go as
basic auth, and no log line shows them, httpx's own request lines (at INFO, the service's default level) included; a
4xx that every input would get (a wrong served_model, credentials) fails the batch at once, not input by input. The
engine is a real HTTP server on loopback; the tokenizer, which this does not exercise, is not loaded."""

from __future__ import annotations

import array
import base64
import json
import logging
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

pytest.importorskip("httpx")

from reward_models import remote
from reward_models.spec import ModelSpec

STATUS: dict[str, int] = {"post": 200}  # what the engine answers to POST /classify


@pytest.fixture
def engine() -> Iterator[tuple[str, list[str | None]]]:
    """A server answering GET /health and vLLM's POST /classify (one logit per row, or the status STATUS["post"]);
    the Authorization headers seen, a request each."""
    seen: list[str | None] = []
    STATUS["post"] = 200

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            seen.append(self.headers.get("Authorization"))
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def do_POST(self) -> None:
            seen.append(self.headers.get("Authorization"))
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            if STATUS["post"] != 200:
                self.send_response(STATUS["post"])
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
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


@pytest.mark.parametrize(("status", "requests"), [(404, 1), (401, 1), (403, 1), (400, 4), (422, 4)])
def test_a_4xx_every_input_would_get_fails_the_batch_at_once(
    engine: tuple[str, list[str | None]], monkeypatch: pytest.MonkeyPatch, status: int, requests: int
) -> None:
    """A batch of 3 inputs: a 400 or 422 (an input over the engine's context length, say) sends each input alone
    (1 + 3 requests); a 404 (no such served model), 401 or 403 is the answer every input would get: one request."""
    address, seen = engine
    monkeypatch.setattr(remote, "load_tokenizer", lambda name, spec: None)
    spec = ModelSpec(path="/tokenizer", backend="vllm", url=f"http://{address}", max_tokens=8)
    model = remote.VllmModel("rm", spec)
    STATUS["post"] = status
    rows = {index: array.array("q", [1, 2, index + 3]) for index in range(3)}
    tokens = {index: len(row) for index, row in rows.items()}
    out: dict[int, Any] = {}
    try:
        model._run(rows, tokens, out, threading.Event(), lambda batch: model._rm_outcomes(batch, rows, tokens))
    finally:
        model.close()
    assert len(seen) - 1 == requests  # after the probe
    assert sorted(out) == [0, 1, 2]
    assert {(outcome.logit, outcome.failure) for outcome in out.values()} == {(None, "model_error")}
