"""Online update of a served reward model, the domain side of `POST /v1/models/{name}/reload` and `/eval`
(model_routes.py is the HTTP side): which paths a reload may load, and an eval of the model against rule outcomes.

- A reload loads the configured path again, or a directory under one of `VERIFIER_MODEL_ROOTS`: the roots are an
  allow-list, empty by default, so a server loads only what its operator pointed it at (as vLLM needs
  VLLM_ALLOW_RUNTIME_LORA_UPDATING and Triton explicit model control before they load a model on request). The path
  is resolved (symlinks and `..`) before it is checked, and whether it exists is said only for paths under a root.
- An eval scores each distinct completion once, in one call to the runtime (so by one version), and computes the
  metrics of reward_models/metrics.py over the scored ones. An rm model's score is its logit (calibrated as its
  sigmoid); a process reward model's is the aggregate of its steps' scores, the completion split and laid out as the
  prm component does (a probability, calibrated as it is). Drift: the service keeps each version's last eval scores
  (by a hash of what the model sees and how it is read), for the version serving and the one before the last reload,
  and compares this eval's scores with the previous version's over the completions both scored. It does not score
  them with the previous version again: that one is freed once its requests finish.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from reward_models import metrics
from reward_models.layout import step_spans
from reward_models.runtime import PrmInput, RmInput
from reward_models.spec import PRM_KINDS
from verifier_service.schema import EvalCounts, EvalDrift, EvalGroup, EvalRequest, EvalResponse, ScoreSummary
from verifier_service.scoring.prm import aggregate
from verifier_service.scoring.rm import sigmoid

if TYPE_CHECKING:
    from reward_models.runtime import ModelRuntime

ECE_BINS = 10


class PathRefused(ValueError):
    """The reload's path is not one this server loads; the message says why without repeating it."""


def reload_path(configured: str, requested: str | None, roots: tuple[str, ...]) -> str:
    """The path to load: the configured one when none (or the same) is asked for; else a directory under a root.

    >>> reload_path("/models/rm", None, ())
    '/models/rm'
    >>> try:
    ...     reload_path("/models/rm", "/tmp/x", ())
    ... except PathRefused as refused:
    ...     print(refused)
    this server reloads only the configured path (set VERIFIER_MODEL_ROOTS to allow others)
    """
    if requested is None or requested == configured:
        return configured
    if not roots:
        raise PathRefused("this server reloads only the configured path (set VERIFIER_MODEL_ROOTS to allow others)")
    if not os.path.isabs(requested):
        raise PathRefused("must be an absolute path")
    resolved = Path(os.path.realpath(requested))
    if not any(resolved.is_relative_to(os.path.realpath(root)) for root in roots):
        raise PathRefused("not under any of VERIFIER_MODEL_ROOTS")
    if not resolved.is_dir():
        raise PathRefused("not a directory on the server")
    return str(resolved)


def item_key(template: str, prompt: str | None, completion: str, *reading: str) -> str:
    """What identifies an eval item across versions: a hash of what the model sees (and, for a process reward model,
    `reading`: how its steps are laid out and made one score)."""
    return hashlib.sha256(json.dumps([template, prompt, completion, *reading]).encode()).hexdigest()[:32]


class EvalMemory:
    """Each model's last eval scores per version (item key -> score), for the version serving and the one before."""

    def __init__(self) -> None:
        self._scores: dict[str, dict[str, dict[str, float]]] = {}

    def recall(self, name: str, version: str) -> dict[str, float]:
        return self._scores.get(name, {}).get(version, {})

    def remember(
        self, name: str, version: str, scores: dict[str, float], serving: str | None, previous: str | None
    ) -> None:
        """Keep an eval's scores by `version` if that is the version `serving` now or the `previous` one (an eval that
        began before a reload may finish after it); keep both of theirs, forget any other version's.

        >>> memory = EvalMemory()
        >>> memory.remember("m", "v1", {"a": 1.0}, serving="v2", previous="v1")
        >>> memory.remember("m", "v0", {"a": 0.0}, serving="v2", previous="v1")  # two reloads ago: not kept
        >>> memory.recall("m", "v1"), memory.recall("m", "v0")
        ({'a': 1.0}, {})
        """
        live = {serving, previous}
        kept = {v: s for v, s in self._scores.get(name, {}).items() if v in live}
        if version in live:
            kept[version] = scores
        self._scores[name] = kept


def drift(now: dict[str, float], before: dict[str, float], previous: str) -> EvalDrift:
    """The change from the previous version's scores to these, over the items both scored."""
    common = [key for key in now if key in before]
    if not common:
        return EvalDrift(previous_version=previous, items=0, mean_abs_diff=None, spearman=None)
    diff = sum(abs(now[key] - before[key]) for key in common) / len(common)
    rho = metrics.spearman([now[key] for key in common], [before[key] for key in common])
    return EvalDrift(previous_version=previous, items=len(common), mean_abs_diff=diff, spearman=rho)


async def evaluate(
    runtime: ModelRuntime, memory: EvalMemory, name: str, body: EvalRequest, deadline: float
) -> EvalResponse:
    """Score every completion with the model (by the loop time `deadline`) and compare with the rule outcomes."""
    rows = [(group, index) for group in body.groups for index in range(len(group.completions))]
    if runtime.kind(name) in PRM_KINDS:
        keys, scored, version = await steps_scored(runtime, name, body, rows, deadline)
        response = metrics_of(body, keys, scored, name, version, probability=float)
    else:
        keys = [item_key(body.template, group.prompt, group.completions[index]) for group, index in rows]
        inputs = {
            key: RmInput(body.template, group.prompt, group.completions[index])
            for key, (group, index) in zip(keys, rows, strict=True)
        }
        version, outcomes = await runtime.score(name, list(inputs.values()), deadline)
        scored = {k: o.logit for k, o in zip(inputs, outcomes, strict=True) if o is not None and o.logit is not None}
        response = metrics_of(body, keys, scored, name, version, probability=sigmoid)
    previous = runtime.previous_version(name)
    if previous is not None and previous != version:
        response.drift = drift(scored, memory.recall(name, previous), previous)
    memory.remember(name, version, scored, runtime.status()[name]["version"], previous)
    return response


async def steps_scored(
    runtime: ModelRuntime, name: str, body: EvalRequest, rows: list[tuple[EvalGroup, int]], deadline: float
) -> tuple[list[str], dict[str, float], str]:
    """A process reward model's eval scores: each completion split at the separator and laid out as the prm component
    does (one with no steps is not sent: unscored), the aggregate of its steps' scores; every item's key, the scores
    by key, and the version that gave them."""
    tags = (body.step_tag, body.good_token, body.bad_token) if body.layout == "step_tag" else ("", "", "")
    reading = (body.layout, body.separator, body.aggregate, *tags)
    keys, inputs = [], dict[str, Any]()
    for group, index in rows:
        completion = group.completions[index]
        key = item_key("steps", group.prompt, completion, *reading)
        keys.append(key)
        steps = tuple(completion[start:end] for start, end in step_spans(completion, body.separator))
        if steps:
            inputs[key] = PrmInput(body.layout, group.prompt, steps, body.separator, *tags)
    version, outcomes = await runtime.score_steps(name, list(inputs.values()), deadline)
    scored = {
        key: aggregate(outcome.steps, body.aggregate)
        for key, outcome in zip(inputs, outcomes, strict=True)
        if outcome is not None and outcome.steps is not None
    }
    return keys, scored, version


def metrics_of(
    body: EvalRequest,
    keys: list[str],
    scored: dict[str, float],
    name: str,
    version: str,
    probability: Callable[[float], float],
) -> EvalResponse:
    """The metrics over the scored items; `keys` lists every item's key, group by group; `probability` makes a score
    the probability its calibration is measured on."""
    groups: list[tuple[list[float], list[bool]]] = []
    scores, outcomes = [], []
    position = 0
    for group in body.groups:
        group_scores, right = [], []
        for outcome in group.outcomes:
            score = scored.get(keys[position])
            position += 1
            if score is not None:
                group_scores.append(score)
                right.append(outcome >= body.correct_threshold)
                scores.append(score)
                outcomes.append(outcome)
        groups.append((group_scores, right))
    accuracy, pairs = metrics.ranking_accuracy(groups)
    labels = [label for _, group_right in groups for label in group_right]
    summary = metrics.summary(scores)
    return EvalResponse(
        model=name,
        model_version=version,
        counts=EvalCounts(
            groups=len(body.groups), items=len(keys), scored=len(scores), unscored=len(keys) - len(scores), pairs=pairs
        ),
        ranking_accuracy=accuracy,
        auroc=metrics.auroc(scores, labels),
        calibration_error=metrics.calibration_error([probability(score) for score in scores], outcomes, ECE_BINS),
        scores=ScoreSummary(**summary) if summary is not None else None,
        drift=None,
    )
