"""The NeMo-Gym routes (/v1/compat/nemo-gym/...) against verifiers 0.4.0's NeMo-Gym bridge, a real client of Gym's
resources-server protocol: its task posts `/seed_session` and `/verify` to a base URL, with the dataset row and a
Responses object built from the trace, and turns the answer into a reward and metrics. (Gym itself needs Python
3.12; its own contract is tested with fixtures in tests/service/test_compat.py.)"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.conftest import Server, running_server
from tests.interop.conftest import SERVICE_PYTHON

KEY = "gym-k3y"
ROW = {"responses_create_params": {"input": [{"role": "user", "content": "What is 6*7?"}]}, "expected_answer": "42"}


@pytest.fixture(scope="module")
def keyed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    settings = {"api_key": KEY, "math_workers": 1, "code_enabled": "false"}
    with running_server(tmp_path_factory.mktemp("keyed"), python=SERVICE_PYTHON, **settings) as server:
        yield server


def scored(base_url: str, answer: str, row: dict[str, Any] = ROW, headers: dict[str, str] | None = None) -> Any:
    """One rollout's trace (the user's question, then the model's reasoning and answer) scored by the bridge."""
    from verifiers.v1.graph import MessageNode
    from verifiers.v1.tasksets.nemo_gym.taskset import NeMoGymData, NeMoGymTask, NeMoGymTaskConfig
    from verifiers.v1.tasksets.nemo_gym.toolset import NeMoGymState
    from verifiers.v1.trace import Trace
    from verifiers.v1.types import AssistantMessage, UserMessage

    question = UserMessage(content="What is 6*7?")
    config = NeMoGymTaskConfig(resources_url=base_url, headers=headers or {})
    task = NeMoGymTask(NeMoGymData(name="rows:0", prompt=[question], row=row), config)
    reply = AssistantMessage(content=answer, reasoning_content="6*7 is \\boxed{48}?")  # a reasoning item: not scored
    nodes = [MessageNode(message=question), MessageNode(parent=0, message=reply, sampled=True)]
    trace = Trace.model_construct(
        nodes=nodes, calls=[], rewards={}, metrics={}, info={}, state=NeMoGymState(), mm_token_type_id_map={}
    )

    async def run() -> None:
        await task.setup(trace, None)  # POST /seed_session
        await task.score(trace)  # POST /verify

    asyncio.run(run())
    return trace


def test_right_and_wrong_answers(verifier: Server) -> None:
    base = f"{verifier.url}/v1/compat/nemo-gym"
    right = scored(base, "The answer is \\boxed{42}.")
    assert right.rewards["nemo_gym"].score == 1.0 and not right.errors
    assert right.metrics == {"mask_sample": 0.0, "verifier_judged": 1.0, "verifier_math": 1.0}
    wrong = scored(base, "The answer is \\boxed{41}.")
    assert wrong.rewards["nemo_gym"].score == 0.0 and wrong.metrics["verifier_math"] == 0.0


def test_a_verifier_spec_in_the_row(verifier: Server) -> None:
    row = {**ROW, "verifier": {"math": {"gold": "42"}, "format": {"prefilled": True}}}
    trace = scored(f"{verifier.url}/v1/compat/nemo-gym", "6*7</think>\\boxed{42}", row)
    assert trace.rewards["nemo_gym"].score == 2.0


def test_an_unjudged_sample_is_masked_which_the_bridge_records_as_a_metric(verifier: Server) -> None:
    """The bridge keeps reward 0.0 and records mask_sample as a metric: it does not drop the sample (NeMo-RL does)."""
    trace = scored(f"{verifier.url}/v1/compat/nemo-gym", "\\boxed{42}", {**ROW, "expected_answer": "\\frac"})
    assert trace.rewards["nemo_gym"].score == 0.0
    assert trace.metrics == {"mask_sample": 1.0, "verifier_judged": 0.0, "verifier_math": 0.0}
    assert "gold_unparseable" in trace.info["nemo_gym"]["failure_reason"]


def test_the_key_as_a_header_or_in_the_base_url(keyed: Server) -> None:
    right = "The answer is \\boxed{42}."
    in_url = scored(f"{keyed.url}/v1/compat/key/{KEY}/nemo-gym", right)
    assert in_url.rewards["nemo_gym"].score == 1.0
    in_header = scored(f"{keyed.url}/v1/compat/nemo-gym", right, headers={"Authorization": f"Bearer {KEY}"})
    assert in_header.rewards["nemo_gym"].score == 1.0
    with pytest.raises(httpx.HTTPStatusError, match="401"):
        scored(f"{keyed.url}/v1/compat/key/not-{KEY}/nemo-gym", right)  # /seed_session refuses it
