"""The item-level checks (`ScoreItem._check_components`): each combination of components, weights and gated options
is checked once and remembered, so the verdict must depend on every one of them. Each case first validates an item
that passes, then one that differs from it in a single respect and must fail (and the other way round): a verdict
remembered under too coarse a key would let the second through."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from verifier_service.schema import ScoreItem

RIGHT = "<think>6 * 7 = 42</think>The answer is \\boxed{42}."
KIMI = {"max_tokens": 100, "correct_short": 0.5, "correct_long": -0.5, "wrong_short": 0.0, "wrong_long": -0.5}
BASE: dict[str, Any] = {"completion": RIGHT, "completion_tokens": 10, "math": {"gold": "42"}}
ANSWER: dict[str, Any] = {"completion": RIGHT, "completion_tokens": 10, "answer": {"gold": "42"}}

CASES = {
    # the weights: accuracy weighted down lets a short wrong answer beat a long right one
    "weight": ({**BASE, "length": KIMI}, {**BASE, "length": KIMI, "weights": {"math": 0.25}}, "at least as much"),
    # the gated component's options, same weights
    "options": (
        {**BASE, "length": {"max_tokens": 100}, "weights": {"math": 0.25}},
        {**BASE, "length": KIMI, "weights": {"math": 0.25}},
        "at least as much",
    ),
    # the threshold: at 0 a wrong answer takes length's right branch
    "threshold": (
        {**BASE, "length": {"max_tokens": 100}, "weights": {"math": 0.25}},
        {**BASE, "length": {"max_tokens": 100, "correct_threshold": 0.0}, "weights": {"math": 0.25}},
        "at least as much",
    ),
    # the correctness component's options: answer's f1 gives partial credit, which threshold 0.5 scores as right
    "partial credit": (
        {**ANSWER, "length": {"max_tokens": 100, "correct_threshold": 0.5}},
        {**ANSWER, "answer": {"gold": "42", "match": "f1"}, "length": {"max_tokens": 100, "correct_threshold": 0.5}},
        "at least as much",
    ),
    # the override
    "allowed": (
        {**BASE, "length": KIMI, "weights": {"math": 0.25}, "allow_order_inversion": True},
        {**BASE, "length": KIMI, "weights": {"math": 0.25}},
        "at least as much",
    ),
    # which components the item has: length names a primary the item lacks
    "components": (
        {**BASE, "answer": {"gold": "42"}, "length": {"max_tokens": 100, "correct_from": "answer"}},
        {**BASE, "format": {}, "length": {"max_tokens": 100, "correct_from": "answer"}},
        "correct_from names a component",
    ),
    # a weight for a component the item does not request
    "weighted name": (
        {**BASE, "format": {}, "weights": {"format": 0.5}},
        {**BASE, "overlong": {"max_tokens": 100}, "weights": {"format": 0.5}},
        "does not request: format",
    ),
}


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("first", ["passing", "failing"])
def test_each_combination_gets_its_own_verdict(case: str, first: str) -> None:
    passing, failing, message = CASES[case]
    for _ in range(2):  # the second round meets both verdicts remembered
        for which in ["passing", "failing"] if first == "passing" else ["failing", "passing"]:
            if which == "passing":
                ScoreItem.model_validate(passing)
            else:
                with pytest.raises(ValidationError, match=message):
                    ScoreItem.model_validate(failing)


def test_an_item_without_components_is_refused_with_or_without_weights() -> None:
    for item in ({"completion": "x"}, {"completion": "x", "weights": {}}, {"completion": "x", "weights": {"math": 1}}):
        with pytest.raises(ValidationError):
            ScoreItem.model_validate(item)


def test_numpy_integers_a_dataset_holds_are_the_ints_they_are_and_json_stays_strict() -> None:
    """In Python (the client, the adapters) an option or an index read from a dataset is often numpy's int64; it
    never comes from JSON, where "12" and true are still refused."""
    import numpy as np

    choice = {"gold": [np.int64(2), np.uint8(0)], "options": ["a", "b", "c"]}
    item = ScoreItem.model_validate(
        {
            "completion": RIGHT,
            "completion_tokens": np.int64(10),
            "overlong": {"max_tokens": np.int32(100)},
            "choice": choice,
        }
    )
    assert (item.completion_tokens, item.overlong.max_tokens, item.choice.gold) == (10, 100, ("C", "A"))
    assert type(item.completion_tokens) is int
    for bad in ('"12"', "true"):
        with pytest.raises(ValidationError, match="completion_tokens"):
            ScoreItem.model_validate_json(f'{{"completion": "x", "format": {{}}, "completion_tokens": {bad}}}')
    with pytest.raises(ValidationError, match="completion_tokens"):
        ScoreItem.model_validate({"completion": "x", "format": {}, "completion_tokens": np.bool_(True)})
