"""A procedural job cannot change how later jobs are scored: its scorer runs in a throwaway fork of the worker
(scoring/forked.py). In one real worker process, with the stand-in dataset of tests/unit/procedural_tasks.py, whose
scorer evals the answer unguarded: an answer that patches math's `verify` and switches the procedural guard off
leaves both as they were, and the next jobs in the same worker are scored as before; a scorer that hangs is gone
(by pid) when its job's timeout ends, and when the pool kills its worker; one killed by a signal is null."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

import pytest

from tests.unit.procedural_tasks import Probe
from tests.unit.test_procedural import component, countdown_entry, generated
from verifier_service.pool import TaskTimeout, WorkerPool
from verifier_service.schema import ComponentResult, MathOptions, ScoreItem
from verifier_service.scoring import forked, procedural
from verifier_service.scoring.math import MathTask
from verifier_service.scoring.procedural import ProceduralJob
from verifier_service.settings import VerifierSettings

pytest.importorskip("reasoning_gym.factory", reason="reasoning-gym (the `procedural` extra) is not installed")
pytestmark = pytest.mark.usefixtures("earlier_garbage_collected")

T = TypeVar("T")
STAND_IN = json.dumps({"question": "say ok", "answer": "ok", "metadata": {}})
LIBRARY_STATE = ("math_verify.grader", "verifier_service.scoring.procedural_guard")
# Read by the stand-in's eval: every later math answer correct, the guard of the evaluating scorers gone; then "ok".
POISON = (
    "[setattr(__import__('math_verify'), 'verify', lambda *a, **k: True),"
    " setattr(__import__('verifier_service.scoring.procedural', fromlist=['_']), 'refusal', lambda *a: None), 'ok'][2]"
)
WRONG_MATH = MathTask(gold="x^2+1", answer="$x^2+2$", options=MathOptions())  # reaches math-verify's verify


def stand_in(answer: str, timeout_s: float = 5.0) -> ProceduralJob:
    return ProceduralJob("stand_in", STAND_IN, answer, False, timeout_s)


def hang(pid_file: Path, *, deaf: bool = False) -> str:
    """An answer whose evaluation writes its process's pid to `pid_file`, then sleeps; `deaf`: with the scorer's
    timer (SIGALRM) blocked, as a loop in C code ignores it, so that only a kill ends it."""
    pid = "str(__import__('os').getpid())"
    block = "__import__('signal').pthread_sigmask(__import__('signal').SIG_BLOCK, [__import__('signal').SIGALRM])"
    write = f"__import__('pathlib').Path({str(pid_file)!r}).write_text({pid})"
    return f"[{write}, {block if deaf else 0}, __import__('time').sleep(600)]"


def in_one_worker(steps: Callable[[WorkerPool], Awaitable[T]]) -> T:
    """steps(pool) on a pool of one real worker running the stand-in's task function, warmed (reasoning-gym
    imported, the stand-in's scorer built) by a first job."""

    async def main() -> T:
        pool = WorkerPool(1, "tests.unit.procedural_tasks:run")
        await pool.start()
        try:
            assert (await pool.run(stand_in("ok"), timeout_s=60)).verdict == "correct"
            return await steps(pool)
        finally:
            await pool.close()

    return asyncio.run(main())


def ended(pid: int) -> bool:
    """Whether process `pid` is gone or a zombie (dead, and waiting for a parent that is not ours to reap it)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return True
    return state in ("Z", "X")


def test_a_scorer_that_patches_its_process_leaves_the_next_jobs_in_the_worker_scored_as_before() -> None:
    hostile = "__import__('os').getpid()"  # arithmetic it is not: the countdown guard refuses it

    async def steps(pool: WorkerPool) -> dict[str, Any]:
        seen: dict[str, Any] = {"worker": pool.pids(), "before": await pool.run(Probe(), timeout_s=60)}
        seen["poison"] = await pool.run(stand_in(POISON), timeout_s=60)
        seen["after"] = await pool.run(Probe(), timeout_s=60)
        seen["math"] = await pool.run(WRONG_MATH, timeout_s=60)
        job = ProceduralJob("countdown", json.dumps(countdown_entry()), hostile, False, 5.0)
        seen["guarded"] = await pool.run(job, timeout_s=60)
        seen["worker after"] = pool.pids()
        return seen

    seen = in_one_worker(steps)
    assert seen["before"] == seen["after"] == LIBRARY_STATE
    assert seen["poison"].verdict == "correct"  # the answer's own score is what its code made it: see forked.py
    assert (seen["math"].score, seen["math"].verdict) == (0.0, "wrong")
    guarded = seen["guarded"]
    assert (guarded.score, guarded.verdict) == (0.0, "wrong") and guarded.detail.startswith("not evaluated")
    assert seen["worker"] == seen["worker after"]  # the same worker process all along


def test_a_scorer_that_hangs_is_gone_when_its_timeout_ends(tmp_path: Path) -> None:
    """Deaf to its timer: the worker kills it (KILL_AFTER_S past the job's 1 s), reaps it, and lives on."""
    pid_file = tmp_path / "pid"

    async def steps(pool: WorkerPool) -> tuple[ComponentResult, list[int], list[int]]:
        worker = pool.pids()
        return await pool.run(stand_in(hang(pid_file, deaf=True), timeout_s=1.0), timeout_s=60), worker, pool.pids()

    timed_out, worker, worker_after = in_one_worker(steps)
    assert (timed_out.score, timed_out.verdict) == (None, "timeout")
    assert timed_out.detail == "the scorer took longer than 1s (its process was killed)"
    assert not Path(f"/proc/{pid_file.read_text()}").exists()  # killed and reaped by the worker
    assert worker == worker_after  # which lives on


def test_a_scorer_that_hangs_goes_with_its_worker_when_the_pool_kills_it(tmp_path: Path) -> None:
    """The pool's backstop (5 s here) kills the worker before the job's own timeout (60 s): the kernel kills the
    child with it (PR_SET_PDEATHSIG)."""
    pid_file = tmp_path / "pid"

    async def steps(pool: WorkerPool) -> tuple[BaseException | None, list[int]]:
        worker = pool.pids()
        try:
            await pool.run(stand_in(hang(pid_file), timeout_s=60), timeout_s=5)
        except TaskTimeout as overrun:
            return overrun, worker
        return None, worker

    overrun, [worker] = in_one_worker(steps)
    assert isinstance(overrun, TaskTimeout)
    pid = int(pid_file.read_text())
    waited = time.monotonic()
    while not ended(pid) and time.monotonic() - waited < 10:
        time.sleep(0.05)
    assert ended(worker) and ended(pid)


def test_a_scorer_killed_by_a_signal_is_null_and_its_worker_lives_on() -> None:
    answer = "__import__('os').kill(__import__('os').getpid(), 9)"

    async def steps(pool: WorkerPool) -> tuple[ComponentResult, ComponentResult, bool]:
        worker = pool.pids()
        killed = await pool.run(stand_in(answer), timeout_s=60)
        return killed, await pool.run(stand_in("ok"), timeout_s=60), worker == pool.pids()

    killed, next_one, same_worker = in_one_worker(steps)
    assert (killed.score, killed.verdict) == (None, "worker_crashed")
    assert killed.detail == "the scorer's process ended without a result (killed by SIGKILL)"
    assert (next_one.score, next_one.verdict) == (1.0, "correct") and same_worker


@pytest.mark.parametrize(
    ("dataset", "setting", "forks"),
    [("countdown", True, True), ("chain_sum", True, False), ("countdown", False, False)],
)
def test_only_the_scorers_that_compile_the_answer_run_forked(
    dataset: str, setting: bool, forks: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The nine guarded scorers (countdown among them) run in a fork, unless VERIFIER_PROCEDURAL_FORK is off; the
    others, which read the answer as data, in the worker: a fork costs more than they do. Right answers score 1."""
    entry = generated(dataset)[0]
    calls: list[float] = []

    def counted(call: Callable[[], str], timeout_s: float) -> str:
        calls.append(timeout_s)
        return forked.run_forked(call, timeout_s)

    monkeypatch.setattr(procedural, "run_forked", counted)
    monkeypatch.setenv("VERIFIER_PROCEDURAL_FORK", str(setting).lower())
    spec = {"dataset": dataset, "entry": entry}
    completion = f"<answer>{entry['answer']}</answer>"
    item = ScoreItem.model_validate({"id": "i", "completion": completion, "procedural": spec})
    job = component(VerifierSettings()).prepare(item, item.procedural)
    assert isinstance(job, ProceduralJob) and job.fork is setting
    assert job.run().verdict == "correct"
    assert len(calls) == (1 if forks else 0)


@pytest.mark.parametrize(
    ("sent", "partial", "verdict"),
    [
        ('{"score": 1.0, "verdict": "correct"}', False, "correct"),
        ('{"score": 0.0, "verdict": "wrong", "detail": "the scorer gave 0.05"}', False, "wrong"),
        ('{"score": 0.5, "verdict": "partial"}', True, "partial"),
        ('{"score": null, "verdict": "timeout"}', False, "timeout"),
        ('{"score": 0.7, "verdict": "timeout"}', False, "worker_crashed"),  # a score with a null verdict
        ('{"score": null, "verdict": "correct"}', False, "worker_crashed"),
        ('{"score": 0.5, "verdict": "partial"}', False, "worker_crashed"),  # partial credit the spec did not ask for
        ('{"score": 1.0, "verdict": "partial"}', True, "worker_crashed"),
        ('{"score": 1.0, "verdict": "match"}', False, "worker_crashed"),  # another component's verdict
        ('{"score": 2.0, "verdict": "correct"}', False, "worker_crashed"),
        ("not json", False, "worker_crashed"),
    ],
)
def test_what_a_fork_sends_back_is_rebuilt_only_from_an_outcome_the_scorer_could_give(
    sent: str, partial: bool, verdict: str
) -> None:
    """A fork that ran the answer's code may write any result: it is kept only where its verdict and score agree as
    the fork's own judging makes them, and only those (a forged field such as `tests` or `model_version` is not)."""
    forged = json.dumps({**json.loads(sent), "tests": [], "model_version": "x"}) if sent[0] == "{" else sent
    back = procedural.returned(forged, "4", partial)
    assert back.verdict == verdict
    assert back.tests is None and back.model_version is None
    assert (back.score is None) == (verdict in ("timeout", "worker_crashed"))
