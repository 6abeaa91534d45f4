"""Dataset labels that hold instructions reach the `instructions` component through the generic path
(trainer_client/domains.py and verifier_service/domain_labels.py): open-instruct's ground-truth string (graded
`fraction`, as open-instruct rewards it), IFEval and NeMo-Gym rows; the TRL reward reads them from the spec column and
the reward's options (loose mode) apply on top."""

from __future__ import annotations

import json

import pytest

from trainer_client.domains import SPEC_COLUMN, open_instruct_specs
from verifier_service.domain_labels import LabelError, open_instruct_instructions
from verifier_service.schema import InstructionsSpec

# open-instruct's IF_multi_constraints_upto5 ground_truth, as its dataset stores it: a Python literal (None, quotes)
OPEN_INSTRUCT = (
    "[{'instruction_id': ['length_constraints:number_words', 'punctuation:no_comma'], "
    "'kwargs': [{'num_words': 100, 'relation': 'at least', 'keywords': None}, None]}]"
)


def test_open_instruct_s_ground_truth_is_read_as_a_literal_never_evaluated() -> None:
    spec = open_instruct_instructions(OPEN_INSTRUCT)
    assert spec == {
        "instruction_ids": ["length_constraints:number_words", "punctuation:no_comma"],
        "kwargs": [{"num_words": 100, "relation": "at least"}, None],
        "grading": "fraction",  # open-instruct's reward is the share followed
    }
    InstructionsSpec.model_validate(spec)
    with pytest.raises(LabelError):
        open_instruct_instructions("[{'instruction_id': __import__('os').system('true')}]")


def test_a_trl_reward_sends_each_row_s_instructions_with_its_options() -> None:
    from trainer_client.reward_core import RewardCore, RewardSpec

    completions = ["<<Tea>>, hot", "no title"]
    specs = [json.dumps(open_instruct_specs({"ground_truth": OPEN_INSTRUCT, "dataset": "ifeval"})), None]
    core = RewardCore(RewardSpec(components=("instructions",), name="if", spec_column=SPEC_COLUMN,
                                 options={"instructions": {"mode": "loose"}}))  # fmt: skip
    batch = core.prepare(completions, {SPEC_COLUMN: specs})
    assert batch.rows == [0]  # a row without instructions: the reward does not apply
    spec = batch.items[0].instructions
    assert spec is not None and spec.mode == "loose" and spec.grading == "fraction"
    assert spec.instruction_ids == ("length_constraints:number_words", "punctuation:no_comma")


def test_the_data_loader_keeps_a_row_s_instructions_in_the_spec_column() -> None:
    from trainer_client.data import Columns, to_row

    row = {"prompt": "Write a title.", "instruction_id_list": ["detectable_format:title"], "kwargs": [{}]}
    found = to_row(
        row, columns=Columns(prompt="prompt"), components=["instructions"], system_prompt="s", shape="ifeval"
    )
    assert json.loads(found[SPEC_COLUMN]) == {
        "instructions": {"instruction_ids": ["detectable_format:title"], "kwargs": [{}]}  # grading: the default, all
    }
    open_instruct = {"prompt": "p", "ground_truth": OPEN_INSTRUCT, "dataset": "ifeval"}
    found = to_row(open_instruct, columns=Columns(prompt="prompt"), components=["instructions"], system_prompt="s",
                   shape="open_instruct")  # fmt: skip
    assert json.loads(found[SPEC_COLUMN])["instructions"]["grading"] == "fraction"
