"""The order guard (`ScoreItem._inversions`) against brute force: for every combination of a correctness component,
the options of a `length` gated on it (mode, ends, correct_threshold) and the weights, the item is refused exactly
when the real scorers, run on a right answer and on wrong ones at many lengths, let a wrong answer score at least as
much as the right one.

A right answer is the correctness component's score 1. A wrong one is its score 0, or, for a component that gives
partial credit (code's pass fraction, answer's f1), any score below 1: a program that passes half the tests is not a
right program, though with `correct_threshold: 0.5` length scores it as one. The threshold decides which branch of
length each of them takes, and `correct_threshold: 0` puts even a score of 0 on the right branch."""

from __future__ import annotations

import itertools
from typing import Any

import pytest
from pydantic import ValidationError

from reward_models.runtime import Outcome
from verifier_service.schema import ComponentResult, LengthSpec, RmSpec, ScoreItem
from verifier_service.scoring import length, rm

MAX_TOKENS, TARGET = 100, 50
LENGTHS = (0, 1, 25, TARGET, 75, MAX_TOKENS, TARGET + 2 * TARGET, 10 * MAX_TOKENS)
PRIMARIES: dict[str, dict[str, Any]] = {  # name -> its spec; partial: whether a wrong answer can score above 0
    "math": {"math": {"gold": "4"}},
    "choice": {"choice": {"gold": "A"}},
    "answer exact": {"answer": {"gold": "Paris"}},
    "answer f1": {"answer": {"gold": "Paris", "match": "f1"}},
    "code": {"code": {"tests": [{"type": "call", "fn": "f", "expected": 1}]}},
    "json_schema": {"json_schema": {"schema": {"type": "object"}}},
    "sql": {"sql": {"schema_sql": "", "gold_sql": "SELECT 1"}},
    "sql executable bonus": {"sql": {"schema_sql": "", "gold_sql": "SELECT 1", "executable_bonus": 0.1}},
    "procedural": {"procedural": {"dataset": "chain_sum", "entry": {"question": "1+1", "answer": "2", "metadata": {}}}},
    "procedural partial": {
        "procedural": {
            "dataset": "chain_sum",
            "entry": {"question": "1+1", "answer": "2", "metadata": {}},
            "partial_credit": True,
        }
    },
    "instructions all": {"instructions": {"instruction_ids": ["punctuation:no_comma"]}},
    "instructions fraction": {"instructions": {"instruction_ids": ["punctuation:no_comma"], "grading": "fraction"}},
}
PARTIAL = {"answer f1", "code", "procedural partial", "instructions fraction", "sql executable bonus"}
SHAPES: dict[str, dict[str, Any]] = {
    "cosine": {"max_tokens": MAX_TOKENS},  # right [0.5, 1], wrong [-1, -0.5]
    "kimi": {"max_tokens": MAX_TOKENS, "correct_short": 0.5, "correct_long": -0.5, "wrong_short": 0.0,
             "wrong_long": -0.5},
    "wrong ends high": {"max_tokens": MAX_TOKENS, "wrong_short": 0.5, "wrong_long": 0.25},
    "target": {"mode": "target", "target_tokens": TARGET},  # right [0, 1], wrong 0
    "target exact, wrong -0.5": {"mode": "target", "target_tokens": TARGET, "kind": "exact", "wrong_score": -0.5},
}  # fmt: skip
THRESHOLDS = (0.0, 0.3, 0.5, 1.0)
PRIMARY_WEIGHTS = (0.0, 0.25, 1.0, 3.0)
LENGTH_WEIGHTS = (1.0, 0.5, -0.5)


def scores_of_wrong_answers(partial: bool) -> list[float]:
    """0, and for partial credit the scores just below and at each threshold, and just below 1: where a wrong
    answer's reward is highest on each branch."""
    if not partial:
        return [0.0]
    edges = [*THRESHOLDS, 0.75, 1.0]
    return sorted({0.0, *(edge - 1e-9 for edge in edges if edge > 0), *(edge for edge in edges if edge < 1)})


def reward(spec: LengthSpec, weights: tuple[float, float], score: float, tokens: int) -> float:
    item = ScoreItem(completion="x", completion_tokens=tokens, math={"gold": "4"}, length=spec,
                     allow_order_inversion=True)  # fmt: skip
    part = length.score(item, spec, ComponentResult(score=score, verdict="correct" if score == 1 else "wrong"))
    assert part.score is not None
    return weights[0] * score + weights[1] * part.score


def inverted(spec: LengthSpec, weights: tuple[float, float], partial: bool) -> bool:
    """Whether some wrong answer, at some length, scores at least as much as the right answer at its worst length."""
    right = min(reward(spec, weights, 1.0, tokens) for tokens in LENGTHS)
    wrong = max(reward(spec, weights, s, tokens) for s in scores_of_wrong_answers(partial) for tokens in LENGTHS)
    return wrong >= right


CASES = list(itertools.product(PRIMARIES, SHAPES, THRESHOLDS, PRIMARY_WEIGHTS, LENGTH_WEIGHTS))


@pytest.mark.parametrize("primary", PRIMARIES)
def test_the_guard_refuses_exactly_the_items_where_a_wrong_answer_can_score_as_much(primary: str) -> None:
    disagreements = []
    for _, shape, threshold, primary_weight, length_weight in (case for case in CASES if case[0] == primary):
        options = {**SHAPES[shape], "correct_threshold": threshold}
        [name] = PRIMARIES[primary]
        fields = {**PRIMARIES[primary], "length": options, "weights": {name: primary_weight, "length": length_weight}}
        try:
            ScoreItem.model_validate({"completion": "x", **fields})
            refused = False
        except ValidationError as exc:
            assert "a wrong answer scores at least as much as a right one" in str(exc), exc
            refused = True
        expected = inverted(LengthSpec(**options), (primary_weight, length_weight), primary in PARTIAL)
        if refused != expected:
            disagreements.append((shape, threshold, primary_weight, length_weight, "refused" if refused else "passed"))
    assert not disagreements, disagreements


def test_the_issue_s_case_is_refused() -> None:
    """Issue 23: correct_threshold 0 let a short wrong answer score 1.0 against a long right one's 0.75."""
    item = {"completion": "x", "math": {"gold": "4"}, "length": {"max_tokens": 100, "correct_threshold": 0.0},
            "weights": {"math": 0.25}}  # fmt: skip
    with pytest.raises(ValidationError, match="math with length"):
        ScoreItem.model_validate(item)
    ScoreItem.model_validate({**item, "length": {"max_tokens": 100}})  # the default threshold: accepted


def test_a_partly_right_program_on_the_right_branch_is_refused_whatever_the_weights() -> None:
    """At correct_threshold 0.5 a program passing 99 of 100 tests counts as right for length: short, it outscores
    a long program that passes them all, and no weight on code makes up for a share that can be as close to 1 as
    it likes. At the default threshold (1) it takes the wrong branch, and the item is accepted."""
    code = {"tests": [{"type": "call", "fn": "f", "expected": 1}]}
    item = {"completion": "x", "code": code, "length": {"max_tokens": 100, "correct_threshold": 0.5}}
    for weight in (1.0, 2.0, 1000.0):
        with pytest.raises(ValidationError, match="code with length"):
            ScoreItem.model_validate({**item, "weights": {"code": weight}})
    spec = LengthSpec(max_tokens=100, correct_threshold=0.5)
    assert reward(spec, (1000.0, 1.0), 0.9999, 0) > reward(spec, (1000.0, 1.0), 1.0, 100)
    ScoreItem.model_validate({**item, "length": {"max_tokens": 100}})
    ScoreItem.model_validate({**item, "allow_order_inversion": True})


# --- Model components (rm): the model's score against the rule's verdict --------------------------------------------
# A model may rank answers within the rule's verdict, never lift a wrong answer to a right one's reward. Brute force
# runs the real pieces: the gate (`RmSpec.settled_by_gate`) on the rule's result, and rm's scorer (`rm.judged`) on
# logits from far below to far above 0 (a raw logit is unbounded: 1e12 outweighs any weight here; a sigmoid
# saturates to 0 and 1 at either end).
LOGITS = (-1e12, -30.0, -1.0, 0.0, 1.0, 30.0, 1e12)
RM_OPTIONS: dict[str, dict[str, Any]] = {
    "raw": {},
    "sigmoid": {"transform": "sigmoid"},
    "raw gated": {"gate": "right"},
    **{f"sigmoid gated at {t}": {"transform": "sigmoid", "gate": "right", "correct_threshold": t} for t in THRESHOLDS},
}
RM_WEIGHTS = (0.0, 0.25, 0.5, 0.999, 1.0, 2.0, -0.5, -1.0)


def rm_scores(spec: RmSpec, score: float) -> list[float]:
    """Every score rm gives an answer whose rule score is `score`: gated out, or the model's over LOGITS."""
    settled = spec.settled_by_gate(ComponentResult(score=score, verdict="correct" if score == 1 else "wrong"))
    if settled is not None:
        assert settled.score is not None and settled.verdict == "gated_out"
        return [settled.score]
    job = rm.RmJob(spec.model, spec.template, True, spec.transform, None, "x")
    found = [rm.judged(job, Outcome(logit), "v1").score for logit in LOGITS]
    assert all(value is not None for value in found)
    return [value for value in found if value is not None]


def rm_inverted(spec: RmSpec, weights: tuple[float, float], partial: bool) -> bool:
    right = min(weights[0] + weights[1] * s for s in rm_scores(spec, 1.0))
    wrong = max(weights[0] * score + weights[1] * s for score in scores_of_wrong_answers(partial)
                for s in rm_scores(spec, score))  # fmt: skip
    return wrong >= right


@pytest.mark.parametrize("primary", PRIMARIES)
def test_the_guard_refuses_exactly_the_items_where_a_model_can_lift_a_wrong_answer(primary: str) -> None:
    disagreements = []
    for shape, primary_weight, rm_weight in itertools.product(RM_OPTIONS, PRIMARY_WEIGHTS, RM_WEIGHTS):
        [name] = PRIMARIES[primary]
        options = {"model": "tiny", **RM_OPTIONS[shape]}
        fields = {**PRIMARIES[primary], "rm": options, "weights": {name: primary_weight, "rm": rm_weight}}
        try:
            ScoreItem.model_validate({"completion": "x", **fields})
            refused = False
        except ValidationError as exc:
            assert f"({name} with rm)" in str(exc) and 'gate "right"' in str(exc), exc
            # raw logits are refused gated too: the hint bounds them first, whichever way it goes on
            assert 'rm: transform "sigmoid", then a weight below the rule\'s or gate "right"' in str(exc), exc
            refused = True
        expected = rm_inverted(RmSpec(**options), (primary_weight, rm_weight), primary in PARTIAL)
        if refused != expected:
            disagreements.append((shape, primary_weight, rm_weight, "refused" if refused else "passed"))
    assert not disagreements, disagreements


def test_the_two_recipes_pass_and_a_raw_or_heavy_model_beside_the_rule_does_not() -> None:
    """Squashed under the rule: sigmoid at a weight below the rule's. Gated on the rule: any positive weight. Raw
    logits beside the rule, or the default weight of 1 (a saturated sigmoid ties a wrong answer with a right one):
    refused; with partial credit, squashing is not enough (a wrong answer's rule score comes as close to 1 as it
    likes) and only the gate passes."""
    math, code = {"gold": "4"}, {"tests": ["assert True"]}
    squashed, gated = {"model": "m", "transform": "sigmoid"}, {"model": "m", "transform": "sigmoid", "gate": "right"}
    accepted: list[dict[str, Any]] = [
        {"math": math, "rm": squashed, "weights": {"math": 1.0, "rm": 0.5}},
        {"math": math, "rm": gated, "weights": {"rm": 100.0}},
        {"code": code, "rm": gated},
        {"rm": {"model": "m"}},  # the model alone: nothing to invert
        {"math": math, "rm": {"model": "m"}, "weights": {"rm": 0.0}},  # counted for nothing
        {"math": math, "rm": {"model": "m"}, "allow_order_inversion": True},
    ]
    refused: list[dict[str, Any]] = [
        {"math": math, "rm": {"model": "m"}},
        {"math": math, "rm": {"model": "m"}, "weights": {"rm": 0.01}},
        {"math": math, "rm": squashed},
        {"math": math, "rm": {"model": "m", "gate": "right"}},  # a raw logit can sink a right answer below 0
        {"code": code, "rm": squashed, "weights": {"rm": 0.01}},
        {"math": math, "rm": {**gated, "correct_threshold": 0.0}},  # every answer passes the gate
    ]
    for fields in accepted:
        ScoreItem.model_validate({"completion": "x", **fields})
    for fields in refused:
        with pytest.raises(ValidationError, match="a wrong answer scores at least as much as a right one"):
            ScoreItem.model_validate({"completion": "x", **fields})


def test_an_ungated_model_counts_against_every_rule_and_a_gated_one_against_the_one_it_reads() -> None:
    both = {"math": {"gold": "4"}, "choice": {"gold": "A"}}
    squashed = {"model": "m", "transform": "sigmoid"}
    with pytest.raises(ValidationError, match=r"\(math with rm; choice with rm\)"):
        ScoreItem.model_validate({"completion": "x", **both, "rm": squashed})
    item = ScoreItem.model_validate({"completion": "x", **both, "rm": squashed, "weights": {"rm": 0.5}})
    assert item.order_inversions() == []
    gated = {**squashed, "gate": "right", "correct_from": "choice"}
    item = ScoreItem.model_validate(
        {"completion": "x", **both, "rm": gated, "weights": {"choice": 0.5, "rm": -1.0}, "allow_order_inversion": True}
    )
    assert item.order_inversions() == ["choice with rm"]  # a right choice can sink below 0; math is not gated on


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"gate": "right"}, "rm reads correctness from another component: the item needs one of math"),
        ({"correct_threshold": 0.5}, 'correct_from and correct_threshold apply only with gate "right"'),
        ({"correct_from": "math"}, 'correct_from and correct_threshold apply only with gate "right"'),
        ({"gate": "wrong"}, "Input should be 'none' or 'right'"),
    ],
)
def test_gate_options_that_do_not_fit_are_refused(options: dict[str, Any], message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        ScoreItem.model_validate({"completion": "x", "rm": {"model": "m", "transform": "sigmoid", **options}})


def test_the_checked_combinations_are_told_apart_by_every_option_the_guard_reads() -> None:
    """The guard's verdict is remembered per combination (schema._CHECKED): one that differs only in transform, gate
    or correct_threshold must be checked again, not given the first one's verdict."""
    math = {"gold": "4"}
    base = {"completion": "x", "math": math, "weights": {"rm": 0.5}}
    ScoreItem.model_validate({**base, "rm": {"model": "m", "transform": "sigmoid"}})
    with pytest.raises(ValidationError, match="math with rm"):
        ScoreItem.model_validate({**base, "rm": {"model": "m"}})
    gated = {"model": "m", "transform": "sigmoid", "gate": "right"}
    ScoreItem.model_validate({**base, "weights": {"rm": 5.0}, "rm": gated})
    with pytest.raises(ValidationError, match="math with rm"):
        ScoreItem.model_validate({**base, "weights": {"rm": 5.0}, "rm": {**gated, "gate": "none"}})
    with pytest.raises(ValidationError, match="math with rm"):
        ScoreItem.model_validate({**base, "weights": {"rm": 5.0}, "rm": {**gated, "correct_threshold": 0.0}})


def test_the_gate_scores_a_wrong_answer_0_and_an_unjudged_one_null_without_the_model() -> None:
    spec = RmSpec(model="m", transform="sigmoid", gate="right", correct_threshold=0.5)
    wrong = spec.settled_by_gate(ComponentResult(score=0.25, verdict="partial"))
    assert wrong is not None and (wrong.score, wrong.verdict) == (0.0, "gated_out")
    unjudged = spec.settled_by_gate(ComponentResult(score=None, verdict="worker_crashed"))
    assert unjudged is not None and (unjudged.score, unjudged.verdict) == (None, "primary_unjudged")
    assert spec.settled_by_gate(ComponentResult(score=0.5, verdict="partial")) is None  # the model scores it


def test_a_client_that_sends_every_option_at_its_default_is_not_refused() -> None:
    """The trainer client sends a spec's every field: the gate's at their defaults say nothing and pass."""
    spec = RmSpec(model="m").model_dump()
    assert spec["correct_from"] is None and spec["correct_threshold"] == 1.0
    ScoreItem.model_validate({"completion": "x", "rm": spec})
