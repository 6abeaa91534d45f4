"""Dataset labels that hold instructions, read into an `instructions` spec (for the trainer client and the compat
routes): open-instruct's ground-truth string, IFEval and NeMo-Gym rows."""

from __future__ import annotations

import json

import pytest

from trainer_client.inputs import instructions_spec
from verifier_service.schema import InstructionsSpec

# open-instruct's IF_multi_constraints_upto5 ground_truth, as its dataset stores it: a Python literal (None, quotes)
OPEN_INSTRUCT = (
    "[{'instruction_id': ['length_constraints:number_words', 'punctuation:no_comma'], "
    "'kwargs': [{'num_words': 100, 'relation': 'at least', 'keywords': None}, None]}]"
)


def test_open_instruct_s_ground_truth_is_read_as_a_literal_never_evaluated() -> None:
    spec = instructions_spec(OPEN_INSTRUCT)
    assert spec == {
        "instruction_ids": ["length_constraints:number_words", "punctuation:no_comma"],
        "kwargs": [{"num_words": 100, "relation": "at least", "keywords": None}, None],
        "grading": "fraction",  # open-instruct's reward is the share followed
    }
    InstructionsSpec.model_validate(spec)
    assert instructions_spec(json.dumps(OPEN_INSTRUCT)) == spec  # a JSON string of it (open-instruct#778)
    with pytest.raises(ValueError, match="neither a Python literal nor JSON"):
        instructions_spec("[{'instruction_id': __import__('os').system('true')}]")


def test_ifeval_and_nemo_gym_rows() -> None:
    row = {"key": 1, "prompt": "p", "instruction_id_list": ["punctuation:no_comma"], "kwargs": [{}]}
    assert instructions_spec(row) == {"instruction_ids": ["punctuation:no_comma"], "kwargs": [{}], "grading": "all"}
    for mode, grading in (("binary", "all"), ("fraction", "fraction")):
        assert instructions_spec({**row, "grading_mode": mode})["grading"] == grading  # type: ignore[index]
    with pytest.raises(ValueError):
        instructions_spec({**row, "grading_mode": "lenient"})


@pytest.mark.parametrize("label", ["42", "\\frac{1}{2}", {"gold": "4"}, {"math": {"gold": "4"}}, None, 3.5])
def test_labels_without_instructions_are_left_alone(label: object) -> None:
    assert instructions_spec(label) is None


def test_a_trl_reward_sends_each_row_s_instructions() -> None:
    """open-instruct's ground_truth column, and IFEval's own columns, become each item's instructions; the reward's
    options (here loose mode) apply on top."""
    from trainer_client.reward_core import RewardCore, RewardSpec

    completions = ["<<Tea>>, hot", "no title"]
    core = RewardCore(RewardSpec(components=("instructions",), name="if", gold_column="ground_truth",
                                 options={"instructions": {"mode": "loose"}}))  # fmt: skip
    batch = core.prepare(completions, {"ground_truth": [OPEN_INSTRUCT, None]})
    assert batch.rows == [0]  # a row without instructions: the reward does not apply
    spec = batch.items[0].instructions
    assert spec is not None and spec.mode == "loose" and spec.grading == "fraction"
    assert spec.instruction_ids == ("length_constraints:number_words", "punctuation:no_comma")
    ifeval = RewardCore(RewardSpec(components=("instructions",), name="if", gold_column="instruction_id_list"))
    columns = {"instruction_id_list": [["detectable_format:title"]] * 2, "kwargs": [[{"num_words": None}]] * 2}
    batch = ifeval.prepare(completions, columns)
    assert [item.instructions.instruction_ids for item in batch.items] == [("detectable_format:title",)] * 2  # type: ignore[union-attr]


def test_the_data_loader_keeps_a_row_s_instructions_as_the_json_of_its_spec() -> None:
    from trainer_client.data import Columns, to_row

    row = {"prompt": "Write a title.", "instruction_id_list": ["detectable_format:title"], "kwargs": [{}]}
    found = to_row(row, columns=Columns(prompt="prompt"), components=["instructions"], system_prompt="s")
    assert json.loads(found["solution"]) == {"instruction_ids": ["detectable_format:title"], "kwargs": [{}],
                                             "grading": "all"}  # fmt: skip
    assert instructions_spec(found["solution"]) == json.loads(found["solution"])  # what the reward reads back
    open_instruct = {"prompt": "p", "ground_truth": OPEN_INSTRUCT}
    found = to_row(open_instruct, columns=Columns(prompt="prompt", solution="ground_truth"),
                   components=["instructions"], system_prompt="s")  # fmt: skip
    assert json.loads(found["solution"])["grading"] == "fraction"
