"""`reward-verifier serve`, `reward-verifier score FILE.jsonl` and the in-process `score()`: the console script as pip
installed it, real math workers and a real sandbox."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import Server, free_port, wait_ready
from verifier_service import AsyncVerifier, Verifier, score
from verifier_service.schema import MathSpec, ScoreItem
from verifier_service.settings import VerifierSettings

CLI = Path(sys.executable).with_name("reward-verifier")
ENV = {k: v for k, v in os.environ.items() if not k.startswith("VERIFIER_")} | {"VERIFIER_MATH_WORKERS": "1"}
ADD = "<think>add</think>```python\ndef add(a, b):\n    return a + b\n```"
ITEMS: list[Any] = [
    {"id": "right", "completion": "<think>6*7</think>The answer is 42.", "math": {"gold": "42"}, "format": {}},
    {"id": "wrong", "completion": "It is 41.", "math": {"gold": "42"}},
    "",
    {"id": "bad", "completion": "x", "math": {"gold": "1"}, "maths": {"gold": "s3cret"}},
    "{not json",
    {
        "id": "code",
        "completion": ADD,
        "code": {"tests": [{"type": "call", "fn": "add", "args": [1, 2], "expected": 3}]},
    },
]


def write_items(path: Path) -> Path:
    path.write_text("".join((json.dumps(i) if isinstance(i, dict) else i) + "\n" for i in ITEMS))
    return path


def test_the_console_script_is_installed() -> None:
    assert CLI.is_file(), "pip install -e . installs reward-verifier next to python"
    done = subprocess.run([str(CLI), "--help"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and "serve" in done.stdout and "score" in done.stdout


@pytest.mark.timeout(180)
def test_score_a_file_in_order_with_a_summary(tmp_path: Path) -> None:
    out = tmp_path / "results.jsonl"
    done = subprocess.run(
        [str(CLI), "score", str(write_items(tmp_path / "items.jsonl")), "-o", str(out)],
        capture_output=True, text=True, timeout=150, env=ENV,
    )  # fmt: skip
    assert done.returncode == 1, done.stderr  # two lines were not items
    results = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["id"] for r in results] == ["right", "wrong", "bad", None, "code"]  # the blank line gives none
    assert [r["reward"] for r in results] == [2.0, 0.0, None, None, 1.0]
    assert results[0]["components"]["math"]["verdict"] == "correct"
    assert results[4]["components"]["code"]["tests"] == [{"verdict": "passed", "detail": None}]
    assert results[2]["error"] == "line 4: unknown field 'maths'; did you mean 'math'?"
    assert results[3]["error"].startswith("line 5: Invalid JSON")
    assert "s3cret" not in out.read_text() + done.stderr
    assert "5/5 items" in done.stderr
    assert "5 items: 3 ok, 2 error (2 invalid lines); mean reward 1" in done.stderr
    assert "math: correct 1, wrong 1" in done.stderr and "code: passed 1" in done.stderr


@pytest.mark.timeout(180)
def test_score_reads_stdin_and_writes_stdout_and_honours_settings(tmp_path: Path) -> None:
    lines = write_items(tmp_path / "items.jsonl").read_text()
    env = ENV | {"VERIFIER_CODE_ENABLED": "false"}
    done = subprocess.run(
        [str(CLI), "score", "-", "-q"], input=lines, capture_output=True, text=True, timeout=150, env=env
    )
    results = [json.loads(line) for line in done.stdout.splitlines()]
    assert len(results) == 5 and results[4]["id"] == "code" and results[4]["status"] == "error"
    assert "VERIFIER_CODE_ENABLED=false" in results[4]["error"]
    assert "items," not in done.stderr  # -q: no progress line


@pytest.mark.timeout(180)
def test_score_reads_a_pipe_once_and_survives_a_line_that_is_not_utf8(tmp_path: Path) -> None:
    items = write_items(tmp_path / "items.jsonl")
    items.write_bytes(items.read_bytes() + b'{"id": "latin", "completion": "caf\xe9", "format": {}}\n')
    done = subprocess.run(
        ["bash", "-c", f'"{CLI}" score <(cat "{items}") -q'], capture_output=True, text=True, timeout=150, env=ENV
    )  # a process substitution: a pipe that can be read only once
    results = [json.loads(line) for line in done.stdout.splitlines()]
    assert [r["id"] for r in results] == ["right", "wrong", "bad", None, "code", None], done.stderr
    assert results[0]["reward"] == 2.0 and results[4]["reward"] == 1.0
    assert results[5]["error"].startswith("line 7: Invalid JSON") and "Traceback" not in done.stderr
    assert done.returncode == 1


DEEP = "[" * 100_000 + "]" * 100_000  # nested past every JSON parser's recursion limit
NINES = "9" * 4_400  # past Python's 4,300-digit limit on int(str)


@pytest.mark.timeout(180)
def test_score_writes_an_error_line_for_a_line_it_cannot_handle_and_scores_the_rest(tmp_path: Path) -> None:
    """Whatever a line holds, it costs that line: a line nested 100,000 deep, degenerate numbers in an answer and in
    a gold answer. Each gets a line of its own in order (an error line where it cannot be scored), the right answers
    around them are scored, and the run ends with its summary, not a traceback."""
    lines = [
        json.dumps({"id": "first", "completion": "The answer is 4.", "math": {"gold": "4"}}),
        '{"id": ' + DEEP + ', "completion": "4", "math": {"gold": "4"}}',
        '{"id": "deep-completion", "completion": ' + DEEP + ', "math": {"gold": "4"}}',
        json.dumps({"id": "nines", "completion": f"#### {NINES} 1/2", "math": {"gold": "4"}}),
        json.dumps({"id": "boxed-nines", "completion": f"\\boxed{{{NINES} 1/2}}", "math": {"gold": "4"}}),
        json.dumps({"id": "gold-nines", "completion": "The answer is 4.", "math": {"gold": f"{NINES}/7"}}),
        json.dumps({"id": "last", "completion": "The answer is 5.", "math": {"gold": "5"}}),
    ]
    items = tmp_path / "items.jsonl"
    items.write_text("\n".join(lines) + "\n")
    out = tmp_path / "results.jsonl"
    env = ENV | {"VERIFIER_CODE_ENABLED": "false"}
    done = subprocess.run([str(CLI), "score", str(items), "-o", str(out), "-q"], capture_output=True, text=True,
                          timeout=150, env=env)  # fmt: skip
    assert "Traceback" not in done.stderr, done.stderr[-3000:]
    assert done.returncode == 1  # the deep lines are not items
    results = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["id"] for r in results] == [None if i in (1, 2) else json.loads(lines[i])["id"] for i in range(7)]
    assert (results[0]["reward"], results[-1]["reward"]) == (1.0, 1.0)
    assert results[1]["error"].startswith("line 2: Invalid JSON") and results[2]["error"].startswith("line 3:")
    # The huge numbers are scored, not error lines: an answer that long is too long (0), a gold that long is null.
    verdicts = [(r["status"], r["reward"], r["components"]["math"]["verdict"]) for r in results[3:6]]
    assert verdicts == [("ok", 0.0, "answer_too_long")] * 2 + [("error", None, "gold_unparseable")], verdicts
    assert NINES not in out.read_text() + done.stderr
    assert any(line.startswith("7 items: ") for line in done.stderr.splitlines())


def test_score_refuses_to_write_over_its_input(tmp_path: Path) -> None:
    items = write_items(tmp_path / "items.jsonl")
    before = items.read_bytes()
    done = subprocess.run([str(CLI), "score", str(items), "-o", str(items)], capture_output=True, text=True,
                          timeout=60, env=ENV)  # fmt: skip
    assert done.returncode != 0 and "is the input file" in done.stderr
    assert items.read_bytes() == before


@pytest.mark.timeout(120)
def test_serve_starts_the_service(tmp_path: Path) -> None:
    port = free_port()
    env = ENV | {"VERIFIER_CODE_ENABLED": "false"}
    with (tmp_path / "serve.log").open("wb") as log:
        process = subprocess.Popen([str(CLI), "serve", "--port", str(port)], env=env, stdout=log, stderr=log)
    try:
        wait_ready(Server(f"http://127.0.0.1:{port}", process, tmp_path / "serve.log"), timeout=60)
        body = {"items": [{"completion": "7", "math": {"gold": "7"}}]}
        assert httpx.post(f"http://127.0.0.1:{port}/v1/score", json=body).json()["results"][0]["reward"] == 1.0
    finally:
        process.terminate()
        process.wait(timeout=30)


def test_bad_settings_are_named_not_a_traceback() -> None:
    done = subprocess.run(
        [str(CLI), "serve"], capture_output=True, text=True, timeout=60, env=ENV | {"VERIFIER_PORT": "0"}
    )
    assert done.returncode != 0
    assert "reward-verifier: invalid settings: port:" in done.stderr and "Traceback" not in done.stderr


@pytest.mark.timeout(120)
def test_in_process_score_and_a_reusable_verifier() -> None:
    item = ScoreItem(completion="The answer is 4.", math=MathSpec(gold="4"))
    [result] = score([item], math_workers=1, code_enabled=False)
    assert result.reward == 1.0
    with Verifier(math_workers=1, code_enabled=False) as verifier:
        assert verifier.status()["status"] == "ready"
        first = verifier.score([{"completion": "\\boxed{\\frac{1}{2}}", "math": {"gold": "0.5"}}] * 3)
        second = verifier.score([item, {"completion": "<think>x</think>y", "format": {}}])
        assert [r.reward for r in first + second] == [1.0, 1.0, 1.0, 1.0, 1.0]
        with pytest.raises(ValueError, match=r"items\.1: unknown field 'formats'; did you mean 'format'\?") as refused:
            verifier.score([item, {"completion": "x", "format": {}, "formats": "s3cret"}])
        assert "s3cret" not in str(refused.value)
        with pytest.raises(ValueError, match=r"items\.0\.code: code scoring is off"):
            verifier.score([{"completion": "x", "code": {"tests": [{"type": "stdio", "stdout": ""}]}}])


@pytest.mark.timeout(120)
def test_the_async_verifier() -> None:
    async def main() -> list[Any]:
        async with AsyncVerifier(math_workers=1, code_enabled=False) as verifier:
            return await verifier.score([{"completion": "x = 3", "math": {"gold": "3"}}])

    [result] = asyncio.run(main())
    assert result.reward == 1.0


@pytest.mark.timeout(120)
def test_a_verifier_that_cannot_start_leaves_nothing_running(monkeypatch: pytest.MonkeyPatch) -> None:
    """The sandbox fails to start: the math workers already started are stopped, and the event loop thread ends."""
    from sandbox.local import LocalExecutor
    from verifier_service.pool import WorkerPool

    closed: list[WorkerPool] = []
    real_close = WorkerPool.close

    async def failing_start(self: LocalExecutor) -> None:
        raise RuntimeError("no sandbox today")

    async def spied_close(self: WorkerPool) -> None:
        closed.append(self)
        await real_close(self)

    monkeypatch.setattr(LocalExecutor, "start", failing_start)
    monkeypatch.setattr(WorkerPool, "close", spied_close)
    with pytest.raises(RuntimeError, match="no sandbox today"), Verifier(math_workers=1):
        pass
    assert len(closed) == 1 and closed[0].pids() == []
    assert not [t for t in threading.enumerate() if t.name == "verifier-loop"]
    with pytest.raises(TypeError, match="either settings or keyword overrides"):
        AsyncVerifier(VerifierSettings(), math_workers=1)
