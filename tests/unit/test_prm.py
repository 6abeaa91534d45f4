"""Process reward models in-process: the steps a completion is split into; the runtime's step path over a tiny
random-weight token-classification model built here (forwards under the token budget, padding counted, each input's
steps as scored alone; a failing forward costs only its input; a deadline stops it between batches); checkpoints of
the wrong shape, and causal LMs whose logits are not their bare head's, refused at load; and items naming a model of
the wrong kind refused, with the field."""

from __future__ import annotations

import asyncio
import json
import re
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from reward_models.layout import step_spans
from reward_models.spec import ModelSpec
from verifier_service.runtime import item_problem
from verifier_service.schema import ScoreItem
from verifier_service.settings import VerifierSettings

torch = pytest.importorskip("torch", reason="the `models` extra (torch, transformers) is not installed")

from reward_models.runtime import LoadedModel, ModelLoadError, ModelRuntime, Outcome, PrmInput  # noqa: E402
from trainer_client.tiny_model import (  # noqa: E402
    build_model,
    build_process_reward_model,
    build_reward_model,
    build_tokenizer,
    gsm8k_rows,
    training_text,
)

BUDGET = 160


@pytest.mark.parametrize(
    ("text", "separator", "steps"),
    [
        ("a = 1\nb = 2", "\n", ["a = 1", "b = 2"]),
        ("\n\na = 1\n \t \n\nb = 2\n\n", "\n", ["a = 1", "b = 2"]),  # empty and whitespace-only pieces dropped
        ("  a = 1 \nb", "\n", ["  a = 1 ", "b"]),  # a step keeps its own spaces
        ("a = 1\n\nb = 2\nc = 3", "\n\n", ["a = 1", "b = 2\nc = 3"]),
        ("Step 1: x. ки Step 2: y.", " ки ", ["Step 1: x.", "Step 2: y."]),
        ("", "\n", []),
        (" \n \n", "\n", []),
    ],
)
def test_steps_are_the_pieces_between_separators_that_have_text(text: str, separator: str, steps: list[str]) -> None:
    spans = step_spans(text, separator)
    assert [text[start:end] for start, end in spans] == steps
    assert all(text[end : end + len(separator)] in (separator, "") for _, end in spans)


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("prm")
    build_tokenizer(path, training_text(gsm8k_rows(100, seed=1)))
    build_process_reward_model(path, max_positions=128)
    return path


def inputs(count: int) -> list[PrmInput]:
    return [PrmInput("trl", f"Tom has {n} apples.", ("He eats one.",) * (1 + n % 4)) for n in range(count)]


def runtime_of(checkpoint: Path, **spec: Any) -> ModelRuntime:
    settings = {"kind": "prm", "max_tokens": 64, "batch_tokens": BUDGET, **spec}
    return ModelRuntime({"m": ModelSpec(path=str(checkpoint), **settings)})


def run(runtime: ModelRuntime, items: Sequence[PrmInput], seconds: float = 60.0) -> list[Outcome | None]:
    async def main() -> list[Outcome | None]:
        await runtime.start()
        try:
            return (await runtime.score_steps("m", items, asyncio.get_running_loop().time() + seconds))[1]
        finally:
            await runtime.close()

    return asyncio.run(main())


def test_step_forwards_stay_under_the_budget_and_scores_equal_those_alone(
    checkpoint: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    shapes: list[tuple[int, int]] = []
    step_scores = LoadedModel.step_scores

    def spied(self: LoadedModel, rows: Sequence[Any], reads: Sequence[Any]) -> list[list[float]]:
        shapes.append((len(rows), max(len(row) for row in rows)))
        return step_scores(self, rows, reads)

    monkeypatch.setattr(LoadedModel, "step_scores", spied)
    items = inputs(24)
    together = run(runtime_of(checkpoint), items)
    assert len(shapes) > 2 and all(rows * width <= BUDGET for rows, width in shapes)
    assert any(rows > 1 for rows, _ in shapes)  # batched, not one by one
    assert [len(o.steps) for o in together if o and o.steps] == [len(item.steps) for item in items]
    alone = [run(runtime_of(checkpoint), [item])[0] for item in items[:4]]
    for one, other in zip(together[:4], alone, strict=True):
        assert one is not None and other is not None and one.steps is not None
        assert one.steps == pytest.approx(other.steps, rel=1e-3)  # relative: the tiny model's scores are small


def test_a_step_forward_that_fails_costs_only_its_input(checkpoint: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    items = inputs(3)  # 1, 2 and 3 steps: told apart by how many positions they are read at
    step_scores = LoadedModel.step_scores

    def failing(self: LoadedModel, rows: Sequence[Any], reads: Sequence[Any]) -> list[list[float]]:
        if any(len(positions) == 2 for positions, _ in reads):
            raise RuntimeError("CUDA out of memory")
        found = step_scores(self, rows, reads)
        return [[float("nan")] * len(s) if len(s) == 3 else s for s in found]

    monkeypatch.setattr(LoadedModel, "step_scores", failing)
    first, second, third = run(runtime_of(checkpoint, batch_tokens=BUDGET * 4), items)
    assert first is not None and first.steps is not None and len(first.steps) == 1
    assert second is not None and (second.steps, second.failure) == (None, "model_error")
    assert third is not None and (third.steps, third.failure) == (None, "model_error")


def test_a_deadline_stops_step_scoring_between_batches(checkpoint: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    step_scores = LoadedModel.step_scores

    def slow(self: LoadedModel, rows: Sequence[Any], reads: Sequence[Any]) -> list[list[float]]:
        threading.Event().wait(0.5)
        return step_scores(self, rows, reads)

    monkeypatch.setattr(LoadedModel, "step_scores", slow)
    found = run(runtime_of(checkpoint, batch_tokens=64), inputs(24), seconds=1.0)
    done = [outcome for outcome in found if outcome is not None]
    assert 0 < len(done) < len(found)


def test_a_layout_over_max_tokens_is_too_long_never_cut(checkpoint: Path) -> None:
    [over, fine] = run(runtime_of(checkpoint), [PrmInput("trl", None, ("He eats one.",) * 40), inputs(1)[0]])
    assert over is not None and (over.steps, over.failure) == (None, "too_long") and over.tokens > 64
    assert fine is not None and fine.steps is not None


def test_checkpoints_of_the_wrong_shape_are_refused_at_load(tmp_path: Path, checkpoint: Path) -> None:
    build_tokenizer(tmp_path, training_text(gsm8k_rows(20, seed=1)))
    build_reward_model(tmp_path, max_positions=128)  # num_labels 1: no token classifier of two labels
    with pytest.raises(ModelLoadError, match="model 'm': kind prm needs a token-classification model with num_labels"):
        LoadedModel("m", ModelSpec(path=str(tmp_path), kind="prm"))
    with pytest.raises(ModelLoadError, match="model 'm': kind rm needs"):
        LoadedModel("m", ModelSpec(path=str(checkpoint), kind="rm"))


def test_a_checkpoint_without_the_head_its_kind_reads_is_refused_not_served_with_a_random_one(tmp_path: Path) -> None:
    """A causal LM named as kind rm or prm: transformers would draw the score head at random and load it (its scores
    would mean nothing, with no error); the service refuses it, naming the weights."""
    build_tokenizer(tmp_path, training_text(gsm8k_rows(20, seed=1)))
    build_model(tmp_path, max_positions=128)  # a causal LM: no score head; two labels by default
    with pytest.raises(
        ModelLoadError, match=r"model 'm': the checkpoint has no weights for score\.bias, score\.weight"
    ):
        LoadedModel("m", ModelSpec(path=str(tmp_path), kind="prm"))
    LoadedModel("m", ModelSpec(path=str(tmp_path), kind="prm_lm"))  # as a causal LM it has every weight
    config = json.loads((tmp_path / "config.json").read_text())
    (tmp_path / "config.json").write_text(json.dumps({**config, "id2label": {"0": "LABEL_0"}}))  # one label
    with pytest.raises(ModelLoadError, match=r"no weights for score\.weight, which kind rm reads"):
        LoadedModel("m", ModelSpec(path=str(tmp_path), kind="rm"))


def test_a_causal_lm_whose_logits_are_not_its_bare_heads_is_refused_as_prm_lm(tmp_path: Path) -> None:
    """prm_lm applies the LM head itself at the tags: a model whose forward scales or caps the head's logits would be
    read without that, so it is refused at load (a scale of 1 changes nothing and loads)."""
    build_tokenizer(tmp_path, training_text(gsm8k_rows(20, seed=1)))
    build_model(tmp_path, max_positions=128)
    config = json.loads((tmp_path / "config.json").read_text())
    spec = ModelSpec(path=str(tmp_path), kind="prm_lm")
    for extra, why in [
        ({"logit_scale": 0.0625}, "scales its logits (logit_scale)"),  # Cohere's
        ({"logits_scaling": 8.0}, "scales its logits (logits_scaling)"),  # Granite's
        ({"final_logit_softcapping": 30.0}, "caps its logits"),  # Gemma 2's
    ]:
        (tmp_path / "config.json").write_text(json.dumps({**config, **extra}))
        refused = re.escape(f"model 'm': kind prm_lm does not serve a model that {why}")
        with pytest.raises(ModelLoadError, match=refused):
            LoadedModel("m", spec)
    (tmp_path / "config.json").write_text(json.dumps({**config, "logits_scaling": 1.0}))
    assert LoadedModel("m", spec).spec.kind == "prm_lm"


SETTINGS = {
    "models": {"tc": {"path": "/m", "kind": "prm"}, "lm": {"path": "/m", "kind": "prm_lm"}, "rm": {"path": "/m"}}
}


@pytest.mark.parametrize(
    ("spec", "why"),
    [
        ({"model": "tc"}, None),
        ({"model": "tc", "layout": "qwen_prm"}, None),
        ({"model": "lm", "layout": "step_tag"}, None),
        ({"model": "gone"}, "names no model of this server"),
        ({"model": "rm"}, "names a model of kind rm; layout trl needs a token-classification model (kind prm)"),
        ({"model": "lm"}, "names a model of kind prm_lm; layout trl needs a token-classification model (kind prm)"),
        ({"model": "tc", "layout": "step_tag"}, "names a model of kind prm; layout step_tag needs a causal LM"),
    ],
)
def test_an_item_naming_a_model_of_another_kind_is_refused(spec: dict[str, str], why: str | None) -> None:
    problem = item_problem(
        ScoreItem.model_validate({"completion": "x", "prm": spec}), VerifierSettings.model_validate(SETTINGS)
    )
    assert problem is None if why is None else problem is not None and problem[0] == "prm.model" and why in problem[1]


def test_prm_beside_a_correctness_component_passes_the_order_guard_as_rm_does() -> None:
    """prm joins the order guard by its score's range, [0, 1]: at the rule's weight a saturated wrong answer ties a
    right one (refused); under it, it ranks within the verdict; beside partial credit only the gate passes."""
    math = {"completion": "x", "prm": {"model": "tc"}, "math": {"gold": "1"}}
    code = {"completion": "x", "prm": {"model": "tc"}, "code": {"tests": ["assert True"]}}
    for refused in (math, {**code, "weights": {"prm": 0.01}}):
        with pytest.raises(ValidationError, match=r"with prm\): .*prm: a weight below the rule's, or gate \"right\""):
            ScoreItem.model_validate(refused)
    assert ScoreItem.model_validate({**math, "weights": {"prm": 0.5}}).prm is not None
    assert ScoreItem.model_validate({**code, "prm": {"model": "tc", "gate": "right"}}).prm is not None
    assert ScoreItem.model_validate({**math, "allow_order_inversion": True}).prm is not None


def test_locating_steps_never_holds_the_device_thread_nor_shares_its_tokenizer(
    checkpoint: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A slow token search (a tokenizer that is not byte-level: up to seconds an item) runs in a thread of its own:
    step scores on the same device come back while it is still searching, and it reads its own tokenizer object,
    not the one the scoring thread tokenizes with meanwhile."""
    searching, release = threading.Event(), threading.Event()
    seen: list[Any] = []

    def slow(tokenizer: Any, ids: Sequence[int], text: str, spans: Sequence[tuple[int, int]]) -> list[Any]:
        seen.append(tokenizer)
        searching.set()
        release.wait(30)
        return []

    monkeypatch.setattr("reward_models.tokens.token_spans", slow)
    runtime = runtime_of(checkpoint)

    async def main() -> tuple[list[Outcome | None], bool, Any]:
        await runtime.start()
        try:
            loop = asyncio.get_running_loop()
            model = runtime._models["m"]
            locating = asyncio.ensure_future(runtime.locate(model, [([1, 2], "ab", [(0, 2)])], loop.time() + 60))
            await asyncio.to_thread(searching.wait, 30)
            scored = (await runtime.score_steps("m", inputs(2), loop.time() + 20))[1]
            still = not locating.done()
            release.set()
            await locating
            return scored, still, model.tokenizer
        finally:
            release.set()
            await runtime.close()

    scored, still_locating, scoring_tokenizer = asyncio.run(main())
    assert all(outcome is not None and outcome.steps for outcome in scored)  # not held behind the search
    assert still_locating
    assert seen and seen[0] is not scoring_tokenizer
    assert seen[0].get_vocab() == scoring_tokenizer.get_vocab()  # a copy of it: no policy_tokenizer was named
