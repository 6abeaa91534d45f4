"""The `language` component through a real server: scores and verdicts, summed with accuracy as R1 did, the
catalogue, and a target the component does not know refused naming the field."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from tests.conftest import Server

ZH_RIGHT = "<think>先算乘法：$6 \\times 7 = 42$，所以答案是 42。</think>The answer is \\boxed{42}."
MIXED_RIGHT = "<think>先算乘法 then check it: $6 \\times 7 = 42$</think>\\boxed{42}"
EN_RIGHT = "<think>Multiply first: $6 \\times 7 = 42$, so the answer is 42.</think>\\boxed{42}"


def post(server: Server, items: list[dict[str, Any]]) -> httpx.Response:
    return httpx.post(f"{server.url}/v1/score", json={"items": items}, timeout=60)


def test_language_scores_each_item_in_order(server: Server) -> None:
    zh = {"target": "zh"}
    items = [
        {"completion": ZH_RIGHT, "language": zh},
        {"completion": MIXED_RIGHT, "language": zh},
        {"completion": EN_RIGHT, "language": zh},
        {"completion": "<think>$x = 1$, 42</think>1", "language": zh},
        {"completion": ZH_RIGHT, "language": {"target": "zh", "scope": "answer"}},
        {"completion": EN_RIGHT, "language": {"target": "en"}},
    ]
    response = post(server, items)
    assert response.status_code == 200, response.text
    found = [
        (r["components"]["language"]["score"], r["components"]["language"]["verdict"])
        for r in response.json()["results"]
    ]
    assert found == [
        (1.0, "consistent"),
        (4 / 7, "mixed"),  # 先算乘法 against then, check, it
        (0.0, "other_language"),
        (None, "no_text"),
        (0.0, "other_language"),  # "The answer is" after the reasoning
        (1.0, "consistent"),
    ]


def test_summed_with_accuracy_as_r1_did(server: Server) -> None:
    items = [
        {"completion": completion, "math": {"gold": "42"}, "language": {"target": "zh"}}
        for completion in (ZH_RIGHT, MIXED_RIGHT, EN_RIGHT)
    ]
    response = post(server, items)
    assert response.status_code == 200, response.text
    rewards = [result["reward"] for result in response.json()["results"]]
    assert rewards == pytest.approx([2.0, 1 + 4 / 7, 1.0])


def test_the_catalogue_lists_it(server: Server) -> None:
    catalogue = httpx.get(f"{server.url}/v1/components", timeout=10).json()["components"]
    language = catalogue["language"]
    assert language["role"] == "shaping"
    assert language["null_verdicts"][0] == "no_text"
    assert {"consistent", "mixed", "other_language", "no_text"} <= set(language["verdicts"])
    assert language["options"]["scope"]["default"] == "reasoning"
    assert "zh" in language["schema"]["properties"]["target"]["enum"]


@pytest.mark.parametrize("target", ["xx-secret", "sco", None])
def test_an_unknown_target_is_a_422_naming_the_field(server: Server, target: str | None) -> None:
    response = post(server, [{"completion": "<think>你好</think>", "language": {"target": target}}])
    assert response.status_code == 422
    [error] = response.json()["errors"]
    assert error["loc"].endswith("language.target")
    assert "xx-secret" not in response.text


def test_the_trl_reward_function_sends_it(server: Server) -> None:
    from trainer_client import VerifierReward

    reward = VerifierReward(["math", "language"], base_url=server.url, options={"language": {"target": "zh"}})
    solution = ["42"] * 3
    values = reward(prompts=["6 * 7?"] * 3, completions=[ZH_RIGHT, MIXED_RIGHT, EN_RIGHT], solution=solution)
    assert values == pytest.approx([2.0, 1 + 4 / 7, 1.0])
    alone = VerifierReward("language", base_url=server.url, target="en", scope="all")
    assert alone(prompts=[""], completions=[EN_RIGHT]) == [1.0]
