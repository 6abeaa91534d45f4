"""What the trainer routes make of the trainers' requests, with no server: options, completions, labels, answers; and
the API key in the URL leaving the path and the access log."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from trainer_client.domains import json_schema_specs
from verifier_service.compat_mapping import (
    QUERY_WITHOUT_PROMPT,
    CompatConfig,
    Invalid,
    NeMoGymVerifyRequest,
    label_specs,
    nemo_gym_answer,
    nemo_gym_label,
    openrlhf_answer,
    openrlhf_completion,
    parse_config,
    response_text,
    scaled,
    score_item,
    strip_special_tokens,
    unjudged,
)
from verifier_service.domain_labels import LabelError, structured_outputs_spec
from verifier_service.schema import ComponentResult, ItemResult, ScoreItem
from verifier_service.settings import DEFAULT_SPECIAL_TOKENS, VerifierSettings
from verifier_service.url_key import SCOPE_KEY, HideUrlKeys, take_key

SECRET = "SeCrEt-9137"


def problems(exc: pytest.ExceptionInfo[Invalid]) -> list[tuple[str, str]]:
    assert SECRET not in repr(exc.value.errors)
    return [(error["loc"], error["msg"]) for error in exc.value.errors]


# Options


@pytest.mark.parametrize(
    ("components", "weights", "expected"),
    [
        (None, None, CompatConfig()),
        (["math+format"], ["math:1+format:0.5"], CompatConfig(("math", "format"), {"math": 1.0, "format": 0.5})),
        (["math,format", "format"], ["format:2"], CompatConfig(("math", "format"), {"format": 2.0})),
        (["answer", "repetition"], [" "], CompatConfig(("answer", "repetition"))),
        (["math+steps"], ["steps:0.5"], CompatConfig(("math", "steps"), {"steps": 0.5})),
    ],
)
def test_options_from_the_url(components: list[str] | None, weights: list[str] | None, expected: CompatConfig) -> None:
    assert parse_config(components, weights, None) == expected


def test_the_fallback_and_the_extra_keys() -> None:
    config = parse_config(["math format"], None, "-0.5")
    assert config.on_unjudged == -0.5
    assert config.extra_keys == ("verifier_judged", "verifier_math", "verifier_format")


@pytest.mark.parametrize(
    ("components", "weights", "on_unjudged", "loc"),
    [
        ([SECRET], None, None, "?components"),
        (["code"], None, None, "?components"),
        (None, [f"{SECRET}:1"], None, "?weights"),
        (None, [f"math:{SECRET}"], None, "?weights"),
        (None, ["math:inf"], None, "?weights"),
        (None, ["math:1e7"], None, "?weights"),
        (None, None, "nan", "?on_unjudged"),
        (None, None, SECRET, "?on_unjudged"),
    ],
)
def test_bad_options_name_the_parameter_not_the_value(
    components: list[str] | None, weights: list[str] | None, on_unjudged: str | None, loc: str
) -> None:
    with pytest.raises(Invalid) as caught:
        parse_config(components, weights, on_unjudged)
    assert [where for where, _ in problems(caught)] == [loc]


# Completions


def test_an_openrlhf_query_loses_its_prompt_and_its_end_tokens() -> None:
    prompt = "<|im_start|>user\n1+1?<|im_end|>\n<|im_start|>assistant\n"
    assert openrlhf_completion(prompt + "2<|im_end|>", prompt, DEFAULT_SPECIAL_TOKENS) == "2"
    assert openrlhf_completion(prompt + "2", None, DEFAULT_SPECIAL_TOKENS) == prompt + "2"  # no prompt: all of it
    assert openrlhf_completion(prompt + "2 </s>  ", "", ["</s>"]) == prompt + "2 "
    with pytest.raises(Invalid) as caught:  # it does not hold its prompt: no response to tell apart
        openrlhf_completion("2<|eot_id|>", prompt, DEFAULT_SPECIAL_TOKENS, "query.3")
    assert problems(caught) == [("query.3", QUERY_WITHOUT_PROMPT)]


def test_a_prompt_cut_on_the_left_is_found_by_its_end() -> None:
    prompt = "<|im_start|>user\n" + "é" * 300 + "?<|im_end|>\n<|im_start|>assistant\n"
    for left in [len(prompt), 250, 199, 31, 5, 1]:  # the tail's 200 characters, then shorter suffixes
        assert openrlhf_completion(prompt[-left:] + "2<|im_end|>", prompt, DEFAULT_SPECIAL_TOKENS) == "2"
        for cut in ["\ufffd", "\ufffd\ufffd\ufffd"]:  # the ids were cut inside a character
            assert openrlhf_completion(cut + prompt[-left:] + "2", prompt, DEFAULT_SPECIAL_TOKENS) == "2"


def test_only_trailing_special_tokens_are_stripped() -> None:
    assert strip_special_tokens("a</s>b</s>", ["</s>"]) == "a</s>b"
    assert strip_special_tokens("a \n", ["</s>"]) == "a \n"  # no token: the text as it was
    assert strip_special_tokens("<|end▁of▁sentence|>", DEFAULT_SPECIAL_TOKENS) == ""
    assert strip_special_tokens("4<｜end▁of▁sentence｜>", DEFAULT_SPECIAL_TOKENS) == "4"  # DeepSeek's: full-width bars


def test_stripping_looks_at_the_end_of_the_text_only() -> None:
    """A text that is nothing but end tokens costs a bounded amount of work: those in the last 4096 characters go."""
    text = "a" + "</s>" * 100_000
    assert strip_special_tokens(text, ["</s>"]) == "a" + "</s>" * (100_000 - 1024)


def test_the_special_tokens_are_a_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VERIFIER_COMPAT_SPECIAL_TOKENS", '["<|my_end|>"]')
    assert VerifierSettings().compat_special_tokens == ("<|my_end|>",)
    with pytest.raises(ValueError, match="COMPAT_SPECIAL_TOKENS"):
        VerifierSettings(compat_special_tokens=(" ",))


def test_a_responses_object_text_is_its_messages_output_text() -> None:
    response = {
        "output": [
            {"type": "reasoning", "summary": [{"type": "summary_text", "text": "R"}]},
            {"type": "function_call", "name": "f", "arguments": "{}"},
            {
                "type": "message",
                "content": [{"type": "output_text", "text": "A"}, {"type": "refusal", "refusal": "no"}],
            },
            {"type": "message", "content": [{"type": "output_text", "text": "B"}]},
        ]
    }
    assert response_text(response) == "AB"
    assert response_text({"output": []}) == ""
    with pytest.raises(Invalid) as caught:
        response_text({"output": SECRET})
    assert [where for where, _ in problems(caught)] == ["response.output"]


# Labels


def test_a_gold_label_is_scored_with_the_urls_components() -> None:
    config = CompatConfig(("math", "format"), {"format": 0.5})
    item = score_item("x", "72", config, "label")
    assert item == ScoreItem(completion="x", math={"gold": "72"}, format={}, weights={"format": 0.5})
    stepped = score_item("x", "72", CompatConfig(("math", "steps")), "label")
    assert stepped == ScoreItem(completion="x", math={"gold": "72"}, steps={})
    assert score_item("x", 72, CompatConfig(), "label").math == ScoreItem(completion="", math={"gold": "72"}).math
    assert score_item("x", "{1, 2}", CompatConfig(), "label").math.gold == "{1, 2}"  # type: ignore[union-attr]


@pytest.mark.parametrize("label", [{"answer": {"gold": "Paris"}}, '{"answer": {"gold": "Paris"}}'])
def test_a_spec_label_is_the_whole_item(label: Any) -> None:
    item = score_item("x", label, CompatConfig(("math", "format")), "labels.0")
    assert item.requested() == ["answer"] and item.answer is not None and item.answer.gold == "Paris"


@pytest.mark.parametrize(
    ("label", "config", "loc"),
    [
        (None, CompatConfig(), "labels.3"),
        ("", CompatConfig(("answer",)), "labels.3"),
        (True, CompatConfig(), "labels.3"),
        ([SECRET], CompatConfig(), "labels.3"),
        ('{"math": ' + SECRET, CompatConfig(), "labels.3"),
        ({"math": {"gold": SECRET, "strict": True}}, CompatConfig(), "labels.3.math"),
        ({"math": {"gold": ""}}, CompatConfig(), "labels.3.math.gold"),
        ({"maths": {"gold": SECRET}}, CompatConfig(), "labels.3"),  # the field's name is said back, not its value
        (float("nan"), CompatConfig(), "labels.3"),
        (float("inf"), CompatConfig(("answer",)), "labels.3"),
        ({"math": {"gold": float("-inf")}}, CompatConfig(), "labels.3.math.gold"),
        ('{"math": ' + "[" * 100_000 + "]" * 100_000 + "}", CompatConfig(), "labels.3"),
        ({"completion": SECRET, "format": {}}, CompatConfig(), "labels.3.completion"),
        ("1", CompatConfig(("math",), {"format": 1.0}), "?weights"),
        ("1", CompatConfig(("math",), {"math": -1.0}), "?weights"),
        ("1" * 10_001, CompatConfig(), "labels.3"),
        (f"[{{'instruction_id': ['a:b'], 'kwargs': [{SECRET}]}}]", CompatConfig(), "labels.3"),  # not a literal
        (f"[{{'instruction_id': '{SECRET}', 'kwargs': []}}]", CompatConfig(), "labels.3"),
        (
            "[{'instruction_id': ['a:b'], 'kwargs': [" + "[" * 100_000 + "]" * 100_000 + "]}]",
            CompatConfig(),
            "labels.3",
        ),
    ],
)
def test_a_bad_label_is_located_and_never_echoed(label: Any, config: CompatConfig, loc: str) -> None:
    with pytest.raises(Invalid) as caught:
        score_item("x", label, config, "labels.3")
    assert [where for where, _ in problems(caught)] == [loc]


OPEN_INSTRUCT = "[{'instruction_id': ['detectable_format:title', 'keywords:frequency'], 'kwargs': [None, {'keyword': 'pink', 'frequency': 2, 'relation': 'at least', 'num_words': None}]}]"  # noqa: E501
INSTRUCTIONS = {
    "instruction_ids": ["detectable_format:title", "keywords:frequency"],
    "kwargs": [None, {"keyword": "pink", "frequency": 2, "relation": "at least"}],
}


def test_open_instructs_ground_truth_string_is_an_instructions_spec() -> None:
    """The spec the label maps to, graded as open-instruct rewards it: the share of the instructions followed."""
    assert label_specs(OPEN_INSTRUCT, "labels.0") == {"instructions": {**INSTRUCTIONS, "grading": "fraction"}}
    assert label_specs("[1, 2]", "labels.0") is None and label_specs("{1, 2}", "labels.0") is None  # math golds


def gym_body(**row: Any) -> NeMoGymVerifyRequest:
    return NeMoGymVerifyRequest.model_validate({"responses_create_params": {}, "response": {"output": []}, **row})


def test_a_nemo_gym_instruction_following_row_is_scored_against_its_instructions() -> None:
    metadata = {"instruction_id_list": INSTRUCTIONS["instruction_ids"], "prompt": "p",
                "kwargs": INSTRUCTIONS["kwargs"], "grading_mode": "fraction"}  # fmt: skip
    expected = {"instructions": {**INSTRUCTIONS, "grading": "fraction"}}
    assert nemo_gym_label(gym_body(verifier_metadata=metadata)) == (expected, "verifier_metadata")
    assert nemo_gym_label(gym_body(**metadata)) == (expected, "instruction_id_list")  # NeMo-Gym's older rows
    assert nemo_gym_label(gym_body(verifier_metadata=metadata, verifier={"format": {}})) == ({"format": {}}, "verifier")
    assert nemo_gym_label(gym_body(verifier_metadata={"x": 1}, expected_answer="4")) == ("4", "expected_answer")


@pytest.mark.parametrize(
    "metadata",
    [
        {"instruction_id_list": SECRET, "kwargs": []},
        {"instruction_id_list": ["a:b"], "kwargs": [SECRET]},
        {"instruction_id_list": ["a:b"], "kwargs": [None], "grading_mode": SECRET},
    ],
)
def test_a_bad_nemo_gym_instruction_row_is_located_and_never_echoed(metadata: dict[str, Any]) -> None:
    with pytest.raises(Invalid) as caught:
        nemo_gym_label(gym_body(verifier_metadata=metadata))
    assert [where for where, _ in problems(caught)] == ["verifier_metadata"]


def test_an_unknown_field_of_a_label_gets_the_closest_name() -> None:
    with pytest.raises(Invalid) as caught:
        score_item("x", {"math": {"gold": "1", "optoins": {}}}, CompatConfig(), "labels.3")
    assert problems(caught) == [("labels.3.math", "unknown field 'optoins'; did you mean 'options'?")]


def test_a_number_label_is_read_by_each_component_as_the_schema_reads_it() -> None:
    item = score_item("x", 2, CompatConfig(("math", "choice", "answer")), "label")
    assert item.math is not None and item.choice is not None and item.answer is not None
    assert (item.math.gold, item.choice.gold, item.answer.gold) == ("2", "C", "2")  # choice: an option index


def test_format_alone_needs_no_gold() -> None:
    assert score_item("x", None, CompatConfig(("format",)), "label").requested() == ["format"]


# Answers


def result(reward: float | None, **components: ComponentResult) -> ItemResult:
    return ItemResult(id=None, reward=reward, status="ok" if reward is not None else "error", components=components)


RIGHT = ComponentResult(score=1.0, verdict="correct")
FORMAT_OK = ComponentResult(score=1.0, verdict="ok")
UNPARSEABLE = ComponentResult(score=None, verdict="gold_unparseable", detail="the gold answer could not be parsed")


def test_scores_are_the_reward_over_the_positive_weights_clipped() -> None:
    item = ScoreItem(completion="x", math={"gold": "1"}, format={}, repetition={}, weights={"format": 0.5})
    assert scaled(1.25, item) == 0.5  # 1 + 0.5 + 1 (repetition scores at most 0, and weighs 1)
    assert scaled(-1.0, item) == 0.0 and scaled(9.0, item) == 1.0
    negative = ScoreItem(completion="x", format={}, weights={"format": -1.0}, allow_order_inversion=True)
    assert scaled(-1.0, negative) == 0.0


def test_the_openrlhf_answer_has_the_same_keys_whatever_the_item_asks_for() -> None:
    config = CompatConfig(("math", "format"))
    items = [ScoreItem(completion="x", math={"gold": "1"}), ScoreItem(completion="x", format={})]
    answer = openrlhf_answer(items, [result(1.0, math=RIGHT), result(1.0, format=FORMAT_OK)], config)
    assert answer == {
        "rewards": [1.0, 1.0],
        "scores": [1.0, 1.0],
        "extra_logs": {"verifier_judged": [1.0, 1.0], "verifier_math": [1.0, 0.0], "verifier_format": [0.0, 1.0]},
    }


def test_why_a_sample_is_not_judged_names_its_null_components() -> None:
    assert unjudged([result(1.0, math=RIGHT)]) is None
    why = unjudged([result(None, math=UNPARSEABLE, format=FORMAT_OK)])
    assert why == "math: gold_unparseable (the gold answer could not be parsed)"
    assert unjudged([result(1.0, math=RIGHT), result(None, math=UNPARSEABLE)]).startswith("sample 1: math")  # type: ignore[union-attr]


def test_the_nemo_gym_answer_echoes_what_was_sent_and_masks_the_unjudged() -> None:
    sent = {"responses_create_params": {"input": []}, "response": {"output": []}, "expected_answer": "1", "k": [1]}
    body = NeMoGymVerifyRequest.model_validate(sent)
    judged = nemo_gym_answer(body, result(1.0, math=RIGHT), CompatConfig())
    assert judged == {**sent, "reward": 1.0, "mask_sample": False, "failure_reason": None} | {
        "verifier_judged": 1.0,
        "verifier_math": 1.0,
    }
    masked = nemo_gym_answer(body, result(None, math=UNPARSEABLE), CompatConfig())
    assert (masked["reward"], masked["mask_sample"], masked["verifier_judged"]) == (0.0, True, 0.0)
    assert "instance_config" not in masked


# The key in the URL


def test_the_key_leaves_the_path() -> None:
    scope = {"type": "http", "path": "/v1/compat/key/a%b/openrlhf", "raw_path": b"/v1/compat/key/a%25b/openrlhf"}
    take_key(scope)
    assert scope == {
        "type": "http",
        "path": "/v1/compat/openrlhf",
        "raw_path": b"/v1/compat/openrlhf",
        SCOPE_KEY: "a%b",
    }
    bare = {"type": "http", "path": "/v1/compat/key/k"}
    take_key(bare)
    assert (bare["path"], bare["raw_path"], bare[SCOPE_KEY]) == ("/v1/compat/", b"/v1/compat/", "k")


def test_the_access_log_filter_masks_a_key_in_a_path() -> None:
    path = f"/v1/compat/key/{SECRET}/openrlhf?components=math"
    record = logging.LogRecord("uvicorn.access", logging.INFO, "", 0, '%s - "%s %s HTTP/%s" %d', (
        "127.0.0.1:5", "POST", path, "1.1", 200), None)  # fmt: skip
    assert HideUrlKeys().filter(record)
    assert record.getMessage() == '127.0.0.1:5 - "POST /v1/compat/key/***/openrlhf?components=math HTTP/1.1" 200'
    other = logging.LogRecord("uvicorn.access", logging.INFO, "", 0, "%s", ("/v1/score",), None)
    assert HideUrlKeys().filter(other) and other.getMessage() == "/v1/score"


def test_a_structured_outputs_row_is_read_once_for_the_route_and_the_trainer() -> None:
    """`domain_labels.structured_outputs_spec` is both readers: schema_str strict, a schema column as given."""
    row = {"schema_str": '{"type": "object"}', "schema_type": "json", "response_mode": "text"}
    assert structured_outputs_spec(row) == {"schema": {"type": "object"}, "strict": True}
    assert json_schema_specs(row) == {"json_schema": structured_outputs_spec(row)}
    assert structured_outputs_spec({"schema": {"type": "object"}}) == {"schema": {"type": "object"}}
    assert structured_outputs_spec({"question": "q"}) is None
    for bad, field in (
        ({"schema_type": "yaml"}, "schema_type"),
        ({"response_mode": "tool_call"}, "response_mode"),
        ({"schema_str": "true"}, "schema_str"),
    ):
        with pytest.raises(LabelError) as exc:
            structured_outputs_spec({**row, **bad})
        assert exc.value.field == field
