"""A scripted stand-in for an OpenAI-compatible chat server, for tests: it speaks the same protocol as vLLM, SGLang,
`transformers serve` and the hosted APIs for the two routes the verifier's judges use, and answers what the test
scripted, chosen by the prompt's content. It is a test fixture, not a model: the tests check the verifier's side of
the protocol (what it sends, how it reads every kind of answer, its limits) with replies they choose.

    python -m tests.judge_standin --port PORT

- `GET /v1/models` -> `{"object": "list", "data": [{"id": "standin", "object": "model"}]}`.
- `POST /v1/chat/completions {"model", "messages", "temperature", "max_tokens"}` -> `{"id", "object":
  "chat.completion", "choices": [{"index": 0, "message": {"role": "assistant", "content": REPLY}, "finish_reason":
  "stop"}]}`, REPLY from the first rule whose every `contains` string is in the last message's content.
- `POST /_script {"rules": [{"contains": [str], "reply": str, "status": int, "raw": str, "delay_s": float,
  "drip_s": float}], "default": {...}, "exact": {PROMPT: {...}}}`: a rule answers `reply` after `delay_s`, or HTTP
  `status` with an error body, or the `raw` body as it is (malformed); with `drip_s` the body is sent in 8 pieces,
  `drip_s` apart (each piece soon, the whole late); the default answers what no rule matches. `exact` (optional)
  maps whole prompts to rules, looked up before `rules` in constant time: bench/judge_rescue.py scripts thousands.
- A request to /v1/ whose Authorization holds "refused" is answered 401, as an API answers a key it refuses.
- `GET /_requests` lists what the chat route received: `{"model", "prompt", "temperature", "max_tokens",
  "authorization", "query"}`; `GET /_count` counts them; `GET /_probes` counts the GETs of /v1/models.
"""

from __future__ import annotations

import argparse
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

STATE: dict[str, Any] = {"rules": [], "default": {"reply": "no rule matched"}, "exact": {}, "requests": [], "probes": 0}
LOCK = threading.Lock()


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _send(self, status: int, body: bytes, kind: str = "application/json", drip_s: float = 0.0) -> None:
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if not drip_s:
            self.wfile.write(body)
            return
        step = -(-len(body) // 8)
        for start in range(0, len(body), step):
            self.wfile.write(body[start : start + step])
            self.wfile.flush()
            time.sleep(drip_s)

    def _json(self, status: int, value: Any) -> None:
        self._send(status, json.dumps(value).encode())

    def _body(self) -> Any:
        return json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")

    def _refused(self) -> bool:
        if self.path.startswith("/v1/") and "refused" in (self.headers.get("Authorization") or ""):
            self._json(401, {"error": {"message": "invalid api key"}})
            return True
        return False

    def do_GET(self) -> None:
        path = self.path.partition("?")[0]  # a judge's base URL may carry a query (`?key=`)
        if self._refused():
            return
        if path == "/v1/models":
            with LOCK:
                STATE["probes"] += 1
            self._json(200, {"object": "list", "data": [{"id": "standin", "object": "model"}]})
        elif self.path == "/_requests":
            with LOCK:
                self._json(200, list(STATE["requests"]))
        elif self.path == "/_count":
            with LOCK:
                self._json(200, len(STATE["requests"]))
        elif self.path == "/_probes":
            self._json(200, STATE["probes"])
        else:
            self._json(404, {"error": "not found"})

    def do_POST(self) -> None:
        body = self._body()
        path, _, query = self.path.partition("?")
        if self._refused():
            return
        if path == "/_script":
            with LOCK:
                STATE["rules"], STATE["default"] = body.get("rules", []), body.get("default", STATE["default"])
                STATE["exact"] = body.get("exact", {})
            self._json(200, {"ok": True})
        elif path == "/v1/chat/completions":
            self._chat(body, query)
        else:
            self._json(404, {"error": "not found"})

    def _chat(self, body: dict[str, Any], query: str) -> None:
        prompt = body["messages"][-1]["content"]
        seen = {key: body.get(key) for key in ("model", "temperature", "max_tokens")}
        with LOCK:
            STATE["requests"].append(
                {**seen, "prompt": prompt, "authorization": self.headers.get("Authorization"), "query": query}
            )
            rules = list(STATE["rules"])
            default, exact = STATE["default"], STATE["exact"].get(prompt)
        rule = exact or next((r for r in rules if all(text in prompt for text in r.get("contains", []))), default)
        time.sleep(rule.get("delay_s", 0.0))
        if "status" in rule:
            self._json(rule["status"], {"error": {"message": "scripted failure"}})
        elif "raw" in rule:
            self._send(200, rule["raw"].encode())
        else:
            message = {"role": "assistant", "content": rule["reply"]}
            choice = {"index": 0, "message": message, "finish_reason": "stop"}
            answer = {"id": "chatcmpl-standin", "object": "chat.completion", "choices": [choice]}
            self._send(200, json.dumps(answer).encode(), drip_s=rule.get("drip_s", 0.0))


class Server(ThreadingHTTPServer):
    daemon_threads = True
    # socketserver's backlog of 5 overflowed under a burst of 16 new connections (bench/judge_rescue.py on a busy
    # 2-core machine): the verifier read a reset (ReadError, judge_error) on about one run in four
    request_queue_size = 256


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    args = parser.parse_args()
    server = Server(("127.0.0.1", args.port), Handler)
    server.serve_forever()


if __name__ == "__main__":
    main()
