"""Models an engine serves (backend vllm or sglang): the service lays out and tokenizes each input itself, exactly as
for a local model (model.ScoredModel), and sends the engine the token ids; only the forward runs there.

The engines' routes, as their sources define them:

- vLLM, rm: `POST /classify {"model", "input": [[ids], ...], "use_activation": false}` answers
  `{"data": [{"index", "probs": [logit]}, ...]}`. `use_activation: false` is sent always: by default vLLM applies a
  sigmoid to a one-label classifier's output (vllm PR#18313), which would silently turn a logit into a probability.
  Token ids in /classify's `input` need a vLLM whose classification request takes them (its pooling frontend's
  `CompletionRequestMixin`); an older one, whose `input` is text only, refuses each request (400): every input is
  then null `model_error`, never 0. The old spelling `activation` is not sent: no vLLM that read it took ids here.
- vLLM, prm: `POST /pooling {"model", "input": [[ids], ...], "task": "token_classify", "use_activation": false}`
  answers `{"data": [{"index", "data": [[logit_0, logit_1] per token]}, ...]}` (ALL pooling, the default of a
  `*ForTokenClassification`); each step's score is softmax(logits)[1] at its position, computed here as the local
  backend does. An answer with another number of rows than tokens (the STEP pooler) is model_error: serve the model
  with `--pooler-config '{"pooling_type": "ALL"}'`.
- SGLang, rm: the native `POST /classify {"input_ids": [[ids], ...]}` (launched with `--is-embedding`) answers
  `[{"embedding": [logit], "meta_info"}, ...]`: the raw score. Its `/v1/classify` is not used: it applies a softmax
  over the outputs, which for a one-label reward model is always 1.0.

Failures are values, never 0: an engine that cannot be reached, a timeout (timeout_s), a 5xx, a body that is not the
shape above, or another number of rows than were sent fail the whole batch (BatchFailed: each input model_error, not
retried one by one); a 400, 413 or 422 (an input the engine refuses: vLLM's and SGLang's answer to one over the
context length) fails the batch's inputs one by one, so that it costs only itself; any other 4xx (a wrong
served_model, credentials or route: every input would get it) fails the whole batch. At most max_concurrency
requests to the engine are in flight at once; a call's batches go out together.

Credentials: `api_key_env` names the environment variable holding the engine's key, read at start and sent as
`Authorization: Bearer <key>` (SGLang's `--api-key` checks it on every route but /health and /metrics; vLLM's only on
its /v1 routes, so its /classify and /pooling need it only behind a proxy that checks it); or `user:password@` in the
url, sent as basic auth (for a proxy). Never both (one Authorization header); neither is ever logged nor shown.

Reachable: whether the engine answered its last request or probe (`GET /health`, which both engines answer 200 once
the model is loaded, 503 before or when unhealthy: only a 2xx counts). Probed at start (an engine not up does not stop
the start), updated by every batch (an answer under 500: reachable; none, or a 5xx: not), and re-probed in the
background (one probe at a time, in a thread of its own, PROBE_TIMEOUT_S) when /readyz or GET /v1/models shows it and
the last word is older than PROBE_TTL_S: an engine that comes up after the service is shown reachable without a
request sent to it.
"""

from __future__ import annotations

import array
import concurrent.futures
import contextlib
import logging
import math
import os
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any
from urllib.parse import unquote, urlsplit

import httpx

from reward_models.model import (
    BatchFailed,
    ModelLoadError,
    Outcome,
    Reads,
    ScoredModel,
    load_policy_tokenizer,
    load_tokenizer,
)
from reward_models.spec import ModelSpec, shown_url

log = logging.getLogger("reward_models.runtime")

HEALTH_TIMEOUT_S = 5.0  # the probe at start: an engine still starting does not hold the service's start
PROBE_TIMEOUT_S = 2.0  # a probe in the background, when /readyz or GET /v1/models is asked
PROBE_TTL_S = 5.0  # how old the last word on the engine may be before /readyz has it probed again
# the 4xx an engine answers for a request one of whose inputs it refuses (too long, say): then each is tried alone
INPUT_REFUSED = (400, 413, 422)


class Refused(RuntimeError):
    """The engine refused the request (INPUT_REFUSED): perhaps one of its inputs; each is tried alone."""


def softmax_good(logits: Sequence[float]) -> float:
    """softmax(logits)[1] of a two-label row, as the local backend reads a step.

    >>> round(softmax_good([0.0, 0.0]), 6), round(softmax_good([-1000.0, 1000.0]), 6)
    (0.5, 1.0)
    """
    top = max(logits)
    weights = [math.exp(value - top) for value in logits]
    return weights[1] / math.fsum(weights)


def credentials(url: str) -> httpx.BasicAuth | None:
    """The basic-auth credentials in the URL's userinfo (percent-decoded), or None.

    >>> credentials("http://gpu-3:8000") is None, credentials("http://user:p%40ss@gpu-3:8000") is not None
    (True, True)
    """
    parts = urlsplit(url)
    if parts.username is None and parts.password is None:
        return None
    return httpx.BasicAuth(unquote(parts.username or ""), unquote(parts.password or ""))


def engine_key(name: str, spec: ModelSpec) -> str | None:
    """The engine's key from the variable `api_key_env` names, read once at start; a missing or empty variable stops
    the start (naming the variable, never a value)."""
    if spec.api_key_env is None:
        return None
    key = os.environ.get(spec.api_key_env, "")
    if not key.strip():
        why = f"{spec.api_key_env} (api_key_env) is not set or empty"
        raise ModelLoadError(f"VERIFIER_MODELS: model {name!r}: {why}", why)
    return key


def finite(value: Any) -> float:
    """A number from the engine's body, or BatchFailed (a bool, a string, null: not the shape sent)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise BatchFailed("the engine's answer holds a value that is not a number")
    return float(value)


class RemoteModel(ScoredModel):
    """A model an engine serves: its tokenizer loaded here, its forwards sent to `spec.url`. A subclass gives the
    engine's routes (`classify`, `pool`) and how their answers read."""

    def __init__(self, name: str, spec: ModelSpec) -> None:
        self.name, self.spec = name, spec
        key = engine_key(name, spec)
        self.tokenizer = load_tokenizer(name, spec)
        self.policy_tokenizer = load_policy_tokenizer(name, spec, self.tokenizer)
        assert spec.url is not None and spec.max_tokens is not None  # ModelSpec checked both
        self.max_tokens = spec.max_tokens
        self.served = spec.served_model or spec.path
        self.version = f"{spec.backend}:{self.served}"
        self.shown = shown_url(spec.url)
        limits = httpx.Limits(max_connections=spec.max_concurrency, max_keepalive_connections=spec.max_concurrency)
        # the credentials go in a header, never in the requests' URL: httpx logs each request's URL at INFO (the
        # service's default level), and an exception's request carries it
        headers = {"Authorization": f"Bearer {key}"} if key is not None else None
        self.client = httpx.Client(
            base_url=self.shown.rstrip("/"),
            auth=credentials(spec.url),
            headers=headers,
            timeout=spec.timeout_s,
            limits=limits,
        )
        self.pool = ThreadPoolExecutor(spec.max_concurrency, thread_name_prefix=f"model-{name}-requests")
        self.prober = ThreadPoolExecutor(1, thread_name_prefix=f"model-{name}-probe")  # never takes a batch's slot
        self._probing: concurrent.futures.Future[None] | None = None
        self.reachable: bool | None = None
        self.checked_at = 0.0
        self.probe(HEALTH_TIMEOUT_S)

    def probe(self, timeout_s: float = PROBE_TIMEOUT_S) -> None:
        """GET /health once (both engines answer it): whether the engine is up and its model loaded now (a 2xx; a
        503 is an engine still loading), for /readyz. One that is not does not stop the start; its inputs are
        model_error until it is."""
        try:
            response = self.client.get("/health", timeout=min(self.spec.timeout_s, timeout_s))
        except httpx.HTTPError as exc:
            self._heard(False, type(exc).__name__)
            return
        self._heard(response.is_success, f"GET /health answered {response.status_code}")

    def _heard(self, reachable: bool, why: str) -> None:
        """The last word on the engine; a change is logged once, not at every probe."""
        was, self.reachable, self.checked_at = self.reachable, reachable, time.monotonic()
        if not reachable and was is not False:
            log.warning("model %s: the engine at %s is not reachable (%s)", self.name, self.shown, why)
        elif reachable and was is False:
            log.info("model %s: the engine at %s is reachable again", self.name, self.shown)

    def probe_if_stale(self) -> None:
        """Probe in the background when the last word on the engine is older than PROBE_TTL_S and no probe is under
        way: never waits (the event loop asks)."""
        if self._probing is not None and not self._probing.done():
            return
        if time.monotonic() - self.checked_at >= PROBE_TTL_S:
            with contextlib.suppress(RuntimeError):  # closed: the last word stands
                self._probing = self.prober.submit(self.probe)

    def status(self) -> dict[str, Any]:
        self.probe_if_stale()
        return {"backend": self.spec.backend, "reachable": self.reachable, "api_key": self.spec.api_key_env is not None}

    def close(self) -> None:
        self.prober.shutdown(wait=False, cancel_futures=True)
        self.pool.shutdown(wait=False, cancel_futures=True)
        self.client.close()

    def _run(
        self,
        rows: dict[int, array.array[int]],
        tokens: dict[int, int],
        out: dict[int, Outcome],
        stop: threading.Event,
        read: Callable[[list[int]], list[Outcome]],
    ) -> None:
        """The batches sent together (at most max_concurrency in flight); once `stop` is set, those not sent yet are
        not sent."""
        sent = [self.pool.submit(self._forward, batch, tokens, out, stop, read) for batch in self._batches(rows)]
        waiting = set(sent)
        while waiting and not stop.is_set():
            _, waiting = concurrent.futures.wait(waiting, timeout=0.05)
        for future in waiting:
            future.cancel()
        for future in sent:
            if future.done() and not future.cancelled() and (error := future.exception()) is not None:
                log.error("model %s: a batch failed", self.name, exc_info=error)

    def post(self, route: str, body: dict[str, Any]) -> Any:
        """The engine's JSON answer to `body` at `route`; BatchFailed when it cannot be had, Refused when one of the
        inputs may be what the engine refuses (INPUT_REFUSED)."""
        try:
            response = self.client.post(route, json=body)
        except httpx.HTTPError as exc:  # refused, reset, timed out
            answered = not isinstance(exc, httpx.ConnectError | httpx.ConnectTimeout)  # it answered, too late
            self._heard(answered, type(exc).__name__)
            raise BatchFailed(f"the engine at {self.shown} failed: {type(exc).__name__}") from None
        self._heard(response.status_code < 500, f"{route} answered {response.status_code}")  # 503: still loading
        if response.status_code in INPUT_REFUSED:
            raise Refused(f"the engine refused the request ({response.status_code})")
        if response.status_code != 200:
            raise BatchFailed(f"the engine answered {response.status_code}")
        try:
            return response.json()
        except ValueError:
            raise BatchFailed("the engine's answer is not JSON") from None

    def logits(self, rows: Sequence[array.array[int]]) -> list[float]:
        return self.classify([row.tolist() for row in rows])

    def step_scores(self, rows: Sequence[array.array[int]], reads: Sequence[Reads]) -> list[list[float]]:
        per_token = self.pool_tokens([row.tolist() for row in rows])
        scores = []
        for row, found, (positions, _) in zip(rows, per_token, reads, strict=True):
            if len(found) != len(row):
                raise BatchFailed(f"the engine gave {len(found)} rows for an input of {len(row)} tokens (ALL pooling?)")
            scores.append([softmax_good(self.label_logits(found[position])) for position in positions])
        return scores

    @staticmethod
    def label_logits(row: Any) -> list[float]:
        if not isinstance(row, list) or len(row) != 2:
            raise BatchFailed("the engine's token row is not two labels' logits (a model with num_labels 2?)")
        return [finite(value) for value in row]

    def classify(self, ids: list[list[int]]) -> list[float]:
        """Each row's logit, from the engine."""
        raise NotImplementedError

    def pool_tokens(self, ids: list[list[int]]) -> list[list[Any]]:
        """Each row's per-token label logits, from the engine."""
        raise NotImplementedError(f"backend {self.spec.backend} serves kind rm only")  # ModelSpec refuses it


def in_order(data: Any, count: int) -> list[dict[str, Any]]:
    """vLLM's `data` list, each entry at its `index`: exactly one per row sent, or BatchFailed."""
    if not isinstance(data, list) or len(data) != count:
        raise BatchFailed(f"the engine answered {len(data) if isinstance(data, list) else 'no'} rows for {count} sent")
    ordered: list[dict[str, Any] | None] = [None] * count
    for entry in data:
        index = entry.get("index") if isinstance(entry, dict) else None
        if not isinstance(index, int) or isinstance(index, bool) or not 0 <= index < count or ordered[index]:
            raise BatchFailed("the engine's rows do not have one index each")
        ordered[index] = entry
    return [entry for entry in ordered if entry is not None]


class VllmModel(RemoteModel):
    """A model vLLM serves (`vllm serve PATH --runner pooling`): rm through /classify, prm through /pooling."""

    def request(self, ids: list[list[int]]) -> dict[str, Any]:
        # use_activation false: the raw logits, never vLLM's default sigmoid (or softmax). add_special_tokens false:
        # the ids are complete as laid out here.
        return {"model": self.served, "input": ids, "use_activation": False, "add_special_tokens": False}

    def classify(self, ids: list[list[int]]) -> list[float]:
        body = self.post("/classify", self.request(ids))
        logits = []
        for entry in in_order(body.get("data") if isinstance(body, dict) else None, len(ids)):
            probs = entry.get("probs")
            if not isinstance(probs, list) or len(probs) != 1:
                raise BatchFailed("the engine's row is not one logit (a model with num_labels 1?)")
            logits.append(finite(probs[0]))
        return logits

    def pool_tokens(self, ids: list[list[int]]) -> list[list[Any]]:
        body = self.post("/pooling", self.request(ids) | {"task": "token_classify"})
        found = []
        for entry in in_order(body.get("data") if isinstance(body, dict) else None, len(ids)):
            rows = entry.get("data")
            if not isinstance(rows, list):
                raise BatchFailed("the engine's row is not a list of per-token logits")
            found.append(rows)
        return found


class SglangModel(RemoteModel):
    """A reward model SGLang serves (`python -m sglang.launch_server --model-path PATH --is-embedding`), through
    its native /classify."""

    def classify(self, ids: list[list[int]]) -> list[float]:
        body = self.post("/classify", {"input_ids": ids})
        if not isinstance(body, list) or len(body) != len(ids):
            found = len(body) if isinstance(body, list) else "no"
            raise BatchFailed(f"the engine answered {found} rows for {len(ids)} sent")
        logits = []
        for entry in body:
            embedding = entry.get("embedding") if isinstance(entry, dict) else None
            if not isinstance(embedding, list) or len(embedding) != 1:
                raise BatchFailed("the engine's row is not one score (a model with num_labels 1?)")
            logits.append(finite(embedding[0]))
        return logits


# Backend -> the class that speaks its engine's routes (runtime.BACKENDS builds a model with it).
REMOTE_MODELS: dict[str, Callable[[str, ModelSpec], RemoteModel]] = {"vllm": VllmModel, "sglang": SglangModel}
