"""The coalescer over `httpx.MockTransport`: concurrent per-sample calls become shared requests, each caller gets its
own result or the shared request's error, and a cancelled caller leaves the others alone. Its per-loop clients
against a live verifier are tested in test_adapters_live.py."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import httpx
import pytest

from tests.client.fakes import FakeVerifier, judge
from trainer_client import AsyncVerifierClient, ClientConfig, VerifierConfigError, VerifierServerError
from trainer_client.integrations.coalesce import Coalescer
from verifier_service.schema import MathSpec, ScoreItem, ScoreRequest, ScoreResponse

URL = "http://verifier.test"
NO_RETRY = ClientConfig(max_retries=0)


def item(n: int, gold: int | None = None) -> ScoreItem:
    return ScoreItem(completion=f"answer {n}", math=MathSpec(gold=str(n if gold is None else gold)))


Handler = Callable[[httpx.Request], httpx.Response | Awaitable[httpx.Response]]


def coalescer_over(handler: Handler, **kw: Any) -> Coalescer:
    http = httpx.AsyncClient(transport=httpx.MockTransport(handler))
    return Coalescer(AsyncVerifierClient(URL, config=NO_RETRY, http_client=http), **kw)


def batch_sizes(fake: FakeVerifier) -> list[int]:
    return [len(body["items"]) for body in fake.score_bodies]


def test_concurrent_callers_share_one_request_and_each_gets_its_own_result() -> None:
    fake = FakeVerifier()
    coalescer = coalescer_over(fake)
    # even n: the gold is n (right); odd n: the gold is n + 1 (wrong)
    golds = {n: n if n % 2 == 0 else n + 1 for n in range(100)}

    async def main() -> list[float | None]:
        results = await asyncio.gather(*(coalescer.score(item(n, golds[n])) for n in range(100)))
        return [result.reward for result in results]

    assert asyncio.run(main()) == [1.0 if n % 2 == 0 else 0.0 for n in range(100)]
    assert batch_sizes(fake) == [100]
    assert [i["completion"] for i in fake.score_bodies[0]["items"]] == [f"answer {n}" for n in range(100)]


def test_callers_in_separate_windows_get_separate_requests() -> None:
    fake = FakeVerifier()
    coalescer = coalescer_over(fake, window_s=0.001)

    async def main() -> None:
        await asyncio.gather(*(coalescer.score(item(n)) for n in range(3)))
        await coalescer.score(item(3))  # after the first window's answer came back

    asyncio.run(main())
    assert batch_sizes(fake) == [3, 1]


def test_a_full_batch_goes_out_without_waiting_for_the_window() -> None:
    fake = FakeVerifier()
    coalescer = coalescer_over(fake, window_s=3600, idle_s=3600, max_batch=10)  # no timer ends within the test

    async def main() -> list[float | None]:
        results = await asyncio.wait_for(asyncio.gather(*(coalescer.score(item(n)) for n in range(20))), timeout=10)
        return [result.reward for result in results]

    assert asyncio.run(main()) == [1.0] * 20
    assert batch_sizes(fake) == [10, 10]


def test_a_batch_goes_out_once_calls_stop_coming_before_the_window_ends() -> None:
    fake = FakeVerifier()
    coalescer = coalescer_over(fake, window_s=3600, idle_s=0.001)

    async def main() -> list[float | None]:
        results = await asyncio.wait_for(asyncio.gather(*(coalescer.score(item(n)) for n in range(5))), timeout=10)
        return [result.reward for result in results]

    assert asyncio.run(main()) == [1.0] * 5
    assert batch_sizes(fake) == [5]


def test_calls_that_keep_coming_wait_for_each_other_until_the_window_ends() -> None:
    fake = FakeVerifier()
    coalescer = coalescer_over(fake, window_s=0.6, idle_s=0.4)

    async def main() -> None:
        calls = [asyncio.create_task(coalescer.score(item(1)))]
        await asyncio.sleep(0.3)  # within idle_s of the first call: it waits for this one
        calls.append(asyncio.create_task(coalescer.score(item(2))))
        await asyncio.sleep(0.35)  # within idle_s of the second call, but the window (0.6 s) is over
        calls.append(asyncio.create_task(coalescer.score(item(3))))
        await asyncio.gather(*calls)

    asyncio.run(main())
    assert batch_sizes(fake) == [2, 1]


def test_as_many_calls_as_the_last_batches_had_go_out_without_waiting() -> None:
    """A fixed number of samples in flight: once they are all waiting, a timer would only add latency."""
    fake = FakeVerifier()
    coalescer = coalescer_over(fake, window_s=3600, idle_s=0.05)

    async def main() -> None:
        await asyncio.gather(*(coalescer.score(item(n)) for n in range(10)))  # sent when calls stop: 10
        await asyncio.gather(*(coalescer.score(item(n)) for n in range(15)))  # 10 at once, then the other 5

    asyncio.run(main())
    assert batch_sizes(fake) == [10, 10, 5]


def test_score_many_keeps_order_and_joins_the_window() -> None:
    fake = FakeVerifier()
    coalescer = coalescer_over(fake)

    async def main() -> tuple[list[float | None], float | None]:
        group, single = await asyncio.gather(
            coalescer.score_many([item(1), item(2, gold=5), item(3)]), coalescer.score(item(4, gold=4))
        )
        return [result.reward for result in group], single.reward

    assert asyncio.run(main()) == ([1.0, 0.0, 1.0], 1.0)
    assert batch_sizes(fake) == [4]


def test_the_shared_request_error_reaches_every_caller() -> None:
    fake = FakeVerifier(script=[httpx.Response(503, json={"detail": "busy"})])
    coalescer = coalescer_over(fake)

    async def main() -> list[BaseException | object]:
        return await asyncio.gather(*(coalescer.score(item(n)) for n in range(5)), return_exceptions=True)

    outcomes = asyncio.run(main())
    assert all(isinstance(outcome, VerifierServerError) for outcome in outcomes), outcomes
    assert "503" in str(outcomes[0]) and "busy" in str(outcomes[0])
    assert batch_sizes(fake) == [5]


def test_an_error_of_one_request_leaves_the_callers_of_another_alone() -> None:
    def failing_when_asked(request: httpx.Request) -> httpx.Response:
        body = ScoreRequest.model_validate_json(request.content)
        if any(i.completion == "answer 13" for i in body.items):
            return httpx.Response(500, json={"detail": "boom"})
        return httpx.Response(200, json=ScoreResponse(results=[judge(i) for i in body.items]).model_dump())

    coalescer = coalescer_over(failing_when_asked, max_batch=2)

    async def main() -> list[BaseException | object]:
        calls = [coalescer.score(item(n)) for n in (10, 11, 12, 13)]  # requests [10, 11] and [12, 13]
        return await asyncio.gather(*calls, return_exceptions=True)

    first, second, third, fourth = asyncio.run(main())
    assert [getattr(r, "reward", None) for r in (first, second)] == [1.0, 1.0]
    assert isinstance(third, VerifierServerError) and isinstance(fourth, VerifierServerError)


class Gate:
    """An async MockTransport handler that holds every request until released, and notes cancelled ones."""

    def __init__(self) -> None:
        self.arrived = asyncio.Event()
        self.release = asyncio.Event()
        self.bodies: list[ScoreRequest] = []
        self.cancelled = 0

    async def __call__(self, request: httpx.Request) -> httpx.Response:
        body = ScoreRequest.model_validate_json(request.content)
        self.bodies.append(body)
        self.arrived.set()
        try:
            await self.release.wait()
        except asyncio.CancelledError:
            self.cancelled += 1
            raise
        return httpx.Response(200, json=ScoreResponse(results=[judge(i) for i in body.items]).model_dump())


def test_a_cancelled_caller_leaves_the_others_request_alone() -> None:
    async def main() -> tuple[list[object], int]:
        gate = Gate()
        coalescer = coalescer_over(gate)
        tasks = [asyncio.create_task(coalescer.score(item(n))) for n in range(3)]
        await gate.arrived.wait()  # the request is in flight
        tasks[0].cancel()
        await asyncio.sleep(0)
        gate.release.set()
        outcomes = await asyncio.gather(*tasks, return_exceptions=True)
        return outcomes, gate.cancelled

    outcomes, cancelled_requests = asyncio.run(main())
    assert isinstance(outcomes[0], asyncio.CancelledError)
    assert [getattr(o, "reward", None) for o in outcomes[1:]] == [1.0, 1.0]
    assert cancelled_requests == 0


def test_a_caller_cancelled_before_the_window_ends_is_not_sent() -> None:
    async def main() -> list[str]:
        gate = Gate()
        gate.release.set()
        coalescer = coalescer_over(gate, window_s=0.05, idle_s=0.05)
        tasks = [asyncio.create_task(coalescer.score(item(n))) for n in range(3)]
        await asyncio.sleep(0)  # all three are waiting for the window
        tasks[1].cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        return [i.completion for body in gate.bodies for i in body.items]

    assert asyncio.run(main()) == ["answer 0", "answer 2"]


def test_a_request_whose_callers_are_all_cancelled_is_cancelled() -> None:
    async def main() -> int:
        gate = Gate()
        coalescer = coalescer_over(gate)
        tasks = [asyncio.create_task(coalescer.score(item(n))) for n in range(2)]
        await gate.arrived.wait()
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        for _ in range(10):  # let the cancellation reach the transport
            await asyncio.sleep(0)
        return gate.cancelled

    assert asyncio.run(main()) == 1


def test_a_coalescer_refuses_a_second_event_loop_while_its_first_is_open() -> None:
    coalescer = coalescer_over(FakeVerifier())
    first = asyncio.new_event_loop()
    try:
        assert first.run_until_complete(coalescer.score(item(1))).reward == 1.0
        with pytest.raises(VerifierConfigError, match="event loop it first ran on"):
            asyncio.run(coalescer.score(item(2)))
    finally:
        first.close()
    assert asyncio.run(coalescer.score(item(3))).reward == 1.0  # the first loop is closed: nothing is left there


def test_aclose_cancels_waiting_callers() -> None:
    async def main() -> object:
        coalescer = coalescer_over(FakeVerifier(), window_s=3600, idle_s=3600)
        task = asyncio.create_task(coalescer.score(item(1)))
        await asyncio.sleep(0)
        await coalescer.aclose()
        return (await asyncio.gather(task, return_exceptions=True))[0]

    assert isinstance(asyncio.run(main()), asyncio.CancelledError)
