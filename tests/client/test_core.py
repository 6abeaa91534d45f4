"""The I/O-free client core: backoff bounds, retry decisions, chunking, parsing."""

from __future__ import annotations

import random

import httpx
import pytest

from trainer_client.config import ClientConfig
from trainer_client.core import Chunk, ClientCore, place
from trainer_client.errors import VerifierRequestError, VerifierResponseError, VerifierServerError
from verifier_service.schema import FormatOptions, ItemResult, ScoreItem

URL = "http://verifier.test"


def core(**config: object) -> ClientCore:
    return ClientCore(URL, None, ClientConfig(**config), rng=random.Random(0))  # type: ignore[arg-type]


def items(n: int) -> list[ScoreItem]:
    return [ScoreItem(id=str(i), completion=f"c{i}", format=FormatOptions()) for i in range(n)]


def test_backoff_is_exponential_jittered_and_capped() -> None:
    c = core(backoff_base_s=0.5, backoff_max_s=8.0)
    for attempt in range(12):
        ceiling = min(8.0, 0.5 * 2**attempt)
        delays = [c.backoff_s(attempt) for _ in range(200)]
        assert all(ceiling / 2 <= d <= ceiling for d in delays), (attempt, min(delays), max(delays))
        assert len(set(delays)) > 100  # jittered, not a fixed schedule
    assert max(c.backoff_s(1000) for _ in range(100)) <= 8.0


def test_retry_after_is_honoured_up_to_the_cap() -> None:
    c = core(backoff_base_s=0.1, backoff_max_s=4.0)
    busy = httpx.Response(429, headers={"retry-after": "3"})
    assert all(3.0 <= c.retry_delay(0, response=busy) <= 4.0 for _ in range(50))  # type: ignore[operator]
    very_busy = httpx.Response(503, headers={"retry-after": "3600"})
    assert c.retry_delay(0, response=very_busy) == 4.0
    assert c.retry_delay(0, response=httpx.Response(503, headers={"retry-after": "Wed, 21 Oct 2015"})) is not None


@pytest.mark.parametrize("status", [429, 500, 502, 503, 504])
def test_busy_and_server_errors_are_retried_until_the_budget_is_spent(status: int) -> None:
    c = core(max_retries=2)
    response = httpx.Response(status)
    assert c.retry_delay(0, response=response) is not None
    assert c.retry_delay(1, response=response) is not None
    assert c.retry_delay(2, response=response) is None


@pytest.mark.parametrize("status", [200, 400, 401, 403, 404, 409, 413, 422])
def test_success_and_client_errors_are_never_retried(status: int) -> None:
    assert core().retry_delay(0, response=httpx.Response(status)) is None


@pytest.mark.parametrize(
    ("error", "retried"),
    [
        (httpx.ConnectError("refused"), True),
        (httpx.ConnectTimeout("slow connect"), True),
        (httpx.ReadTimeout("slow answer"), False),
        (httpx.ReadError("reset"), False),
        (httpx.RemoteProtocolError("hung up"), False),
        (httpx.WriteTimeout("slow"), False),
        (httpx.PoolTimeout("pool"), False),
        (httpx.InvalidURL("bad"), False),
    ],
)
def test_only_connect_errors_are_retried(error: Exception, retried: bool) -> None:
    assert (core().retry_delay(0, error=error) is not None) is retried


def test_chunks_cover_the_batch_in_order() -> None:
    chunks = core(chunk_size=3).chunks(items(10))
    assert [(c.start, len(c.items)) for c in chunks] == [(0, 3), (3, 3), (6, 3), (9, 1)]
    assert [i.id for c in chunks for i in c.items] == [str(i) for i in range(10)]
    assert core().chunks([]) == []


def test_place_puts_results_back_by_chunk_start() -> None:
    batch = items(5)
    chunks = [Chunk(0, batch[:2]), Chunk(2, batch[2:4]), Chunk(4, batch[4:])]
    answers = [[ItemResult(id=i.id, reward=1.0, status="ok", components={}) for i in c.items] for c in chunks]
    assert [r.id for r in place(chunks, answers, 5)] == ["0", "1", "2", "3", "4"]


def ok_body(ids: list[str | None]) -> dict[str, object]:
    return {"results": [{"id": i, "reward": 1.0, "status": "ok", "components": {}} for i in ids]}


def test_parse_checks_count_and_echoed_ids() -> None:
    c, chunk = core(), Chunk(0, items(2))
    assert len(c.parse_score(httpx.Response(200, json=ok_body(["0", "1"])), chunk)) == 2
    with pytest.raises(VerifierResponseError, match="1 results for 2 items"):
        c.parse_score(httpx.Response(200, json=ok_body(["0"])), chunk)
    with pytest.raises(VerifierResponseError, match="result 0 has id '1'"):
        c.parse_score(httpx.Response(200, json=ok_body(["1", "0"])), chunk)
    with pytest.raises(VerifierResponseError, match="wire contract"):
        c.parse_score(httpx.Response(200, text="<html>proxy</html>"), chunk)


def test_parse_maps_statuses_with_the_servers_message() -> None:
    c, chunk = core(), Chunk(0, items(1))
    with pytest.raises(VerifierRequestError) as refused:
        c.parse_score(httpx.Response(422, json={"detail": "items.0: code scoring is not enabled"}), chunk)
    assert refused.value.status_code == 422 and refused.value.detail == "items.0: code scoring is not enabled"
    with pytest.raises(VerifierServerError) as broken:
        c.parse_score(httpx.Response(502, text="bad gateway"), chunk)
    assert broken.value.status_code == 502 and "bad gateway" in str(broken.value)


def test_request_body_follows_the_schema_and_keeps_code_test_types() -> None:
    from verifier_service.schema import CodeSpec, ScoreRequest, StdioTest

    item = ScoreItem(completion="x", code=CodeSpec(tests=[StdioTest(stdout="1")]))
    body = Chunk(0, [item]).body()
    assert ScoreRequest.model_validate_json(body).items == [item]
    assert b'"type":"stdio"' in body and b"null" not in body


@pytest.mark.parametrize(
    "bad",
    [
        {"chunk_size": 0},
        {"max_concurrency": 0},
        {"read_timeout_s": 0},
        {"max_retries": -1},
        {"backoff_base_s": 2.0, "backoff_max_s": 1.0},
    ],
)
def test_config_fails_fast(bad: dict[str, float]) -> None:
    with pytest.raises(ValueError, match="ClientConfig"):
        ClientConfig(**bad)  # type: ignore[arg-type]


def test_api_key_goes_in_a_bearer_header_and_never_in_repr() -> None:
    c = ClientCore(URL + "/", "s3cret", ClientConfig())
    assert c.headers["authorization"] == "Bearer s3cret"
    assert c.score_url == URL + "/v1/score"
    assert "s3cret" not in repr(ClientConfig())


def test_a_401_says_whether_a_key_was_sent() -> None:
    refusal = httpx.Response(401, json={"detail": "missing or wrong API key"})
    with pytest.raises(VerifierRequestError, match="no API key was sent: pass api_key="):
        core().parse_score(refusal, Chunk(0, items(1)))
    with pytest.raises(VerifierRequestError, match="the api_key= given was refused"):
        ClientCore(URL, "wrong", ClientConfig()).parse_score(refusal, Chunk(0, items(1)))
