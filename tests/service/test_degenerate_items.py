"""Degenerate completions through a real server (issue 23, points 11 and 12): each costs its own item, never the batch
or the process.

Point 11: a number past Python's 4,300-digit limit on int() in an answer (`#### 99...9 1/2`, in every form the issue
lists) or in a gold made the whole batch answer 500. Point 12: text built to make a regex backtrack (`<answer>x` +
60,000 spaces + `y</answer>`) took 78 s and left /healthz unanswered all that time.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.conftest import Server, running_server
from tests.service.test_compat import gym_row

NINES = "9" * 4_400
HUGE_ANSWERS = {
    "gsm8k": f"#### {NINES} 1/2",
    "boxed": f"The answer is \\boxed{{{NINES} 1/2}}.",
    "bare tail": f"so it is {NINES} 1/2",
    "thousands groups": "#### 1" + " 999" * 1_500 + " 1/2",
}


def post(server: Server, path: str, body: Any) -> httpx.Response:
    return httpx.post(f"{server.url}{path}", json=body, timeout=120)


def test_a_huge_number_costs_its_own_item_only(server: Server) -> None:
    items = [{"completion": "<think>a</think>\\boxed{1/2}", "math": {"gold": "1/2"}}]
    items += [{"id": name, "completion": text, "math": {"gold": "1/2"}} for name, text in HUGE_ANSWERS.items()]
    items += [
        {"id": "huge gold", "completion": "\\boxed{3}", "math": {"gold": f"{NINES}/7"}},
        {"id": "huge latex gold", "completion": "\\boxed{3}", "math": {"gold": f"\\frac{{{NINES}}}{{7}}"}},
        {"completion": "<think>a</think>\\boxed{2}", "math": {"gold": "1/2"}, "format": {}},
    ]
    answer = post(server, "/v1/score", {"items": items})
    assert answer.status_code == 200, answer.text[:500]
    results = answer.json()["results"]
    assert [result["id"] for result in results] == [item.get("id") for item in items]
    verdicts = [(result["reward"], result["components"]["math"]["verdict"]) for result in results]
    too_long = [(0.0, "answer_too_long")] * len(HUGE_ANSWERS)
    unjudged = [(None, "gold_unparseable")] * 2
    assert verdicts == [(1.0, "correct"), *too_long, *unjudged, (1.0, "wrong")]  # the last: wrong, but well formatted
    assert NINES[:100] not in answer.text  # the number is not said back


@pytest.mark.parametrize("completion", HUGE_ANSWERS.values(), ids=HUGE_ANSWERS.keys())
def test_a_huge_number_through_the_trainer_routes(server: Server, completion: str) -> None:
    rewards = post(server, "/v1/compat/openrlhf", {"query": [completion], "labels": ["1/2"]})
    assert rewards.status_code == 200 and rewards.json()["rewards"] == [0.0], rewards.text[:500]
    slime = post(server, "/v1/compat/slime", {"response": completion, "label": "1/2"})
    assert slime.status_code == 200 and slime.json()["reward"] == 0.0, slime.text[:500]
    gym = post(server, "/v1/compat/nemo-gym/verify", gym_row(completion, expected_answer="1/2"))
    assert gym.status_code == 200 and gym.json()["reward"] == 0.0, gym.text[:500]
    assert not gym.json()["mask_sample"]


def test_a_huge_gold_label_is_unjudged_not_a_500(server: Server) -> None:
    answer = post(server, "/v1/compat/slime?on_unjudged=0", {"response": "\\boxed{3}", "label": f"{NINES}/7"})
    assert answer.status_code == 200, answer.text[:500]
    assert answer.json()["verifier_judged"] == 0.0
    gym = post(server, "/v1/compat/nemo-gym/verify", gym_row("\\boxed{3}", expected_answer=f"{NINES}/7"))
    assert gym.status_code == 200 and gym.json()["mask_sample"] is True


# Point 12: health checks while a large adversarial batch scores.

ADVERSARIAL = [  # each about the completion size limit (1,000,000 characters)
    "<answer>x" + " " * 999_980 + "y</answer>",  # the issue's reproduction, at the size limit
    "<answer>x" + "\n" * 999_980 + "y</answer>",
    "\\boxed{" + " " * 999_990 + "}",
    "<answer>" * 124_999,
    "#### 1" + " 999" * 249_990 + " x 1/2",
    "\\boxed{an option} " * 55_555,
]
SPECS = {
    "answer": {"gold": "Paris"},  # not the answer: a wrong one is also split into its candidates
    "choice": {"gold": "B", "options": [f"option {n} " * 500 for n in range(26)]},
    "format": {},
    "repetition": {},
}


@pytest.fixture(scope="module")
def default_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """A server with the default limits: completions up to 1,000,000 characters."""
    with running_server(tmp_path_factory.mktemp("degenerate"), math_workers=2) as server:
        yield server


def health_waits(server: Server, stop: threading.Event, waits: list[float]) -> None:
    """Ask /healthz again and again until `stop`; record how long each answer took."""
    with httpx.Client(timeout=300) as client:
        while not stop.is_set():
            start = time.monotonic()
            assert client.get(f"{server.url}/healthz").status_code == 200
            waits.append(time.monotonic() - start)
            time.sleep(0.02)


@pytest.mark.timeout(600)
def test_health_checks_are_answered_while_an_adversarial_batch_scores(default_server: Server) -> None:
    """The batch's text is scored in a thread and its extraction on the event loop in slices; every scorer is linear,
    so no single call holds the interpreter long. The stall's premise: the batch takes long enough (seconds) that a
    loop held for its scoring would be seen; health answers then wait a small part of it, not all of it."""
    items = [{"completion": text, **SPECS, "math": {"gold": "1/2"}} for text in ADVERSARIAL * 2]  # 12 MB
    stop, waits = threading.Event(), list[float]()
    poller = threading.Thread(target=health_waits, args=(default_server, stop, waits))
    poller.start()
    try:
        time.sleep(0.5)
        start = time.monotonic()
        answer = post(default_server, "/v1/score", {"items": items})
        took = time.monotonic() - start
    finally:
        stop.set()
        poller.join()
    assert answer.status_code == 200, answer.text[:500]
    assert len(answer.json()["results"]) == len(items)
    assert took > 1.0, f"the batch took {took:.2f}s: too little to tell a stall"  # the premise
    assert max(waits) < took / 4, f"/healthz waited {max(waits):.2f}s while the batch took {took:.2f}s"
