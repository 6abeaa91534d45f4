"""The verifiers adapter inside PrimeIntellect verifiers 0.4.0: a task whose config plugs
`trainer_client.integrations.verifiers:score` as a reward (what `--env.taskset.task.rewards.verifier.fn` sets),
scored by the real `Task.score`, which loads the function by its import path and records its result."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from tests.conftest import Server, free_port

RIGHT = "<think>6 * 7 = 42</think>The answer is \\boxed{42}."
WRONG = "<think>6 * 7 = 41</think>The answer is 41."
PLUGGED = "trainer_client.integrations.verifiers:score"


def rollout(data: dict[str, Any], reply: str) -> tuple[Any, Any]:
    """A task of `data` with the plugged reward, and the trace of a rollout that replied `reply`."""
    import verifiers.v1 as vf
    from verifiers.v1.trace import Trace

    class MathData(vf.TaskData):
        answer: str | None = None
        verifier: dict[str, Any] | None = None

    class MathTask(vf.Task[MathData, vf.TaskConfig]):
        pass

    config = vf.TaskConfig.model_validate({"rewards": {"verifier": {"fn": PLUGGED}}})
    task = MathTask(MathData(prompt="What is 6 * 7?", **data), config)
    return task, Trace.model_construct(rewards={}, metrics={}, root_reply=reply, info={})


def score(data: dict[str, Any], reply: str) -> Any:
    """The trace of a rollout that replied `reply`, scored; a fresh event loop each, as loops come and go in a run."""
    task, trace = rollout(data, reply)
    asyncio.run(task.score(trace))
    return trace


def test_plugged_reward_scores_right_and_wrong(verifier: Server, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VERIFIER_URL", verifier.url)
    right, wrong = score({"answer": "42"}, RIGHT), score({"answer": "42"}, WRONG)
    assert (right.rewards["verifier"].score, wrong.rewards["verifier"].score) == (1.0, 0.0)
    assert right.metrics == {"verifier_math": 1.0, "verifier_judged": 1.0}
    spec = score({"verifier": {"math": {"gold": "42"}, "format": {}}}, RIGHT)
    assert spec.rewards["verifier"].score == 2.0
    assert spec.metrics == {"verifier_math": 1.0, "verifier_format": 1.0, "verifier_judged": 1.0}


def test_an_unjudged_answer_is_a_task_error_never_a_zero(verifier: Server, monkeypatch: pytest.MonkeyPatch) -> None:
    from verifiers.v1 import TaskError

    monkeypatch.setenv("VERIFIER_URL", verifier.url)
    task, trace = rollout({"answer": "\\frac"}, RIGHT)
    with pytest.raises(TaskError, match="math: gold_unparseable"):
        asyncio.run(task.score(trace))
    assert trace.rewards == {"verifier": None}  # unscored, not 0
    assert trace.metrics == {"verifier_judged": 0.0}


def test_with_the_verifier_down_scoring_is_a_task_error(monkeypatch: pytest.MonkeyPatch) -> None:
    from verifiers.v1 import TaskError

    monkeypatch.setenv("VERIFIER_URL", f"http://127.0.0.1:{free_port()}")  # nothing listens there
    with pytest.raises(TaskError, match="VerifierConnectionError"):
        score({"answer": "42"}, RIGHT)
