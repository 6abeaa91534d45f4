"""The I/O-free readiness wait on a fake clock: when it gives up, and how often it says why it is waiting."""

from __future__ import annotations

import logging

import httpx
import pytest

from trainer_client.config import ClientConfig
from trainer_client.core import ClientCore
from trainer_client.errors import VerifierConnectionError, VerifierNotReadyError, VerifierRequestError
from trainer_client.readiness import ReadinessWait

URL = "http://verifier.test"
REFUSED = httpx.ConnectError("[Errno 111] Connection refused")
STARTING = httpx.Response(503, json={"status": "starting", "math_workers": {"alive": 0, "pids": []}})


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def waiting(timeout: float, connect_grace: float | None) -> tuple[ReadinessWait, Clock]:
    clock = Clock()
    return ReadinessWait(ClientCore(URL, None, ClientConfig()), timeout, connect_grace, clock=clock), clock


def test_nothing_listening_gives_up_when_the_grace_is_spent(caplog: pytest.LogCaptureFixture) -> None:
    wait, clock = waiting(timeout=300, connect_grace=20)
    with caplog.at_level(logging.INFO, logger="trainer_client"):
        for second in (0, 5, 10, 15, 19.9):
            clock.now = 1000 + second
            wait.request_timeout()
            wait.failed(REFUSED)
        clock.now = 1020
        with pytest.raises(VerifierConnectionError, match=r"refused; for 20s\): is the verifier running") as caught:
            wait.failed(REFUSED)
    assert caught.value.__cause__ is REFUSED
    # a line at once, then one every 10 s while the reason stays the same, each with the time left
    assert [r.getMessage().rsplit("; ", 1)[1] for r in caplog.records] == [
        "giving up in 20s unless it starts listening",
        "giving up in 10s unless it starts listening",
    ]


def test_a_verifier_that_answers_is_waited_for_until_the_timeout(caplog: pytest.LogCaptureFixture) -> None:
    wait, clock = waiting(timeout=300, connect_grace=20)
    with caplog.at_level(logging.INFO, logger="trainer_client"):
        wait.failed(REFUSED)
        for second in range(5, 300, 5):
            clock.now = 1000 + second
            assert wait.request_timeout() == 5.0
            assert wait.answered(STARTING) is False
        clock.now = 1299
        wait.failed(REFUSED)  # the grace counts from here, not from the first refusal
        clock.now = 1300
        with pytest.raises(VerifierNotReadyError, match=r"not ready after 300s: .*refused"):
            wait.request_timeout()
    kinds = [r.getMessage().split(": ", 1)[1][:20] for r in caplog.records]
    assert kinds[0].startswith("nothing listening") and kinds[-1].startswith("nothing listening")
    assert all(kind.startswith("HTTP 503: starting") for kind in kinds[1:-1])
    assert len(kinds) == 2 + 30  # 59 polls over 290 s: a line every 10 s, not one per poll


def test_without_a_grace_refusals_are_waited_for_until_the_timeout() -> None:
    wait, clock = waiting(timeout=60, connect_grace=None)
    for second in range(0, 60, 5):
        clock.now = 1000 + second
        wait.request_timeout()
        wait.failed(REFUSED)
    clock.now = 1060
    with pytest.raises(VerifierNotReadyError):
        wait.request_timeout()


def test_the_last_request_is_cut_to_the_time_left() -> None:
    wait, clock = waiting(timeout=60, connect_grace=None)
    clock.now = 1058
    assert wait.request_timeout() == pytest.approx(2.0)
    assert wait.delay() == 0.5  # ClientConfig.ready_poll_s
    clock.now = 1059.9
    assert wait.delay() == pytest.approx(0.1)


def test_a_url_that_is_not_a_verifier_raises_at_once() -> None:
    wait, _ = waiting(timeout=60, connect_grace=None)
    with pytest.raises(VerifierRequestError, match="404"):
        wait.answered(httpx.Response(404, text="not found"))
