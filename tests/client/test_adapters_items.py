"""What the trainer adapters share, without a verifier: their options, the item each sample becomes, and what a
result becomes (`trainer_client.integrations.common`, `ground_truth`)."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import pytest

from tests.conftest import ROOT
from trainer_client import VerifierUnjudgedError
from trainer_client.integrations.common import EXTRA_KEYS, AdapterConfig, Outcome, build_item
from trainer_client.integrations.openrlhf_reward_func import completion_of
from verifier_service.schema import ComponentResult, ItemResult

COMPLETION = "<think>the model's private reasoning</think>The answer is 42."


STDIO_1 = {"type": "stdio", "stdin": "1 2\n", "stdout": "3\n"}
STDIO_2 = {"type": "stdio", "stdin": "3\n4", "stdout": "7"}
CALL_1 = {"type": "call", "fn": "add", "args": [1, 2], "expected": 3}
CALL_2 = {"type": "call", "fn": "add", "args": [[1], [2]], "expected": [1, 2]}


def config(**kwargs: Any) -> AdapterConfig:
    return AdapterConfig.from_kwargs({"url": "http://verifier.test", **kwargs})


def fields(item: Any) -> dict[str, Any]:
    return item.model_dump(exclude_none=True, exclude={"completion", "allow_order_inversion"})


@pytest.mark.parametrize(
    ("data_source", "ground_truth", "expected"),
    [
        ("openai/gsm8k", "72", {"math": {"gold": "72"}}),
        ("lighteval/MATH", "\\frac{1}{2}", {"math": {"gold": "\\frac{1}{2}"}}),
        ("unknown_source", 7.5, {"math": {"gold": "7.5"}}),
        (None, {"math": {"gold": "3"}, "format": {}}, {"math": {"gold": "3"}, "format": {}}),
        (None, '{"answer": {"gold": ["Paris", "City of Light"]}}', {"answer": {"gold": ("Paris", "City of Light")}}),
        ("searchR1_nq", {"target": ["Paris"]}, {"answer": {"gold": ("Paris",)}}),
        ("mbpp", ["assert f(1) == 2"], {"code": {"tests": [{"type": "assert", "code": "assert f(1) == 2"}]}}),
        (
            "codecontests",  # APPS/PRIME stdio, as a JSON string
            json.dumps({"inputs": ["1 2\n", ["3", "4"]], "outputs": ["3\n", "7"]}),
            {"code": {"tests": [STDIO_1, STDIO_2]}},
        ),
        (
            "anything",  # APPS call-based: return values wrapped in one-element lists
            {"fn_name": "add", "inputs": [[1, 2], [[1], [2]]], "outputs": [[3], [[1, 2]]]},
            {"code": {"tests": [CALL_1, CALL_2]}},
        ),
        (
            "taco",  # PRIME call-based: arguments as JSON lines, outputs as JSON text
            {"fn_name": "f", "inputs": ["1\n[2, 3]"], "outputs": ["[5]"]},
            {"code": {"tests": [{"type": "call", "fn": "f", "args": [1, [2, 3]], "expected": 5}]}},
        ),
    ],
)
def test_the_ground_truth_becomes_the_items_specs(data_source: str | None, ground_truth: Any, expected: Any) -> None:
    got = fields(build_item(COMPLETION, ground_truth, config(), data_source=data_source))
    for name, spec in expected.items():  # the specs' defaults (code limits, math options) may be added
        for key, value in spec.items():
            actual = got[name][key]
            if key == "tests":
                pairs = zip(actual, value, strict=True)
                actual = [{k: v for k, v in test.items() if k in want} for test, want in pairs]
            assert actual == value, (name, key)
    assert set(got) == set(expected)


def test_a_spec_in_extra_info_wins_over_the_ground_truth() -> None:
    item = build_item(COMPLETION, "1", config(), spec='{"math": {"gold": "42"}, "weights": {"math": 2.0}}')
    assert item.math is not None and item.math.gold == "42" and item.weights == {"math": 2.0}


def test_components_override_the_data_source_and_add_shaping_components() -> None:
    item = build_item(COMPLETION, "Paris", config(components=["answer", "format"]), data_source="openai/gsm8k")
    assert item.requested() == ["answer", "format"] and item.answer is not None and item.answer.gold == "Paris"
    only_format = build_item(COMPLETION, "ignored", config(components="format"))
    assert only_format.requested() == ["format"]


def test_component_options_merge_under_the_rows_own() -> None:
    cfg = config(
        math={"options": {"float_rounding": 2, "strict": False}},
        format={"tag": "reasoning"},
        code={"timeout_s": 2},  # a code option does not make a math row a code row
        weights={"math": 1.0, "format": 0.25, "code": 3.0},
    )
    item = build_item(COMPLETION, "3", cfg)
    assert item.requested() == ["math", "format"]
    assert item.math is not None and (item.math.options.float_rounding, item.math.options.strict) == (2, False)
    assert item.format is not None and item.format.tag == "reasoning"
    assert item.weights == {"math": 1.0, "format": 0.25}
    row = build_item(COMPLETION, {"math": {"gold": "3", "options": {"strict": True}}}, cfg)
    assert row.math is not None and (row.math.options.float_rounding, row.math.options.strict) == (2, True)


@pytest.mark.parametrize(
    ("kwargs", "ground_truth", "message"),
    [
        ({}, "", "ground truth is empty"),
        ({}, ["1", "2"], "one answer, got a list"),
        ({}, {"question": "q"}, "component specs"),
        ({"overlong": {}}, "3", "overlong needs the option 'max_tokens'"),
        ({"math": {"options": {"float_rounding": "x"}}}, "3", "math.options.float_rounding"),
    ],
)
def test_a_ground_truth_or_option_that_makes_no_item_says_why(kwargs: Any, ground_truth: Any, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        build_item(COMPLETION, ground_truth, config(**kwargs))


def test_options_are_checked() -> None:
    with pytest.raises(TypeError, match=r"unknown options \['on_unjuged'\]"):
        config(on_unjuged=0.0)
    with pytest.raises(ValueError, match="at most one of"):
        config(components=["math", "code"])
    with pytest.raises(ValueError, match="on_unjudged must be"):
        config(on_unjudged="zero")
    # verl adds these when it runs a reward-model router; they are not ours, and not an error
    assert config(reward_router_address="x", reward_model_tokenizer=object()).url == "http://verifier.test"


def test_address_and_key_come_from_arguments_then_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("VERIFIER_URL", raising=False)
    monkeypatch.delenv("VERIFIER_API_KEY", raising=False)
    assert (AdapterConfig.from_kwargs({}).url, AdapterConfig.from_kwargs({}).api_key) == ("http://127.0.0.1:8088", None)
    monkeypatch.setenv("VERIFIER_URL", "http://from-env:1/v1/score")
    monkeypatch.setenv("VERIFIER_API_KEY", "env-key")
    from_env = AdapterConfig.from_kwargs({})
    assert (from_env.url, from_env.api_key) == ("http://from-env:1", "env-key")
    explicit = AdapterConfig.from_kwargs({"url": "http://given:2", "api_key": "given-key"})
    assert (explicit.url, explicit.api_key) == ("http://given:2", "given-key")


def result(reward: float | None, **components: tuple[float | None, str]) -> ItemResult:
    parts = {name: ComponentResult(score=score, verdict=verdict) for name, (score, verdict) in components.items()}
    return ItemResult(id=None, reward=reward, status="ok" if reward is not None else "error", components=parts)


def test_an_unjudged_item_raises_naming_its_verdicts_never_the_completion() -> None:
    unjudged = result(None, math=(None, "gold_unparseable"), format=(1.0, "ok"))
    with pytest.raises(VerifierUnjudgedError, match="math: gold_unparseable") as raised:
        Outcome.of(unjudged, on_unjudged=None)
    assert raised.value.verdicts == {"math": "gold_unparseable"}
    assert "format" not in str(raised.value) and "private reasoning" not in str(raised.value)


def test_a_fallback_is_flagged_and_the_keys_never_change() -> None:
    judged = Outcome.of(result(1.5, math=(1.0, "correct"), format=(0.5, "ok")), on_unjudged=None).extra()
    fallback = Outcome.of(result(None, math=(None, "gold_unparseable")), on_unjudged=-1.0).extra()
    assert judged == {"score": 1.5, "acc": 1.0, "verifier_judged": 1.0}
    assert fallback == {"score": -1.0, "acc": -1.0, "verifier_judged": 0.0}
    assert tuple(judged) == tuple(fallback) == EXTRA_KEYS


@pytest.mark.parametrize(
    ("query", "prompt", "completion"),
    [
        ("<|im_start|>user\nq<|im_end|>\n<|im_start|>assistant\n#### 4<|im_end|>",
         "<|im_start|>user\nq<|im_end|>\n<|im_start|>assistant\n", "#### 4"),
        ("[INST] q [/INST] 4</s>", "[INST] q [/INST]", " 4"),
        ("<|start_header_id|>assistant<|end_header_id|>\n\n4<|eot_id|><|end_of_text|>",
         "<|start_header_id|>assistant<|end_header_id|>\n\n", "4"),
        ("...end of a long prompt: Answer:\n 5<|endoftext|>", "A" * 500 + "...end of a long prompt: Answer:\n", " 5"),
    ],
)  # fmt: skip
def test_openrlhf_queries_lose_their_prompt_and_end_tokens(query: str, prompt: str, completion: str) -> None:
    assert completion_of(query, prompt) == completion


def test_openrlhf_query_without_its_prompt_is_refused() -> None:
    with pytest.raises(ValueError, match="does not hold its prompt"):
        completion_of("something else entirely", "the prompt")


def test_the_adapters_import_no_trainer_and_no_heavy_package() -> None:
    heavy = ["torch", "ray", "verl", "openrlhf", "verifiers", "nemo_rl", "slime", "fastapi", "sympy", "math_verify"]
    modules = ["verl", "verifiers", "openrlhf_reward_func", "slime", "nemo_rl"]
    imports = "; ".join(f"import trainer_client.integrations.{name}" for name in modules)
    code = f"import json, sys; {imports}; print(json.dumps([m for m in {heavy!r} if m in sys.modules]))"
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert json.loads(out.stdout) == []


def test_verifier_errors_survive_pickling_as_ray_sends_them() -> None:
    import pickle

    from trainer_client import VerifierServerError

    for error in (
        VerifierUnjudgedError("math: gold_unparseable", verdicts={"math": "gold_unparseable"}),
        VerifierServerError("HTTP 503: busy", status_code=503, detail="busy"),
    ):
        copy = pickle.loads(pickle.dumps(error))
        assert (type(copy), copy.args, copy.__dict__) == (type(error), error.args, error.__dict__)


def test_the_adapters_address_variable_is_not_an_unknown_service_setting() -> None:
    """A trainer and a verifier may share an environment: the service must not warn about VERIFIER_URL."""
    from verifier_service.settings import unknown_settings

    assert unknown_settings({"VERIFIER_URL": "http://verifier:8088", "VERIFIER_APIKEY": "k"}) == {
        "VERIFIER_APIKEY": "VERIFIER_API_KEY"
    }


CHAT = [
    {"role": "user", "content": "6*7?"},
    {"role": "assistant", "reasoning_content": "6*7", "content": [{"type": "text", "text": "42"}]},
]


@pytest.mark.parametrize(
    ("ground_truth", "data_source", "spec"),
    [
        (72, None, {"math": {"gold": 72}}),
        (72.0, None, {"math": {"gold": 72.0}}),
        ({"math": {"gold": 72}}, None, {"math": {"gold": 72}}),
        ('{"math": {"gold": 72}}', None, {"math": {"gold": 72}}),
        (["assert f() == 72"], "mbpp", {"code": {"tests": ["assert f() == 72"]}}),
        (1, None, {"choice": {"gold": 1}}),
    ],
)
def test_the_adapters_read_a_sample_as_the_schema_does(ground_truth: Any, data_source: Any, spec: Any) -> None:
    """One normalisation (issue 23, point 4): what an adapter sends for a sample is what /v1/score makes of the
    sample's raw shapes, since both are the schema's validators (and the client's completion_text is the schema's)."""
    import trainer_client.inputs
    import verifier_service.schema

    assert trainer_client.inputs.completion_text is verifier_service.schema.completion_text
    options = {"components": ["choice"]} if "choice" in spec else {}
    item = build_item(CHAT, ground_truth, config(**options), data_source=data_source)
    raw = verifier_service.schema.ScoreItem.model_validate({"completion": CHAT, **spec})
    assert item == raw and item.completion == "<think>6*7</think>42"


def test_an_instruction_following_ground_truth_becomes_an_instructions_spec() -> None:
    """verl's, OpenRLHF's, slime's and NeMo-RL's ground truth of Tulu / IFEval rows; the spec is scored once the
    `instructions` component is in the schema (the item is built from it as from any spec): open-instruct's graded
    as open-instruct rewards it, the share followed."""
    from trainer_client.integrations.ground_truth import specs_from_ground_truth

    spec = {"instruction_ids": ["change_case:english_lowercase"], "kwargs": [None]}
    tulu = "[{'instruction_id': ['change_case:english_lowercase'], 'kwargs': [None]}]"
    assert specs_from_ground_truth(tulu, "math") == {"instructions": {**spec, "grading": "fraction"}}
    google = {"instruction_id_list": ["change_case:english_lowercase"], "kwargs": [{"unused": None}]}
    assert specs_from_ground_truth(json.dumps(google), "math") == {"instructions": {**spec, "kwargs": [{}]}}
    with pytest.raises(ValueError, match="Python-literal list") as error:
        specs_from_ground_truth("[{'instruction_id': ['a:b'], 'kwargs': [SECRET_NAME]}]", "math")
    assert "SECRET_NAME" not in str(error.value)
