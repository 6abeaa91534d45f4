"""One request of absurd expressions costs its own time, not everyone's: requests share the math workers."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import httpx
import pytest

from tests.conftest import running_server
from verifier_service.pool import GIVE_WAY_AFTER_S
from verifier_service.scoring.math import GROUP_SIZE

# Each of these takes about 0.4 s of sympy on an idle 2-core machine (simplifying the difference of two polynomials of
# degree 300; at degree 180, 0.24 s, the group's 8 took 1.8 s on a quiet CI run, under the premise's 2 s) and
# ends well within its deadline; they share their gold, so the engine sends them to one worker as one group
# (scoring.math._groups), which holds the server's only worker for several times GIVE_WAY_AFTER_S unless it gives way.
HARD = [
    {"id": f"hard{k}", "completion": f"\\boxed{{(x+{k})^{{300}}}}", "math": {"gold": "(x+1)^{300}"}}
    for k in range(2, 10)
]
TRIVIAL = [{"id": "trivial", "completion": "\\boxed{\\sqrt{4}}", "math": {"gold": "2"}}]  # needs a worker (sympy)


def _math_tasks(url: str) -> float:
    for line in httpx.get(f"{url}/metrics").text.splitlines():
        if line.startswith("verifier_math_tasks_total "):
            return float(line.split()[1])
    raise AssertionError("no verifier_math_tasks_total in /metrics")


@pytest.mark.timeout(300)
def test_a_trivial_request_does_not_wait_for_another_clients_hard_group(tmp_path: Path) -> None:
    """The hard request's group has run past GIVE_WAY_AFTER_S when the trivial request comes: it gives way after its
    current task, and the trivial request is answered while the group's other tasks still wait to run."""
    assert len({item["math"]["gold"] for item in HARD}) == 1 and len(HARD) <= GROUP_SIZE  # one group
    with running_server(tmp_path, math_workers=1, math_timeout_s=60, code_enabled=False) as server:
        hard: dict[str, object] = {}

        def send_hard() -> None:
            with httpx.Client(timeout=300) as client:  # one client
                started = time.monotonic()
                hard["response"] = client.post(f"{server.url}/v1/score", json={"items": HARD})
                hard["seconds"] = time.monotonic() - started

        sender = threading.Thread(target=send_hard)
        sender.start()
        deadline = time.monotonic() + 30
        while _math_tasks(server.url) < len(HARD):  # its group is on the worker
            assert time.monotonic() < deadline, "the hard request never reached the workers"
            time.sleep(0.02)
        with httpx.Client(timeout=300) as client:  # another client
            started = time.monotonic()
            trivial = client.post(f"{server.url}/v1/score", json={"items": TRIVIAL})
            trivial_seconds = time.monotonic() - started
            hard_running = sender.is_alive()
        sender.join(timeout=280)

        assert trivial.status_code == 200 and trivial.json()["results"][0]["reward"] == 1.0
        response = hard["response"]
        assert isinstance(response, httpx.Response) and response.status_code == 200
        verdicts = [result["components"]["math"]["verdict"] for result in response.json()["results"]]
        assert isinstance(hard["seconds"], float)
        # The premise: every hard item ran to its end (no deadline killed the worker, which would free it for the
        # trivial request by another path), and the group ran for several times GIVE_WAY_AFTER_S. If sympy ever
        # settles these much faster, this test proves nothing: raise the degree.
        assert verdicts == ["wrong"] * len(HARD), (
            f"premise broken: the hard items did not all run to the end: {verdicts}"
        )
        assert hard["seconds"] > 4 * GIVE_WAY_AFTER_S, f"premise broken: the group took {hard['seconds']:.2f}s"
        assert hard_running, "the trivial request was answered only after the hard one"
        # It waited for the group's current task (and GIVE_WAY_AFTER_S at most), not for the whole group.
        assert trivial_seconds < hard["seconds"] / 2
