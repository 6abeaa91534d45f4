"""The components beyond math, code and format, through a real server: the catalogue at GET /v1/components, the
order guard, length inputs, and correctness read from another component of the same item."""

from __future__ import annotations

import math
from typing import Any

import httpx
import jsonschema
import pytest

from tests.conftest import Server
from verifier_service.schema import COMPONENTS, PRIMARIES, SPECS, VERDICTS

RIGHT = "<think>6 * 7 = 42</think>The answer is \\boxed{42}."
WRONG = "<think>6 * 7 = 41</think>The answer is \\boxed{41}."


def post(server: Server, items: list[dict[str, Any]]) -> httpx.Response:
    return httpx.post(f"{server.url}/v1/score", json={"items": items}, timeout=60)


def results(server: Server, items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    response = post(server, items)
    assert response.status_code == 200, response.text
    return response.json()["results"]  # type: ignore[no-any-return]


def test_the_catalogue_describes_every_component_from_its_model(server: Server) -> None:
    response = httpx.get(f"{server.url}/v1/components", timeout=10)
    assert response.status_code == 200
    catalogue = response.json()["components"]
    assert list(catalogue) == list(COMPONENTS)
    for name, info in catalogue.items():
        assert info["verdicts"] == [v.value for v in VERDICTS[name]]
        assert set(info["null_verdicts"]) <= set(info["verdicts"]) and "internal_error" in info["null_verdicts"]
        assert info["role"] == ("primary" if name in PRIMARIES else "shaping")
        assert info["reads_correctness"] == (name == "length")
        required = {option for option, about in info["options"].items() if about["required"]}
        assert required == set(info["schema"].get("required", []))
        assert set(info["options"]) == {field.alias or option for option, field in SPECS[name].model_fields.items()}
        assert info["available"] is SPECS[name].available()
    # the defaults it lists are the ones the server applies, and its schema takes what the server takes
    overlong = catalogue["overlong"]
    defaults = {option: about["default"] for option, about in overlong["options"].items() if not about["required"]}
    assert defaults == {"buffer_tokens": None, "penalty": 1.0, "on_truncated": "penalty", "unit": "tokens"}
    assert SPECS["overlong"](max_tokens=10).model_dump(exclude={"max_tokens"}) == defaults
    jsonschema.validate({"max_tokens": 10}, overlong["schema"])
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"penalty": 1.0}, overlong["schema"])
    assert catalogue["repetition"]["score_range"] == "[max_penalty, 0]"


def test_a_wrong_answer_that_can_outscore_a_right_one_is_refused(server: Server) -> None:
    # Kimi-style ends (a short wrong answer, 0.0, beats a long right one, -0.5) with accuracy weighted down
    kimi = {"max_tokens": 100, "correct_short": 0.5, "correct_long": -0.5, "wrong_short": 0.0, "wrong_long": -0.5}
    inverted = {
        "completion": RIGHT,
        "completion_tokens": 10,
        "math": {"gold": "42"},
        "length": kimi,
        "weights": {"math": 0.25},
    }
    balanced = post(server, [inverted | {"weights": {"math": 1.0}}])  # 1 - 0.5 for the long right answer: 0.5 > 0
    assert balanced.status_code == 200, balanced.text
    response = post(server, [{"completion": "x", "format": {}}, inverted])
    assert response.status_code == 422
    [error] = response.json()["errors"]
    assert error["loc"] == "items.1" and "(math with length)" in error["msg"]
    assert "allow_order_inversion" in error["msg"] and "-0.5" not in error["msg"]  # names, never values
    negative = post(server, [{"completion": RIGHT, "math": {"gold": "42"}, "weights": {"math": -1.0}}])
    assert negative.status_code == 422 and "(math)" in negative.json()["errors"][0]["msg"]
    [allowed] = results(server, [inverted | {"allow_order_inversion": True}])
    assert allowed["components"]["length"]["verdict"] == "correct"


def test_the_usual_recipe_passes_the_guard(server: Server) -> None:
    """Accuracy, format, DAPO overlong, cosine length and repetition at their defaults, all weight 1."""
    recipe = {
        "math": {"gold": "42"},
        "format": {},
        "overlong": {"max_tokens": 1000},
        "length": {"max_tokens": 1000},
        "repetition": {},
    }
    right, wrong = results(
        server,
        [
            {"completion": RIGHT, "completion_tokens": 500, "truncated": False, **recipe},
            {"completion": WRONG, "completion_tokens": 500, "truncated": False, **recipe},
        ],
    )
    assert list(right["components"]) == ["math", "format", "overlong", "length", "repetition"]
    assert right["components"]["length"]["score"] == pytest.approx(0.75)  # halfway from 1.0 to 0.5
    assert wrong["components"]["length"]["score"] == pytest.approx(-0.75)
    assert right["reward"] > wrong["reward"]


def test_length_reads_correctness_from_the_primary(server: Server) -> None:
    length = {"mode": "target", "target_tokens": 100}
    items = [
        {"completion": RIGHT, "completion_tokens": 150, "math": {"gold": "42"}, "length": length},
        {"completion": WRONG, "completion_tokens": 150, "math": {"gold": "42"}, "length": length},
        # the primary cannot judge: neither can length, and the item is null
        {"completion": RIGHT, "completion_tokens": 150, "math": {"gold": "\\frac{"}, "length": length},
        # two primaries: length names the one it reads
        {
            "completion": "<think>x</think><answer>Paris</answer> \\boxed{41}",
            "completion_tokens": 50,
            "math": {"gold": "42"},
            "answer": {"gold": "paris"},
            "length": length | {"correct_from": "answer"},
            "weights": {"math": 1.0, "answer": 1.0, "length": 1.0},
        },
    ]
    right, wrong, unjudged, two = results(server, items)
    assert right["components"]["length"] == {
        "score": pytest.approx(0.5), "verdict": "correct", "detail": right["components"]["length"]["detail"]
    }  # fmt: skip
    assert (wrong["components"]["length"]["score"], wrong["components"]["length"]["verdict"]) == (0.0, "wrong")
    assert unjudged["components"]["length"]["verdict"] == "primary_unjudged"
    assert unjudged["reward"] is None and unjudged["status"] == "error"
    assert two["components"]["math"]["verdict"] == "wrong" and two["components"]["length"]["verdict"] == "correct"


def test_two_primaries_without_correct_from_are_refused(server: Server) -> None:
    item = {"completion": RIGHT, "math": {"gold": "42"}, "answer": {"gold": "42"}, "length": {"max_tokens": 9}}
    response = post(server, [item])
    assert response.status_code == 422 and "correct_from" in response.json()["errors"][0]["msg"]
    alone = post(server, [{"completion": RIGHT, "format": {}, "length": {"max_tokens": 9}}])
    assert alone.status_code == 422 and "math, code, choice, answer" in alone.json()["errors"][0]["msg"]


def test_a_length_never_falls_back_to_characters(server: Server) -> None:
    unknown, chars = results(
        server,
        [
            {"completion": "x" * 950, "overlong": {"max_tokens": 1000}},
            {"completion": "x" * 950, "overlong": {"max_tokens": 1000, "unit": "chars"}},
        ],
    )
    assert unknown["components"]["overlong"]["score"] is None
    assert unknown["components"]["overlong"]["verdict"] == "length_unknown" and unknown["reward"] is None
    # 950 characters: 150 into the 200-character buffer
    assert math.isclose(chars["reward"], -0.75) and chars["components"]["overlong"]["verdict"] == "in_buffer"


def test_a_truncated_completion(server: Server) -> None:
    cut = {"completion": "<think>and so on", "completion_tokens": 1000, "truncated": True}
    penalised, skipped = results(
        server,
        [
            cut | {"overlong": {"max_tokens": 1000}},
            cut | {"overlong": {"max_tokens": 1000, "on_truncated": "null"}},
        ],
    )
    assert (penalised["reward"], penalised["components"]["overlong"]["verdict"]) == (-1.0, "truncated")
    assert (skipped["reward"], skipped["components"]["overlong"]["verdict"]) == (None, "truncated")


def test_new_components_score_in_one_batch_with_the_rest(server: Server) -> None:
    loop = "<think>" + "I think so. " * 40 + "</think>" + "\n" * 80
    items = [
        {"completion": "<think>r</think>The answer is \\boxed{C}.", "choice": {"gold": "C"}},
        {"completion": "<think>r</think>The answer is A or C.", "choice": {"gold": "C"}},
        {"completion": "<think>r</think><answer>The Eiffel Tower</answer>", "answer": {"gold": "eiffel tower"}},
        {"completion": loop, "repetition": {}},
        {"completion": RIGHT, "math": {"gold": "42"}},
    ]
    choice, hedged, answer, looping, maths = results(server, items)
    assert (choice["reward"], choice["components"]["choice"]["verdict"]) == (1.0, "correct")
    assert (hedged["reward"], hedged["components"]["choice"]["verdict"]) == (0.0, "hedged")
    assert (answer["reward"], answer["components"]["answer"]["verdict"]) == (1.0, "correct")
    assert (looping["reward"], looping["components"]["repetition"]["verdict"]) == (-1.0, "loop")
    assert maths["reward"] == 1.0
