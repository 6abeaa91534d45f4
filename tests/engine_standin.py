"""A stand-in for an inference engine's server, for tests: it speaks the HTTP protocol vLLM and SGLang document for
reward models (below), over a checkpoint it runs with transformers. It is a test fixture, not the engine: neither
vLLM nor SGLang can be installed here (they need a GPU), so the tests check the service against the engines' routes
and answers as their sources define them, with a model whose logits are known.

    python -m tests.engine_standin --port PORT --checkpoint DIR --kind rm|prm [--served-model NAME] [--api-key KEY]

- `GET /health`: 200 (both engines), 503 while `loading`.
- vLLM `POST /classify {"model", "input": [[ids]...] | [ids], "use_activation"}` -> `{"data": [{"index", "label",
  "probs", "num_classes"}], ...}`: a one-label model's logit, through a sigmoid unless `use_activation` is false
  (vLLM's default activation, vllm PR#18313).
- vLLM `POST /pooling {"model", "input", "task": "token_classify", "use_activation"}` -> `{"data": [{"index",
  "object": "pooling", "data": [[logit_0, logit_1] per token]}]}` (ALL pooling), softmaxed unless `use_activation`
  is false.
- SGLang `POST /classify {"input_ids": [[ids]...] | [ids]}` -> `[{"embedding": [logit], "meta_info"}]` (native,
  `--is-embedding`): the raw score.

Each input runs alone, unpadded, as an engine schedules sequences. `POST /_fault {"mode", "delay_s"}` makes the
routes above (not /health) fail until reset: `500`, `malformed` (not JSON), `shape` (JSON of another shape), `rows`
(one row fewer than sent), `slow` (answer after delay_s); `none` resets. `max_model_len` (none) makes vLLM's routes
refuse a request holding a longer input with 400, as vLLM does. `loading` (false) makes it an engine still loading
its model: /health and the routes above answer 503. `api_key` (none; `--api-key` sets it at start) makes every route
but /health and the test's own (`/_...`) answer 401 unless the request has `Authorization: Bearer <key>`, as SGLang's
`--api-key` does. `GET /_requests` lists the bodies received.
"""

from __future__ import annotations

import argparse
import asyncio
import math
from typing import Any

import uvicorn
from fastapi import FastAPI, Request, Response
from fastapi.responses import JSONResponse, PlainTextResponse


def build_app(checkpoint: str, kind: str, served_model: str, api_key: str | None = None) -> FastAPI:
    import torch  # here, not at import: the suite collects this module where the `models` extra is not installed
    from transformers import AutoModelForSequenceClassification, AutoModelForTokenClassification

    auto = AutoModelForSequenceClassification if kind == "rm" else AutoModelForTokenClassification
    model = auto.from_pretrained(checkpoint).eval()
    app = FastAPI()
    fault: dict[str, Any] = {"mode": "none", "delay_s": 0.0, "max_model_len": None, "loading": False}
    fault["api_key"] = api_key
    received: list[dict[str, Any]] = []

    @app.middleware("http")
    async def authenticate(request: Request, call_next: Any) -> Response:
        """SGLang's --api-key: every route but /health (and this stand-in's own, /_...) needs the Bearer key; an
        engine still loading answers 503."""
        if request.url.path.startswith(("/health", "/_")):
            return await call_next(request)  # type: ignore[no-any-return]
        key = fault["api_key"]
        if key is not None and request.headers.get("Authorization") != f"Bearer {key}":
            return JSONResponse({"error": "Unauthorized"}, status_code=401)
        if fault["loading"]:
            return JSONResponse({"error": "the model is loading"}, status_code=503)
        return await call_next(request)  # type: ignore[no-any-return]

    def forward(ids: list[int]) -> list[list[float]]:
        with torch.inference_mode():
            logits = model(input_ids=torch.tensor([ids])).logits[0]
        return [[float(value) for value in row] for row in torch.atleast_2d(logits).tolist()]

    def rows_of(value: Any) -> list[list[int]]:
        return [value] if value and isinstance(value[0], int) else list(value)

    async def faulty(answer: Any) -> Response:
        mode = fault["mode"]
        if mode == "slow":
            await asyncio.sleep(fault["delay_s"])
        if mode == "500":
            return PlainTextResponse("engine error", status_code=500)
        if mode == "malformed":
            return PlainTextResponse('{"data": [', media_type="application/json")
        if mode == "shape":
            return JSONResponse({"data": "no rows"})
        if mode == "rows":
            answer = answer[:-1] if isinstance(answer, list) else answer | {"data": answer["data"][:-1]}
        return JSONResponse(answer)

    def refused(body: dict[str, Any], rows: list[list[int]]) -> Response | None:
        """vLLM's 4xx: a model it does not serve; a prompt longer than its max_model_len (the whole request)."""
        if body.get("model") not in (None, served_model):
            return JSONResponse({"error": {"message": "The model does not exist."}}, status_code=404)
        if (limit := fault["max_model_len"]) is not None and any(len(ids) > limit for ids in rows):
            return JSONResponse({"error": {"message": "longer than the maximum context length"}}, status_code=400)
        return None

    @app.get("/health")
    async def health() -> Response:
        return Response(status_code=503 if fault["loading"] else 200)

    @app.post("/_fault")
    async def set_fault(request: Request) -> Response:
        fault.update(await request.json())
        return Response(status_code=204)

    @app.get("/_requests")
    async def requests() -> Response:
        return JSONResponse(received)

    @app.post("/classify")
    async def classify(request: Request) -> Response:
        body = await request.json()
        received.append({"route": "/classify", **body})
        if "input_ids" in body:  # SGLang's native /classify: the raw score
            rows = rows_of(body["input_ids"])
            answer = [{"embedding": forward(ids)[0], "meta_info": {"prompt_tokens": len(ids)}} for ids in rows]
            return await faulty(answer)
        if (refusal := refused(body, rows_of(body["input"]))) is not None:
            return refusal
        data = []
        for index, ids in enumerate(rows_of(body["input"])):
            logit = forward(ids)[0][0]
            probs = [logit] if body.get("use_activation") is False else [1 / (1 + math.exp(-logit))]
            data.append({"index": index, "label": "LABEL_0", "probs": probs, "num_classes": 1})
        return await faulty({"object": "list", "model": served_model, "data": data, "usage": {}})

    @app.post("/pooling")
    async def pooling(request: Request) -> Response:
        body = await request.json()
        received.append({"route": "/pooling", **body})
        if (refusal := refused(body, rows_of(body["input"]))) is not None:
            return refusal
        if body.get("task") != "token_classify":
            return JSONResponse({"error": {"message": "unsupported task"}}, status_code=400)
        data = []
        for index, ids in enumerate(rows_of(body["input"])):
            rows = forward(ids)
            if body.get("use_activation") is not False:
                rows = [torch.tensor(row).softmax(-1).tolist() for row in rows]
            data.append({"index": index, "object": "pooling", "data": rows})
        return await faulty({"object": "list", "model": served_model, "data": data, "usage": {}})

    return app


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--checkpoint", required=True)
    parser.add_argument("--kind", choices=("rm", "prm"), required=True)
    parser.add_argument("--served-model", default="model")
    parser.add_argument("--api-key", default=None, help="require 'Authorization: Bearer KEY', as the engines' flag")
    args = parser.parse_args()
    app = build_app(args.checkpoint, args.kind, args.served_model, args.api_key)
    uvicorn.run(app, host="127.0.0.1", port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
