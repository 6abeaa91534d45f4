"""HTTP as a client meets it, through a real server: paths with a trailing slash, the bare address, a connection
kept alive past a 500, a client that half-closes its connection after its request."""

from __future__ import annotations

import httpx

from tests.conftest import Server

ITEM = {"completion": "The answer is \\boxed{7}.", "math": {"gold": "7"}}


def test_a_trailing_slash_serves_the_route_itself(server: Server) -> None:
    scored = httpx.post(f"{server.url}/v1/score/", json={"items": [ITEM]})
    assert scored.status_code == 200, scored.text
    assert scored.json()["results"][0]["reward"] == 1.0
    assert httpx.get(f"{server.url}/v1/components/").json()["components"]
    assert httpx.get(f"{server.url}/readyz/").status_code == 200
    assert httpx.post(f"{server.url}/v1/compat/openrlhf/", json={"query": ["\\boxed{7}"], "labels": ["7"]}).json()[
        "rewards"
    ] == [1.0]
    refused = httpx.post(f"{server.url}/v1/score/", json={"items": []})
    assert refused.status_code == 422 and refused.json()["detail"].startswith("invalid request")


def test_the_bare_address_points_to_the_docs(server: Server) -> None:
    root = httpx.get(server.url)
    assert root.status_code == 200
    links = root.json()
    assert links["docs"] == "/docs" and links["openapi"] == "/openapi.json"
    assert links["routes"]["score"] == "POST /v1/score"
    assert httpx.get(f"{server.url}{links['docs']}").status_code == 200
