"""The GRPO training script: argument parsing (flags and YAML), GSM8K preparation, and end-to-end runs on CPU."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.client.tiny_model import gsm8k_rows, mbpp_rows, write_jsonl
from tests.conftest import ROOT, Server, free_port, running_server
from trainer_client import AsyncVerifierReward, VerifierReward
from trainer_client.data import CODE_SYSTEM_PROMPT, Columns, load_prompts, to_row
from trainer_client.gsm8k import SYSTEM_PROMPT, gold_answer, load_gsm8k
from trainer_client.metrics import VERDICTS

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
    assert json.loads(first["tests"]) == [{"type": "assert", "code": test} for test in asserts]
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


def test_a_missing_column_names_the_flag(tmp_path: Path) -> None:
    data = write_jsonl(tmp_path / "mbpp.jsonl", mbpp_rows(1))
    with pytest.raises(ValueError, match=r"no column 'question' for the prompts.*--prompt_column"):
        load_prompts(str(data), components=["code"])
    with pytest.raises(ValueError, match=r"no column 'tests' for the tests.*'test_list'.*--tests_column"):
        load_prompts(str(data), columns=Columns("text"), components=["code"])


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
    assert [type(r) for r in rewards] == [VerifierReward, VerifierReward]
    assert [r.__name__ for r in rewards] == ["verifier_math", "verifier_format"]
    assert all(r.base_url == "http://verifier:8088" for r in rewards)


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
    assert reward.api_key == "from-env" and reward.spec.format_options.prefilled is True


@pytest.mark.filterwarnings(TRL_DEPRECATION)
def test_unknown_flags_and_config_keys_are_refused(tmp_path: Path) -> None:
    from trainer_client.train import make_parser

    with pytest.raises(ValueError, match="no_such_flag"):
        make_parser().parse_args_and_config(args=["--no_such_flag", "1", *CPU, "--output_dir", str(tmp_path)])
    config = tmp_path / "typo.yaml"
    config.write_text("verifer_url: http://verifier:8088\n")
    with pytest.raises(ValueError, match="verifer_url"):
        make_parser().parse_args_and_config(args=["--config", str(config), *CPU, "--output_dir", str(tmp_path)])


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


def run_train(argv: list[str], timeout: float, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    env = {**{k: v for k, v in os.environ.items() if k != "VERIFIER_API_KEY"}, **OFFLINE, **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "trainer_client.train", *argv],
        cwd=ROOT,
        env=env,
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
PREFLIGHT_VERDICTS = {"math": "correct", "format": "ok", "code": "passed"}


def train(server: Server, model: Path, tmp_path: Path, data: Path, *extra: str) -> tuple[list[dict[str, Any]], Path]:
    """Two GRPO steps of 4 completions (one prompt each) on CPU; the logged steps and the output directory."""
    out = tmp_path / "run"
    argv = [
        "--model_name_or_path", str(model),
        "--dataset_name", str(data),
        "--verifier_url", server.url,
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
    result = run_train(argv, timeout=600)
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
    # 2 steps x 2 reward functions, each one request with the step's 4 completions
    assert counters['verifier_requests_total{status="200"}'] == 4 + PREFLIGHT
    assert sum(v for k, v in counters.items() if k.startswith("verifier_items_total")) == 16 + PREFLIGHT
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
