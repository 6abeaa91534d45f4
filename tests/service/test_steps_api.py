"""The `steps` component through a real server: its verdicts in the catalogue and the OpenAPI document, the
per-step spans in the result JSON, min and mean, and a wrong step lowering the reward of a right answer."""

from __future__ import annotations

from typing import Any

import httpx

from tests.conftest import Server

LUCKY = "<think>48 / 2 = 24 and 24 + 5 = 30, so it is 29.</think>The answer is \\boxed{29}."
SOUND = "<think>48 / 2 = 24 and 24 + 5 = 29.</think>The answer is \\boxed{29}."


def results(server: Server, items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    response = httpx.post(f"{server.url}/v1/score", json={"items": items}, timeout=60)
    assert response.status_code == 200, response.text
    return response.json()["results"]  # type: ignore[no-any-return]


def test_steps_are_listed_with_their_spans(server: Server) -> None:
    lucky, sound, none, mean = results(
        server,
        [
            {"completion": LUCKY, "steps": {}},
            {"completion": SOUND, "steps": {"scope": "reasoning"}},
            {"completion": "The answer is 29.", "steps": {}},
            {"completion": LUCKY, "steps": {"aggregate": "mean"}},
        ],
    )
    steps = lucky["components"]["steps"]
    assert (steps["score"], steps["verdict"]) == (0.0, "invalid_step")
    assert [(LUCKY[step["start"] : step["end"]], step["score"]) for step in steps["steps"]] == [
        ("48 / 2 = 24", 1.0),
        ("24 + 5 = 30", 0.0),
    ]
    assert "24 + 5" not in steps["detail"]
    assert (sound["components"]["steps"]["verdict"], sound["reward"]) == ("valid", 1.0)
    assert len(sound["components"]["steps"]["steps"]) == 2
    assert none["components"]["steps"] == {
        "score": 1.0,
        "verdict": "no_steps",
        "detail": "no arithmetic step to check",
        "steps": [],
    }
    assert (mean["components"]["steps"]["score"], mean["components"]["steps"]["verdict"]) == (0.5, "invalid_step")


def test_a_wrong_step_lowers_a_right_answer(server: Server) -> None:
    item = {"math": {"gold": "29"}, "steps": {}, "weights": {"math": 1.0, "steps": 0.5}}
    lucky, sound = results(server, [{"completion": LUCKY, **item}, {"completion": SOUND, **item}])
    assert lucky["components"]["math"]["verdict"] == sound["components"]["math"]["verdict"] == "correct"
    assert (lucky["reward"], sound["reward"]) == (1.0, 1.5)


def test_the_catalogue_and_openapi_give_its_verdicts(server: Server) -> None:
    catalogue = httpx.get(f"{server.url}/v1/components", timeout=10).json()["components"]
    steps = catalogue["steps"]
    assert steps["verdicts"][:3] == ["valid", "invalid_step", "no_steps"]
    assert steps["role"] == "shaping"
    assert {option: about["default"] for option, about in steps["options"].items()} == {
        "aggregate": "min",
        "scope": "all",
        "think_tag": "think",
    }
    spec = httpx.get(f"{server.url}/openapi.json", timeout=10).json()
    published = spec["components"]["schemas"]["ItemResult"]["properties"]["components"]["properties"]["steps"]
    assert published["properties"]["verdict"]["enum"][:3] == ["valid", "invalid_step", "no_steps"]


def test_bad_options_are_refused_by_name(server: Server) -> None:
    response = httpx.post(
        f"{server.url}/v1/score", json={"items": [{"completion": "1 + 1 = 2", "steps": {"aggregate": "max"}}]}
    )
    assert response.status_code == 422
    assert "aggregate" in response.text
