"""The README's example is the one that works: run it, verbatim, against a real server."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT, Server


def test_readme_python_example(server: Server) -> None:
    readme = (ROOT / "README.md").read_text()
    examples = [block for block in re.findall(r"```python\n(.*?)```", readme, re.S) if "httpx.post" in block]
    assert len(examples) == 1
    code = examples[0].replace("http://127.0.0.1:8088", server.url)
    namespace: dict[str, object] = {}
    exec(compile(code, "README.md", "exec"), namespace)
    assert namespace["rewards"] == [2.0, 1.0]


def in_process_example() -> str:
    readme = (ROOT / "README.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", readme, re.S)
    [code] = [block for block in blocks if "from verifier_service import Verifier" in block]
    return code


def run_script(path: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("VERIFIER_")} | {"VERIFIER_MATH_WORKERS": "1"}
    return subprocess.run([sys.executable, str(path)], cwd=path.parent, env=env, capture_output=True, text=True,
                          timeout=120)  # fmt: skip


@pytest.mark.timeout(150)
def test_readme_in_process_example_runs_as_a_script(tmp_path: Path) -> None:
    """As a user saves it: a script of its own, whose main module the math workers import again."""
    script = tmp_path / "example.py"
    script.write_text(in_process_example())
    done = run_script(script)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.splitlines() == ["2.0 correct", "[2.0, 2.0, 2.0]"]


@pytest.mark.timeout(150)
def test_a_script_without_the_main_guard_is_told_what_to_do(tmp_path: Path) -> None:
    script = tmp_path / "unguarded.py"
    script.write_text("from verifier_service import score\n\nscore([{'completion': '4', 'math': {'gold': '4'}}])\n")
    done = run_script(script)
    assert done.returncode != 0
    assert "under `if __name__ == '__main__':`" in done.stderr


def test_readme_starts_with_the_two_commands() -> None:
    readme = (ROOT / "README.md").read_text()
    first_block = re.search(r"```bash\n(.*?)```", readme, re.S)
    assert first_block is not None
    commands = [line.split("#")[0].strip() for line in first_block.group(1).splitlines() if line.strip()]
    assert commands == ["docker compose up --build", "make test"]
    ci = (ROOT / ".ci" / "run").read_text()
    assert "make test" in ci
