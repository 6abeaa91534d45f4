"""The model runtime in-process, over a tiny random-weight reward model built here: forwards are cut under the token
budget (padding counted) and give each input the score it gets alone; a forward that fails, or a non-finite score,
costs only its input (null, never 0); a deadline stops it between batches; equal inputs run once; and bad model
settings fail with the model's name and the field."""

from __future__ import annotations

import asyncio
import json
import math
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from reward_models.batching import batches
from reward_models.spec import ModelSpec
from verifier_service.runtime import item_problem
from verifier_service.schema import ScoreItem
from verifier_service.scoring.pooled import Request
from verifier_service.settings import VerifierSettings

torch = pytest.importorskip("torch", reason="the `models` extra (torch, transformers) is not installed")

from reward_models.runtime import LoadedModel, ModelRuntime, Outcome, RmInput  # noqa: E402
from trainer_client.tiny_model import build_reward_model, build_tokenizer, gsm8k_rows, training_text  # noqa: E402

BUDGET = 160


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("rm")
    build_tokenizer(path, training_text(gsm8k_rows(100, seed=1)))
    build_reward_model(path, max_positions=128)
    return path


def texts(count: int) -> list[RmInput]:
    return [RmInput("raw", f"Tom has {n} apples. ", "He eats one. " * (1 + n % 7)) for n in range(count)]


def run(runtime: ModelRuntime, inputs: Sequence[RmInput], seconds: float = 60.0) -> list[Outcome | None]:
    async def main() -> list[Outcome | None]:
        await runtime.start()
        try:
            loop = asyncio.get_running_loop()
            return (await runtime.score("m", inputs, loop.time() + seconds))[1]
        finally:
            await runtime.close()

    return asyncio.run(main())


def runtime_of(checkpoint: Path, **spec: Any) -> ModelRuntime:
    return ModelRuntime({"m": ModelSpec(path=str(checkpoint), **{"max_tokens": 64, "batch_tokens": BUDGET, **spec})})


def test_4096_inputs_of_8000_tokens_are_cut_into_forwards_under_the_budget() -> None:
    cut = batches([8000] * 4096, 16_384)
    assert sorted(index for batch in cut for index in batch) == list(range(4096))
    assert max(len(batch) for batch in cut) == 2  # 2 x 8,000 padded tokens fit; never one forward over them all


def test_forwards_stay_under_the_budget_and_scores_equal_those_alone(
    checkpoint: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    shapes: list[tuple[int, int]] = []
    logits = LoadedModel.logits

    def spied(self: LoadedModel, rows: Sequence[Any]) -> list[float]:
        shapes.append((len(rows), max(len(row) for row in rows)))
        return logits(self, rows)

    monkeypatch.setattr(LoadedModel, "logits", spied)
    inputs = texts(24)
    together = run(runtime_of(checkpoint), inputs)
    assert len(shapes) > 2 and all(rows * width <= BUDGET for rows, width in shapes)
    assert any(rows > 1 for rows, _ in shapes)  # batched, not one by one
    alone = [run(runtime_of(checkpoint), [item])[0] for item in inputs[:4]]
    assert [o.logit for o in together[:4] if o] == pytest.approx([o.logit for o in alone if o], abs=1e-3)


def test_a_forward_that_fails_costs_only_its_input(checkpoint: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The second input's forward raises (out of memory, say), the third's score is NaN: told apart by length."""
    inputs = texts(3)
    lengths = [len(runtime_tokens(checkpoint, item)) for item in inputs]
    assert len(set(lengths)) == 3
    logits = LoadedModel.logits

    def failing(self: LoadedModel, rows: Sequence[Any]) -> list[float]:
        found = logits(self, rows)
        if any(len(row) == lengths[1] for row in rows):
            raise RuntimeError("CUDA out of memory")
        return [math.nan if len(row) == lengths[2] else value for row, value in zip(rows, found, strict=True)]

    monkeypatch.setattr(LoadedModel, "logits", failing)
    first, second, third = run(runtime_of(checkpoint), inputs)
    assert first is not None and first.logit is not None and first.failure is None
    assert second == Outcome(None, "model_error", lengths[1])
    assert third == Outcome(None, "model_error", lengths[2])


def runtime_tokens(checkpoint: Path, item: RmInput) -> list[int]:
    from transformers import AutoTokenizer

    from reward_models.layout import token_ids

    [ids] = token_ids(AutoTokenizer.from_pretrained(checkpoint), "raw", [(item.prompt, item.completion)])
    return ids


def test_a_deadline_stops_between_batches(checkpoint: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    logits = LoadedModel.logits
    entered = threading.Event()

    def slow(self: LoadedModel, rows: Sequence[Any]) -> list[float]:
        entered.set()
        threading.Event().wait(0.5)
        return logits(self, rows)

    monkeypatch.setattr(LoadedModel, "logits", slow)
    found = run(runtime_of(checkpoint, batch_tokens=64), texts(24), seconds=1.0)
    done = [outcome for outcome in found if outcome is not None]
    assert entered.is_set() and 0 < len(done) < len(found)  # some batches ran, the rest were never started


def test_a_failing_batch_retried_input_by_input_stops_at_the_deadline_too(
    checkpoint: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A device that fails every forward (a broken CUDA context) would fail each input of a large batch in turn: the
    one-by-one retries stop at the deadline as batches do, so the thread is free for the next request."""
    calls: list[int] = []

    def broken(self: LoadedModel, rows: Sequence[Any]) -> list[float]:
        calls.append(len(rows))
        threading.Event().wait(0.1)
        raise RuntimeError("CUDA error: an illegal memory access was encountered")

    monkeypatch.setattr(LoadedModel, "logits", broken)
    found = run(runtime_of(checkpoint, batch_tokens=100_000), texts(40), seconds=1.0)
    assert calls[0] == 40  # one batch, then its inputs alone
    assert 1 < len(calls) < 41  # stopped before all 40 were retried
    assert all(outcome is None or outcome.failure == "model_error" for outcome in found)
    assert any(outcome is None for outcome in found)  # left for the deadline: deadline_exceeded, null


def rm_component(runtime: ModelRuntime) -> Any:
    from verifier_service.metrics import Metrics
    from verifier_service.resources import Models
    from verifier_service.scoring.pooled import Resources
    from verifier_service.scoring.rm import RmComponent

    return RmComponent(Resources(VerifierSettings(batch_timeout_s=30), Metrics(), {"models": Models(runtime)}))


def run_component(runtime: ModelRuntime, items: list[ScoreItem], seconds: float) -> tuple[Any, dict[Any, Any]]:
    """The component's results for the items' jobs (equal jobs once), by a deadline `seconds` away."""
    component = rm_component(runtime)
    jobs: dict[Any, list[int]] = {}
    for index, item in enumerate(items):
        assert item.rm is not None
        jobs.setdefault(component.prepare(item, item.rm), []).append(index)

    async def main() -> dict[Any, Any]:
        await runtime.start()
        try:
            return dict(await component.run(jobs, asyncio.get_running_loop().time() + seconds, Request()))
        finally:
            await runtime.close()

    return component, asyncio.run(main())


def test_what_the_deadline_left_unscored_is_deadline_exceeded(
    checkpoint: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    logits = LoadedModel.logits
    calls = [0]

    def slow(self: LoadedModel, rows: Sequence[Any]) -> list[float]:
        """The first batch at once; every later one held a second past the 3-second deadline, so what is scored by
        then does not depend on how busy the machine is (before, each batch took 0.5 s against a 1 s deadline, and on
        a loaded machine none finished)."""
        calls[0] += 1
        if calls[0] > 1:
            threading.Event().wait(4.0)
        return logits(self, rows)

    monkeypatch.setattr(LoadedModel, "logits", slow)
    items = [
        ScoreItem.model_validate({"prompt": item.prompt, "completion": item.completion, "rm": {"model": "m"}})
        for item in texts(24)
    ]
    _, results = run_component(runtime_of(checkpoint, batch_tokens=64), items, seconds=3.0)
    assert calls[0] >= 2  # the premise: a second batch was started, and held past the deadline
    verdicts = [(result.score is None, result.verdict) for result in results.values()]
    assert (False, "scored") in verdicts and (True, "deadline_exceeded") in verdicts
    assert set(verdicts) == {(False, "scored"), (True, "deadline_exceeded")}


def test_equal_inputs_of_a_request_run_once(checkpoint: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[int] = []
    score = LoadedModel.score

    def counted(self: LoadedModel, inputs: Sequence[RmInput], stop: Any, out: Any) -> None:
        seen.append(len(inputs))
        score(self, inputs, stop, out)

    monkeypatch.setattr(LoadedModel, "score", counted)
    items = [
        ScoreItem.model_validate({"prompt": "p", "completion": text, "rm": {"model": "m", "transform": transform}})
        for text, transform in [("a", "raw"), ("a", "sigmoid"), ("b", "raw"), ("a", "raw")]
    ]
    component, results = run_component(runtime_of(checkpoint), items, seconds=60)
    assert len(results) == 3 and seen == [2]  # "a" raw, "a" sigmoid and "b": two inputs, one call
    raw, squashed = (results[component.prepare(items[i], items[i].rm)] for i in (0, 1))
    assert squashed.score == pytest.approx(1 / (1 + math.exp(-raw.score)))
    assert raw.model_version is not None and raw.model_version == squashed.model_version


def test_bad_model_settings_name_the_model_and_the_field() -> None:
    with pytest.raises(ValidationError, match=r"models\.judge\.device"):
        VerifierSettings(models={"judge": {"path": "/m", "device": "gpu"}})
    with pytest.raises(ValidationError, match=r"models\.judge\n.*max_tokens must be at most batch_tokens"):
        VerifierSettings(models={"judge": {"path": "/m", "max_tokens": 100, "batch_tokens": 10}})
    with pytest.raises(ValidationError, match=r"models\.judge\.kind"):
        VerifierSettings.model_validate({"models": json.loads('{"judge": {"path": "/m", "kind": "orm"}}')})
    for name in ("no spaces", "judge\n"):  # a name no request could give ($ alone matches before a final newline)
        with pytest.raises(ValidationError, match="model name"):
            VerifierSettings(models={name: {"path": "/m"}})


def test_an_item_naming_a_model_of_another_kind_is_refused() -> None:
    settings = VerifierSettings(models={"steps": {"path": "/m", "kind": "prm"}, "outcome": {"path": "/m"}})
    item = ScoreItem.model_validate({"completion": "x", "rm": {"model": "steps"}})
    assert item_problem(item, settings) == (
        "rm.model",
        "names a model of kind prm; rm needs a sequence-classification model (kind rm)",
    )
    assert item_problem(ScoreItem.model_validate({"completion": "x", "rm": {"model": "outcome"}}), settings) is None
