"""The `instructions` component through a real server: a batch of IFEval items (every verdict, in order), the 422
for kwargs of another length than the ids, the catalogue entry, and regex-bomb-shaped answers."""

from __future__ import annotations

from typing import Any

import httpx

from tests.conftest import Server

TITLE_NO_COMMA = {"instruction_ids": ["detectable_format:title", "punctuation:no_comma"]}


def post(server: Server, items: list[dict[str, Any]]) -> httpx.Response:
    return httpx.post(f"{server.url}/v1/score", json={"items": items}, timeout=120)


def test_a_batch_gets_each_item_s_verdict_in_order(server: Server) -> None:
    words = {
        "instruction_ids": ["length_constraints:number_words"],
        "kwargs": [{"num_words": 3, "relation": "at least"}],
    }
    items = [
        {"completion": "<think>hm, ok</think><<Tea>>\nTea is hot.", "instructions": TITLE_NO_COMMA},
        {"completion": "<<Tea>>\nTea, hot.", "instructions": {**TITLE_NO_COMMA, "grading": "fraction"}},
        {"completion": "Tea, hot.", "instructions": TITLE_NO_COMMA},
        {"completion": "x", "instructions": {"instruction_ids": ["made_up:thing"]}},
        {"completion": "x", "instructions": {"instruction_ids": ["length_constraints:number_words"]}},
        {"completion": "Sure:\n*three words here*", "instructions": {**words, "mode": "loose"}},
        {"completion": "12345", "instructions": {"instruction_ids": ["language:response_language"],
                                                 "kwargs": [{"language": "en"}]}},
    ]  # fmt: skip
    response = post(server, items)
    assert response.status_code == 200, response.text
    found = [
        (r["components"]["instructions"]["score"], r["components"]["instructions"]["verdict"])
        for r in response.json()["results"]
    ]
    assert found == [
        (1.0, "followed"),
        (0.5, "not_followed"),
        (0.0, "not_followed"),
        (None, "unknown_instruction"),
        (None, "bad_kwargs"),
        (1.0, "followed"),
        (0.0, "not_followed"),  # digits: no language to detect, not a free pass
    ]
    assert response.json()["results"][2]["components"]["instructions"]["detail"] == (
        "Not followed: detectable_format:title, punctuation:no_comma."
    )


def test_kwargs_of_another_length_than_the_ids_get_a_422_naming_the_field(server: Server) -> None:
    response = post(server, [{"completion": "x", "instructions": {**TITLE_NO_COMMA, "kwargs": [{"secret": "v4lue"}]}}])
    assert response.status_code == 422
    assert "kwargs" in response.text and "v4lue" not in response.text


def test_the_catalogue_lists_it_as_a_primary_component(server: Server) -> None:
    entry = httpx.get(f"{server.url}/v1/components", timeout=10).json()["components"]["instructions"]
    assert entry["role"] == "primary"
    assert {"followed", "not_followed", "unknown_instruction", "bad_kwargs"} <= set(entry["verdicts"])
    assert {"unknown_instruction", "bad_kwargs"} <= set(entry["null_verdicts"])


def test_answers_shaped_against_google_s_regexes_at_the_size_limit_are_judged(server: Server) -> None:
    ids = ["detectable_format:number_bullet_lists", "detectable_content:number_placeholders", "detectable_format:title"]
    kwargs = [{"num_bullets": 1}, {"num_placeholders": 1}, None]
    bombs = ["\n" * 200_000, "[" * 200_000, "<<" * 100_000]  # the service's default limit; 1 MB: the unit tests
    items = [{"completion": bomb, "instructions": {"instruction_ids": ids, "kwargs": kwargs}} for bomb in bombs]
    response = post(server, items)
    assert response.status_code == 200, response.text
    assert [r["components"]["instructions"]["verdict"] for r in response.json()["results"]] == ["not_followed"] * 3


# The trainer routes: open-instruct's ground truth as an OpenRLHF or slime label, NeMo-Gym's instruction_following row.

GROUND_TRUTH = str([{"instruction_id": ["punctuation:no_comma", "detectable_format:title"], "kwargs": [None, None]}])
TEMPLATE = "<|im_start|>user\nWrite a title.<|im_end|>\n<|im_start|>assistant\n"


def test_openrlhf_and_slime_read_open_instruct_s_ground_truth(server: Server) -> None:
    """open-instruct's reward is the share followed: a title with a comma earns 0.5."""
    response = "<think>ok</think><<Tea>>, hot"
    body = {"query": [TEMPLATE + response + "<|im_end|>"], "prompts": [TEMPLATE], "labels": [GROUND_TRUTH]}
    answer = httpx.post(f"{server.url}/v1/compat/openrlhf", json=body, timeout=60)
    assert answer.status_code == 200, answer.text
    assert answer.json()["rewards"] == [0.5]
    slime = {"prompt": "Write a title.", "response": response.replace(",", ""), "label": GROUND_TRUTH}
    answer = httpx.post(f"{server.url}/v1/compat/slime", json=slime, timeout=60)
    assert answer.status_code == 200, answer.text
    assert answer.json()["reward"] == 1.0


def test_nemo_gym_reads_verifier_metadata(server: Server) -> None:
    def body(text: str, grading_mode: str) -> dict[str, Any]:
        message = {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": text}]}
        metadata = {"instruction_id_list": ["punctuation:no_comma", "detectable_format:title"], "kwargs": [{}, {}],
                    "grading_mode": grading_mode}  # fmt: skip
        return {"responses_create_params": {"input": []}, "response": {"output": [message]},
                "verifier_metadata": metadata}  # fmt: skip

    for grading_mode, reward in (("binary", 0.0), ("fraction", 0.5)):
        answer = httpx.post(f"{server.url}/v1/compat/nemo-gym/verify", json=body("<<Tea>>, hot", grading_mode))
        assert answer.status_code == 200, answer.text
        assert answer.json()["reward"] == reward
