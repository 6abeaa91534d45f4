"""VerifierClient and AsyncVerifierClient over `httpx.MockTransport`: retries, error mapping, chunking, order."""

from __future__ import annotations

import asyncio
import inspect
import logging
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import httpx
import pytest

import trainer_client.errors as errors
from tests.client.fakes import FakeVerifier
from trainer_client import (
    AsyncVerifierClient,
    ClientConfig,
    VerifierClient,
    VerifierConfigError,
    VerifierConnectionError,
    VerifierError,
    VerifierNotReadyError,
    VerifierRequestError,
    VerifierResponseError,
    VerifierServerError,
    VerifierTimeoutError,
)
from verifier_service.schema import FormatOptions, ItemResult, MathSpec, ScoreItem, ScoreRequest

URL = "http://verifier.test"
FAST = ClientConfig(backoff_base_s=0.001, backoff_max_s=0.002, ready_poll_s=0.01)


class Driver:
    """Runs the sync or the async client through the same calls, so every test covers both."""

    def __init__(self, mode: str, handler: Callable[[httpx.Request], httpx.Response], config: ClientConfig) -> None:
        self.mode = mode
        transport = httpx.MockTransport(handler)
        if mode == "sync":
            self.sync = VerifierClient(URL, api_key="k", config=config, http_client=httpx.Client(transport=transport))
        else:
            self.aio = AsyncVerifierClient(
                URL, api_key="k", config=config, http_client=httpx.AsyncClient(transport=transport)
            )

    def score(self, items: Sequence[ScoreItem]) -> list[ItemResult]:
        return self.sync.score(items) if self.mode == "sync" else asyncio.run(self.aio.score(items))

    def wait_until_ready(self, timeout: float, connect_grace: float | None = None) -> None:
        if self.mode == "sync":
            self.sync.wait_until_ready(timeout, connect_grace=connect_grace)
        else:
            asyncio.run(self.aio.wait_until_ready(timeout, connect_grace=connect_grace))


@pytest.fixture(params=["sync", "async"])
def mode(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def driver(mode: str, handler: Callable[[httpx.Request], httpx.Response], **config: Any) -> Driver:
    base = {**FAST.__dict__, **config}
    return Driver(mode, handler, ClientConfig(**base))


def math_items(n: int) -> list[ScoreItem]:
    """Item i is right (the fake's rule: gold in completion) unless i % 3 == 0."""
    return [
        ScoreItem(id=f"i{i}", completion=f"answer {i}", math=MathSpec(gold=str(i) if i % 3 else "x")) for i in range(n)
    ]


def test_round_trip_with_explicit_timeouts_and_auth(mode: str) -> None:
    fake = FakeVerifier()
    results = driver(mode, fake, connect_timeout_s=2.5, read_timeout_s=42.0).score(math_items(3))
    assert [(r.id, r.reward) for r in results] == [("i0", 0.0), ("i1", 1.0), ("i2", 1.0)]
    [request] = fake.requests
    assert request.extensions["timeout"] == {"connect": 2.5, "read": 42.0, "write": 42.0, "pool": 42.0}
    assert request.headers["authorization"] == "Bearer k"
    assert ScoreRequest.model_validate_json(request.content).items == math_items(3)


def test_an_empty_batch_sends_nothing(mode: str) -> None:
    fake = FakeVerifier()
    assert driver(mode, fake).score([]) == []
    assert fake.requests == []


@pytest.mark.parametrize("status", [429, 500, 503])
def test_transient_statuses_are_retried(mode: str, status: int) -> None:
    fake = FakeVerifier([httpx.Response(status), httpx.Response(status)])
    assert len(driver(mode, fake, max_retries=2).score(math_items(2))) == 2
    assert len(fake.requests) == 3


def test_server_errors_past_the_retry_budget_raise_with_status_and_detail(mode: str) -> None:
    fake = FakeVerifier([httpx.Response(503, json={"detail": "pool restarting"})] * 4)
    with pytest.raises(VerifierServerError) as caught:
        driver(mode, fake, max_retries=3).score(math_items(1))
    assert caught.value.status_code == 503 and caught.value.detail == "pool restarting"
    assert len(fake.requests) == 4


@pytest.mark.parametrize("status", [400, 401, 404, 413, 422])
def test_client_errors_raise_at_once(mode: str, status: int) -> None:
    fake = FakeVerifier([httpx.Response(status, json={"detail": "items.0: code scoring is not enabled"})])
    with pytest.raises(VerifierRequestError, match="code scoring is not enabled") as caught:
        driver(mode, fake, max_retries=5).score(math_items(1))
    assert caught.value.status_code == status
    assert len(fake.requests) == 1


def test_connect_errors_are_retried_then_succeed(mode: str) -> None:
    fake = FakeVerifier([httpx.ConnectError("refused"), httpx.ConnectTimeout("slow")])
    assert len(driver(mode, fake, max_retries=2).score(math_items(1))) == 1
    assert len(fake.requests) == 3


def test_connect_errors_past_the_budget_raise_connection_error_from_httpx(mode: str) -> None:
    refused = httpx.ConnectError("refused")
    fake = FakeVerifier([refused] * 3)
    with pytest.raises(VerifierConnectionError) as caught:
        driver(mode, fake, max_retries=2).score(math_items(1))
    assert caught.value.__cause__ is refused
    assert len(fake.requests) == 3


@pytest.mark.parametrize(
    ("error", "expected"),
    [(httpx.ReadTimeout("slow"), VerifierTimeoutError), (httpx.RemoteProtocolError("gone"), VerifierConnectionError)],
)
def test_errors_after_the_request_left_are_not_retried(
    mode: str, error: Exception, expected: type[VerifierError]
) -> None:
    fake = FakeVerifier([error])
    with pytest.raises(expected):
        driver(mode, fake, max_retries=5).score(math_items(1))
    assert len(fake.requests) == 1


# --------------------------------------------------------------------------- error mapping completeness

EXPECTED_MAPPING: dict[str, type[VerifierError]] = {
    "HTTPError": VerifierError,
    "RequestError": VerifierConnectionError,
    "TransportError": VerifierConnectionError,
    "TimeoutException": VerifierTimeoutError,
    "ConnectTimeout": VerifierConnectionError,
    "ReadTimeout": VerifierTimeoutError,
    "WriteTimeout": VerifierTimeoutError,
    "PoolTimeout": VerifierTimeoutError,
    "NetworkError": VerifierConnectionError,
    "ConnectError": VerifierConnectionError,
    "ReadError": VerifierConnectionError,
    "WriteError": VerifierConnectionError,
    "CloseError": VerifierConnectionError,
    "ProtocolError": VerifierConnectionError,
    "LocalProtocolError": VerifierConfigError,
    "RemoteProtocolError": VerifierConnectionError,
    "ProxyError": VerifierConnectionError,
    "UnsupportedProtocol": VerifierConfigError,
    "DecodingError": VerifierResponseError,
    "TooManyRedirects": VerifierResponseError,
    "HTTPStatusError": VerifierServerError,  # built below with a 500 response
    "InvalidURL": VerifierConfigError,
    "CookieConflict": VerifierConfigError,
    "StreamError": VerifierConfigError,
    "StreamConsumed": VerifierConfigError,
    "StreamClosed": VerifierConfigError,
    "ResponseNotRead": VerifierConfigError,
    "RequestNotRead": VerifierConfigError,
}


def httpx_exception_classes() -> Iterator[type[Exception]]:
    for name in httpx.__all__:
        obj = getattr(httpx, name)
        if inspect.isclass(obj) and issubclass(obj, Exception):
            yield obj


def make_httpx_error(cls: type[Exception]) -> Exception:
    request = httpx.Request("POST", URL + "/v1/score")
    if cls is httpx.HTTPStatusError:
        return cls("boom", request=request, response=httpx.Response(500, request=request))
    for args in (("boom",), ()):
        try:
            error = cls(*args, request=request)  # type: ignore[call-arg]
            break
        except TypeError:
            try:
                error = cls(*args)
                break
            except TypeError:
                continue
    return error


def test_the_expected_table_lists_every_httpx_exception() -> None:
    # A new httpx release that adds an exception fails here until the mapping (and this table) covers it.
    assert {cls.__name__ for cls in httpx_exception_classes()} == set(EXPECTED_MAPPING)


@pytest.mark.parametrize("cls", list(httpx_exception_classes()), ids=lambda c: c.__name__)
def test_every_httpx_exception_is_mapped_with_its_cause(mode: str, cls: type[Exception]) -> None:
    error = make_httpx_error(cls)

    def handler(request: httpx.Request) -> httpx.Response:
        raise error

    with pytest.raises(VerifierError) as caught:
        driver(mode, handler, max_retries=1).score(math_items(1))
    assert type(caught.value) is EXPECTED_MAPPING[cls.__name__]
    assert caught.value.__cause__ is error
    assert ("HTTP 500" if cls is httpx.HTTPStatusError else cls.__name__) in str(caught.value)


def test_an_unknown_exception_is_not_swallowed(mode: str) -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        raise KeyError("a bug in a custom transport")

    with pytest.raises(KeyError):
        driver(mode, handler).score(math_items(1))


def test_map_httpx_error_is_total_over_httpx_classes() -> None:
    for cls in httpx_exception_classes():
        assert isinstance(errors.map_httpx_error(make_httpx_error(cls)), VerifierError)


# --------------------------------------------------------------------------- chunking and order


def test_chunks_go_out_concurrently_and_results_keep_their_order(mode: str) -> None:
    # The first two chunks wait for each other: sent one after the other, they would fail the barrier.
    sync_barrier = threading.Barrier(2, timeout=10)
    seen: list[int] = []

    def on_score(body: ScoreRequest) -> None:
        first = int(body.items[0].id.removeprefix("i"))  # type: ignore[union-attr]
        seen.append(first)
        if mode == "sync" and first in (0, 4):
            sync_barrier.wait()

    fake = FakeVerifier(on_score=on_score)
    results = driver(mode, fake, chunk_size=4, max_concurrency=3).score(math_items(18))
    assert [r.id for r in results] == [f"i{i}" for i in range(18)]
    assert [r.reward for r in results] == [0.0 if i % 3 == 0 else 1.0 for i in range(18)]
    assert sorted(len(b["items"]) for b in fake.score_bodies) == [2, 4, 4, 4, 4]
    assert sorted(seen) == [0, 4, 8, 12, 16]


def test_async_chunks_are_in_flight_together() -> None:
    in_flight = 0
    peak = 0

    async def handler(request: httpx.Request) -> httpx.Response:
        nonlocal in_flight, peak
        in_flight += 1
        peak = max(peak, in_flight)
        await asyncio.sleep(0)  # let the other chunks start
        await asyncio.sleep(0)
        in_flight -= 1
        return FakeVerifier()(request)

    async def run() -> list[ItemResult]:
        client = AsyncVerifierClient(
            URL,
            config=ClientConfig(chunk_size=2, max_concurrency=3),
            http_client=httpx.AsyncClient(transport=httpx.MockTransport(handler)),
        )
        return await client.score(math_items(10))

    assert len(asyncio.run(run())) == 10
    assert peak == 3  # five chunks, at most three at once


def test_one_failing_chunk_fails_the_call(mode: str) -> None:
    def rule(item: ScoreItem) -> ItemResult:
        return ItemResult(id=item.id, reward=1.0, status="ok", components={})

    def handler(request: httpx.Request) -> httpx.Response:
        body = ScoreRequest.model_validate_json(request.content)
        if body.items[0].id == "i4":
            return httpx.Response(422, json={"detail": "bad chunk"})
        return FakeVerifier(rule=rule)(request)

    with pytest.raises(VerifierRequestError, match="bad chunk"):
        driver(mode, handler, chunk_size=4).score(math_items(12))


def test_a_server_that_reorders_results_is_caught(mode: str) -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        response = FakeVerifier()(request)
        body = response.json()
        body["results"].reverse()
        return httpx.Response(200, json=body)

    with pytest.raises(VerifierResponseError, match="has id"):
        driver(mode, handler).score(math_items(3))


# --------------------------------------------------------------------------- readiness


def test_wait_until_ready_polls_through_503_and_refused_connections(mode: str) -> None:
    fake = FakeVerifier([httpx.ConnectError("refused"), httpx.Response(503, json={"status": "starting"})])
    driver(mode, fake).wait_until_ready(timeout=30)
    assert [r.url.path for r in fake.requests] == ["/readyz"] * 3


def test_wait_until_ready_gives_up_with_the_last_reason(mode: str) -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(503, json={"status": "starting"})

    with pytest.raises(VerifierNotReadyError, match="HTTP 503"):
        driver(mode, handler).wait_until_ready(timeout=0.2)


def test_wait_until_ready_raises_at_once_when_the_url_is_not_a_verifier(mode: str) -> None:
    fake = FakeVerifier([httpx.Response(404, text="not found")])
    with pytest.raises(VerifierRequestError, match="404"):
        driver(mode, fake).wait_until_ready(timeout=30)
    assert len(fake.requests) == 1


def test_nothing_listening_fails_after_the_connect_grace_not_the_timeout(mode: str) -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("[Errno 111] Connection refused")

    # the timeout is far away: only the grace can end this wait with a connection error
    with pytest.raises(VerifierConnectionError, match=r"nothing is listening at http://verifier.test.*refused"):
        driver(mode, handler).wait_until_ready(timeout=300, connect_grace=0.05)


def test_a_starting_verifier_is_waited_for_past_the_connect_grace(mode: str) -> None:
    starting = httpx.Response(503, json={"status": "starting"})
    dropped = httpx.RemoteProtocolError("Server disconnected without sending a response")  # Docker's port proxy
    refused = httpx.ConnectError("refused")
    # 20 polls, 0.01 s apart, of a verifier that answers: more than the grace, and the grace starts over after them
    fake = FakeVerifier([refused, *[starting] * 10, dropped, *[starting] * 9, refused])
    driver(mode, fake).wait_until_ready(timeout=30, connect_grace=0.05)
    assert len(fake.requests) == 23


def test_an_invalid_url_fails_at_once(mode: str) -> None:
    client: Any = VerifierClient("localhost:8088") if mode == "sync" else AsyncVerifierClient("localhost:8088")
    with pytest.raises(VerifierConfigError, match="UnsupportedProtocol"):
        if mode == "sync":
            client.wait_until_ready(timeout=60)
        else:
            asyncio.run(client.wait_until_ready(timeout=60))


def test_waiting_says_what_it_waits_for(mode: str, caplog: pytest.LogCaptureFixture) -> None:
    body = {"status": "starting", "math_workers": {"alive": 1, "pids": [7]}, "sandbox": {"ready": False, "up": 0}}
    fake = FakeVerifier([httpx.ConnectError("[Errno 111] Connection refused"), httpx.Response(503, json=body)])
    with caplog.at_level(logging.INFO, logger="trainer_client"):
        driver(mode, fake).wait_until_ready(timeout=30, connect_grace=20)
    lines = [record.getMessage() for record in caplog.records]
    assert len(lines) == 3, lines
    assert "http://verifier.test: nothing listening (ConnectError: [Errno 111] Connection refused)" in lines[0]
    assert "giving up in 20s unless it starts listening" in lines[0]
    assert "HTTP 503: starting (math workers alive: 1; sandbox: 0 of ? up); waiting up to" in lines[1]
    assert "ready after" in lines[2]


def test_a_verifier_ready_at_once_logs_nothing(mode: str, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="trainer_client"):
        driver(mode, FakeVerifier()).wait_until_ready(timeout=30, connect_grace=20)
    assert caplog.records == []


# --------------------------------------------------------------------------- ownership


def test_close_leaves_an_injected_client_open_and_closes_its_own() -> None:
    injected = httpx.Client(transport=httpx.MockTransport(FakeVerifier()))
    with VerifierClient(URL, http_client=injected) as client:
        client.score([ScoreItem(completion="x", format=FormatOptions())])
    assert not injected.is_closed
    own = VerifierClient(URL)
    own.close()
    assert own._http.is_closed
