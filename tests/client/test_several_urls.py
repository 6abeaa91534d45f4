"""A client given several verifier URLs: chunks spread over them, retries move to another, readiness of each.

Over `httpx.MockTransport` with one fake verifier per host; the live version is in test_live_server.py."""

from __future__ import annotations

import asyncio
import threading
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any

import httpx
import pytest

from tests.client.fakes import FakeVerifier
from trainer_client import (
    AsyncVerifierClient,
    ClientConfig,
    VerifierClient,
    VerifierConnectionError,
    VerifierNotReadyError,
)
from trainer_client.core import COOLDOWN_S, ClientCore, Endpoints, parse_urls
from verifier_service.schema import ItemResult, MathSpec, ScoreItem

A, B, C = "http://a.test:8088", "http://b.test:8088", "http://c.test:8088"
FAST = ClientConfig(backoff_base_s=0.001, backoff_max_s=0.002, ready_poll_s=0.01)


class Hosts:
    """A MockTransport handler that passes each request to the fake verifier of its host, recording (host, path)."""

    def __init__(self, fakes: dict[str, FakeVerifier]) -> None:
        self.fakes = {httpx.URL(url).host: fake for url, fake in fakes.items()}
        self.seen: list[tuple[str, str]] = []
        self._lock = threading.Lock()

    def __call__(self, request: httpx.Request) -> httpx.Response:
        with self._lock:
            self.seen.append((request.url.host, request.url.path))
        return self.fakes[request.url.host](request)

    @property
    def hosts(self) -> list[str]:
        return [host for host, _ in self.seen]

    def score_hosts(self) -> list[str]:
        return [host for host, path in self.seen if path == "/v1/score"]


def client(mode: str, urls: str | Sequence[str], handler: Hosts, **config: Any) -> Callable[..., Any]:
    """A `score(items)` / `wait(timeout, connect_grace)` pair for the sync or the async client."""
    settings = ClientConfig(**{**FAST.__dict__, **config})
    transport = httpx.MockTransport(handler)
    if mode == "sync":
        sync = VerifierClient(urls, config=settings, http_client=httpx.Client(transport=transport))
        return lambda op, *args, **kw: getattr(sync, op)(*args, **kw)
    aio = AsyncVerifierClient(urls, config=settings, http_client=httpx.AsyncClient(transport=transport))
    return lambda op, *args, **kw: asyncio.run(getattr(aio, op)(*args, **kw))


@pytest.fixture(params=["sync", "async"])
def mode(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def items(n: int) -> list[ScoreItem]:
    return [ScoreItem(id=f"i{i}", completion=f"answer {i}", math=MathSpec(gold=str(i))) for i in range(n)]


def all_right(results: list[ItemResult], n: int) -> bool:
    return [r.id for r in results] == [f"i{i}" for i in range(n)] and all(r.reward == 1.0 for r in results)


def test_urls_come_as_a_list_or_a_comma_separated_string() -> None:
    assert parse_urls([A + "/", B]) == parse_urls(f" {A}, {B}/ ") == (A, B)
    assert parse_urls(A) == (A,)
    assert parse_urls(f"{A}/v1/score, {B}/v1/score/") == (A, B)  # the route, as copied from the docs, is dropped
    with pytest.raises(ValueError, match="no verifier URL"):
        parse_urls(" , ")
    assert ClientCore(f"{A},{B}", None, FAST).urls == (A, B)


def test_one_url_keeps_its_address_and_urls() -> None:
    core = ClientCore(A + "/", None, FAST)
    assert (core.base_url, core.score_url, core.ready_url) == (A, A + "/v1/score", A + "/readyz")


def test_chunks_take_turns_over_the_urls(mode: str) -> None:
    hosts = Hosts({A: FakeVerifier(), B: FakeVerifier(), C: FakeVerifier()})
    results = client(mode, [A, B, C], hosts, chunk_size=2, max_concurrency=1)("score", items(12))
    assert all_right(results, 12)
    assert hosts.score_hosts() == ["a.test", "b.test", "c.test"] * 2


def test_a_chunk_goes_to_the_url_with_fewest_in_flight() -> None:
    """A holds its first chunk until B has answered three: least-in-flight sends chunks 3 and 4 to B too (taking
    turns would send chunk 3 to A and wait for it)."""
    b_answered = threading.Semaphore(0)

    def hold(body: Any) -> None:
        for _ in range(3):
            assert b_answered.acquire(timeout=10), "B did not get three chunks while A held one"

    hosts = Hosts({A: FakeVerifier(on_score=hold), B: FakeVerifier(on_score=lambda body: b_answered.release())})
    results = client("sync", f"{A},{B}", hosts, chunk_size=5, max_concurrency=2)("score", items(20))
    assert all_right(results, 20)
    assert Counter(hosts.score_hosts()) == {"a.test": 1, "b.test": 3}


def test_a_url_that_refuses_connections_is_passed_over(mode: str) -> None:
    down = FakeVerifier(script=[httpx.ConnectError("refused")] * 100)
    hosts = Hosts({A: down, B: FakeVerifier()})
    results = client(mode, [A, B], hosts, chunk_size=2, max_concurrency=1, max_retries=1)("score", items(10))
    assert all_right(results, 10)
    # The first chunk found A down and went on to B at once; A then sat out its cooldown: every other chunk went to B.
    assert hosts.hosts.count("a.test") == 1
    assert hosts.score_hosts() == ["a.test"] + ["b.test"] * 5


def test_a_busy_or_failing_url_sends_the_chunk_elsewhere(mode: str) -> None:
    busy = FakeVerifier(script=[httpx.Response(503, json={"detail": "starting"})])
    hosts = Hosts({A: busy, B: FakeVerifier()})
    results = client(mode, [A, B], hosts, chunk_size=4, max_concurrency=1, max_retries=1)("score", items(4))
    assert all_right(results, 4)
    assert hosts.score_hosts() == ["a.test", "b.test"]


def test_when_every_url_is_down_the_retries_alternate_and_then_fail(mode: str) -> None:
    refusing = [httpx.ConnectError("no")] * 9
    hosts = Hosts({A: FakeVerifier(script=refusing), B: FakeVerifier(script=refusing)})
    with pytest.raises(VerifierConnectionError, match=r"b\.test"):
        client(mode, [A, B], hosts, max_retries=3)("score", items(1))
    assert hosts.score_hosts() == ["a.test", "b.test", "a.test", "b.test"]


def test_no_chunk_stays_counted_in_flight() -> None:
    hosts = Hosts({A: FakeVerifier(script=[httpx.ConnectError("no")] * 3), B: FakeVerifier()})
    config = ClientConfig(chunk_size=1, max_concurrency=3, backoff_base_s=0.001, backoff_max_s=0.002)
    sync = VerifierClient([A, B], config=config, http_client=httpx.Client(transport=httpx.MockTransport(hosts)))
    assert all_right(sync.score(items(7)), 7)
    assert sync.core.endpoints.in_flight() == (0, 0)


def test_endpoints_prefer_fewest_in_flight_then_take_turns_and_sit_out_a_failure() -> None:
    now = [0.0]
    endpoints = Endpoints([A, B, C], clock=lambda: now[0])
    assert [endpoints.acquire() for _ in range(4)] == [0, 1, 2, 0]
    endpoints.release(1)
    assert endpoints.acquire() == 1  # the one with nothing in flight
    endpoints.release(2, failed=True)
    endpoints.release(0)
    endpoints.release(0)
    assert endpoints.in_flight() == (0, 1, 0)
    # C sits out its cooldown, even with none in flight: A (none), then B (A and B tie at one; B's turn)
    assert [endpoints.acquire(), endpoints.acquire()] == [0, 1]
    now[0] += COOLDOWN_S
    assert endpoints.acquire() == 2
    assert endpoints.acquire(avoid=2) != 2


def test_wait_until_ready_waits_for_every_url(mode: str) -> None:
    starting = FakeVerifier(script=[httpx.Response(503, json={"status": "starting"})] * 3)
    hosts = Hosts({A: FakeVerifier(), B: starting})
    client(mode, [A, B], hosts)("wait_until_ready", 5)
    assert hosts.hosts == ["a.test"] + ["b.test"] * 4


def test_wait_until_ready_names_the_url_that_is_not_there(mode: str) -> None:
    hosts = Hosts({A: FakeVerifier(), B: FakeVerifier(script=[httpx.ConnectError("refused")] * 1000)})
    with pytest.raises(VerifierConnectionError, match=r"nothing is listening at http://b\.test:8088"):
        client(mode, [A, B], hosts)("wait_until_ready", 5, connect_grace=0.05)
    hosts = Hosts({A: FakeVerifier(), B: FakeVerifier(script=[httpx.Response(503)] * 1000)})
    with pytest.raises(VerifierNotReadyError, match=r"http://b\.test:8088 not ready"):
        client(mode, [A, B], hosts)("wait_until_ready", 0.1)
