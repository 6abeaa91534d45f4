"""Large batches score their text components in the worker pool (`scoring.texts.TextTask`): exactly the results the
service computes itself, and a worker that fails on a chunk costs nothing but time."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable, Iterator
from typing import Any, TypeVar

import pytest

from verifier_service import engine as engine_module
from verifier_service.engine import Engine
from verifier_service.metrics import Metrics
from verifier_service.pool import WorkerPool
from verifier_service.resources import WORKER_TASK, MathWorkers
from verifier_service.schema import ItemResult, ScoreItem
from verifier_service.scoring.pooled import Resources
from verifier_service.scoring.texts import TextTask, run_text_task
from verifier_service.settings import VerifierSettings

T = TypeVar("T")
STALL = "tests.unit.pool_tasks:stall_on_text"  # the worker, except that a text chunk never finishes

COMPLETIONS = [
    "<think>6 * 7 = 42</think>The answer is \\boxed{C}. <answer>42</answer>",
    "<think>" + "我们需要计算总数然后检查每一步" * 20 + "</think>答案是 \\boxed{B}",
    "<think>Let me check. " + "Let me check again. " * 30,
    "The answer is A or B.",
    "",
    "<think>" + " ".join(f"step{i}" for i in range(700)) + "</think><answer>forty two</answer>",
]


def items(count: int, seed: int = 0) -> list[ScoreItem]:
    rng = random.Random(seed)
    made = []
    for index in range(count):
        fields: dict[str, Any] = {
            "id": str(index),
            "completion": str(index % 3) + rng.choice(COMPLETIONS),
            "completion_tokens": rng.randint(0, 600),
            "truncated": rng.random() < 0.1,
            "choice": {"gold": rng.choice("ABC")},
            "answer": {"gold": rng.choice(["42", "forty two"]), "match": rng.choice(["exact", "f1"])},
            "format": {},
            "overlong": {"max_tokens": 512},
            "repetition": {"n": rng.choice([2, 3])},
        }
        if rng.random() < 0.5:
            fields |= {"math": {"gold": "42"}, "length": {"max_tokens": 512, "correct_from": "math"}}
        made.append(ScoreItem.model_validate(fields))
    return made


def run_engine(
    function: str, use: Callable[[Engine, WorkerPool], Awaitable[T]], in_workers: bool, **settings: Any
) -> T:
    """`use(engine, pool)` on a fresh two-worker pool running `function`; text components go to the workers from 8
    items when `in_workers`, else never."""

    async def main() -> T:
        pool = WorkerPool(2, function)
        await pool.start()
        try:
            metrics = Metrics()
            resources = Resources(
                VerifierSettings(math_workers=2, **settings), metrics, {"math_workers": MathWorkers(pool, metrics)}
            )
            return await use(Engine(resources), pool)
        finally:
            await pool.close()

    saved = engine_module.WORKER_TEXT_ITEMS
    engine_module.WORKER_TEXT_ITEMS = 8 if in_workers else 10**9
    try:
        return asyncio.run(main())
    finally:
        engine_module.WORKER_TEXT_ITEMS = saved


def score(function: str, batch: list[ScoreItem], in_workers: bool, **settings: Any) -> list[ItemResult]:
    return run_engine(function, lambda engine, _: engine.score(batch), in_workers, **settings)


@pytest.fixture(scope="module")
def batch() -> Iterator[list[ScoreItem]]:
    yield items(150)


@pytest.fixture(scope="module")
def in_the_service(batch: list[ScoreItem]) -> list[ItemResult]:
    return score(WORKER_TASK, batch, in_workers=False)


@pytest.mark.timeout(120)
def test_workers_give_the_results_the_service_gives(batch: list[ScoreItem], in_the_service: list[ItemResult]) -> None:
    found = score(WORKER_TASK, batch, in_workers=True)
    assert found == in_the_service
    verdicts = {c.verdict for result in found for c in result.components.values()}
    assert {"loop", "hedged", "truncated", "correct", "wrong"} <= verdicts  # the batch exercises the components


@pytest.mark.timeout(120)
@pytest.mark.parametrize("function", ["tests.unit.pool_tasks:die_on_text", "tests.unit.pool_tasks:fail_on_text"])
def test_a_chunk_whose_worker_fails_is_scored_in_the_service(
    function: str, batch: list[ScoreItem], in_the_service: list[ItemResult]
) -> None:
    assert score(function, batch, in_workers=True) == in_the_service


@pytest.mark.timeout(120)
def test_a_chunk_past_the_batch_deadline_is_null_and_nothing_is_lost(batch: list[ScoreItem]) -> None:
    found = score(STALL, batch[:20], in_workers=True, batch_timeout_s=2.0, math_timeout_s=1.0)
    assert [result.id for result in found] == [item.id for item in batch[:20]]
    for result in found:
        assert result.reward is None and result.status == "error"
        assert result.components["repetition"].verdict == "deadline_exceeded"
        assert result.components["repetition"].score is None


def test_a_chunk_carries_each_distinct_spec_once() -> None:
    """Equal options become one spec object, which pickle sends once; different options stay apart."""
    same = [ScoreItem(completion=f"a b {n}", repetition={"n": 3}, overlong={"max_tokens": 8}) for n in range(3)]
    other = ScoreItem(completion="a b 3", repetition={"n": 4}, overlong={"max_tokens": 8})
    task = TextTask.of([*same, other])
    specs = [dict(row[3]) for row in task.items]
    assert specs[0]["repetition"] is specs[1]["repetition"] is specs[2]["repetition"]
    assert specs[3]["repetition"] is not specs[0]["repetition"] and specs[3]["repetition"].n == 4
    assert specs[3]["overlong"] is specs[0]["overlong"]
    scored = [dict(found) for found in run_text_task(task)]  # each scored with its own options
    assert [found["repetition"][1] for found in scored] == ["no_repetition"] * 3 + ["too_short"]


@pytest.mark.timeout(120)
def test_a_request_cancelled_while_its_answers_are_extracted_retires_its_chunks_workers() -> None:
    """The client goes away while the service still extracts the math answers, with every worker stuck on a text
    chunk: the chunks are cancelled with the request and their workers replaced at once, not at the batch
    deadline (120 s)."""
    big = items(10_000, seed=1)  # 11 MB of completions: extraction takes a quarter of a second or more

    async def cancel_early(engine: Engine, pool: WorkerPool) -> int:
        task = asyncio.ensure_future(engine.score(big))
        await asyncio.sleep(0.05)  # the chunks are out; the extraction is under way
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        return pool.restarts

    restarts = run_engine(STALL, cancel_early, in_workers=True, batch_timeout_s=120)
    assert restarts == 2  # both stuck workers retired (and replaced)


@pytest.mark.timeout(120)
def test_a_request_that_fails_in_the_service_retires_its_chunks_workers(monkeypatch: pytest.MonkeyPatch) -> None:
    """A bug while the answers are extracted (here: every extraction raises) fails the request; the text chunks
    it sent are cancelled with it, their workers replaced, not left busy until the batch deadline."""

    def broken(*args: Any, **kwargs: Any) -> None:
        raise RuntimeError("a bug in extraction")

    monkeypatch.setattr(Engine, "_prepare_one", broken)  # outside the guard that keeps one item's failure its own
    batch = [ScoreItem(completion=f"<think>x</think>{n}", math={"gold": "1"}, format={}) for n in range(64)]

    async def fail(engine: Engine, pool: WorkerPool) -> int:
        with pytest.raises(RuntimeError, match="a bug in extraction"):
            await engine.score(batch)
        return pool.restarts

    restarts = run_engine(STALL, fail, in_workers=True, batch_timeout_s=120)
    assert restarts == 2  # both workers were stuck on a chunk; both retired
