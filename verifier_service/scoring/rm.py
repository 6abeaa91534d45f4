"""The `rm` component: a reward model's score of the prompt and the completion, from the model runtime
(reward_models/runtime.py) that the service's resources hold.

On the event loop an item becomes a job (the model, the layout, the texts); equal jobs of a request run once, and
so do jobs that differ only in `transform`: each model gets each distinct input once, in one call that batches them
under its token budget in the model's thread. What the model could not score is null, never 0: an input over its
max_tokens with `on_overflow: "null"` (`too_long`), a forward pass or a template that failed (`model_error`), an
input not reached by the batch deadline (`deadline_exceeded`). With `gate: "right"` the engine prepares rm in its
second round, after the rule it reads, and an answer the rule does not call right never becomes a job
(`RmSpec.settled_by_gate`: 0, `gated_out`).
"""

from __future__ import annotations

import asyncio
import logging
import math
import weakref
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from reward_models.layout import Template
from verifier_service.schema import ComponentResult, RmSpec, ScoreItem, Verdict
from verifier_service.scoring.pooled import ITEM_FAILED, Resources, deadline_exceeded

if TYPE_CHECKING:
    from reward_models.runtime import ModelRuntime, Outcome, RmInput, ScoredModel

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class RmJob:
    """One item's input to one model, and how its logit becomes the score."""

    model: str
    template: Template
    keep_end: bool
    transform: str
    prompt: str | None
    completion: str

    def input(self) -> RmInput:
        from reward_models.runtime import RmInput

        return RmInput(self.template, self.prompt, self.completion, self.keep_end)


def sigmoid(logit: float) -> float:
    """1 / (1 + e^-logit), without overflow at either end.

    >>> sigmoid(0.0), sigmoid(-1000.0), sigmoid(1000.0)
    (0.5, 0.0, 1.0)
    """
    if logit >= 0:
        return 1.0 / (1.0 + math.exp(-logit))
    small = math.exp(logit)
    return small / (1.0 + small)


def judged(job: RmJob, outcome: Outcome, version: str) -> ComponentResult:
    """The component's result for the model's outcome on the job's input."""
    if outcome.failure == "too_long":
        detail = f"the input has {outcome.tokens} tokens, more than the model's max_tokens"
        return ComponentResult(score=None, verdict=Verdict.TOO_LONG.value, detail=detail, model_version=version)
    if outcome.logit is None:
        detail = "the model failed on this input"
        return ComponentResult(score=None, verdict=Verdict.MODEL_ERROR.value, detail=detail, model_version=version)
    if job.transform == "sigmoid":  # the logit itself in the detail: the sigmoid saturates
        shown = f"logit {outcome.logit:.6g}"
        return ComponentResult(
            score=sigmoid(outcome.logit), verdict=Verdict.SCORED.value, detail=shown, model_version=version
        )
    return ComponentResult(score=outcome.logit, verdict=Verdict.SCORED.value, model_version=version)


class ModelComponent:
    """The base of a component scored by the model runtime (rm, prm): jobs made on the loop (each has a `model`), run
    model by model; a subclass gives `reads`, `prepare`, `_forward` (the runtime's call for its kind of model) and
    `_judged` (an outcome's result).

    A request is scored wholly by one version of each model, though it may run jobs twice (ungated items in the
    engine's first round, `gate: "right"` ones in its second) and a reload may swap the model between the two: the
    first run pins the version serving then (`ModelRuntime.pin`), per request (`owner`, held weakly: the pin goes
    with the request), and the second run scores with that pinned version."""

    name = "model"

    def __init__(self, resources: Resources) -> None:
        models = resources.part("models")
        self.settings = resources.settings
        self.runtime: ModelRuntime | None = models.runtime if models is not None else None
        self._pins: weakref.WeakKeyDictionary[object, dict[str, ScoredModel]] = weakref.WeakKeyDictionary()

    async def run(
        self, jobs: Mapping[Any, Sequence[int]], deadline: float, owner: object
    ) -> dict[Any, ComponentResult]:
        by_model: dict[str, list[Any]] = {}
        for job in jobs:
            by_model.setdefault(job.model, []).append(job)
        pins = self._pins.setdefault(owner, {})  # the owner must be weakly referable: the engine's Request is
        scored = await asyncio.gather(
            *(self._pinned(model, group, deadline, pins) for model, group in by_model.items()), return_exceptions=True
        )
        results: dict[Any, ComponentResult] = {}
        for group, found in zip(by_model.values(), scored, strict=True):
            if isinstance(found, BaseException):
                log.error("%s: scoring failed", self.name, exc_info=found)
                failed = ComponentResult(score=None, verdict=Verdict.INTERNAL_ERROR.value, detail=ITEM_FAILED)
                results.update(dict.fromkeys(group, failed))
            else:
                results.update(found)
        return results

    async def _pinned(
        self, model: str, group: list[Any], deadline: float, pins: dict[str, ScoredModel]
    ) -> dict[Any, ComponentResult]:
        """The group scored by the request's version of `model`: the one pinned by its first run, else the one
        serving now (pinned from here on)."""
        if model not in pins:
            pins[model] = self._runtime(model).pin(model)
        return await self._score(model, group, deadline, pins[model])

    def _runtime(self, model: str) -> ModelRuntime:
        if self.runtime is None:  # the request was checked against VERIFIER_MODELS: not reached
            raise RuntimeError(f"no model runtime, yet an item names model {model!r}")
        return self.runtime

    async def _score(
        self, model: str, group: list[Any], deadline: float, loaded: ScoredModel
    ) -> dict[Any, ComponentResult]:
        """Each job's result, scored by `loaded`, the request's version of `model`: the model run once per distinct
        input; what the deadline left unscored is deadline_exceeded."""
        inputs = list(dict.fromkeys(job.input() for job in group))
        version, outcomes = await self._forward(self._runtime(model), model, inputs, deadline, loaded)
        by_input = dict(zip(inputs, outcomes, strict=True))
        results: dict[Any, ComponentResult] = {}
        for job in group:
            outcome = by_input[job.input()]
            results[job] = deadline_exceeded(self.settings) if outcome is None else self._judged(job, outcome, version)
        return results

    async def _forward(
        self, runtime: ModelRuntime, model: str, inputs: list[Any], deadline: float, loaded: ScoredModel
    ) -> tuple[str, list[Outcome | None]]:
        """The runtime's call for this kind of model: its version and an outcome per input (None: not reached)."""
        raise NotImplementedError

    def _judged(self, job: Any, outcome: Outcome, version: str) -> ComponentResult:
        """The component's result for the model's outcome on the job's input."""
        raise NotImplementedError


class RmComponent(ModelComponent):
    """rm as a pooled component: jobs made on the loop, scored by the model runtime, model by model."""

    name = "rm"

    def reads(self, item: ScoreItem, spec: RmSpec) -> int:
        return len(item.completion) + len(item.prompt or "")  # a job's hash reads them

    def prepare(self, item: ScoreItem, spec: RmSpec) -> RmJob:
        keep_end = spec.on_overflow == "keep_end"
        return RmJob(spec.model, spec.template, keep_end, spec.transform, item.prompt, item.completion)

    async def _forward(
        self, runtime: ModelRuntime, model: str, inputs: list[Any], deadline: float, loaded: ScoredModel
    ) -> tuple[str, list[Outcome | None]]:
        return await runtime.score(model, inputs, deadline, loaded)

    def _judged(self, job: RmJob, outcome: Outcome, version: str) -> ComponentResult:
        return judged(job, outcome, version)
