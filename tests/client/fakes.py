"""A fake verifier for `httpx.MockTransport`: parses requests with the wire schema and answers by simple rules.

Used to test the code above the transport (retries, chunking, reward mapping). The real server is tested in
test_live_server.py.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Sequence
from typing import Any

import httpx

from verifier_service.schema import ComponentResult, ItemResult, OverlongSpec, ScoreItem, ScoreRequest, ScoreResponse

UNJUDGEABLE = "unjudgeable"  # a gold answer the fake cannot judge: score None, verdict gold_unparseable


def judge(item: ScoreItem) -> ItemResult:
    """math: correct when the gold appears in the completion; format: ok when it opens with <think>;
    code: passes when the completion says 'pass'; choice: correct when the completion ends with the gold letter;
    answer: correct when it ends with the gold or an alias; overlong: DAPO's penalty on `completion_tokens` and
    `truncated`; length: +1 right, -1 wrong (null without tokens, or when its primary is null); repetition: -1
    for a completion that says 'again again again', else 0."""
    parts: dict[str, ComponentResult] = {}
    if item.math is not None:
        if item.math.gold == UNJUDGEABLE:
            parts["math"] = ComponentResult(score=None, verdict="gold_unparseable")
        else:
            parts["math"] = _right_or_wrong(item.math.gold in item.completion)
    if item.format is not None:
        ok = item.completion.startswith(f"<{item.format.tag}>")
        parts["format"] = ComponentResult(score=float(ok), verdict="ok" if ok else "missing_open_tag")
    if item.code is not None:
        passed = len(item.code.tests) if "pass" in item.completion else 0
        parts["code"] = ComponentResult(
            score=passed / len(item.code.tests),
            verdict="passed" if passed else "failed",
            passed=passed,
            total=len(item.code.tests),
        )
    if item.choice is not None:
        golds = (item.choice.gold,) if isinstance(item.choice.gold, str) else item.choice.gold
        parts["choice"] = _right_or_wrong(item.completion.rstrip().endswith("".join(golds)))
    if item.answer is not None:
        aliases = (item.answer.gold,) if isinstance(item.answer.gold, str) else item.answer.gold
        parts["answer"] = _right_or_wrong(any(item.completion.rstrip().endswith(a) for a in aliases))
    if item.overlong is not None:
        parts["overlong"] = _overlong(item, item.overlong)
    if item.repetition is not None:
        loop = "again again again" in item.completion
        parts["repetition"] = ComponentResult(score=-1.0 if loop else 0.0, verdict="loop" if loop else "no_repetition")
    if item.prm is not None:  # a step score; the ids it got echoed as its steps' count, for the tests to see
        parts["prm"] = ComponentResult(score=0.5, verdict="scored", detail=f"{len(item.completion_ids or ())} ids")
    if item.length is not None:
        parts["length"] = _length(item, parts[item.correctness_source(item.length)])
    scores = [part.score for part in parts.values()]
    weights = item.weights or {}
    reward = (
        None if None in scores else sum(weights.get(name, 1.0) * (part.score or 0.0) for name, part in parts.items())
    )
    return ItemResult(id=item.id, reward=reward, status="ok" if reward is not None else "error", components=parts)


def _right_or_wrong(right: bool) -> ComponentResult:
    return ComponentResult(score=float(right), verdict="correct" if right else "wrong")


def _overlong(item: ScoreItem, spec: OverlongSpec) -> ComponentResult:
    if item.completion_tokens is None:
        return ComponentResult(score=None, verdict="length_unknown")
    start = spec.max_tokens - spec.buffer
    if item.truncated or item.completion_tokens >= spec.max_tokens:
        return ComponentResult(score=-spec.penalty, verdict="truncated" if item.truncated else "over_limit")
    if item.completion_tokens <= start:
        return ComponentResult(score=0.0, verdict="within_budget")
    return ComponentResult(score=-spec.penalty * (item.completion_tokens - start) / spec.buffer, verdict="in_buffer")


def _length(item: ScoreItem, correctness: ComponentResult) -> ComponentResult:
    if item.completion_tokens is None:
        return ComponentResult(score=None, verdict="length_unknown")
    if correctness.score is None:
        return ComponentResult(score=None, verdict="primary_unjudged")
    right = correctness.score >= 1
    return ComponentResult(score=1.0 if right else -1.0, verdict="correct" if right else "wrong")


class FakeVerifier:
    """MockTransport handler. `script` holds responses or exceptions to give first, in order (None: score that
    request normally); then it scores every request."""

    def __init__(
        self,
        script: Sequence[httpx.Response | Exception | None] = (),
        rule: Callable[[ScoreItem], ItemResult] = judge,
        on_score: Callable[[ScoreRequest], None] | None = None,
    ) -> None:
        self.script = list(script)
        self.rule = rule
        self.on_score = on_score
        self.requests: list[httpx.Request] = []
        self._lock = threading.Lock()

    def __call__(self, request: httpx.Request) -> httpx.Response:
        with self._lock:
            self.requests.append(request)
            step = self.script.pop(0) if self.script else None
        if isinstance(step, Exception):
            raise step
        if step is not None:
            return step
        if request.url.path == "/readyz":
            return httpx.Response(200, json={"status": "ready"})
        body = ScoreRequest.model_validate_json(request.content)
        if self.on_score is not None:
            self.on_score(body)
        return httpx.Response(200, json=ScoreResponse(results=[self.rule(i) for i in body.items]).model_dump())

    @property
    def score_bodies(self) -> list[dict[str, Any]]:
        return [json.loads(r.content) for r in self.requests if r.url.path == "/v1/score"]

    def transport(self) -> httpx.MockTransport:
        return httpx.MockTransport(self)
