"""Datasets of other domains through the training client: rows mapped to specs by their shape (`--dataset_shape`)
or read from a column of specs (`--spec_column`), the reward functions reading those specs for any component, and
`--check_data`'s account of rows that map to none. The components the shapes feed (instructions, sql, ...) are
added on other branches; here the generic path is shown with components this branch has (answer, choice, math,
overlong), against a real verifier where a reward is scored."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import Server
from trainer_client import VerifierClient, VerifierReward, VerifierRewards
from trainer_client.data import TASK_SYSTEM_PROMPT, Columns, load_prompts
from trainer_client.data_check import check_data, check_specs
from trainer_client.domains import SPEC_COLUMN
from trainer_client.train import check_item

DATA = Path(__file__).parents[1] / "data" / "domains"


def prepared(name: str, components: list[str], **kwargs: Any) -> list[dict[str, Any]]:
    return list(load_prompts(str(DATA / name), components=components, **kwargs)["train"])


def specs(rows: list[dict[str, Any]]) -> list[Any]:
    return [json.loads(row[SPEC_COLUMN]) if row[SPEC_COLUMN] else None for row in rows]


def batch(rows: list[dict[str, Any]], completions: list[str]) -> dict[str, Any]:
    """A TRL call's keywords: the prepared rows' columns, one value per completion."""
    columns = {name: [row[name] for row in rows] for name in rows[0] if name != "prompt"}
    return {"prompts": [row["prompt"] for row in rows], "completions": completions, **columns}


def test_each_shape_is_detected_and_its_rows_keep_their_specs_and_prompts() -> None:
    google = prepared("ifeval.jsonl", ["format"])
    assert specs(google)[0]["instructions"]["kwargs"][1] == {"num_highlights": 3}
    assert specs(google)[0] == specs(google)[1]  # the Arrow copy's null-filled kwargs map the same
    assert google[0]["prompt"][0] == {"role": "system", "content": TASK_SYSTEM_PROMPT}  # not the math tutor's
    assert google[0]["prompt"][1]["content"].startswith("Write a 300+ word summary")
    nemo = prepared("nemo_gym_if.jsonl", ["format"])
    assert [spec["instructions"]["grading"] for spec in specs(nemo)] == ["all", "fraction"]
    assert nemo[0]["prompt"] == [{"role": "user", "content": nemo[0]["prompt"][0]["content"]}]  # the chat as is
    tulu = prepared("open_instruct.jsonl", ["math", "format"])
    assert specs(tulu)[1] == {"math": {"gold": "18"}} and specs(tulu)[2] is None
    assert set(tulu[0]) == {"prompt", SPEC_COLUMN}  # no gold column in the dataset: none is read
    assert specs(prepared("bird.jsonl", ["format"]))[0]["sql"]["db"] == "california_schools"
    bird = prepared("nemo_gym_bird.jsonl", ["format"], columns=Columns(prompt="responses_create_params"))
    assert [m["role"] for m in bird[0]["prompt"]] == ["system", "user"]  # NeMo-Gym's create params: their input
    assert specs(prepared("reasoning_gym.jsonl", ["format"]))[0]["procedural"]["dataset"] == "countdown"
    assert specs(prepared("json_schema.jsonl", ["format"]))[1] is None  # the YAML row


def test_a_named_shape_wins_and_none_maps_nothing(tmp_path: Path) -> None:
    assert SPEC_COLUMN not in prepared("reasoning_gym.jsonl", ["math"], dataset_shape="none")[0]
    with pytest.raises(ValueError, match="unknown dataset shape"):
        prepared("reasoning_gym.jsonl", ["math"], dataset_shape="gym")


def test_a_component_that_needs_each_rows_spec_and_gets_none_fails_before_training() -> None:
    with pytest.raises(ValueError, match=r"overlong takes each row's spec .* --spec_column, or the shape"):
        load_prompts(str(DATA / "spider.jsonl"), components=["overlong"], dataset_shape="none", options={},
                     columns=Columns(prompt="question"))  # fmt: skip
    with pytest.raises(ValueError, match="overlong needs the option 'max_tokens', or a dataset column of per-row"):
        VerifierReward("overlong")
    # with a spec column, the fields the rows bring are not asked of the options, but a wrong option still fails
    assert VerifierReward("overlong", spec_column=SPEC_COLUMN, buffer_tokens=4).spec.options == {
        "overlong": {"buffer_tokens": 4}
    }
    with pytest.raises(ValueError, match=r"overlong\.unit: Input should be 'tokens' or 'chars'"):
        VerifierReward("overlong", spec_column=SPEC_COLUMN, unit="bytes")


def write_jsonl(path: Path, rows: list[dict[str, Any]]) -> str:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return str(path)


def test_any_component_reads_its_spec_from_a_spec_column_against_the_real_verifier(
    server: Server, tmp_path: Path
) -> None:
    data = [
        {"question": "Capital of France?", "verifier": {"answer": {"gold": ["Paris", "City of Light"]}}},
        {"question": "Capital of Italy?", "verifier": json.dumps({"answer": {"gold": "Rome"}})},
        {"question": "Pick the prime.", "verifier": {"choice": {"gold": "B", "options": ["4", "7"]}}},
        {"question": "No spec for this one.", "verifier": None},
    ]
    rows = prepared(write_jsonl(tmp_path / "qa.jsonl", data), ["answer", "choice"], columns=Columns(spec="verifier"))
    completions = ["<answer>City of Light</answer>", "<answer>Milan</answer>", "\\boxed{7}", "<answer>x</answer>"]
    answer = VerifierReward("answer", base_url=server.url, spec_column=SPEC_COLUMN)
    assert answer(**batch(rows, completions)) == [1.0, 0.0, None, None]
    group = VerifierRewards(["choice", "format"], base_url=server.url, spec_column=SPEC_COLUMN)
    choice, format_ = group.functions
    assert choice(**batch(rows, completions)) == [None, None, 1.0, None]  # an option named by its text
    assert format_(**batch(rows, completions)) == [None, None, 0.0, None]  # sent with choice: only where it applies


def test_open_instruct_math_rows_are_scored_from_their_ground_truth(server: Server) -> None:
    rows = prepared("open_instruct.jsonl", ["math"])
    reward = VerifierReward("math", base_url=server.url, spec_column=SPEC_COLUMN)
    assert reward(**batch(rows, ["\\boxed{18}", "The answer is \\boxed{18}.", "\\boxed{18}"])) == [None, 1.0, None]


def test_a_component_with_row_fields_is_scored_from_the_row_and_left_out_of_the_preflight(server: Server) -> None:
    reward = VerifierReward("overlong", base_url=server.url, spec_column=SPEC_COLUMN, eos_token_id=2)
    rows = [{SPEC_COLUMN: json.dumps({"overlong": {"max_tokens": 10, "buffer_tokens": 4}})}, {SPEC_COLUMN: None}]
    values = reward(prompts=["q", "q"], completions=["a", "b"], completion_ids=[[5] * 7 + [2], [5]],
                    **{SPEC_COLUMN: [row[SPEC_COLUMN] for row in rows]})  # fmt: skip
    assert values == [-0.5, None]
    item = check_item(reward)  # max_tokens comes from the rows: the check sends what it can, format
    assert item.requested() == ["format"]
    with VerifierClient(server.url) as client:
        assert client.score([item])[0].reward is not None


def test_check_data_reports_rows_that_map_to_no_spec(server: Server) -> None:
    rows = prepared("open_instruct.jsonl", ["math"])
    with VerifierClient(server.url) as client:
        report, unusable = check_data(client, rows, Columns(), ["math"], {}, "tulu", "--dataset_shape auto")
    assert "  spec     <- --dataset_shape auto: per-row component specs (a row's spec wins)" in report
    assert "math gold answers: 1 of 3 rows usable" in report
    assert "  2 without a gold (the reward skips them): rows 0, 2" in report
    assert unusable == 0


def test_check_specs_counts_rows_without_a_spec_and_specs_the_schema_refuses() -> None:
    rows = [{SPEC_COLUMN: json.dumps({"overlong": {"max_tokens": 8}})}, {SPEC_COLUMN: None},
            {SPEC_COLUMN: json.dumps({"overlong": {"max_tokens": -1}})}]  # fmt: skip
    checked = check_specs("overlong", rows, {})
    assert checked == (
        ["overlong specs: 1 of 3 rows usable", "  1 map to no overlong spec (the reward skips them): rows 1",
         "  1 with a spec the wire schema refuses: rows 2"],
        1,
    )  # fmt: skip
    none_mapped = check_specs("overlong", [{SPEC_COLUMN: None}] * 2, {})
    assert none_mapped is not None and none_mapped[1] == 2  # no row can be rewarded: all unusable
    assert check_specs("overlong", [{SPEC_COLUMN: None}], {"max_tokens": 8}) is None  # the options suffice
