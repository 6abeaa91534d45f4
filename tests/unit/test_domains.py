"""Rows of other domains' datasets as component specs (`trainer_client.domains`, `verifier_service.domain_labels`):
pure functions, on rows copied from the datasets (tests/data/domains/README.md says from where)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from trainer_client.domains import (
    DATASET_SHAPES,
    bird_specs,
    detect_shape,
    ifeval_specs,
    json_schema_specs,
    open_instruct_specs,
    parse_specs,
    reasoning_gym_specs,
    resolve_shape,
    shape_prompt,
    shape_specs,
)
from verifier_service.domain_labels import (
    LabelError,
    instructions_spec,
    is_open_instruct_label,
    nemo_gym_instructions,
    open_instruct_instructions,
)

DATA = Path(__file__).parents[1] / "data" / "domains"
SECRET = "SeCrEt-VaLuE-9137"


def rows(name: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (DATA / name).read_text().splitlines()]


def test_google_ifeval_rows_map_to_instructions_the_arrow_copy_alike() -> None:
    plain, arrow = rows("ifeval.jsonl")
    expected = {
        "instructions": {
            "instruction_ids": [
                "punctuation:no_comma",
                "detectable_format:number_highlighted_sections",
                "length_constraints:number_words",
            ],
            "kwargs": [{}, {"num_highlights": 3}, {"relation": "at least", "num_words": 300}],
        }
    }
    assert ifeval_specs(plain) == expected
    assert ifeval_specs(arrow) == expected  # the Hugging Face copy's null-filled kwargs lose their nulls


def test_nemo_gym_rows_map_to_instructions_with_their_grading_mode() -> None:
    nested, top_level = rows("nemo_gym_if.jsonl")
    ids = ["paragraphs:paragraphs", "detectable_format:title", "length_constraints:number_words"]
    kwargs = [{}, None, {"num_words": 204, "relation": "less than"}]
    assert ifeval_specs(nested) == {"instructions": {"instruction_ids": ids, "kwargs": kwargs, "grading": "all"}}
    assert ifeval_specs(top_level)["instructions"]["grading"] == "fraction"
    assert shape_prompt(nested) == nested["responses_create_params"]["input"]


def test_open_instruct_ground_truth_is_read_as_open_instruct_reads_it() -> None:
    instruct, math, old_style = rows("open_instruct.jsonl")
    ids = ["length_constraints:number_paragraphs", "letters:letter_counting2", "keywords:word_once"]
    letters = {"letter": "s", "let_frequency": 20, "let_relation": "at least"}
    kwargs = [{"num_paragraphs": 4}, letters, {"keyword": "flight"}]
    assert open_instruct_specs(instruct) == {
        "instructions": {"instruction_ids": ids, "kwargs": kwargs, "grading": "fraction"}  # open-instruct's reward
    }
    assert open_instruct_specs(math) == {"math": {"gold": "18"}}
    assert open_instruct_specs(old_style) == {}  # func_name constraints: no IFEval ids to map them to
    assert shape_prompt(instruct) == instruct["messages"]


def test_an_element_that_is_a_json_string_and_lists_of_one_are_read() -> None:
    inner = json.dumps({"instruction_id": ["punctuation:no_comma"], "kwargs": [None]})
    assert open_instruct_instructions(repr([inner])) == {
        "instruction_ids": ["punctuation:no_comma"],
        "kwargs": [None],
        "grading": "fraction",
    }
    row = {"ground_truth": ["[{'instruction_id': ['a:b'], 'kwargs': [{}]}]"], "dataset": ["ifeval"]}
    assert open_instruct_specs(row) == {
        "instructions": {"instruction_ids": ["a:b"], "kwargs": [{}], "grading": "fraction"}
    }


@pytest.mark.parametrize(
    "label",
    [
        f"[{{'instruction_id': ['a:b'], 'kwargs': [{SECRET}]}}]",  # a name: literal_eval builds no names
        f"[{{'instruction_id': ['a:b'], 'kwargs': [__import__('os').system('{SECRET}')]}}]",  # never run
        f"[{{'instruction_id': '{SECRET}', 'kwargs': []}}]",  # ids not a list
        f"[{{'instruction_id': [1], 'kwargs': ['{SECRET}']}}]",
        f"[{{'instruction_id': ['a:b'], 'kwargs': ['{SECRET}']}}]",  # a kwargs string that is not JSON
        "[{'instruction_id': ['a:b']" + ", 'x': [" * 200 + "]" * 200 + "}]",
    ],
)
def test_a_malformed_open_instruct_label_is_an_error_that_never_echoes_it(label: str) -> None:
    assert is_open_instruct_label(label)
    with pytest.raises(LabelError) as error:
        open_instruct_instructions(label)
    assert SECRET not in str(error.value)


def test_what_is_not_an_instruction_label_is_told_apart() -> None:
    for gold in ("[1, 2]", "{1, 2}", "72", "[{'a': 1}]", 72, None, '{"math": {"gold": "1"}}'):
        assert not is_open_instruct_label(gold)


def test_instruction_lists_of_the_wrong_shape_are_errors_and_lengths_are_left_to_the_schema() -> None:
    with pytest.raises(LabelError, match="non-empty list of strings"):
        instructions_spec([], [])
    with pytest.raises(LabelError, match="grading_mode must be one of"):
        nemo_gym_instructions({"instruction_id_list": ["a:b"], "kwargs": [None], "grading_mode": SECRET})
    # a kwargs list of another length goes on as it is: the component's schema refuses it with a 422 naming the field
    assert instructions_spec(["a:b", "c:d"], [None])["kwargs"] == [None]
    assert instructions_spec(["a:b"], None) == {"instruction_ids": ["a:b"], "kwargs": [None]}
    assert nemo_gym_instructions({"prompt": "no instruction list"}) is None


def test_bird_and_spider_rows_map_to_sql_on_the_named_database() -> None:
    [bird] = rows("bird.jsonl")
    [spider] = rows("spider.jsonl")
    [nemo] = rows("nemo_gym_bird.jsonl")
    assert bird_specs(bird) == {"sql": {"gold_sql": bird["SQL"], "db": "california_schools"}}
    assert bird_specs(spider) == {"sql": {"gold_sql": "SELECT count(*) FROM head WHERE age  >  56",
                                          "db": "department_management"}}  # fmt: skip
    # NeMo-Gym's placeholder sql_context is no schema: the database is the named one
    assert bird_specs(nemo) == {"sql": {"gold_sql": nemo["gt_sql"], "db": "california_schools"}}


def test_a_row_that_carries_its_schema_builds_the_database_from_it() -> None:
    [spider] = rows("spider.jsonl")
    schema = "CREATE TABLE head (head_ID INTEGER, name TEXT, born_state TEXT, age REAL);"
    assert bird_specs({**spider, "schema_sql": schema}) == {"sql": {"gold_sql": spider["query"], "schema_sql": schema}}
    assert bird_specs({"db_id": "x", "query": "  "}) == {}


def test_a_reasoning_gym_entry_maps_to_its_datasets_scorer_whole() -> None:
    [entry] = rows("reasoning_gym.jsonl")
    assert reasoning_gym_specs(entry) == {"procedural": {"dataset": "countdown", "entry": entry}}
    as_text = {**entry, "metadata": json.dumps(entry["metadata"])}  # a metadata column kept as JSON text
    assert reasoning_gym_specs(as_text) == reasoning_gym_specs(entry)
    assert reasoning_gym_specs({**entry, "metadata": {"numbers": [1]}}) == {}  # no source_dataset: nothing to score


def test_json_schema_rows_map_to_their_schema_and_other_formats_to_nothing() -> None:
    json_row, yaml_row = rows("json_schema.jsonl")
    assert json_schema_specs(json_row) == {"json_schema": {"schema": json.loads(json_row["schema"])}}
    assert json_schema_specs(yaml_row) == {}
    # NeMo-Gym's schema_str rows are strict, as NeMo-Gym scores them (and as the service's NeMo-Gym route reads them).
    gym = {"schema_str": '{"type": "object"}', "schema_type": "json", "response_mode": "text"}
    assert json_schema_specs(gym) == {"json_schema": {"schema": {"type": "object"}, "strict": True}}
    assert json_schema_specs({**gym, "response_mode": "tool_call"}) == {}  # tool-call arguments are not read
    assert json_schema_specs({"schema": "not json"}) == json_schema_specs({"schema": True}) == {}


@pytest.mark.parametrize(
    ("name", "shape"),
    [
        ("ifeval.jsonl", "ifeval"),
        ("nemo_gym_if.jsonl", "ifeval"),
        ("open_instruct.jsonl", "open_instruct"),
        ("bird.jsonl", "bird"),
        ("spider.jsonl", "bird"),
        ("nemo_gym_bird.jsonl", "bird"),
        ("reasoning_gym.jsonl", "reasoning_gym"),
        ("json_schema.jsonl", "json_schema"),
    ],
)
def test_the_shape_is_detected_by_the_columns(name: str, shape: str) -> None:
    columns = list(rows(name)[0])
    assert detect_shape(columns) == shape
    assert resolve_shape("auto", columns) == shape and resolve_shape("none", columns) is None


def test_datasets_of_the_older_domains_have_no_shape() -> None:
    for columns in (["question", "answer"], ["problem", "solution"], ["text", "test_list"], ["prompt", "test"],
                    ["question", "choices", "answer"]):  # fmt: skip
        assert detect_shape(columns) is None
    with pytest.raises(ValueError, match="unknown dataset shape 'bird_sql'; shapes: auto, none, ifeval"):
        resolve_shape("bird_sql", [])
    assert set(DATASET_SHAPES) == {
        "auto",
        "none",
        "ifeval",
        "open_instruct",
        "bird",
        "reasoning_gym",
        "json_schema",
        "codeforces",
        "code_contests",
    }


def test_a_malformed_row_is_an_error_naming_the_row_never_the_value() -> None:
    row = {"ground_truth": f"[{{'instruction_id': ['a:b'], 'kwargs': [{SECRET}]}}]", "dataset": "ifeval"}
    with pytest.raises(ValueError, match="row 7 of a open_instruct dataset") as error:
        shape_specs("open_instruct", row, 7)
    assert SECRET not in str(error.value)


def test_a_spec_column_holds_objects_or_their_json() -> None:
    assert parse_specs({"answer": {"gold": "Paris"}}) == parse_specs('{"answer": {"gold": "Paris"}}')
    assert parse_specs(None) == parse_specs(" ") == {}
    for bad in (f'"{SECRET}"', f'{{"answer": "{SECRET}"}}', f"{SECRET}{{", 3):
        with pytest.raises(ValueError, match="dataset column 'verifier'") as error:
            parse_specs(bad, "verifier")
        assert SECRET not in str(error.value)
