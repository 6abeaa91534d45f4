"""The model runtime's reload in-process, over tiny random-weight reward models built here: the swap is one assignment
after the load (a call that took the old version is scored by it), the old version is freed once nothing holds it, a
load that fails keeps the old version serving, and a second reload of the same model while one runs is refused.
Also the reload path rules, and the eval metrics against hand-computed values."""

from __future__ import annotations

import asyncio
import gc
import threading
import weakref
from pathlib import Path
from typing import Any

import pytest

from reward_models import metrics
from verifier_service.model_update import EvalMemory, PathRefused, reload_path

torch = pytest.importorskip("torch", reason="the `models` extra (torch, transformers) is not installed")

from reward_models.runtime import LoadedModel, ModelLoadError, ModelRuntime, ReloadBusy, RmInput  # noqa: E402
from reward_models.spec import ModelSpec  # noqa: E402
from trainer_client.tiny_model import build_reward_model, build_tokenizer, gsm8k_rows, training_text  # noqa: E402

ITEM = RmInput("raw", "Tom has 3 apples. ", "He eats one.")


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    found = {}
    for name, seed in (("a", 0), ("b", 1)):
        path = tmp_path_factory.mktemp(name)
        build_tokenizer(path, training_text(gsm8k_rows(100, seed=1)))
        build_reward_model(path, seed=seed, max_positions=128)
        found[name] = path
    return found


def runtime_of(path: Path) -> ModelRuntime:
    return ModelRuntime({"m": ModelSpec(path=str(path), max_tokens=64, batch_tokens=256)})


async def logit(runtime: ModelRuntime) -> tuple[str, float | None]:
    version, [outcome] = await runtime.score("m", [ITEM], asyncio.get_running_loop().time() + 60)
    assert outcome is not None
    return version, outcome.logit


def test_reload_swaps_after_the_load_and_frees_the_old_version(checkpoints: dict[str, Path]) -> None:
    async def main() -> None:
        runtime = runtime_of(checkpoints["a"])
        await runtime.start()
        try:
            version_a, logit_a = await logit(runtime)
            old = weakref.ref(runtime._models["m"])
            previous, version_b = await runtime.reload("m", str(checkpoints["b"]))
            assert (previous, runtime.previous_version("m")) == (version_a, version_a)
            assert version_b != version_a and runtime.status()["m"]["path"] == str(checkpoints["b"])
            now, logit_b = await logit(runtime)
            assert now == version_b and logit_b != pytest.approx(logit_a, abs=1e-3)
            gc.collect()
            assert old() is None  # nothing held the old version: freed, not kept beside the new one
            assert runtime.ready and runtime.specs["m"].path == str(checkpoints["a"])  # the configured path stays
        finally:
            await runtime.close()

    asyncio.run(main())


def test_a_call_that_took_the_old_version_is_scored_by_it(
    checkpoints: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The scoring call holds the old version while the reload loads and swaps: it finishes with the old one."""
    entered, release = threading.Event(), threading.Event()
    score = LoadedModel.score

    def held(self: LoadedModel, *args: Any) -> None:
        if self.spec.path == str(checkpoints["a"]):
            entered.set()
            release.wait(30)
        score(self, *args)

    monkeypatch.setattr(LoadedModel, "score", held)

    async def main() -> None:
        runtime = runtime_of(checkpoints["a"])
        await runtime.start()
        try:
            version_a = runtime.status()["m"]["version"]
            in_flight = asyncio.ensure_future(logit(runtime))
            await asyncio.to_thread(entered.wait, 30)
            _, version_b = await runtime.reload("m", str(checkpoints["b"]))  # loads and swaps while the call runs
            assert not in_flight.done()
            release.set()
            assert (await in_flight)[0] == version_a
            assert (await logit(runtime))[0] == version_b
        finally:
            release.set()
            await runtime.close()

    asyncio.run(main())


def held_load(monkeypatch: pytest.MonkeyPatch, path: Path, most_s: float) -> tuple[threading.Event, threading.Event]:
    """Loading the checkpoint at `path` waits (up to `most_s`) for the second event, once it has set the first."""
    started, release = threading.Event(), threading.Event()
    init = LoadedModel.__init__

    def slow(self: LoadedModel, name: str, spec: ModelSpec) -> None:
        if spec.path == str(path):
            started.set()
            release.wait(most_s)
        init(self, name, spec)

    monkeypatch.setattr(LoadedModel, "__init__", slow)
    return started, release


def test_the_old_version_scores_while_the_new_one_loads(
    checkpoints: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The load runs in a loader thread, not the device's: a call made while it loads is scored by the old version,
    without waiting for it."""
    started, release = held_load(monkeypatch, checkpoints["b"], 120)

    async def main() -> None:
        runtime = runtime_of(checkpoints["a"])
        await runtime.start()
        try:
            version_a = runtime.status()["m"]["version"]
            reload = asyncio.ensure_future(runtime.reload("m", str(checkpoints["b"])))
            await asyncio.to_thread(started.wait, 30)
            # behind the load in the device's thread, the call would wait for the release (120 s): 30 s fails it
            assert (await asyncio.wait_for(logit(runtime), 30))[0] == version_a
            assert runtime.status()["m"]["reloading"] is True
            release.set()
            _, version_b = await reload
            assert (await logit(runtime))[0] == version_b != version_a
        finally:
            release.set()
            await runtime.close()

    asyncio.run(main())


def test_a_second_reload_while_one_runs_is_refused(
    checkpoints: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    started, release = held_load(monkeypatch, checkpoints["b"], 30)

    async def main() -> None:
        runtime = runtime_of(checkpoints["a"])
        await runtime.start()
        try:
            first = asyncio.ensure_future(runtime.reload("m", str(checkpoints["b"])))
            await asyncio.to_thread(started.wait, 30)
            with pytest.raises(ReloadBusy):
                await runtime.reload("m", str(checkpoints["a"]))
            release.set()
            await first
            await runtime.reload("m", str(checkpoints["a"]))  # once it has finished, the next one runs
        finally:
            release.set()
            await runtime.close()

    asyncio.run(main())


def test_a_load_that_fails_keeps_the_old_version_serving(checkpoints: dict[str, Path], tmp_path: Path) -> None:
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "config.json").write_text("SECRET-CONTENT {not json")

    async def main() -> None:
        runtime = runtime_of(checkpoints["a"])
        await runtime.start()
        try:
            before = await logit(runtime)
            for path in (broken, tmp_path / "missing"):
                with pytest.raises(ModelLoadError) as failed:
                    await runtime.reload("m", str(path))
                assert "SECRET" not in failed.value.public and str(tmp_path) not in failed.value.public
                assert await logit(runtime) == before and runtime.previous_version("m") is None
                assert runtime.status()["m"]["reloading"] is False
        finally:
            await runtime.close()

    asyncio.run(main())


def test_a_request_whose_two_rounds_straddle_a_reload_is_scored_by_one_version(
    checkpoints: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ungated rm items run in the engine's first round, `gate: "right"` ones in its second: a reload that finishes
    between the two must not give the request's items two versions (the first round pins the version)."""
    from fastapi.testclient import TestClient

    from verifier_service.app import create_app
    from verifier_service.settings import VerifierSettings

    model = {"path": str(checkpoints["a"]), "max_tokens": 64, "batch_tokens": 256}
    settings = VerifierSettings(math_workers=1, code_enabled=False, models={"m": model})
    score, calls, old = ModelRuntime.score, list[str](), list[weakref.ref[LoadedModel]]()

    async def reloaded_after_the_first(self: ModelRuntime, name: str, *args: Any) -> Any:
        found = await score(self, name, *args)
        calls.append(found[0])
        if len(calls) == 1:  # a reload finishes between the request's two rounds
            old.append(weakref.ref(self._models[name]))
            await self.reload(name, str(checkpoints["b"]))
        return found

    monkeypatch.setattr(ModelRuntime, "score", reloaded_after_the_first)
    rm = {"model": "m", "transform": "sigmoid"}
    items = [
        {"completion": "\\boxed{7}", "math": {"gold": "7"}, "rm": rm, "weights": {"math": 1, "rm": 0.5}},
        {"completion": "\\boxed{7}", "math": {"gold": "7"}, "rm": {**rm, "gate": "right"}},
    ]
    with TestClient(create_app(settings)) as client:
        before = client.get("/v1/models").json()
        response = client.post("/v1/score", json={"items": items})
        after = client.get("/v1/models").json()
        gc.collect()
        freed = old[0]() is None  # the pin went with the request: the old version is not kept beside the new one
    assert response.status_code == 200, response.text
    assert len(calls) == 2  # both rounds ran, and the reload swapped between them
    assert before != after
    found = {result["components"]["rm"]["model_version"] for result in response.json()["results"]}
    assert found == {calls[0]} and len(set(calls)) == 1
    assert freed


def test_eval_memory_keeps_the_serving_and_the_previous_versions_scores() -> None:
    """An eval that began on v1 and finishes after a reload to v2 (and after an eval on v2) keeps v2's scores."""
    memory = EvalMemory()
    memory.remember("m", "v1", {"a": 1.0}, serving="v1", previous=None)
    memory.remember("m", "v2", {"a": 2.0}, serving="v2", previous="v1")  # after the reload
    memory.remember("m", "v1", {"a": 1.5}, serving="v2", previous="v1")  # the eval that began on v1 ends
    assert (memory.recall("m", "v2"), memory.recall("m", "v1")) == ({"a": 2.0}, {"a": 1.5})
    memory.remember("m", "v3", {"a": 3.0}, serving="v3", previous="v2")  # another reload: v1 goes
    memory.remember("m", "v1", {"a": 1.7}, serving="v3", previous="v2")  # an eval from two reloads ago: not kept
    assert [memory.recall("m", v) for v in ("v3", "v2", "v1")] == [{"a": 3.0}, {"a": 2.0}, {}]
    memory.remember("n", "w1", {"b": 0.5}, serving="w1", previous=None)  # models apart
    assert memory.recall("m", "v3") == {"a": 3.0} and memory.recall("n", "w1") == {"b": 0.5}


def test_a_checkpoint_whose_files_cannot_be_read_for_its_version_is_a_load_error(
    checkpoints: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """An OSError while hashing the files (checkpoint_version) is a ModelLoadError, not a bare OSError (a 500)."""

    def unreadable(path: str, model: Any) -> str:
        raise PermissionError(f"[Errno 13] Permission denied: {path}/model.safetensors")

    monkeypatch.setattr("reward_models.runtime.checkpoint_version", unreadable)
    with pytest.raises(ModelLoadError) as failed:
        LoadedModel("m", ModelSpec(path=str(checkpoints["a"]), max_tokens=64, batch_tokens=256))
    assert "PermissionError" in failed.value.public and str(checkpoints["a"]) not in failed.value.public


def test_reload_paths(tmp_path: Path) -> None:
    root, inside, outside = tmp_path / "root", tmp_path / "root" / "step-10", tmp_path / "other"
    inside.mkdir(parents=True)
    outside.mkdir()
    (root / "link").symlink_to(outside)
    roots = (str(root),)
    assert reload_path("/models/rm", None, roots) == "/models/rm"
    assert reload_path("/models/rm", "/models/rm", ()) == "/models/rm"
    assert reload_path("/models/rm", str(root / "x" / ".." / "step-10"), roots) == str(inside)
    for path, allowed in [
        (str(inside), tuple[str, ...]()),  # no roots: only the configured path
        ("step-10", roots),
        (str(outside), roots),
        (str(root / "link"), roots),  # a symlink out of the root is outside it
        (str(root / "step-10" / ".." / ".." / "other"), roots),
        (str(root / "missing"), roots),
    ]:
        with pytest.raises(PathRefused) as refused:
            reload_path("/models/rm", path, allowed)
        assert str(tmp_path) not in str(refused.value)


def test_the_metrics_on_hand_computed_values() -> None:
    # Two groups: in the first, right 0.9 beats wrong 0.1 and 0.5 (2 of 2); in the second, right 0.2 loses to wrong
    # 0.4 and ties wrong 0.2 (0.5 of 2): 2.5 of 4.
    groups = [([0.9, 0.1, 0.5], [True, False, False]), ([0.2, 0.4, 0.2], [True, False, False])]
    assert metrics.ranking_accuracy(groups) == (0.625, 4)
    # Over all six: right {0.9, 0.2} vs wrong {0.1, 0.5, 0.4, 0.2}: 0.9 beats 4; 0.2 beats 0.1, ties 0.2: 5.5 of 8.
    scores = [0.9, 0.1, 0.5, 0.2, 0.4, 0.2]
    assert metrics.auroc(scores, [True, False, False, True, False, False]) == pytest.approx(5.5 / 8)
    assert metrics.auroc([1.0, 0.0], [True, False]) == 1.0 and metrics.auroc([0.0, 1.0], [True, False]) == 0.0
    # Bins of 0.1: 0.0 and 0.09 in bin 0 (mean 0.045, outcomes 0 and 1: 0.5), 1.0 in the last (outcome 1).
    assert metrics.calibration_error([0.0, 0.09, 1.0], [0.0, 1.0, 1.0]) == pytest.approx((2 * 0.455 + 0) / 3)
    assert metrics.spearman([1.0, 2.0, 2.0, 3.0], [1.0, 2.0, 2.0, 3.0]) == pytest.approx(1.0)
    assert metrics.spearman([1.0, 1.0], [1.0, 2.0]) is None
    summary = metrics.summary([4.0, 1.0, 3.0, 2.0, 5.0])
    assert summary == {"mean": 3.0, "std": pytest.approx(2**0.5), "p5": 1.2, "p25": 2.0, "p50": 3.0, "p75": 4.0,
                       "p95": pytest.approx(4.8)}  # fmt: skip
