"""PrimeIntellect verifiers (v1 API, 0.4): the verifier as a plugged reward function, set on the command line only.

    --env.taskset.task.rewards.verifier.fn trainer_client.integrations.verifiers:score

verifiers injects the task's data (`task`) and the rollout's trace (`trace`) by name. The completion is
`trace.last_reply`; the gold answer is the task data's `answer` field, or a `verifier` field holds the item's
component specs (`{"math": {"gold": "72"}, "format": {}}`); a `data_source` field picks the component the answer
feeds, as for verl. The verifier's address and key come from $VERIFIER_URL and $VERIFIER_API_KEY. Each component's
score is recorded as a metric (`verifier_math`, ...), with `verifier_judged`.

A sample the verifier cannot judge raises: verifiers records a TaskError on the trace and leaves its reward unset
(`trace.has_error`), never a silent 0. Concurrent rollouts' calls coalesce into shared requests (`coalesce`).
"""

from __future__ import annotations

from typing import Any

from trainer_client.integrations.coalesce import coalescer_for
from trainer_client.integrations.common import Outcome, adapter_config, build_item
from verifier_service.schema import ItemResult

HINT = ("the task's answer (or verifier spec) cannot be graded; verifiers records this as a TaskError on the trace, "
        "so the rollout carries no reward")  # fmt: skip


async def score(task: Any, trace: Any) -> float:
    """The reward of one rollout: the verifier's reward for `trace.last_reply` against the task's gold answer."""
    spec, answer = getattr(task, "verifier", None), getattr(task, "answer", None)
    if spec is None and answer is None:
        raise ValueError(f"the task data ({type(task).__name__}) has neither an 'answer' nor a 'verifier' field")
    config = adapter_config({}, "trainer_client.integrations.verifiers:score")
    item = build_item(trace.last_reply, answer, config, data_source=getattr(task, "data_source", None), spec=spec)
    coalescer = await coalescer_for(config)
    result = await coalescer.score(item)
    _record_metrics(trace, result)
    return Outcome.of(result, None, HINT).score


def _record_metrics(trace: Any, result: ItemResult) -> None:
    record = getattr(trace, "record_metric", None)
    if record is None:
        return
    for name, part in result.components.items():
        if part.score is not None:
            record(f"verifier_{name}", part.score)
    record("verifier_judged", 0.0 if result.reward is None else 1.0)
