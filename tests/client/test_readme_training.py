"""The README's TRL example trains as written: run verbatim against a real server, on CPU, with a tiny local model.

Only what names the outside world is replaced: the hub model id by the locally built tiny model, the verifier's
URL by the test server's, and the hub dataset id by a local GSM8K file. The example trains one epoch; the file has
two questions, so with GRPOConfig's defaults (8 completions per question, 8 per step) that is two steps.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pandas
import pytest

from tests.client.tiny_model import gsm8k_rows, write_jsonl
from tests.conftest import ROOT, Server
from trainer_client.metrics import VERDICTS

OFFLINE = {"HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
# Run after the example, to read what it did: the trainer's logged history.
EPILOGUE = '\nimport json\nprint("LOG_HISTORY=" + json.dumps(trainer.state.log_history))\n'


def trl_example() -> str:
    readme = (ROOT / "README.md").read_text()
    examples = [block for block in re.findall(r"```python\n(.*?)```", readme, re.S) if "GRPOTrainer(" in block]
    assert len(examples) == 1, "one TRL example in the README, the one this test runs"
    return examples[0]


def substitute(code: str, replacements: dict[str, str]) -> str:
    for old, new in replacements.items():
        assert old in code, f"the README example no longer contains {old}"
        code = code.replace(old, new)
    return code


def test_the_example_is_complete() -> None:
    code = trl_example()
    assert "dataset = " in code and "trainer.train()" in code
    assert "use_cpu=" in code and "bf16=" in code  # runs without a GPU as written


@pytest.mark.slow
def test_the_readme_trl_example_trains_as_written(server: Server, tiny_model: Path, tmp_path: Path) -> None:
    data = write_jsonl(tmp_path / "gsm8k.jsonl", gsm8k_rows(2, seed=5))
    code = substitute(
        trl_example(),
        {
            '"Qwen/Qwen2.5-0.5B-Instruct"': repr(str(tiny_model)),
            "http://127.0.0.1:8088": server.url,
            '"openai/gsm8k"': repr(str(data)),
        },
    )
    script = tmp_path / "readme_example.py"
    script.write_text(code + EPILOGUE)
    env = {k: v for k, v in os.environ.items() if k != "VERIFIER_API_KEY"}
    env |= OFFLINE | {"PYTHONPATH": str(ROOT), "HF_HOME": str(tmp_path / "hf_home")}
    result = subprocess.run(
        [sys.executable, str(script)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=280
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-6000:]
    [line] = [line for line in result.stdout.splitlines() if line.startswith("LOG_HISTORY=")]
    history = json.loads(line.removeprefix("LOG_HISTORY="))
    assert history[-1]["step"] == 2
    logged = {key: value for entry in history for key, value in entry.items()}
    for name in ("verifier_math", "verifier_format"):
        assert f"rewards/{name}/mean" in logged and logged[f"{name}/null_rate"] == 0.0
    # log_completions=True: TRL's completions table, with the verdict of each completion
    table = pandas.read_parquet(tmp_path / "runs" / "grpo" / "completions" / "completions_00002.parquet")
    assert len(table) == 8
    assert set(table["verifier_math/math"]) <= set(VERDICTS["math"])
    assert set(table["verifier_format/format"]) <= set(VERDICTS["format"])


def try_it_commands() -> str:
    readme = (ROOT / "README.md").read_text()
    [block] = [b for b in re.findall(r"```bash\n(.*?)```", readme, re.S) if "trainer_client.tiny_model" in b]
    return block


@pytest.mark.slow
def test_the_readme_cpu_try_out_runs_as_written(server: Server, tmp_path: Path) -> None:
    """The README's two commands, as a user types them in an empty directory: the `python` on the path, no hub, only
    the verifier's URL replaced by the test server's. They build the tiny model and train two steps, ending with the
    success line the README quotes."""
    commands = substitute(try_it_commands(), {"http://127.0.0.1:8088": server.url})
    env = {k: v for k, v in os.environ.items() if k != "VERIFIER_API_KEY"}
    env |= {"PATH": f"{Path(sys.executable).parent}:{env['PATH']}", "PYTHONPATH": str(ROOT),
            "HF_HOME": str(tmp_path / "hf_home")}  # fmt: skip
    result = subprocess.run(["bash", "-ec", commands], cwd=tmp_path, env=env, capture_output=True, text=True,
                            timeout=280)  # fmt: skip
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-6000:]
    last = result.stdout.strip().splitlines()[-1]
    assert last.startswith(f"done: 2 GRPO steps rewarded by the verifier at {server.url} (mean reward over the logged")
    assert last.endswith("the model and trainer_state.json are in runs/tiny-grpo")
    state = json.loads((tmp_path / "runs" / "tiny-grpo" / "trainer_state.json").read_text())
    steps = [entry for entry in state["log_history"] if "rewards/verifier_math/mean" in entry]
    assert [entry["step"] for entry in steps] == [1, 2]
    assert all(entry["verifier_math/null_rate"] == 0.0 for entry in steps)
    readme = (ROOT / "README.md").read_text()
    assert "It ends with `done: 2 GRPO steps rewarded by the verifier at http://127.0.0.1:8088" in readme


def readme_block_after(heading: str, fence: str) -> str:
    """The first ```fence block of the README section `heading`."""
    readme = (ROOT / "README.md").read_text()
    section = readme.split(f"### {heading}\n", 1)[1].split("\n### ", 1)[0]
    [block, *_] = [body for kind, body in re.findall(r"^```(\w*)\n(.*?)^```", section, re.S | re.M) if kind == fence]
    return str(block)


def test_the_readme_data_check_runs_as_written_without_a_gpu(server: Server, tmp_path: Path) -> None:
    """The README's `--check_data true` command, typed as it is (no --use_cpu, no --bf16 false, no model) on this
    CPU-only machine, against a GSM8K file like the one it describes, prints the README's report and exits 1. So does
    the README's GPU training command with --check_data true added (its `--bf16 true` and vLLM flags as they are)."""
    rows = [*gsm8k_rows(3, seed=2), {"question": "q", "answer": "#### \\frac"}, {"question": "q", "answer": None}]
    write_jsonl(tmp_path / "gsm8k.jsonl", [*rows, *gsm8k_rows(2, seed=3)])
    command = substitute(readme_block_after("Check a dataset before training", "bash"), {_URL: server.url})
    gpu_run = readme_block_after("GRPO on GSM8K, one GPU", "bash").split("\n\n", 1)[1].rstrip()
    gpu_run = substitute(gpu_run, {_URL: server.url, "openai/gsm8k": "gsm8k.jsonl"}) + " --check_data true"
    env = {k: v for k, v in os.environ.items() if k != "VERIFIER_API_KEY"}
    env |= OFFLINE | {"PATH": f"{Path(sys.executable).parent}:{env['PATH']}", "PYTHONPATH": str(ROOT),
                      "HF_HOME": str(tmp_path / "hf_home"), "CUDA_VISIBLE_DEVICES": ""}  # fmt: skip
    expected = readme_block_after("Check a dataset before training", "").strip().splitlines()
    for run in (command, gpu_run):
        result = subprocess.run(["bash", "-c", run], cwd=tmp_path, env=env, capture_output=True, text=True,
                                timeout=280)  # fmt: skip
        assert result.returncode == 1, result.stdout[-3000:] + result.stderr[-6000:]  # some gold cannot be used
        assert result.stdout.splitlines() == expected, result.stderr[-3000:]
    assert not (tmp_path / "runs").exists()  # nothing trained, nothing written


_URL = "http://127.0.0.1:8088"
