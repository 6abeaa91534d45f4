"""The reward functions of the newer components (overlong, length, repetition, choice, answer) over
`httpx.MockTransport`: length inputs from TRL's `completion_ids`, options checked when the reward is made, the
correctness component a length reward sends, dataset columns, names and metrics."""

from __future__ import annotations

import pickle
from types import SimpleNamespace
from typing import Any

import pytest
from pydantic import ValidationError

from tests.client.fakes import UNJUDGEABLE, FakeVerifier
from tests.client.test_rewards import Recorder, Reward, call, make_reward
from trainer_client import AsyncVerifierReward, VerifierReward, VerifierRewards
from trainer_client.metrics import VERDICTS
from trainer_client.options import describe
from trainer_client.reward_core import DEFAULT_NAMES
from verifier_service import problems
from verifier_service.schema import (
    COMPONENTS,
    FormatOptions,
    MathOptions,
    OverlongSpec,
    RepetitionSpec,
    ScoreItem,
    ScoreRequest,
)

OVERLONG = {"max_tokens": 10, "buffer_tokens": 4}


@pytest.fixture(params=["sync", "async"])
def mode(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def sent_items(fake: FakeVerifier) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = fake.score_bodies[-1]["items"]
    return items


# --------------------------------------------------------------------------- length inputs


def test_items_carry_completion_tokens_and_truncated_by_trls_rule(mode: str) -> None:
    """TRL's test: truncated when the last id is neither an EOS id (several may be given) nor the pad id."""
    fake = FakeVerifier()
    reward = make_reward(mode, fake, "overlong", **OVERLONG, eos_token_id=[2, 7], pad_token_id=0)
    ids = [[5, 2], [5, 5, 7], [5, 0], [5] * 7 + [2], [5] * 4, [5] * 10]
    rewards = call(reward, completions=["c"] * 6, completion_ids=ids)
    assert [(i["completion_tokens"], i["truncated"]) for i in sent_items(fake)] == [
        (2, False),
        (3, False),  # the second EOS id
        (2, False),  # ended in padding
        (8, False),
        (4, True),  # cut off before the cap (not in TRL's test, but neither EOS nor pad)
        (10, True),
    ]
    assert rewards == [0.0, 0.0, 0.0, -0.5, -1.0, -1.0]


def test_without_eos_ids_truncated_is_unknown_never_guessed(mode: str) -> None:
    fake = FakeVerifier()
    reward = make_reward(mode, fake, "overlong", **OVERLONG)
    assert call(reward, completions=["c", "c"], completion_ids=[[5, 2], [5] * 10]) == [0.0, -1.0]
    assert [i.get("completion_tokens") for i in sent_items(fake)] == [2, 10]
    assert all("truncated" not in item for item in sent_items(fake))
    # no completion_ids at all (a direct call): no length, and the verifier says it cannot judge
    assert call(reward, completions=["c"], completion_ids=None) == [None]
    assert "completion_tokens" not in sent_items(fake)[0]


def test_completion_ids_are_sent_only_when_prm_is_in_the_reward(mode: str) -> None:
    """prm's steps get their token indices from the ids; no other component reads them, so no other item grows."""
    import numpy as np

    fake = FakeVerifier()
    reward = make_reward(mode, fake, "prm", model="m")
    ids = [[5, 9, 2], np.array([7, 8], dtype=np.int64)]  # TRL's lists, or an array's integers: sent as ints
    assert call(reward, completions=["a\nb", "c"], completion_ids=ids) == [0.5, 0.5]
    assert [item["completion_ids"] for item in sent_items(fake)] == [[5, 9, 2], [7, 8]]
    call(reward, completions=["a"], completion_ids=None)  # a direct call without ids: none sent
    assert "completion_ids" not in sent_items(fake)[0]
    other = make_reward(mode, fake, "overlong", **OVERLONG)
    call(other, completions=["c"], completion_ids=[[5, 2]])
    assert "completion_ids" not in sent_items(fake)[0] and sent_items(fake)[0]["completion_tokens"] == 2


def test_an_empty_completion_has_zero_tokens_and_unknown_truncation(mode: str) -> None:
    fake = FakeVerifier()
    reward = make_reward(mode, fake, "overlong", **OVERLONG, eos_token_id=2)
    call(reward, completions=[""], completion_ids=[[]])
    [item] = sent_items(fake)
    assert item["completion_tokens"] == 0 and "truncated" not in item


def test_the_tokenizer_gives_eos_and_pad_and_a_missing_pad_is_eos() -> None:
    with_pad = VerifierReward("overlong", **OVERLONG, tokenizer=SimpleNamespace(eos_token_id=2, pad_token_id=0))
    assert (with_pad.spec.stop.eos, with_pad.spec.stop.pad) == ((2,), 0)  # type: ignore[union-attr]
    processor = SimpleNamespace(tokenizer=SimpleNamespace(eos_token_id=3, pad_token_id=None))
    no_pad = VerifierReward("overlong", **OVERLONG, tokenizer=processor)
    assert (no_pad.spec.stop.eos, no_pad.spec.stop.pad) == ((3,), 3)  # type: ignore[union-attr]
    with pytest.raises(ValueError, match="not both"):
        VerifierReward("overlong", **OVERLONG, tokenizer=processor, eos_token_id=3)
    with pytest.raises(ValueError, match="no eos_token_id"):
        VerifierReward("overlong", **OVERLONG, tokenizer=SimpleNamespace(eos_token_id=None))


@pytest.mark.parametrize(
    "bad", [{"eos_token_id": -1}, {"eos_token_id": "2"}, {"eos_token_id": []}, {"pad_token_id": 0}]
)
def test_bad_token_ids_are_refused(bad: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match="eos"):
        VerifierReward("overlong", **OVERLONG, **bad)


def test_token_ids_can_be_set_once_the_trainer_is_built(mode: str) -> None:
    fake = FakeVerifier()
    reward = make_reward(mode, fake, "overlong", **OVERLONG)
    reward.set_token_ids([2, 9], 0)  # as train.py does with trainer.eos_token_ids
    assert call(reward, completions=["c", "c"], completion_ids=[[5, 9], [5, 5]]) == [0.0, -1.0]
    assert [i["truncated"] for i in sent_items(fake)] == [False, True]
    assert pickle.loads(pickle.dumps(reward)).spec.stop == reward.spec.stop
    reward.set_token_ids(None)
    call(reward, completions=["c"], completion_ids=[[5, 5]])
    assert "truncated" not in sent_items(fake)[0]


def test_completion_ids_of_another_length_are_an_error(mode: str) -> None:
    reward = make_reward(mode, FakeVerifier(), "overlong", **OVERLONG)
    with pytest.raises(ValueError, match="completion_ids has 1 entries for 2 completions"):
        call(reward, completions=["a", "b"], completion_ids=[[1]])


def test_every_reward_sends_the_length_fields(mode: str) -> None:
    fake = FakeVerifier()
    reward = make_reward(mode, fake, "math", eos_token_id=2)
    call(reward, completions=["1"], solution=["1"], completion_ids=[[4, 4, 2]])
    assert sent_items(fake)[0]["completion_tokens"] == 3 and sent_items(fake)[0]["truncated"] is False


def test_a_lone_overlong_reward_with_on_truncated_null_warns(caplog: pytest.LogCaptureFixture) -> None:
    """TRL adds a None reward as 0 (nansum), overlong's best score, when other functions score the completion."""
    with caplog.at_level("WARNING", logger="trainer_client"):
        VerifierReward("overlong", max_tokens=10, on_truncated="null")
    assert "mask_truncated_completions" in caplog.text and "VerifierRewards" in caplog.text
    caplog.clear()
    with caplog.at_level("WARNING", logger="trainer_client"):
        VerifierReward(["math", "overlong"], options={"overlong": {"max_tokens": 10, "on_truncated": "null"}})
    assert not caplog.text


# --------------------------------------------------------------------------- options


def test_keyword_options_land_in_the_components_spec(mode: str) -> None:
    fake = FakeVerifier()
    cases: list[tuple[str, dict[str, Any], dict[str, Any]]] = [
        ("overlong", {"max_tokens": 1024, "buffer_tokens": 200, "penalty": 0.5}, {}),
        ("length", {"mode": "cosine", "max_tokens": 1024, "correct_long": 0.25}, {"solution": ["1"]}),
        ("repetition", {"n": 4, "scope": "answer", "units": "words"}, {}),
        ("choice", {"letters": "ABCDE"}, {"solution": ["B"]}),
        ("answer", {"match": "f1"}, {"solution": ["Paris"]}),
    ]
    for component, options, columns in cases:
        reward = make_reward(mode, fake, component, **options)
        call(reward, completions=["c"], **columns)
        spec = sent_items(fake)[0][component]
        assert {key: spec[key] for key in options} == options, component


def test_options_for_several_components_and_spec_objects(mode: str) -> None:
    fake = FakeVerifier()
    options: dict[str, Any] = {"overlong": OverlongSpec(max_tokens=64, penalty=0.5), "repetition": {"n": 2}}
    reward = make_reward(mode, fake, ["overlong", "repetition"], options=options, weights={"repetition": 0.5})
    call(reward, completions=["c"], completion_ids=[[1] * 70])
    [item] = sent_items(fake)
    assert item["overlong"]["max_tokens"] == 64 and item["overlong"]["penalty"] == 0.5
    assert item["repetition"]["n"] == 2 and item["weights"] == {"repetition": 0.5}
    assert reward.__name__ == "verifier"


def test_the_older_arguments_still_set_the_options(mode: str) -> None:
    fake = FakeVerifier()
    math = make_reward(mode, fake, "math", math_options=MathOptions(language="fr"), gold_column="g")
    call(math, completions=["1"], g=["1"])
    assert sent_items(fake)[0]["math"] == {
        "gold": "1",
        "options": MathOptions(language="fr").model_dump(mode="json", exclude_none=True),
    }
    fmt = make_reward(mode, fake, "format", format_options=FormatOptions(prefilled=True))
    call(fmt, completions=["x"])
    assert sent_items(fake)[0]["format"]["prefilled"] is True
    code = make_reward(mode, fake, "code", code_timeout_s=2.5, code_memory_mb=256)
    call(code, completions=["pass"], tests=[[{"type": "assert", "code": "assert True"}]])
    assert (sent_items(fake)[0]["code"]["timeout_s"], sent_items(fake)[0]["code"]["memory_mb"]) == (2.5, 256)
    # an older argument for a component the reward does not send is ignored, as it always was
    assert VerifierReward("math", format_options=FormatOptions(prefilled=True)).spec.options == {}


BAD_OPTIONS: list[tuple[tuple[Any, ...], dict[str, Any], str]] = [
    (("overlong",), {"max_tokens": 8, "bufer_tokens": 2}, r"unknown option 'bufer_tokens' for overlong; did you mean "
     r"'buffer_tokens'\?"),
    (("overlong",), {"max_tokens": 8, "zzz": 2}, r"unknown option 'zzz' for overlong; allowed: max_tokens, "
     r"buffer_tokens, penalty, on_truncated, unit"),
    (("overlong",), {}, r"overlong needs the option 'max_tokens'"),
    (("overlong",), {"max_tokens": 8, "buffer_tokens": 9}, r"buffer_tokens must be at most max_tokens"),
    (("length",), {"mode": "cosine"}, r"length: mode cosine needs max_tokens"),
    (("length",), {"max_tokens": 8, "correct_from": "maths"}, r"length\.correct_from: Input should be 'math'"),
    (("repetition",), {"n": 0}, r"repetition\.n: Input should be greater than or equal to 1"),
    (("answer",), {"match": "fuzzy"}, r"answer\.match: Input should be 'exact' or 'f1'"),
    (("math",), {"options": {"math": {"options": {"langauge": "fr"}}}},
     r"unknown option 'langauge' for math\.options; did you mean 'language'\?"),
    (("choice",), {"gold": "A"}, r"choice\.gold comes from the dataset"),
    (("math", "format"), {"n": 3}, r"need a reward with one component; with several, pass options="),
    (("math",), {"options": {"overlong": {"max_tokens": 8}}}, r"options name components this reward does not send"),
    (("math",), {"options": {"overlng": {}}}, r"options name 'overlng', which is not a component; did you mean "
     r"'overlong'\? Components: math, code"),
    (("format",), {"prefilled": True, "format_options": FormatOptions(prefilled=False)}, r"prefilled given twice"),
    (("math", "choice", "length"), {"options": {"length": {"max_tokens": 8}}}, r"needs correct_from to name one"),
]  # fmt: skip


@pytest.mark.parametrize(("args", "kwargs", "message"), BAD_OPTIONS)
@pytest.mark.parametrize("kind", [VerifierReward, AsyncVerifierReward])
def test_bad_options_fail_when_the_reward_is_made(
    kind: type[Reward], args: tuple[Any, ...], kwargs: dict[str, Any], message: str
) -> None:
    components = args[0] if len(args) == 1 else list(args)
    with pytest.raises((ValueError, TypeError), match=message):
        kind(components, **kwargs)


MISSPELLED: list[tuple[Any, str]] = [
    ("maths", rf"^unknown component 'maths'; did you mean 'math'\? Components: {', '.join(COMPONENTS)}$"),
    (["math", "fromat"], r"^unknown component 'fromat'; did you mean 'format'\?"),
    (["overlong", "lenght"], r"^unknown component 'lenght'; did you mean 'length'\?"),
    (["math", "zzz"], r"^unknown component 'zzz'; Components: math,"),  # nothing close: the list alone
]


@pytest.mark.parametrize(("components", "message"), MISSPELLED)
@pytest.mark.parametrize("kind", [VerifierReward, AsyncVerifierReward, VerifierRewards])
def test_a_misspelled_component_is_a_value_error_with_the_closest_name(
    kind: Any, components: Any, message: str
) -> None:
    """Not a KeyError from deep inside the option gathering: the name, the closest component, before anything is
    sent (no transport: a request would fail)."""
    names = [components] if kind is VerifierRewards and isinstance(components, str) else components
    with pytest.raises(ValueError, match=message):
        kind(names, base_url="http://127.0.0.1:9", max_consecutive_failures=None)


MISSPELLED_OPTIONS: list[tuple[Any, dict[str, Any], str, str]] = [
    ("overlong", {"max_tokens": 8, "bufer_tokens": 2}, "overlong", "bufer_tokens"),
    (["math", "format"], {"options": {"format": {"prefiled": True}}}, "format", "prefiled"),
    (["math", "length"], {"options": {"length": {"max_tokens": 8, "mode": "cosine", "correct_frm": "math"}}}, "length",
     "correct_frm"),
    ("math", {"options": {"math": {"options": {"langauge": "en"}}}}, "math.options", "langauge"),
]  # fmt: skip


@pytest.mark.parametrize(("components", "kwargs", "where", "name"), MISSPELLED_OPTIONS)
@pytest.mark.parametrize("kind", [VerifierReward, AsyncVerifierReward, VerifierRewards])
def test_a_misspelled_option_gets_the_servers_suggestion(
    kind: Any, components: Any, kwargs: dict[str, Any], where: str, name: str
) -> None:
    """The client says what the server would (`schema.unknown_name`, one definition): the option, where it is, the
    closest real name, before anything is sent."""
    names = [components] if kind is VerifierRewards and isinstance(components, str) else components
    with pytest.raises(ValueError) as refused:
        kind(names, base_url="http://127.0.0.1:9", max_consecutive_failures=None, **kwargs)
    assert "for ;" not in str(refused.value)
    server = servers_message(kwargs.get("options") or {components: kwargs})
    hint = server.split("; ", 1)[1]
    assert hint.startswith("did you mean '")
    assert f"unknown option {name!r} for {where}; {hint}" in str(refused.value)


def servers_message(options: dict[str, dict[str, Any]]) -> str:
    """What /v1/score's 422 says of the same options in an item."""
    specs: dict[str, dict[str, Any]] = {"math": {"gold": "1"}}
    for name, values in options.items():
        specs[name] = {**specs.get(name, {}), **values}
    with pytest.raises(ValidationError) as refused:
        ScoreRequest.model_validate({"items": [{"completion": "x", **specs}]})
    [problem] = problems.describe(refused.value.errors())
    return str(problem["msg"])


def test_an_unknown_item_field_is_named_with_the_closest_and_no_empty_place() -> None:
    with pytest.raises(ValidationError) as refused:
        ScoreItem.model_validate({"completion": "x", "math": {"gold": "1"}, "maths": {}})
    assert describe(refused.value) == "unknown item field 'maths'; did you mean 'math'?"


# --------------------------------------------------------------------------- length and its correctness component


def test_the_length_reward_sends_math_with_weight_zero(mode: str) -> None:
    fake = FakeVerifier()
    reward = make_reward(mode, fake, "length", max_tokens=100, math_options=MathOptions(boxed_priority=50))
    assert reward.__name__ == "verifier_length" and reward.spec.sent == ("length", "math")
    rewards = call(reward, completions=["so 7", "so 8", "so 9"], solution=["7", "7", None], completion_ids=[[1]] * 3)
    assert rewards == [1.0, -1.0, None]  # the length score alone; the row without gold is skipped
    first, second = sent_items(fake)
    assert first["math"] == {
        "gold": "7",
        "options": MathOptions(boxed_priority=50).model_dump(mode="json", exclude_none=True),
    }
    assert first["weights"] == {"math": 0.0} and first["length"]["max_tokens"] == 100
    # the server's validation, its order guard included (not switched off), takes these items
    assert first["allow_order_inversion"] is False
    for item in (first, second):
        ScoreItem.model_validate(item)


def test_a_weight_zero_primary_with_cosine_passes_the_servers_order_guard() -> None:
    reward = VerifierReward("length", max_tokens=100)
    assert reward.spec.item_weights == {"math": 0.0}
    ScoreItem(completion="", math={"gold": "1"}, length={"max_tokens": 100}, weights=reward.spec.item_weights)
    # with a weight of zero on math, length must itself rank right above wrong: an inverted one is refused
    with pytest.raises(ValueError, match=r"wrong answer scores at least as much.*allow_order_inversion=True"):
        VerifierReward("length", max_tokens=100, correct_long=-0.6)


def test_target_length_needs_allow_order_inversion_or_a_negative_wrong_score(mode: str) -> None:
    with pytest.raises(ValueError, match="wrong answer scores at least as much"):
        VerifierReward("length", mode="target", target_tokens=50)
    assert VerifierReward("length", mode="target", target_tokens=50, wrong_score=-0.5).spec.sent == ("length", "math")
    fake = FakeVerifier()
    reward = make_reward(mode, fake, "length", mode="target", target_tokens=50, allow_order_inversion=True)
    call(reward, completions=["7"], solution=["7"])
    assert sent_items(fake)[0]["allow_order_inversion"] is True


def test_correct_from_picks_the_primary_the_length_reward_sends(mode: str) -> None:
    fake = FakeVerifier()
    reward = make_reward(mode, fake, "length", max_tokens=100, correct_from="choice", options_column="choices")
    rewards = call(reward, completions=["it is B", "it is A"], solution=[1, "B"], choices=[["x", "y"], None])
    assert rewards == [1.0, -1.0]
    first, second = sent_items(fake)
    assert first["choice"] == {"gold": "B", "options": ["x", "y"], "think_tag": "think"}
    assert first["weights"] == {"choice": 0.0} and "math" not in first and "options" not in second["choice"]
    code = make_reward(mode, fake, "length", max_tokens=100, correct_from="code")
    assert call(code, completions=["pass"], tests=[[{"type": "assert", "code": "assert True"}]]) == [1.0]
    assert sent_items(fake)[0]["weights"] == {"code": 0.0}


def test_a_combined_reward_with_its_own_primary_sends_no_extra_component(mode: str) -> None:
    fake = FakeVerifier()
    reward = make_reward(mode, fake, ["choice", "length"], options={"length": {"max_tokens": 100}})
    assert call(reward, completions=["B"], solution=["B"]) == [2.0]
    [item] = sent_items(fake)
    assert set(item) & {"math", "choice", "length", "weights"} == {"choice", "length"}


def test_a_length_reward_whose_primary_cannot_judge_is_none(mode: str) -> None:
    reward = make_reward(mode, FakeVerifier(), "length", max_tokens=100)
    assert call(reward, completions=["1", "2"], solution=[UNJUDGEABLE, "2"]) == [None, 1.0]


# --------------------------------------------------------------------------- choice and answer columns


def test_choice_golds_are_letters_indexes_or_lists(mode: str) -> None:
    fake = FakeVerifier()
    reward = make_reward(mode, fake, "choice", gold_column="answer", options_column="options")
    options = [["2", "3", "4", "5"], '["red", "blue"]', None, ["a", "b", "c"]]
    rewards = call(reward, completions=["C", "A", "B", "AC"], answer=["C", 0, None, ["A", "C"]], options=options)
    assert rewards == [1.0, 1.0, None, 1.0]
    items = sent_items(fake)
    assert [i["choice"]["gold"] for i in items] == ["C", "A", ["A", "C"]]
    assert [i["choice"].get("options") for i in items] == [["2", "3", "4", "5"], ["red", "blue"], ["a", "b", "c"]]


def test_a_missing_options_column_is_a_clear_error(mode: str) -> None:
    reward = make_reward(mode, FakeVerifier(), "choice", options_column="choices")
    with pytest.raises(ValueError, match=r"column 'choices'.*options_column="):
        call(reward, completions=["A"], solution=["A"])


def test_answer_golds_are_strings_or_aliases(mode: str) -> None:
    fake = FakeVerifier()
    reward = make_reward(mode, fake, "answer")
    golds: list[Any] = [" Paris ", ["NYC", "New York City"], 42, []]
    assert call(reward, completions=["Paris", "New York City", "42", "x"], solution=golds) == [1.0, 1.0, 1.0, None]
    assert [i["answer"]["gold"] for i in sent_items(fake)] == ["Paris", ["NYC", "New York City"], "42"]


def test_a_bad_gold_in_the_dataset_names_the_row(mode: str) -> None:
    reward = make_reward(mode, FakeVerifier(), "answer")
    with pytest.raises(ValueError, match=r"completion 1 makes an invalid item: answer\.gold"):
        call(reward, completions=["a", "b"], solution=["a", "x" * 10_001])


def test_golds_a_dataset_holds_as_numpy_numbers_or_nan_are_read_as_python_ones(mode: str) -> None:
    """An index read by numpy is an index, not the text '2'; NaN is how pandas marks a missing value: no gold."""
    import numpy as np

    fake = FakeVerifier()
    reward = make_reward(mode, fake, "choice", gold_column="answer")
    rewards = call(reward, completions=["C", "A", "B"], answer=[np.int64(2), float("nan"), np.int32(1)])
    assert rewards == [1.0, None, 1.0]
    assert [i["choice"]["gold"] for i in sent_items(fake)] == ["C", "B"]


@pytest.mark.parametrize("gold", [True, float("inf")])
def test_a_value_that_is_no_gold_names_the_column_and_the_row_not_the_value(mode: str, gold: object) -> None:
    reward = make_reward(mode, FakeVerifier(), "answer", gold_column="answer")
    with pytest.raises(ValueError, match=r"dataset column 'answer', row of completion 1: a gold") as caught:
        call(reward, completions=["a", "b"], answer=["a", gold])
    assert str(gold) not in str(caught.value)


# --------------------------------------------------------------------------- names and metrics


def test_no_option_is_shadowed_by_a_reward_argument() -> None:
    """Keyword options share the reward's signature: an option named like an argument could not be given so."""
    import inspect

    from trainer_client.options import option_names

    arguments = set(inspect.signature(VerifierReward.__init__).parameters)
    shadowed = {(c, o) for c in COMPONENTS for o in option_names(c) if o in arguments}
    assert shadowed == {("math", "options")}  # math's options: math_options= or options={"math": {"options": ...}}


def test_every_component_has_a_default_name() -> None:
    assert {DEFAULT_NAMES[(name,)] for name in COMPONENTS} == {f"verifier_{name}" for name in COMPONENTS}
    assert VerifierReward("repetition").__name__ == "verifier_repetition"
    assert AsyncVerifierReward("overlong", max_tokens=8).__name__ == "verifier_overlong"


@pytest.mark.parametrize("component", ["overlong", "length", "repetition", "choice", "answer"])
def test_new_components_log_every_verdict_and_a_table_column(mode: str, component: str) -> None:
    options = {"overlong": OVERLONG, "length": {"max_tokens": 8}}.get(component, {})
    rec = Recorder()
    reward = make_reward(mode, FakeVerifier(), component, **options)
    call(reward, completions=["A", "A"], solution=["A", "B"], log_metric=rec.log_metric, log_extra=rec.log_extra)
    name = f"verifier_{component}"
    verdict_rates = {key for key in rec.metrics if key.startswith(f"{name}/{component}/")}
    assert verdict_rates == {f"{name}/{component}/{verdict}" for verdict in (*VERDICTS[component], "other")}
    assert set(rec.metrics) - verdict_rates == {f"{name}/null_rate", f"{name}/unreachable_rate"}  # no math rates
    assert list(rec.extra) == [f"{name}/{component}"] and len(rec.extra[f"{name}/{component}"]) == 2
    assert sum(rec.metrics[f"{name}/{component}/{verdict}"][0] for verdict in VERDICTS[component]) == 1.0


def test_the_repetition_reward_is_its_score(mode: str) -> None:
    reward = make_reward(mode, FakeVerifier(), "repetition", options={"repetition": RepetitionSpec(n=2)})
    assert call(reward, completions=["fine", "again again again"]) == [0.0, -1.0]


def test_pickle_keeps_options_and_token_ids() -> None:
    reward = VerifierReward("length", max_tokens=64, correct_from="answer", eos_token_id=[1, 2], pad_token_id=0)
    copy = pickle.loads(pickle.dumps(reward))
    assert copy.spec == reward.spec and copy.spec.sent == ("length", "answer")
