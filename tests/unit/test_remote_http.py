"""How the service speaks to an engine's server: an engine URL's credentials (`http://user:password@gpu-3:8000`) go as
basic auth, the key `api_key_env` names as a Bearer token, and no log line shows either, httpx's own request lines (at
INFO, the service's default level) included; a missing key variable stops the start, naming it; a 4xx that every
input would get (a wrong served_model, credentials) fails the batch at once, not input by input; only a 2xx from
/health is reachable (503: still loading), and the word is refreshed by batches and by probes when it is stale; the
start's log line names the engine and its URL without credentials, not a device. The engine is a real HTTP server on
loopback; the tokenizer, which this does not exercise, is not loaded."""

from __future__ import annotations

import array
import asyncio
import base64
import json
import logging
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

pytest.importorskip("httpx")

from reward_models import remote, runtime
from reward_models.model import ModelLoadError
from reward_models.spec import ModelSpec

STATUS: dict[str, int] = {"post": 200, "health": 200}  # what the engine answers to POST /classify and GET /health
KEY = "sk-engine-hunter2"


@pytest.fixture
def engine() -> Iterator[tuple[str, list[str | None]]]:
    """A server answering GET /health and vLLM's POST /classify (one logit per row, or the status STATUS["post"]);
    the Authorization headers seen, a request each."""
    seen: list[str | None] = []
    STATUS.update(post=200, health=200)

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            seen.append(self.headers.get("Authorization"))
            self.send_response(STATUS["health"])
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


def test_the_key_goes_as_a_bearer_token_and_never_in_a_log_line_nor_the_status(
    engine: tuple[str, list[str | None]], monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    address, seen = engine
    monkeypatch.setattr(remote, "load_tokenizer", lambda name, spec: None)
    monkeypatch.setenv("ENGINE_KEY", KEY)
    spec = ModelSpec(path="/tokenizer", backend="vllm", url=f"http://{address}", api_key_env="ENGINE_KEY", max_tokens=8)
    caplog.set_level(logging.DEBUG)
    model = remote.VllmModel("rm", spec)
    try:
        assert model.classify([[1, 2, 3]]) == [0.5]
        shown = model.status()
    finally:
        model.close()
    assert seen == [f"Bearer {KEY}"] * 2  # the probe and the request
    assert shown["api_key"] is True and "hunter2" not in json.dumps(shown)
    logged = "\n".join(record.getMessage() for record in caplog.records)
    assert "HTTP Request" in logged and "hunter2" not in logged


@pytest.mark.parametrize("value", [None, "", "  "])
def test_a_missing_key_variable_stops_the_start_naming_it(
    engine: tuple[str, list[str | None]], monkeypatch: pytest.MonkeyPatch, value: str | None
) -> None:
    address, seen = engine
    monkeypatch.setattr(remote, "load_tokenizer", lambda name, spec: None)
    if value is None:
        monkeypatch.delenv("ENGINE_KEY", raising=False)
    else:
        monkeypatch.setenv("ENGINE_KEY", value)
    spec = ModelSpec(path="/tokenizer", backend="vllm", url=f"http://{address}", api_key_env="ENGINE_KEY", max_tokens=8)
    with pytest.raises(ModelLoadError, match="model 'rm': ENGINE_KEY \\(api_key_env\\) is not set or empty"):
        remote.VllmModel("rm", spec)
    assert seen == []  # stopped before anything was sent


def wait_for(check: object, timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not check():  # type: ignore[operator]
        assert time.monotonic() < deadline, "not within the time"
        time.sleep(0.05)


def test_an_engine_still_loading_is_not_reachable_until_its_health_answers_2xx(
    engine: tuple[str, list[str | None]], monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """/health 503 (vLLM's and SGLang's answer while the model loads, or when the engine is unhealthy): not
    reachable. Once it answers 200, a status asked after PROBE_TTL_S (as /readyz asks it) probes again in the
    background and shows it reachable, with no batch sent; a status asked sooner sends nothing."""
    address, seen = engine
    monkeypatch.setattr(remote, "load_tokenizer", lambda name, spec: None)
    STATUS["health"] = 503
    spec = ModelSpec(path="/tokenizer", backend="vllm", url=f"http://{address}", max_tokens=8)
    caplog.set_level(logging.INFO, logger="reward_models.runtime")
    model = remote.VllmModel("rm", spec)
    try:
        assert model.reachable is False
        assert model.status()["reachable"] is False and len(seen) == 1  # fresh: no probe sent
        STATUS["health"] = 200
        monkeypatch.setattr(remote, "PROBE_TTL_S", 0.2)
        wait_for(lambda: model.status()["reachable"] is True)
        STATUS["health"] = 503
        wait_for(lambda: model.status()["reachable"] is False)
    finally:
        model.close()
    said = [record.getMessage() for record in caplog.records]
    assert sum("answered 503" in line for line in said) == 2  # each change once, not at every probe
    assert sum("reachable again" in line for line in said) == 1


def test_a_batch_updates_whether_the_engine_is_reachable(
    engine: tuple[str, list[str | None]], monkeypatch: pytest.MonkeyPatch
) -> None:
    address, _ = engine
    monkeypatch.setattr(remote, "load_tokenizer", lambda name, spec: None)
    STATUS["health"] = 503
    spec = ModelSpec(path="/tokenizer", backend="vllm", url=f"http://{address}", max_tokens=8)
    model = remote.VllmModel("rm", spec)
    try:
        assert model.reachable is False
        assert model.classify([[1, 2]]) == [0.5]
        assert model.reachable is True
        STATUS["post"] = 503
        with pytest.raises(remote.BatchFailed):
            model.classify([[1, 2]])
        assert model.reachable is False
    finally:
        model.close()


def test_the_start_logs_an_engines_model_by_its_engine_and_url_without_credentials(
    engine: tuple[str, list[str | None]], monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    address, _ = engine
    monkeypatch.setattr(remote, "load_tokenizer", lambda name, spec: None)
    monkeypatch.setattr(runtime, "import_model_code", lambda: None)
    spec = ModelSpec(path="/tokenizer", backend="sglang", url=f"http://user:hunter2@{address}", max_tokens=8)
    models = runtime.ModelRuntime({"rm": spec})
    caplog.set_level(logging.INFO, logger="reward_models.runtime")

    async def start_and_close() -> None:
        await models.start()
        await models.close()

    asyncio.run(start_and_close())
    [line] = [record.getMessage() for record in caplog.records if "loaded" in record.getMessage()]
    shown = f"served by sglang at http://{address}"
    assert line == f"model rm loaded: /tokenizer (its tokenizer), {shown}, version sglang:/tokenizer"
