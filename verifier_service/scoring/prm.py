"""The `prm` component: a process reward model's score per step of the completion, from the model runtime
(reward_models/runtime.py) that the service's resources hold, and their aggregate.

On the event loop an item's completion is split into steps (the whole completion: a PRM reads the chain of thought)
and becomes a job; a completion with no steps is settled there (`no_steps`, null). Jobs that differ only in
`aggregate` share their input: each model gets each distinct input once, in one call that batches them under its
token budget in the model's thread. What the model could not score is null, never 0: a layout over its max_tokens
(`too_long`: never cut, which would drop or shift steps), steps that cannot be laid out for it (`bad_layout`), a
forward pass or a template that failed (`model_error`), an input not reached by the batch deadline
(`deadline_exceeded`).

An item that carries its token ids (`completion_ids`) gets each scored step's token range in them: after the forward,
in the model's thread, with the model's policy tokenizer (reward_models/tokens.py), checked against the completion;
where the ids do not give it, the steps have no ranges and the detail says why. Items without ids pay nothing.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from reward_models.layout import StepLayout, step_spans
from verifier_service.schema import ComponentResult, PrmSpec, ScoreItem, StepScore, Verdict
from verifier_service.scoring.rm import ModelComponent

if TYPE_CHECKING:
    from reward_models.runtime import Located, ModelRuntime, Outcome, PrmInput, ScoredModel

FAILED = {
    "too_long": (Verdict.TOO_LONG, "the steps' layout has {tokens} tokens, more than the model's max_tokens"),
    "bad_layout": (
        Verdict.BAD_LAYOUT,
        "the steps cannot be laid out for this model: a step holds its tag token, or a tag is not one of its tokens",
    ),
    "model_error": (Verdict.MODEL_ERROR, "the model failed on this input"),
}

NOT_LOCATED = "the deadline passed before the steps were found in the token ids"


@dataclass(frozen=True)
class PrmJob:
    """One item's steps for one model, and how their scores make the score."""

    model: str
    layout: StepLayout
    separator: str
    aggregate: str
    step_tag: str
    good_token: str
    bad_token: str
    prompt: str | None
    completion: str
    spans: tuple[tuple[int, int], ...]
    ids: tuple[int, ...] | None = None  # the completion's token ids, when the item carries them

    def input(self) -> PrmInput:
        from reward_models.runtime import PrmInput

        steps = tuple(self.completion[start:end] for start, end in self.spans)
        tags = (self.step_tag, self.good_token, self.bad_token) if self.layout == "step_tag" else ("", "", "")
        return PrmInput(self.layout, self.prompt, steps, self.separator, *tags)


def aggregate(scores: Sequence[float], how: str) -> float:
    """The steps' scores made one.

    >>> [aggregate([0.5, 0.25, 1.0], how) for how in ("min", "last", "mean", "prod")]
    [0.25, 1.0, 0.5833333333333334, 0.125]
    """
    if how == "min":
        return min(scores)
    if how == "last":
        return scores[-1]
    if how == "mean":
        return math.fsum(scores) / len(scores)
    return math.prod(scores)


def judged(job: PrmJob, outcome: Outcome, version: str) -> ComponentResult:
    """The component's result for the model's outcome on the job's steps."""
    if outcome.steps is None:
        verdict, detail = FAILED[outcome.failure or "model_error"]
        shown = detail.format(tokens=outcome.tokens)
        return ComponentResult(score=None, verdict=verdict.value, detail=shown, model_version=version)
    steps = tuple(
        StepScore(start=start, end=end, score=score)
        for (start, end), score in zip(job.spans, outcome.steps, strict=True)
    )
    return ComponentResult(
        score=aggregate(outcome.steps, job.aggregate),
        verdict=Verdict.SCORED.value,
        detail=f"{len(steps)} steps, {job.aggregate} of their scores",
        steps=steps,
        model_version=version,
    )


class PrmComponent(ModelComponent):
    """prm as a pooled component: steps split and jobs made on the loop, scored by the model runtime, model by
    model."""

    name = "prm"

    def reads(self, item: ScoreItem, spec: PrmSpec) -> int:
        # split into steps, and a job's hash reads them (and the ids, when it carries them)
        return len(item.completion) + len(item.prompt or "") + len(item.completion_ids or ())

    def prepare(self, item: ScoreItem, spec: PrmSpec) -> PrmJob | ComponentResult:
        spans = tuple(step_spans(item.completion, spec.separator))
        if not spans:
            detail = "the completion has no steps: no text between separators"
            return ComponentResult(score=None, verdict=Verdict.NO_STEPS.value, detail=detail)
        return PrmJob(
            spec.model, spec.layout, spec.separator, spec.aggregate, spec.step_tag, spec.good_token, spec.bad_token,
            item.prompt, item.completion, spans,
            None if item.completion_ids is None else tuple(item.completion_ids),
        )  # fmt: skip

    async def _forward(
        self, runtime: ModelRuntime, model: str, inputs: list[Any], deadline: float, loaded: ScoredModel
    ) -> tuple[str, list[Outcome | None]]:
        return await runtime.score_steps(model, inputs, deadline, loaded)

    def _judged(self, job: PrmJob, outcome: Outcome, version: str) -> ComponentResult:
        return judged(job, outcome, version)

    async def _score(
        self, model: str, group: list[Any], deadline: float, loaded: ScoredModel
    ) -> dict[Any, ComponentResult]:
        """The steps scored, then, for the scored jobs that carry token ids, the steps found in them (in the model's
        thread, with its policy tokenizer; only after scoring, so that a request without ids pays nothing)."""
        results = await super()._score(model, group, deadline, loaded)
        wanted = [job for job in group if job.ids is not None and results[job].steps is not None]
        if not wanted:
            return results
        inputs = list(dict.fromkeys((job.ids, job.completion, job.spans) for job in wanted))  # aggregate aside
        located = dict(zip(inputs, await self._runtime(model).locate(loaded, inputs, deadline), strict=True))
        for job in wanted:
            results[job] = self._relocated(results[job], located[job.ids, job.completion, job.spans])
        return results

    @staticmethod
    def _relocated(result: ComponentResult, found: Located | None) -> ComponentResult:
        """The scored result with its steps' token ranges, or the reason there are none in its detail."""
        assert result.steps is not None
        if found is None or found.spans is None:
            why = NOT_LOCATED if found is None else found.why
            return result.model_copy(update={"detail": f"{result.detail}; no token indices: {why}"})
        steps = tuple(
            step.model_copy(update={"token_start": start, "token_end": end})
            for step, (start, end) in zip(result.steps, found.spans, strict=True)
        )
        return result.model_copy(update={"steps": steps})
