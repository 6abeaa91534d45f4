"""reasoning-gym entries on the trainer side, against a real server: a JSONL file of generated entries (several
datasets and a composite one in one file) loads as GRPO rows whose spec column holds the procedural spec (the
reasoning_gym shape of trainer_client/domains.py); the TRL reward scores them; the same spec is a label-spec on the
OpenRLHF route."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import Server
from trainer_client import VerifierReward
from trainer_client.data import ANSWER_SYSTEM_PROMPT, load_prompts
from trainer_client.domains import SPEC_COLUMN, reasoning_gym_specs

factory = pytest.importorskip("reasoning_gym.factory", reason="reasoning-gym (the `procedural` extra) is not installed")
pytest.importorskip("datasets", reason="the [train] extra is not installed")


def generated(name: str, size: int = 3, **config: Any) -> list[dict[str, Any]]:
    dataset = factory.create_dataset(name, size=size, seed=11, **config)
    return [dataset[index] for index in range(size)]


def answered(answer: str) -> str:
    return f"<think>Let me work it out.</think>\n<answer>{answer}</answer>"


def test_a_jsonl_of_entries_loads_as_rows_the_reward_scores(server: Server, tmp_path: Path) -> None:
    from reasoning_gym.composite import DatasetSpec

    parts = [DatasetSpec(name=name, weight=1.0, config={}) for name in ("gcd", "word_sorting")]
    entries = generated("chain_sum") + generated("composite", datasets=parts)
    path = tmp_path / "gym.jsonl"
    # metadata as a JSON string: one file holds several datasets' metadata, which Arrow would merge into one struct
    path.write_text("".join(json.dumps({**e, "metadata": json.dumps(e["metadata"])}) + "\n" for e in entries))
    rows = load_prompts(str(path), components=["procedural"])["train"]
    assert rows[0]["prompt"][0] == {"role": "system", "content": ANSWER_SYSTEM_PROMPT}
    assert rows[0]["prompt"][1]["content"] == entries[0]["question"]
    labels = [json.loads(label)["procedural"] for label in rows[SPEC_COLUMN]]
    assert [label["dataset"] for label in labels] == [e["metadata"]["source_dataset"] for e in entries]
    assert labels[0]["entry"] == json.loads(json.dumps(entries[0]))

    reward = VerifierReward("procedural", base_url=server.url, spec_column=SPEC_COLUMN)
    right = reward(prompts=rows["prompt"], completions=[answered(e["answer"]) for e in entries], **rows.to_dict())
    wrong = reward(prompts=rows["prompt"], completions=[answered("nothing")] * len(entries), **rows.to_dict())
    assert right == [1.0] * len(entries) and wrong == [0.0] * len(entries)


def test_partial_credit_is_a_reward_option(server: Server) -> None:
    entry = generated("countdown")[0]
    partly = " + ".join(str(n) for n in entry["metadata"]["numbers"][:-1])  # not every number: countdown's 0.05
    label = json.dumps(reasoning_gym_specs(entry))
    strict = VerifierReward("procedural", base_url=server.url, spec_column=SPEC_COLUMN)
    partial = VerifierReward("procedural", base_url=server.url, spec_column=SPEC_COLUMN, partial_credit=True)
    assert strict(prompts=["p"], completions=[answered(partly)], spec=[label]) == [0.0]
    assert partial(prompts=["p"], completions=[answered(partly)], spec=[label]) == [0.05]


def test_a_row_without_source_dataset_maps_to_no_spec(tmp_path: Path) -> None:
    path = tmp_path / "bare.jsonl"
    path.write_text(json.dumps({"question": "1+1?", "answer": "2", "metadata": {"difficulty": 1}}) + "\n")
    assert load_prompts(str(path), components=["procedural"])["train"][SPEC_COLUMN] == [None]


def test_the_spec_is_a_label_on_the_openrlhf_route(server: Server) -> None:
    entry = json.loads(json.dumps(generated("puzzle24")[0]))
    prompt = "<|im_start|>user\nMake 24.<|im_end|>\n<|im_start|>assistant\n"
    label = reasoning_gym_specs(entry)
    for sent in (label, json.dumps(label)):  # an object, or its JSON string
        for response, expected in ((entry["answer"], 1.0), ("1 + 2 + 3 + 4", 0.0)):
            body = {"query": [prompt + answered(response) + "<|im_end|>"], "prompts": [prompt], "labels": [sent]}
            answer = httpx.post(f"{server.url}/v1/compat/openrlhf", json=body, timeout=60)
            assert answer.status_code == 200, answer.text
            assert answer.json()["rewards"] == [expected]
