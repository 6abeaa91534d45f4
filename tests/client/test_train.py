"""The GRPO training script: argument parsing (flags and YAML), GSM8K preparation, and end-to-end runs on CPU."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from types import SimpleNamespace
from typing import Any, ClassVar

import httpx
import pytest

from tests.client.tiny_model import gsm8k_rows, mbpp_rows, write_jsonl
from tests.conftest import ROOT, Server, free_port, running_server
from trainer_client import AsyncVerifierReward
from trainer_client.data import (
    ANSWER_SYSTEM_PROMPT,
    CHOICE_SYSTEM_PROMPT,
    CODE_SYSTEM_PROMPT,
    Columns,
    load_prompts,
    to_row,
)
from trainer_client.gsm8k import SYSTEM_PROMPT, gold_answer, load_gsm8k
from trainer_client.inputs import code_spec
from trainer_client.metrics import VERDICTS
from trainer_client.reward_group import ComponentReward
from verifier_service.schema import COMPONENTS, PRIMARIES

# transformers 5 renamed gradient checkpointing; TRL 1.16's GRPOConfig still sets the old name.
TRL_DEPRECATION = "ignore:`gradient_checkpointing` is deprecated:FutureWarning"
OFFLINE = {"HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
CPU = ["--use_cpu", "true", "--bf16", "false"]  # GRPOConfig defaults to bf16, which needs a GPU


@pytest.fixture(autouse=True)
def offline(monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory) -> None:
    for key, value in OFFLINE.items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("HF_HOME", str(tmp_path_factory.getbasetemp() / "hf_home"))


# --------------------------------------------------------------------------- GSM8K


def test_gold_answer_comes_from_the_last_hash_line() -> None:
    assert gold_answer("a #### not this\n3 + 4 = 7\n#### 7") == "7"
    assert gold_answer("#### 1,234,567") == "1234567"
    assert gold_answer("#### -3.5 ") == "-3.5"
    with pytest.raises(ValueError, match="no '#### N' line"):
        gold_answer("The answer is 7.")


def test_prompts_ask_for_think_tags_and_a_final_answer() -> None:
    row = to_row(
        {"question": "How many?", "answer": "2+2=4\n#### 4"},
        columns=Columns(),
        components=["math", "format"],
        system_prompt=SYSTEM_PROMPT,
    )
    assert row["solution"] == "4"
    system, user = row["prompt"]
    assert system["role"] == "system" and "<think>" in system["content"] and "</think>" in system["content"]
    assert user == {"role": "user", "content": "How many?"}


def test_a_local_jsonl_file_loads_like_the_hub_dataset(tmp_path: Path) -> None:
    data = write_jsonl(tmp_path / "gsm.jsonl", gsm8k_rows(5, seed=3))
    dataset = load_gsm8k(str(data))
    assert dataset["train"].column_names == ["prompt", "solution"]
    first = gsm8k_rows(5, seed=3)[0]
    assert dataset["train"][0]["solution"] == gold_answer(first["answer"])
    assert dataset["train"][0]["prompt"][1]["content"] == first["question"]
    assert dataset["train"][0]["prompt"][0]["content"] == SYSTEM_PROMPT


# --------------------------------------------------------------------------- other shapes


def test_math_style_rows_keep_their_boxed_solution_as_the_gold(tmp_path: Path) -> None:
    rows = [{"problem": "What is $1+1$?", "solution": "We add: $1+1=\\boxed{2}$.", "level": "Level 1"}]
    dataset = load_prompts(str(write_jsonl(tmp_path / "math.jsonl", rows)), columns=Columns("problem", "solution"))
    [row] = dataset["train"]
    assert set(row) == {"prompt", "solution"}  # only what the rewards read
    assert row["solution"] == rows[0]["solution"]  # the verifier reads the boxed answer of a gold solution
    assert row["prompt"] == [
        {"role": "system", "content": SYSTEM_PROMPT},
        {"role": "user", "content": "What is $1+1$?"},
    ]


def test_a_chat_prompt_is_kept_and_a_bare_answer_is_the_gold(tmp_path: Path) -> None:
    chat = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "6*7?"}]
    rows = [{"prompt": chat, "final": 42}, {"prompt": chat, "final": None}]
    data = write_jsonl(tmp_path / "chat.jsonl", rows)
    dataset = load_prompts(str(data), columns=Columns(prompt="prompt", solution="final"), system_prompt="unused")
    assert dataset["train"]["prompt"] == [chat, chat]
    assert dataset["train"]["solution"] == ["42", None]  # a row without gold: the math reward skips it


def test_mbpp_rows_become_code_prompts_with_assert_tests(tmp_path: Path) -> None:
    rows = mbpp_rows(3)
    data = write_jsonl(tmp_path / "mbpp.jsonl", rows)
    dataset = load_prompts(str(data), columns=Columns("text", tests="test_list"), components=["code", "format"])
    first = dataset["train"][0]
    assert set(first) == {"prompt", "tests"}
    assert first["prompt"][0] == {"role": "system", "content": CODE_SYSTEM_PROMPT}
    assert "```python" in CODE_SYSTEM_PROMPT and "<think>" in CODE_SYSTEM_PROMPT
    asserts = rows[0]["test_list"]
    assert isinstance(asserts, list)
    assert json.loads(first["tests"]) == asserts  # kept as MBPP writes them: the schema reads each as an assert test
    spec = code_spec(first["tests"])
    assert spec is not None
    assert [test.model_dump(include={"type", "code"}) for test in spec.tests] == [
        {"type": "assert", "code": test} for test in asserts
    ]
    # MBPP's text names no function; its asserts do, so the prompt lists them (as MBPP's own prompt does)
    task = first["prompt"][1]["content"]
    assert task == f"{rows[0]['text']} Your code should pass these tests:\n" + "\n".join(asserts)
    plain = load_prompts(str(data), columns=Columns("text", tests="test_list"), components=["code"],
                         tests_in_prompt=False)  # fmt: skip
    assert plain["train"][0]["prompt"][1]["content"] == rows[0]["text"]


def test_humaneval_rows_are_converted_with_their_entry_point(tmp_path: Path) -> None:
    check = "\n\nMETADATA = {}\n\n\ndef check(candidate):\n    assert candidate(1) == 2\n"
    rows = [{"task_id": "HumanEval/0", "prompt": "def inc(x):\n    ", "test": check, "entry_point": "inc"}]
    data = write_jsonl(tmp_path / "humaneval.jsonl", rows)
    dataset = load_prompts(str(data), columns=Columns("prompt", tests="test"), components=["code"])
    [test] = json.loads(dataset["train"][0]["tests"])
    assert test == {"type": "assert", "code": check.rstrip() + "\n\ncheck(inc)\n"}


def test_a_humaneval_test_without_entry_point_is_a_clear_error(tmp_path: Path) -> None:
    rows = [{"prompt": "def inc(x):\n", "test": "def check(candidate):\n    assert candidate(1) == 2\n"}]
    data = write_jsonl(tmp_path / "humaneval.jsonl", rows)
    with pytest.raises(ValueError, match=r"column 'test' holds a string that is not JSON") as caught:
        load_prompts(str(data), columns=Columns("prompt", tests="test"), components=["code"])
    assert 'check(<entry_point>)"}]' in str(caught.value)


def test_mmlu_rows_become_choice_prompts_with_lettered_options(tmp_path: Path) -> None:
    rows = [
        {"question": "Which is a prime?", "choices": ["4", "7", "9"], "answer": 1},  # MMLU: a 0-based index
        {"question": "Pick the even ones.", "choices": ["2", "3", "4"], "answer": ["A", "C"]},
    ]
    data = write_jsonl(tmp_path / "mmlu.jsonl", rows[:1])
    dataset = load_prompts(str(data), columns=Columns(options="choices"), components=["choice", "format"])
    [row] = dataset["train"]
    assert set(row) == {"prompt", "solution", "options"}
    assert row["solution"] == "B" and row["options"] == ["4", "7", "9"]
    assert row["prompt"] == [
        {"role": "system", "content": CHOICE_SYSTEM_PROMPT},
        {"role": "user", "content": "Which is a prime?\n\nA. 4\nB. 7\nC. 9"},
    ]
    assert "\\boxed{" in CHOICE_SYSTEM_PROMPT and "letter" in CHOICE_SYSTEM_PROMPT
    multi = to_row(rows[1], columns=Columns(options="choices"), components=["choice"], system_prompt="",
                   options_in_prompt=False)  # fmt: skip
    assert multi["solution"] == ["A", "C"] and multi["prompt"] == [{"role": "user", "content": "Pick the even ones."}]
    # MMLU-Pro's letter, and no option texts when no column names them (the question lists them itself)
    bare = to_row({"question": "Q\nA. x\nB. y", "answer": "B"}, columns=Columns(), components=["choice"],
                  system_prompt="")  # fmt: skip
    assert bare == {"prompt": [{"role": "user", "content": "Q\nA. x\nB. y"}], "solution": "B"}


def test_short_answer_rows_keep_their_aliases(tmp_path: Path) -> None:
    rows = [
        {"question": "Capital of France?", "answer": ["Paris", "paris, France"]},
        {"question": "6*7?", "answer": 42},
    ]
    data = write_jsonl(tmp_path / "qa.jsonl", rows[:1])
    [row] = load_prompts(str(data), components=["answer"])["train"]
    assert row["solution"] == ["Paris", "paris, France"] and row["prompt"][0]["content"] == ANSWER_SYSTEM_PROMPT
    assert "<answer>" in ANSWER_SYSTEM_PROMPT
    assert to_row(rows[1], columns=Columns(), components=["answer"], system_prompt="")["solution"] == "42"


def test_a_row_with_no_gold_at_all_names_its_column_and_row(tmp_path: Path) -> None:
    """A boolean is no gold (an infinity neither): the preparation stops there, saying where, not what."""
    rows = [{"question": "Q", "answer": "Paris"}, {"question": "Q", "answer": True}]
    with pytest.raises(ValueError, match=r"^dataset column 'answer', row 1: a gold answer must be a string or a nu"):
        load_prompts(str(write_jsonl(tmp_path / "qa.jsonl", rows)), components=["answer"])
    # a NaN (how pandas marks a missing number) is no gold: the row is skipped, as one with None
    assert to_row({"question": "Q", "answer": float("nan")}, columns=Columns(), components=["math"],
                  system_prompt="")["solution"] is None  # fmt: skip


def test_a_data_check_counts_a_prepared_gold_no_component_reads_as_refused() -> None:
    """Rows prepared by hand (or by an older script) reach the check as they are: no traceback for them."""
    from trainer_client.data_check import check_golds

    check = check_golds(None, "choice", [{"solution": True}, {"solution": float("inf")}, {"solution": None}], {})  # type: ignore[arg-type]
    assert (check.refused, check.without, check.unusable) == ([0, 1], [2], 2)


def test_a_length_run_reads_the_gold_of_its_correctness_component(tmp_path: Path) -> None:
    data = write_jsonl(tmp_path / "gsm8k.jsonl", gsm8k_rows(2))
    # the length reward sends math with weight 0: train.py asks for the components the rewards send
    dataset = load_prompts(str(data), components=["length", "math"])
    assert dataset["train"].column_names == ["prompt", "solution"]
    assert dataset["train"][0]["prompt"][0]["content"] == SYSTEM_PROMPT


def test_a_missing_column_names_the_flag(tmp_path: Path) -> None:
    data = write_jsonl(tmp_path / "mbpp.jsonl", mbpp_rows(1))
    with pytest.raises(ValueError, match=r"no column 'question' for the prompts.*--prompt_column"):
        load_prompts(str(data), components=["code"])
    with pytest.raises(ValueError, match=r"no column 'tests' for the tests;.*'test_list'.*--tests_column"):
        load_prompts(str(data), columns=Columns("text"), components=["code"])
    questions = write_jsonl(tmp_path / "mmlu.jsonl", [{"question": "Q", "answer": 0, "choices": ["a", "b"]}])
    with pytest.raises(ValueError, match=r"no column 'options' for the options;.*--options_column"):
        load_prompts(str(questions), columns=Columns(options="options"), components=["choice"])


# --------------------------------------------------------------------------- arguments


@pytest.mark.filterwarnings(TRL_DEPRECATION)
def test_flags_and_a_yaml_config_parse_into_trl_configs(tmp_path: Path) -> None:
    from trainer_client.train import make_parser, reward_functions

    config = tmp_path / "run.yaml"
    config.write_text(
        "model_name_or_path: Qwen/Qwen2.5-0.5B-Instruct\n"
        "dataset_name: openai/gsm8k\n"
        "verifier_url: http://verifier:8088\n"
        "num_generations: 4\n"
        "max_steps: 7\n"
        "reward_components: [math, format]\n"
    )
    argv = ["--config", str(config), "--max_steps", "3", "--use_cpu", "true", "--bf16", "false"]
    argv += ["--report_to", "none", "--use_vllm", "false", "--output_dir", str(tmp_path / "out")]
    script, training, model = make_parser().parse_args_and_config(args=argv)
    assert model.model_name_or_path == "Qwen/Qwen2.5-0.5B-Instruct"
    assert script.verifier_url == "http://verifier:8088" and script.dataset_name == "openai/gsm8k"
    assert training.num_generations == 4 and training.max_steps == 3  # the command line wins over the file
    assert training.use_cpu is True and training.bf16 is False and training.use_vllm is False
    rewards = reward_functions(script)
    assert [type(r) for r in rewards] == [ComponentReward, ComponentReward]
    assert [r.__name__ for r in rewards] == ["verifier_math", "verifier_format"]
    assert all(r.group.scorer.base_url == "http://verifier:8088" for r in rewards)


@pytest.mark.filterwarnings(TRL_DEPRECATION)
def test_combined_async_rewards_and_an_api_key_from_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from trainer_client.train import make_parser, reward_functions

    monkeypatch.setenv("VERIFIER_API_KEY", "from-env")
    argv = ["--combined_reward", "true", "--async_rewards", "true", "--format_prefilled", "true"]
    script, _, _ = make_parser().parse_args_and_config(args=[*argv, *CPU, "--output_dir", str(tmp_path)])
    [reward] = reward_functions(script)
    assert isinstance(reward, AsyncVerifierReward) and reward.spec.components == ("math", "format")
    assert reward.api_key == "from-env" and reward.spec.options["format"] == {"prefilled": True}


@pytest.mark.filterwarnings(TRL_DEPRECATION)
def test_unknown_flags_and_config_keys_are_refused(tmp_path: Path) -> None:
    from trainer_client.train import make_parser

    with pytest.raises(ValueError, match="no_such_flag"):
        make_parser().parse_args_and_config(args=["--no_such_flag", "1", *CPU, "--output_dir", str(tmp_path)])
    config = tmp_path / "typo.yaml"
    config.write_text("verifer_url: http://verifier:8088\n")
    with pytest.raises(ValueError, match="verifer_url"):
        make_parser().parse_args_and_config(args=["--config", str(config), *CPU, "--output_dir", str(tmp_path)])


@pytest.mark.filterwarnings(TRL_DEPRECATION)
def test_a_data_check_validates_the_training_flags_as_for_a_cpu(tmp_path: Path) -> None:
    """--check_data, on the command line or in --config, trains nothing: the device flags are set for a CPU, whatever
    the command says (a GPU run's --bf16 true would stop a CPU-only machine first); a run keeps them as given."""
    from trl import GRPOConfig

    from trainer_client.train import parse_arguments

    config = tmp_path / "run.yaml"
    config.write_text("check_data: true\nbf16: true\nmax_completion_length: 64\n")
    for argv in (["--check_data", "true", "--bf16", "true", "--tf32", "true"], ["--config", str(config)]):
        script, training, _ = parse_arguments([*argv, "--output_dir", str(tmp_path)])
        assert script.check_data and (training.use_cpu, training.bf16, training.fp16, training.tf32) == (
            True, False, False, None
        )  # fmt: skip
    assert training.max_completion_length == 64  # the rest as given
    script, training, _ = parse_arguments([*CPU, "--max_steps", "3", "--output_dir", str(tmp_path)])
    assert not script.check_data and type(training) is GRPOConfig and training.max_steps == 3


HEAVY = ("torch", "trl", "transformers", "datasets")
# `python -m trainer_client.train --help`, then which heavy modules the process had loaded
HELP_AND_MODULES = (
    "import runpy, sys\n"
    "try:\n"
    "    runpy.run_module('trainer_client.train', run_name='__main__', alter_sys=True)\n"
    "finally:\n"
    f"    print('LOADED', [m for m in {HEAVY!r} if m in sys.modules])\n"
)


def test_help_lists_the_scripts_own_flags_first_grouped_without_loading_trl_or_torch() -> None:
    from dataclasses import fields

    from trainer_client.train import HELP_GROUPS, TRL_FLAGS, VerifierScriptArguments

    done = subprocess.run([sys.executable, "-c", HELP_AND_MODULES, "--help"], cwd=ROOT, env=train_env(None),
                          capture_output=True, text=True, timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    out = done.stdout
    assert out.splitlines()[-1] == "LOADED []"  # the parsing that --help needs imports none of them
    assert out.startswith("usage: python -m trainer_client.train --model_name_or_path MODEL --output_dir DIR")
    ours = [f.name for f in fields(VerifierScriptArguments)]
    at = {name: out.index(f"  --{name} ") for name in [*ours, *TRL_FLAGS]}  # each flag is listed with its help
    titles = [out.index(f"\n{title}:\n") for title in HELP_GROUPS]
    assert titles == sorted(titles) and max(at[name] for name in ours) < min(at[name] for name in TRL_FLAGS)
    assert "--help-all" in out and len(out.splitlines()) < 200


def test_every_flag_of_the_script_is_in_one_help_group() -> None:
    from dataclasses import fields

    from trainer_client.train import HELP_GROUPS, VerifierScriptArguments

    grouped = [name for names in HELP_GROUPS.values() for name in names]
    assert sorted(grouped) == sorted(f.name for f in fields(VerifierScriptArguments))


@pytest.mark.filterwarnings(TRL_DEPRECATION)
def test_help_all_is_trls_whole_parser_and_lists_the_flags_the_short_help_names(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from trainer_client.train import TRL_FLAGS, cli, make_parser

    known = {action.dest for action in make_parser()._actions}
    assert set(TRL_FLAGS) <= known  # the short help names TRL flags that exist
    cli(["--help-all"])
    out = capsys.readouterr().out
    assert "--verifier_url" in out and "--gradient_checkpointing" in out and "--vllm_mode" in out
    assert len(out.splitlines()) > 500  # all of TRL's


def parse(tmp_path: Path, *argv: str) -> tuple[Any, Any]:
    from trainer_client.train import make_parser

    script, training, _ = make_parser().parse_args_and_config(args=[*argv, *CPU, "--output_dir", str(tmp_path)])
    return script, training


@pytest.mark.filterwarnings(TRL_DEPRECATION)
def test_every_component_is_a_reward_and_the_cap_is_max_tokens(tmp_path: Path) -> None:
    from trainer_client.train import reward_functions

    components = ["math", "format", "overlong", "length", "repetition"]
    script, training = parse(tmp_path, "--reward_components", *components, "--max_completion_length", "96")
    rewards = reward_functions(script, training.max_completion_length)
    assert [r.__name__ for r in rewards] == [f"verifier_{name}" for name in components]
    [spec] = {id(r.spec): r.spec for r in rewards}.values()  # one group: one request per batch for all of them
    assert spec.options["overlong"] == {"max_tokens": 96} and "repetition" not in spec.options
    assert spec.options["length"] == {"max_tokens": 96, "correct_from": "math"} and "format" not in spec.options
    assert spec.sent == tuple(components) and spec.item_weights is None
    for name in ("choice", "answer", "code"):  # each correctness component may be what length reads
        script, training = parse(tmp_path, "--reward_components", "length", name, "--max_completion_length", "8")
        [length, _] = reward_functions(script, training.max_completion_length)
        assert length.spec.sent == ("length", name) and length.spec.options["length"]["correct_from"] == name
    script, training = parse(tmp_path, "--reward_components", "format", "length", "--max_completion_length", "8")
    assert reward_functions(script, 8)[0].spec.item_weights == {"math": 0.0}  # read, not rewarded
    with pytest.raises(ValueError, match="overlong needs --max_completion_length"):
        reward_functions(parse(tmp_path, "--reward_components", "overlong")[0], None)
    with pytest.raises(ValueError, match="names a component twice: math math"):
        reward_functions(parse(tmp_path, "--reward_components", "math", "math")[0], None)


@pytest.mark.filterwarnings(TRL_DEPRECATION)
def test_the_order_guard_sees_the_reward_weights_and_can_be_told_not_to(tmp_path: Path) -> None:
    from trainer_client.train import reward_functions

    target = ["--reward_options", '{"length": {"mode": "target", "target_tokens": 30}}']
    script, _training = parse(
        tmp_path, "--reward_components", "math", "length", "--max_completion_length", "64", *target
    )
    reward_functions(script, 64)  # math at weight 1 outweighs a length that pays a wrong answer as much as a right one
    with pytest.raises(ValueError, match="wrong answer scores at least as much"):
        reward_functions(script, 64, [0.0, 1.0])
    script.allow_order_inversion = True
    assert reward_functions(script, 64, [0.0, 1.0])[1].spec.allow_order_inversion is True


@pytest.mark.filterwarnings(TRL_DEPRECATION)
def test_reward_options_win_over_the_scripts_own_settings(tmp_path: Path) -> None:
    from trainer_client.train import reward_functions

    script, _ = parse(tmp_path, "--reward_components", "math", "format", "--format_prefilled", "true")
    assert reward_functions(script)[1].spec.options["format"] == {"prefilled": True}
    script.reward_options = '{"format": {"prefilled": false, "tag": "reasoning"}}'
    assert reward_functions(script)[1].spec.options["format"] == {"prefilled": False, "tag": "reasoning"}


@pytest.mark.filterwarnings(TRL_DEPRECATION)
def test_reward_options_from_flags_and_yaml_win_and_a_typo_fails(tmp_path: Path) -> None:
    from trainer_client.train import reward_functions

    options = '{"overlong": {"buffer_tokens": 16}, "length": {"correct_from": "answer"}, "answer": {"match": "f1"}}'
    script, training = parse(tmp_path, "--reward_components", "overlong", "length", "--reward_options", options)
    overlong, length = reward_functions(script, training.max_completion_length)
    assert overlong.spec.options["overlong"] == {"max_tokens": training.max_completion_length, "buffer_tokens": 16}
    assert length.spec.sent == ("overlong", "length", "answer") and length.spec.options["answer"] == {"match": "f1"}
    config = tmp_path / "run.yaml"
    config.write_text("reward_components: [repetition]\nreward_options:\n  repetition:\n    n: 5\n")
    [repetition] = reward_functions(parse(tmp_path, "--config", str(config))[0])
    assert repetition.spec.options == {"repetition": {"n": 5}}
    failures = {
        '{"repetition": {"size": 5}}': "unknown option 'size' for repetition; allowed: n, max_penalty",
        '{"overlong": {"n": 5}}': "names components this run does not reward: overlong",
        '["n", 5]': "must be a JSON object of objects",
    }
    for bad, message in failures.items():
        script, training = parse(tmp_path, "--reward_components", "repetition", "--reward_options", bad)
        with pytest.raises(ValueError, match=re.escape(message)):
            reward_functions(script, training.max_completion_length)


@pytest.mark.filterwarnings(TRL_DEPRECATION)
def test_a_combined_reward_holds_every_component_and_passes_the_order_guard(tmp_path: Path) -> None:
    from trainer_client.train import reward_functions

    for components, sent, weights in [
        (["math", "format", "overlong", "length", "repetition"], None, None),
        (["format", "length"], ("format", "length", "math"), {"math": 0.0}),
        (["choice", "length"], None, None),
    ]:
        script, training = parse(tmp_path, "--combined_reward", "true", "--reward_components", *components)
        [reward] = reward_functions(script, training.max_completion_length)
        assert reward.__name__ == "verifier" and reward.spec.components == tuple(components)
        assert reward.spec.sent == (sent or tuple(components)) and reward.spec.item_weights == weights


@pytest.mark.filterwarnings(TRL_DEPRECATION)
def test_the_pre_flight_item_asks_for_what_the_rewards_send_with_their_options(tmp_path: Path) -> None:
    from trainer_client.train import check_item, reward_functions

    runs = [*([name] for name in COMPONENTS), list(COMPONENTS), ["format", "length"], ["code", "length"]]
    for components in runs:
        script, _training = parse(tmp_path, "--reward_components", *components, "--max_completion_length", "64")
        options: dict[str, Any] = {"repetition": {"n": 4}} if "repetition" in components else {}
        models = [name for name in ("rm", "prm") if name in components]
        for name in models:  # the model is the run's choice, not the rows'; beside a rule it needs the inversion
            options[name] = {"model": "helpful"}
            script.allow_order_inversion = len(components) > 1
        if "judge" in components:  # the judge too (the gold is the rows')
            options["judge"] = {"judge": "helpful"}
            script.allow_order_inversion = len(components) > 1
        script.reward_options = json.dumps(options) if options else None
        [item] = {id(r.spec): check_item(r) for r in reward_functions(script, 64)}.values()
        assert set(components) <= set(item.requested()), components
        assert item.completion_tokens is not None and item.truncated is False
        if "length" in components:
            assert item.length is not None and item.length.max_tokens == 64
            source = item.correctness_source(item.length)
            assert source == next((c for c in components if c in PRIMARIES), "math")
            assert (item.weights or {}).get(source, 1.0) == (1.0 if source in components else 0.0)
        if "overlong" in components:
            assert item.overlong is not None and item.overlong.max_tokens == 64
        if "repetition" in components:
            assert item.repetition is not None and item.repetition.n == 4  # the run's own options


@pytest.mark.filterwarnings(TRL_DEPRECATION)
def test_the_pre_flight_item_is_right_for_every_component(server: Server, tmp_path: Path) -> None:
    """The verifier answers it with the verdicts the end-to-end tests subtract (PREFLIGHT_VERDICTS)."""
    from trainer_client.client import VerifierClient
    from trainer_client.train import check_item, reward_functions

    # rm, prm, judge: this server serves no model and asks no judge (test_rm_api, test_prm_api, test_judge_api)
    components = [c for c in COMPONENTS if c not in ("code", "rm", "prm", "judge")]
    script, _ = parse(tmp_path, "--reward_components", *components, "--max_completion_length", "64")
    [item] = {id(r.spec): check_item(r) for r in reward_functions(script, 64)}.values()
    with VerifierClient(server.url) as client:
        [result] = client.score([item])
    verdicts = {name: part.verdict for name, part in result.components.items()}
    assert verdicts == {name: PREFLIGHT_VERDICTS[name] for name in components}
    assert result.status == "ok"


def test_stop_token_ids_are_the_trainers() -> None:
    from types import SimpleNamespace

    from trainer_client.tokens import stop_token_ids

    tokenizer = SimpleNamespace(eos_token_id=2, pad_token_id=0)
    assert stop_token_ids(SimpleNamespace(eos_token_ids=[2, 9], processing_class=tokenizer)) == ([2, 9], 0)
    processor = SimpleNamespace(tokenizer=tokenizer)  # a vision-language model's processor holds the tokenizer
    assert stop_token_ids(SimpleNamespace(eos_token_ids=[9], processing_class=processor)) == ([9], 0)
    assert stop_token_ids(SimpleNamespace(processing_class=tokenizer)) == ([2], 0)  # a TRL without eos_token_ids


class FakeTrainer:
    """Stands in for GRPOTrainer in `main`: records what it was given, and what the rewards know when training
    starts (the point where TRL first calls them)."""

    made: ClassVar[list[FakeTrainer]] = []

    def __init__(self, **kwargs: Any) -> None:
        self.kwargs = kwargs
        self.eos_token_ids = [2, 9]
        self.processing_class = type("Tok", (), {"eos_token_id": 2, "pad_token_id": 0})()
        self.stops_at_train: list[Any] = []
        self.state = SimpleNamespace(global_step=0, log_history=[])
        FakeTrainer.made.append(self)

    def train(self, resume_from_checkpoint: Any = None) -> None:
        self.stops_at_train = [reward.spec.stop for reward in self.kwargs["reward_funcs"]]

    def save_model(self, output_dir: str) -> None:
        pass

    def save_state(self) -> None:
        pass


@pytest.mark.filterwarnings(TRL_DEPRECATION)
def test_main_gives_the_rewards_the_trainers_token_ids_and_the_data_their_columns(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import trainer_client.train as train_module
    from trainer_client.tokens import StopTokens

    rows = [{"question": "Which is a prime?", "choices": ["4", "7"], "answer": 1}]
    data = write_jsonl(tmp_path / "mmlu.jsonl", rows)
    monkeypatch.setattr("trl.GRPOTrainer", FakeTrainer)  # main imports it once the arguments are parsed
    checked: list[Any] = []
    monkeypatch.setattr(train_module, "check_verifier", lambda args, rewards: checked.append(rewards))
    argv = ["--dataset_name", str(data), "--model_name_or_path", "m", "--options_column", "choices"]
    argv += ["--reward_components", "choice", "length", "overlong", "--max_completion_length", "48"]
    script, training, model = train_module.make_parser().parse_args_and_config(
        args=[*argv, *CPU, "--output_dir", str(tmp_path / "out")]
    )
    train_module.main(script, training, model)
    [trainer] = FakeTrainer.made
    FakeTrainer.made.clear()
    assert checked == [trainer.kwargs["reward_funcs"]]
    assert trainer.stops_at_train == [StopTokens((2, 9), 0)] * 3
    [row] = trainer.kwargs["train_dataset"]
    assert row["solution"] == "B" and row["options"] == ["4", "7"]
    assert row["prompt"][1]["content"] == "Which is a prime?\n\nA. 4\nB. 7"


@pytest.mark.filterwarnings(TRL_DEPRECATION)
def test_bad_reward_options_stop_the_script_before_it_waits_for_the_verifier(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import trainer_client.train as train_module

    monkeypatch.setattr(train_module, "check_verifier", lambda *args: pytest.fail("the verifier was checked"))
    script, training = parse(tmp_path, "--reward_components", "overlong", "--reward_options", '{"overlong": {"x": 1}}')
    with pytest.raises(SystemExit, match=r"^error: --reward_components / --reward_options: .*unknown option 'x'"):
        train_module.main(script, training, None)


@pytest.mark.filterwarnings(TRL_DEPRECATION)
def test_a_misspelled_component_stops_the_script_with_the_closest_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import trainer_client.train as train_module

    monkeypatch.setattr(train_module, "check_verifier", lambda *args: pytest.fail("the verifier was checked"))
    script, training = parse(tmp_path, "--reward_components", "maths", "format")
    message = r"^error: --reward_components / --reward_options: unknown component 'maths'; did you mean 'math'\?"
    with pytest.raises(SystemExit, match=message):
        train_module.main(script, training, None)


def test_check_data_maps_the_columns_and_counts_the_golds_the_verifier_cannot_parse(
    server: Server, tmp_path: Path
) -> None:
    """`--check_data true` on the training command: which column feeds what, how many gold answers the verifier
    cannot parse (row numbers, never their text), and a stop before the model loads (its path does not exist)."""
    rows = [*gsm8k_rows(3, seed=1), {"question": "q", "answer": "#### \\frac"}, {"question": "q", "answer": None}]
    rows += [{"question": "q", "answer": "So it is $\\boxed{\\frac{1}{2}}$."}, {"question": "q", "answer": "#### ((("}]
    data = write_jsonl(tmp_path / "rows.jsonl", rows)
    argv = ["--check_data", "true", "--dataset_name", str(data), "--verifier_url", server.url, "--model_name_or_path",
            str(tmp_path / "no-such-model"), *CPU, "--output_dir", str(tmp_path / "out")]  # fmt: skip
    result = run_train(argv, timeout=280)
    assert result.returncode == 1, result.stdout[-3000:] + result.stderr[-3000:]  # some golds cannot be used
    assert result.stdout.splitlines() == [
        f"data check of {data}, split train: 7 rows",
        "  prompt   <- column 'question' (a text gets the system prompt; a chat is kept as it is)",
        "  solution <- column 'answer', read as math's gold: a GSM8K solution's '#### N' number, else the text (a "
        "MATH solution's \\boxed{} counts)",
        "math gold answers: 4 of 7 rows usable",
        "  1 without a gold (the reward skips them): rows 4",
        "  2 with a gold the verifier cannot judge (gold_unparseable): rows 3, 6",
        "data check done: 2 of 7 rows have a gold answer or tests the verifier cannot use; nothing was trained",
    ]
    assert "Traceback" not in result.stderr and not (tmp_path / "out").exists()


def test_check_data_of_code_and_choice_rows(server: Server, tmp_path: Path) -> None:
    rows = [
        {"q": "Which is a prime?", "choices": ["4", "7"], "answer": 1, "tests": '["assert True"]'},
        {"q": "Pick one.", "choices": ["4", "7"], "answer": "E", "tests": None},  # E is not an option: bad_gold
        {"q": "Pick one.", "choices": ["4", "7"], "answer": "A", "tests": '[{"type": "stdio"}]'},  # no stdout
    ]
    data = write_jsonl(tmp_path / "rows.jsonl", rows)
    argv = ["--check_data", "true", "--dataset_name", str(data), "--verifier_url", server.url, "--prompt_column", "q",
            "--options_column", "choices", "--reward_components", "choice", "code", *CPU,
            "--output_dir", str(tmp_path / "out")]  # fmt: skip
    result = run_train(argv, timeout=280)
    out = result.stdout.splitlines()
    assert result.returncode == 1, result.stdout[-3000:] + result.stderr[-3000:]
    assert (
        "  options  <- column 'choices', the option texts" in out
        and "  tests    <- column 'tests', the code tests" in out
    )
    assert "  1 with a gold the verifier cannot judge (bad_gold): rows 1" in out
    assert "code tests: 1 of 3 rows usable" in out and "  1 without tests (the reward skips them): rows 1" in out
    assert out[-1].startswith("data check done: 2 of 3 rows have a gold answer or tests the verifier cannot use")


def test_a_dataset_the_script_cannot_prepare_is_one_error_line(server: Server, tmp_path: Path) -> None:
    data = write_jsonl(tmp_path / "rows.jsonl", [{"question": "Q", "answer": "A"}, {"question": "Q", "answer": False}])
    argv = ["--check_data", "true", "--dataset_name", str(data), "--verifier_url", server.url,
            "--reward_components", "choice", *CPU, "--output_dir", str(tmp_path / "out")]  # fmt: skip
    result = run_train(argv, timeout=280)
    assert result.returncode == 1 and "Traceback" not in result.stderr, result.stderr[-3000:]
    assert result.stderr.strip().splitlines()[-1] == (
        f"error: {data}: dataset column 'answer', row 1: a gold answer must be a string or a number (not a boolean)"
    )


def test_the_script_fails_fast_when_the_verifier_is_not_there(tmp_path: Path) -> None:
    # Default waiting settings: nothing listening ends the run after --verifier_connect_grace (20 s), well inside
    # this timeout; --verifier_ready_timeout (300 s) is for a verifier that answers but is still starting.
    url = f"http://127.0.0.1:{free_port()}"
    argv = ["--verifier_url", url, "--model_name_or_path", "/nonexistent", *CPU, "--output_dir", str(tmp_path)]
    result = run_train(argv, timeout=150)
    assert result.returncode == 1
    assert f"waiting for the verifier at {url}: nothing listening (ConnectError" in result.stderr  # progress
    last = result.stderr.strip().splitlines()[-2:]
    assert last[0].startswith(f"error: nothing is listening at {url}")
    assert "--verifier_url" in last[1] and "--verifier_connect_grace" in last[1]
    assert "Traceback" not in result.stderr


@pytest.mark.filterwarnings(TRL_DEPRECATION)
def test_the_api_key_is_checked_before_the_data_and_the_model_load(tmp_path: Path) -> None:
    data = write_jsonl(tmp_path / "gsm8k.jsonl", gsm8k_rows(4))
    argv = ["--model_name_or_path", str(tmp_path / "no-such-model"), "--dataset_name", str(data)]
    argv += [*CPU, "--output_dir", str(tmp_path / "out")]
    with running_server(tmp_path, api_key="right") as srv:
        without_key = run_train([*argv, "--verifier_url", srv.url], timeout=150)
        with_key = run_train([*argv, "--verifier_url", srv.url], timeout=300, env={"VERIFIER_API_KEY": "right"})
    assert without_key.returncode == 1
    assert without_key.stderr.strip().splitlines()[-1] == (
        f"error: the verifier at {srv.url} requires an API key (HTTP 401: missing or wrong API key (send "
        "'Authorization: Bearer <key>')): pass it with --verifier_api_key or set the VERIFIER_API_KEY environment "
        "variable"
    )
    assert "no-such-model" not in without_key.stderr  # it stopped before the model
    # with the key the check passes, and the same run gets as far as the model that is not there
    assert with_key.returncode != 0 and "verifier ready at" in with_key.stderr
    assert "no-such-model" in with_key.stderr and "API key" not in with_key.stderr


@pytest.mark.filterwarnings(TRL_DEPRECATION)
def test_a_code_run_against_a_verifier_without_code_stops_before_the_model_loads(tmp_path: Path) -> None:
    data = write_jsonl(tmp_path / "mbpp.jsonl", mbpp_rows(2))
    argv = ["--model_name_or_path", str(tmp_path / "no-such-model"), "--dataset_name", str(data), *MBPP_COLUMNS]
    argv += ["--reward_components", "code", "format", *CPU, "--output_dir", str(tmp_path / "out")]
    with running_server(tmp_path, code_enabled="false", math_workers=1) as srv:
        result = run_train([*argv, "--verifier_url", srv.url], timeout=150)
    assert result.returncode == 1
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith(f"error: the verifier at {srv.url} refuses what this run would ask of it")
    assert "--reward_components code format" in last and "VERIFIER_CODE_ENABLED=false" in last
    assert "no-such-model" not in result.stderr


# --------------------------------------------------------------------------- end to end on CPU


@pytest.fixture
def e2e_server(tmp_path: Path) -> Iterator[Server]:
    with running_server(tmp_path, math_timeout_s=3) as srv:
        yield srv


def train_env(env: dict[str, str] | None = None) -> dict[str, str]:
    return {**{k: v for k, v in os.environ.items() if k != "VERIFIER_API_KEY"}, **OFFLINE, **(env or {})}


def run_train(argv: list[str], timeout: float, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "trainer_client.train", *argv],
        cwd=ROOT,
        env=train_env(env),
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def server_counters(server: Server) -> dict[str, float]:
    """The server's Prometheus counters, by sample name with labels."""
    counters = {}
    for line in httpx.get(f"{server.url}/metrics", timeout=10).text.splitlines():
        match = re.fullmatch(r"(verifier_(?:requests|items|verdicts)_total(?:\{.*\})?) (\S+)", line)
        if match:
            counters[match[1]] = float(match[2])
    return counters


def verdict_counts(counters: dict[str, float], component: str) -> dict[str, float]:
    """How many items of `component` got each verdict, by the server's count."""
    return {
        re.search(r'verdict="([^"]+)"', key)[1]: value  # type: ignore[index]
        for key, value in counters.items()
        if key.startswith("verifier_verdicts_total") and f'component="{component}"' in key
    }


# Before it loads anything the script scores one item with every rewarded component, which it answers right: one
# request, one item, and for each component one verdict more on the server's counters than the training steps sent.
PREFLIGHT = 1
PREFLIGHT_VERDICTS = {
    "math": "correct",
    "format": "ok",
    "code": "passed",
    "choice": "correct",
    "answer": "correct",
    "procedural": "correct",  # basic_arithmetic, answer 1: the box holds it
    "instructions": "followed",  # its pre-flight instruction is no_comma
    "overlong": "within_budget",
    "length": "correct",
    "repetition": "no_repetition",  # no trigram repeated
    "sql": "match",  # SELECT 1 against the placeholder gold SELECT 1
    "json_schema": "valid",  # 1 under {"type": "integer"}
    "language": "consistent",  # the reasoning's five English words, target en
    "steps": "no_steps",  # no arithmetic written: nothing to fault
}


def train_argv(url: str, model: Path, data: Path, out: Path, *extra: str) -> list[str]:
    """Two GRPO steps of 4 completions (one prompt each) on CPU, every step logged; `extra` flags win."""
    return [
        "--model_name_or_path", str(model),
        "--dataset_name", str(data),
        "--verifier_url", url,
        "--output_dir", str(out),
        "--max_steps", "2",
        "--per_device_train_batch_size", "4",
        "--num_generations", "4",
        "--max_completion_length", "24",
        "--logging_steps", "1",
        "--save_strategy", "no",
        "--report_to", "none",
        *CPU,
        "--seed", "0",
        *extra,
    ]  # fmt: skip


def train(server: Server, model: Path, tmp_path: Path, data: Path, *extra: str) -> tuple[list[dict[str, Any]], Path]:
    """Two GRPO steps of 4 completions (one prompt each) on CPU; the logged steps and the output directory."""
    out = tmp_path / "run"
    result = run_train(train_argv(server.url, model, data, out, *extra), timeout=600)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-6000:]
    assert "verifier ready at" in result.stderr
    assert (out / "model.safetensors").is_file()
    state = json.loads((out / "trainer_state.json").read_text())
    steps = [entry for entry in state["log_history"] if "loss" in entry]
    assert [entry["step"] for entry in steps] == [1, 2]
    return steps, out


def train_and_read_logs(server: Server, model: Path, tmp_path: Path, *extra: str) -> list[dict[str, Any]]:
    data = write_jsonl(tmp_path / "gsm8k.jsonl", gsm8k_rows(16, seed=7))
    return train(server, model, tmp_path, data, *extra)[0]


def assert_logged_rates_are_the_servers(
    steps: list[dict[str, Any]], counters: dict[str, float], name: str, component: str
) -> None:
    """The logged verdict rates are the server's verdicts: rate x 4 completions, summed over the steps, equals the
    server's count for every verdict it gave (less the pre-flight item's)."""
    given = verdict_counts(counters, component)
    given[PREFLIGHT_VERDICTS[component]] -= PREFLIGHT
    given = {verdict: count for verdict, count in given.items() if count}
    assert sum(given.values()) == 8
    for verdict, count in given.items():
        assert sum(entry[f"{name}/{component}/{verdict}"] * 4 for entry in steps) == pytest.approx(count), verdict


@pytest.mark.slow
def test_grpo_trains_two_steps_on_cpu_scored_by_the_verifier(
    e2e_server: Server, tiny_model: Path, tmp_path: Path
) -> None:
    steps = train_and_read_logs(e2e_server, tiny_model, tmp_path)
    counters = server_counters(e2e_server)
    # 2 steps, one request each with the step's 4 completions, which both reward functions read
    assert counters['verifier_requests_total{status="200"}'] == 2 + PREFLIGHT
    assert sum(v for k, v in counters.items() if k.startswith("verifier_items_total")) == 8 + PREFLIGHT
    for entry in steps:
        for name in ("verifier_math", "verifier_format"):
            assert f"rewards/{name}/mean" in entry
            assert entry[f"{name}/null_rate"] == 0.0 and entry[f"{name}/unreachable_rate"] == 0.0
    assert_logged_rates_are_the_servers(steps, counters, "verifier_math", "math")
    assert_logged_rates_are_the_servers(steps, counters, "verifier_format", "format")
    # and the rewards TRL logged are the verifier's: a verdict other than correct/ok scores 0
    for entry in steps:
        assert entry["rewards/verifier_math/mean"] == pytest.approx(entry["verifier_math/math/correct"])
        assert entry["rewards/verifier_format/mean"] == pytest.approx(entry["verifier_format/format/ok"])
    # where each step's time went (trainer_client/timings.py): generation and the wait for the rewards are parts of
    # TRL's step_time, each step one generation batch
    for entry in steps:
        assert entry["timing/generation"] > 0 and entry["timing/rewards"] > 0, entry
        assert entry["timing/generation"] + entry["timing/rewards"] < entry["step_time"], entry
        assert "gpu/peak_memory_gib" not in entry  # on CPU


@pytest.mark.slow
def test_grpo_with_one_combined_async_reward(e2e_server: Server, tiny_model: Path, tmp_path: Path) -> None:
    steps = train_and_read_logs(
        e2e_server, tiny_model, tmp_path, "--combined_reward", "true", "--async_rewards", "true"
    )
    assert server_counters(e2e_server)['verifier_requests_total{status="200"}'] == 2 + PREFLIGHT  # one a step
    for entry in steps:
        assert "rewards/verifier/mean" in entry and entry["verifier/null_rate"] == 0.0
        assert "verifier/math/wrong" in entry and "verifier/format/ok" in entry


MBPP_COLUMNS = ("--prompt_column", "text", "--tests_column", "test_list")


@pytest.mark.slow
def test_grpo_on_mbpp_style_data_with_the_code_reward(e2e_server: Server, tiny_model: Path, tmp_path: Path) -> None:
    import pandas

    data = write_jsonl(tmp_path / "mbpp.jsonl", mbpp_rows(8))
    flags = ("--reward_components", "code", *MBPP_COLUMNS, "--log_completions", "true")
    steps, out = train(e2e_server, tiny_model, tmp_path, data, *flags)
    counters = server_counters(e2e_server)
    assert set(verdict_counts(counters, "code")) <= set(VERDICTS["code"])
    assert_logged_rates_are_the_servers(steps, counters, "verifier_code", "code")
    for entry in steps:
        assert "rewards/verifier_code/mean" in entry and entry["verifier_code/null_rate"] == 0.0
    # --log_completions: TRL's table of each logged step, with the verdict of every completion as a column
    tables = sorted((out / "completions").glob("completions_*.parquet"))
    assert [table.name for table in tables] == ["completions_00001.parquet", "completions_00002.parquet"]
    frame = pandas.read_parquet(tables[-1])
    assert len(frame) == 4 and set(frame["verifier_code/code"]) <= set(VERDICTS["code"])
    assert "verifier_code" in frame.columns and "Python programmer" in str(frame["prompt"][0])


@pytest.mark.slow
def test_grpo_with_code_and_format_rewards(e2e_server: Server, tiny_model: Path, tmp_path: Path) -> None:
    data = write_jsonl(tmp_path / "mbpp.jsonl", mbpp_rows(8))
    flags = ("--reward_components", "code", "format", *MBPP_COLUMNS)
    steps, _ = train(e2e_server, tiny_model, tmp_path, data, *flags)
    counters = server_counters(e2e_server)
    assert_logged_rates_are_the_servers(steps, counters, "verifier_code", "code")
    assert_logged_rates_are_the_servers(steps, counters, "verifier_format", "format")
    for entry in steps:
        assert "rewards/verifier_code/mean" in entry and "rewards/verifier_format/mean" in entry


@pytest.mark.slow
def test_grpo_with_the_length_shaping_rewards(e2e_server: Server, tiny_model_stopping: Path, tmp_path: Path) -> None:
    """overlong, length and repetition as their own reward functions, max_tokens from --max_completion_length
    (24), and the truncation TRL sees: the model stops at EOS ids its tokenizer does not know (its generation
    config's), so some completions end early and the others are cut off at the cap."""
    data = write_jsonl(tmp_path / "gsm8k.jsonl", gsm8k_rows(16, seed=7))
    flags = ("--reward_components", "math", "overlong", "length", "repetition")
    steps, _ = train(e2e_server, tiny_model_stopping, tmp_path, data, *flags)
    counters = server_counters(e2e_server)
    for name in ("overlong", "length", "repetition"):
        assert_logged_rates_are_the_servers(steps, counters, f"verifier_{name}", name)
        for entry in steps:
            assert f"rewards/verifier_{name}/mean" in entry and entry[f"verifier_{name}/null_rate"] == 0.0
    # math judged once per completion: the length reward reads the math result the accuracy reward returns
    assert sum(verdict_counts(counters, "math").values()) == 8 + PREFLIGHT
    assert counters['verifier_requests_total{status="200"}'] == 2 + PREFLIGHT
    # what TRL counts as clipped (the last id neither one of its EOS ids nor pad) is what the verifier was told
    clipped = sum(entry["completions/clipped_ratio"] * 4 for entry in steps)
    assert 0 < clipped < 8  # both kinds, or this test would not tell them apart
    overlong = verdict_counts(counters, "overlong")
    assert overlong.get("truncated", 0) == pytest.approx(clipped)
    assert sum(overlong.values()) - overlong.get("truncated", 0) == 8 - clipped + PREFLIGHT  # judged by length


def mmlu_rows(count: int) -> list[dict[str, Any]]:
    """MMLU-shaped rows: a question, its options in `choices`, the right one's 0-based index in `answer`."""
    return [
        {"question": f"Which number is {n} + 1?", "choices": [str(n), str(n + 1), str(n + 2)], "answer": 1}
        for n in range(count)
    ]


@pytest.mark.slow
def test_grpo_on_mmlu_style_data_with_the_choice_reward(e2e_server: Server, tiny_model: Path, tmp_path: Path) -> None:
    data = write_jsonl(tmp_path / "mmlu.jsonl", mmlu_rows(8))
    flags = ("--reward_components", "choice", "length", "--options_column", "choices", "--log_completions", "true")
    steps, out = train(e2e_server, tiny_model, tmp_path, data, *flags)
    counters = server_counters(e2e_server)
    assert_logged_rates_are_the_servers(steps, counters, "verifier_length", "length")
    # the length reward reads correctness from choice, in the same item: each completion's choice judged once,
    # and math never
    choice = verdict_counts(counters, "choice")
    choice[PREFLIGHT_VERDICTS["choice"]] -= PREFLIGHT
    assert sum(choice.values()) == 8 and not verdict_counts(counters, "math")
    for verdict, count in choice.items():
        assert sum(entry[f"verifier_choice/choice/{verdict}"] * 4 for entry in steps) == pytest.approx(count)
    import pandas

    frame = pandas.read_parquet(sorted((out / "completions").glob("completions_*.parquet"))[-1])
    assert set(frame["verifier_choice/choice"]) <= set(VERDICTS["choice"])
    assert all("B. " in str(prompt) and "C. " in str(prompt) for prompt in frame["prompt"])  # the options listed


# --------------------------------------------------------------------------- outages during training


@contextmanager
def training_in_background(argv: list[str], log: Path) -> Iterator[subprocess.Popen[bytes]]:
    """The training script running while the test acts on the verifier; its output goes to `log` as it comes."""
    with log.open("wb") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "trainer_client.train", *argv], cwd=ROOT, env=train_env(), stdout=out, stderr=out
        )
    try:
        yield process
    finally:
        if process.poll() is None:  # the test failed while it ran
            process.kill()
            process.wait()


def wait_until(condition: Callable[[], bool], process: subprocess.Popen[bytes], log: Path, what: str) -> None:
    """Poll `condition` while the training runs; fail if it ends first or takes two minutes."""
    deadline = time.monotonic() + 120
    while not condition():
        if process.poll() is not None or time.monotonic() > deadline:
            pytest.fail(f"training never {what}:\n{log.read_text(errors='replace')[-6000:]}")
        time.sleep(0.05)


# The training starts with the server; it waits for it (the script's pre-flight), longer than its usual 20 s on a
# busy machine.
GRACE = ("--verifier_connect_grace", "60")


def scored_batches(server: Server) -> float:
    return server_counters(server).get('verifier_requests_total{status="200"}', 0)


def logged_steps(state_file: Path) -> list[dict[str, Any]]:
    return [entry for entry in json.loads(state_file.read_text())["log_history"] if "loss" in entry]


@pytest.mark.slow
def test_a_verifier_gone_for_good_stops_the_run_with_a_checkpoint_that_resumes(
    tiny_model: Path, tmp_path: Path
) -> None:
    data = write_jsonl(tmp_path / "gsm8k.jsonl", gsm8k_rows(16, seed=7))
    out, log, port = tmp_path / "run", tmp_path / "train.log", free_port()
    # 40 steps: a tiny model's steps take tens of ms, so several run while the server stops; the two failed calls in a
    # row must come before the last step (with 6, a CI run once had only steps 5 and 6 left: it finished, exit 0)
    steps_asked = 40
    flags = ("--max_steps", str(steps_asked), "--max_consecutive_failures", "2", *GRACE)
    with training_in_background(train_argv(f"http://127.0.0.1:{port}", tiny_model, data, out, *flags), log) as run:
        with running_server(tmp_path, port=port, math_timeout_s=3) as srv:
            wait_until(lambda: scored_batches(srv) >= PREFLIGHT + 2, run, log, "scored two steps")
        code = run.wait(timeout=300)  # the verifier is gone for good
    output = log.read_text(errors="replace")
    assert code == 1, output[-6000:]
    messages = [line for line in output.splitlines() if line.startswith("error: training stopped")]
    assert len(messages) == 1, output[-6000:]
    message = messages[0]
    match = re.match(
        rf"error: training stopped after step (\d+) of {steps_asked}: the verifier gave no rewards \(", message
    )
    assert match, message
    step = int(match[1])
    checkpoint = out / f"checkpoint-{step}"
    assert "2 reward calls in a row got no reward" in message
    assert f"saved in {checkpoint};" in message and f"--resume_from_checkpoint {checkpoint} " in message
    assert [path.name for path in out.iterdir() if path.name.startswith("checkpoint-")] == [checkpoint.name]
    for name in ("model.safetensors", "optimizer.pt", "scheduler.pt", "rng_state.pth", "trainer_state.json"):
        assert (checkpoint / name).is_file(), name
    state = json.loads((checkpoint / "trainer_state.json").read_text())
    steps = logged_steps(checkpoint / "trainer_state.json")
    assert state["global_step"] == step == len(steps) and 2 < step < steps_asked
    assert [entry["step"] for entry in steps] == list(range(1, step + 1))
    # the first failed call gave None rewards and its step went on; the second in a row stopped the run
    assert steps[-1]["verifier_math/unreachable_rate"] == 1.0
    assert all(entry["verifier_math/unreachable_rate"] == 0.0 for entry in steps[:-1])

    with running_server(tmp_path, math_timeout_s=3) as srv:
        resumed = run_train([*train_argv(srv.url, tiny_model, data, out, *flags), "--resume_from_checkpoint",
                             str(checkpoint)], timeout=300)  # fmt: skip
        assert resumed.returncode == 0, resumed.stderr[-6000:]
        assert scored_batches(srv) == PREFLIGHT + steps_asked - step  # only the steps the checkpoint had not done
    final = logged_steps(out / "trainer_state.json")
    assert [entry["step"] for entry in final] == list(range(1, steps_asked + 1))
    assert final[:step] == steps  # the history carried over from the checkpoint
    assert all(entry["verifier_math/unreachable_rate"] == 0.0 for entry in final[step:])


@pytest.mark.slow
def test_a_verifier_restarted_mid_training_costs_rewards_not_the_run(tiny_model: Path, tmp_path: Path) -> None:
    data = write_jsonl(tmp_path / "gsm8k.jsonl", gsm8k_rows(16, seed=7))
    out, log, port = tmp_path / "run", tmp_path / "train.log", free_port()
    # 12 steps: the 10 after the two watched outlast the restart (each failed call retries for about 3 s)
    argv = train_argv(f"http://127.0.0.1:{port}", tiny_model, data, out, "--max_steps", "12", *GRACE)
    with training_in_background(argv, log) as run:
        with running_server(tmp_path, port=port, math_timeout_s=3) as srv:
            wait_until(lambda: scored_batches(srv) >= PREFLIGHT + 2, run, log, "scored two steps")
        # killed (the context stopped it); restarted once a reward call has found it gone
        wait_until(lambda: "no answer from the verifier" in log.read_text(errors="replace"), run, log, "missed it")
        with running_server(tmp_path, port=port, math_timeout_s=3) as srv:
            code = run.wait(timeout=300)
            after_restart = scored_batches(srv)
    assert code == 0, log.read_text(errors="replace")[-6000:]
    steps = logged_steps(out / "trainer_state.json")
    assert [entry["step"] for entry in steps] == list(range(1, 13))
    unreachable = [entry["verifier_math/unreachable_rate"] > 0 for entry in steps]
    first, last = unreachable.index(True), len(unreachable) - 1 - unreachable[::-1].index(True)
    assert first >= 2 and all(unreachable[first : last + 1])  # one outage, after the two steps watched
    for entry in steps[first : last + 1]:
        assert entry["verifier_math/null_rate"] == 1.0 and entry["verifier_format/unreachable_rate"] == 1.0
        assert entry["rewards/verifier_math/mean"] is None  # TRL's mean of no rewards: NaN, written as null
    # every step after it was scored by the restarted verifier, and rewarded again
    assert len(steps) - 1 - last == after_restart >= 1
    for entry in steps[last + 1 :]:
        assert entry["verifier_math/null_rate"] == 0.0 and entry["rewards/verifier_math/mean"] >= 0.0
