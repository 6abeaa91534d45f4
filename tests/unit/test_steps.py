"""The `steps` component: each claim form it checks and each look-alike it must leave alone, exact spans, min and
mean, GSM8K's reference solutions (no false alarm) and planted errors (caught), and inputs shaped to make a regex or
a big-number computation run away."""

from __future__ import annotations

import json
import random
import re
from pathlib import Path

import pytest

from tests.unit.test_arithmetic_compiled import require_compiled
from verifier_service.schema import ScoreItem, StepsSpec
from verifier_service.scoring import arithmetic
from verifier_service.scoring.arithmetic import MAX_TOKENS, claims
from verifier_service.scoring.steps import score

DATA = Path(__file__).resolve().parents[1] / "data" / "steps"
ANNOTATION = re.compile(r"<<[^<>]*>>")


@pytest.fixture(params=["compiled", "python"], autouse=True)
def reader(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Each test runs with the C reader (scoring/_arithmetic.c, the Python reader behind it for what it declines), and
    again with the Python reader alone."""
    if request.param == "compiled":
        require_compiled()
    else:
        monkeypatch.setattr(arithmetic, "READ_CLAIMS", None)
    return str(request.param)


def checked(text: str) -> list[tuple[str, bool]]:
    """Each claim found: its text (the slice of its span) and whether it is right."""
    return [(text[start:end], right) for start, end, right in claims(text)]


def judged(completion: str, **options: object) -> tuple[float | None, str]:
    spec = StepsSpec(**options)  # type: ignore[arg-type]
    found = score(ScoreItem(completion=completion, steps=spec), spec)
    return found.score, found.verdict


@pytest.mark.parametrize(
    ("text", "claim"),
    [
        ("So 48 / 2 = 24 apples.", "48 / 2 = 24"),
        ("It costs $12 × 4 = $48 in all.", "12 × 4 = $48"),
        ("3 x 4 = 12", "3 x 4 = 12"),
        ("3x4=12", "3x4=12"),
        ("1,200 + 300 = 1,500", "1,200 + 300 = 1,500"),
        ("2^10 = 1024", "2^10 = 1024"),
        ("2**10 = 1024", "2**10 = 1024"),
        ("$\\frac{48}{2} = 24$", "\\frac{48}{2} = 24"),
        ("$\\dfrac{3}{4} \\cdot 8 = 6$", "\\dfrac{3}{4} \\cdot 8 = 6"),
        ("$6 \\times 7 = 42$", "6 \\times 7 = 42"),
        ("6 · 7 = 42", "6 · 7 = 42"),
        ("84 ÷ 2 = 42", "84 ÷ 2 = 42"),
        ("50 − 8 = 42", "50 − 8 = 42"),
        ("(2 + 4) * 7 = 42", "(2 + 4) * 7 = 42"),
        ("\\left(2 + 4\\right) \\times 7 = 42", "\\left(2 + 4\\right) \\times 7 = 42"),
        ("-3 + 5 = 2", "-3 + 5 = 2"),
        ("5² = 25", "5² = 25"),
        ("2³ + 1 = 9", "2³ + 1 = 9"),
        ("20% of 50 = 10", "20% of 50 = 10"),
        ("50 * 20% = 10", "50 * 20% = 10"),
        ("0.2 = 20%", "0.2 = 20%"),
        ("100 - 20 = 80% of the price", "100 - 20 = 80%"),
        ("0.1 + 0.2 = 0.3", "0.1 + 0.2 = 0.3"),
        ("2,5 + 1 = 3,5", "2,5 + 1 = 3,5"),
        ("16 eggs - 3 eggs = 13 eggs", "16 eggs - 3 eggs = 13"),
        ("2 hours * 60 minutes/hour = 120 minutes", "2 hours * 60 minutes/hour = 120"),
        ("<think>6 * 7 = 42</think>42", "6 * 7 = 42"),
        ("Step 1: 2 + 3 = 5", "2 + 3 = 5"),
        ("Ferdinand:6/2=3 trees", "6/2=3"),
        ("x = 2 + 3 = 5", "2 + 3 = 5"),
        ("(so 2 + 3 = 5)", "2 + 3 = 5"),
        ("it takes 25 / 1/5 = 125 cups", "25 / 1/5 = 125"),
    ],
)
def test_each_claim_form_is_found_with_its_exact_span(text: str, claim: str) -> None:
    assert checked(text) == [(claim, True)]


@pytest.mark.parametrize(
    ("text", "claim"),
    [
        ("So 48 / 2 = 25 apples.", "48 / 2 = 25"),
        ("It costs $12 × 4 = $46 in all.", "12 × 4 = $46"),
        ("3 x 4 = 13", "3 x 4 = 13"),
        ("1,200 + 300 = 1,600", "1,200 + 300 = 1,600"),
        ("2^10 = 1000", "2^10 = 1000"),
        ("$\\frac{48}{2} = 23$", "\\frac{48}{2} = 23"),
        ("5² = 10", "5² = 10"),
        ("20% of 50 = 15", "20% of 50 = 15"),
        ("0.2 = 2%", "0.2 = 2%"),
        ("10 / 3 = 3.34", "10 / 3 = 3.34"),
        ("7 / 2 = 4.5", "7 / 2 = 4.5"),
    ],
)
def test_a_wrong_claim_is_found_wrong(text: str, claim: str) -> None:
    assert checked(text) == [(claim, False)]


@pytest.mark.parametrize(
    ("text", "found"),
    [
        ("12 * 4 = 50 5 boxes", [("12 * 4 = 50", False)]),
        ("12 * 4 = 48 5 boxes", [("12 * 4 = 48", True)]),
        ("2+2=5 3+3=6", [("2+2=5", False), ("3+3=6", True)]),
        ("2+2=4 3+3=7", [("2+2=4", True), ("3+3=7", False)]),
        ("2+2=4 3+3=6", [("2+2=4", True), ("3+3=6", True)]),
        ("1+1=2 1+1=2 1+1=2 ", [("1+1=2", True)] * 3),
        ("1+1=3 1+1=2 1+1=2 ", [("1+1=3", False), ("1+1=2", True), ("1+1=2", True)]),
        ("2+2=5, 3+3=6", [("2+2=5", False), ("3+3=6", True)]),
        ("12 * 4 = 50 (5 boxes)", [("12 * 4 = 50", False)]),
        ("12 * 4 = 48 (5 boxes)", [("12 * 4 = 48", True)]),
        ("2 + 3 = 5 (2 + 3 = 6)", [("2 + 3 = 5", True), ("2 + 3 = 6", False)]),
        # a space may group thousands (GSM8K writes `$12 000`): either reading of the result may hold it
        ("1000 + 500 = 1 500 boxes", [("1000 + 500 = 1 500", True)]),
        ("1000 + 500 = 1 600 boxes", [("1000 + 500 = 1", False)]),
        ("2 + 2 = 5 333 boxes", [("2 + 2 = 5", False)]),
        ("2 + 2 = 4 100 + 100 = 201", [("2 + 2 = 4", True), ("100 + 100 = 201", False)]),
        ("W = 1 500 + 200 = 1700", []),  # the sum starts inside a number: not a step
        # a mixed number, likewise read either way; what follows it starts inside it
        ("5 - 1 - 1/2 = 3 1/2 hours", [("5 - 1 - 1/2 = 3 1/2", True)]),
        ("7/2 = 3 1/2 + 1 = 4 1/2", [("7/2 = 3 1/2", True)]),
        ("W = 1 1/2 / 1/2 = 3 episodes", []),
        ("12 * 4 = 50 1/2 boxes", [("12 * 4 = 50", False)]),
        ("2+2=4 1/2+1/2=5", [("2+2=4", True), ("1/2+1/2=5", False)]),
        # the same in LaTeX: a wrong result cannot hide behind `\frac` either
        ("7 * 8 = 50 \\frac{1}{2}", [("7 * 8 = 50", False)]),
        ("101 / 2 = 50 \\frac{1}{2}", [("101 / 2 = 50 \\frac{1}{2}", True)]),
        ("7/2 = 3 \\dfrac{1}{2} + 1 = 4 \\frac{1}{2}", [("7/2 = 3 \\dfrac{1}{2}", True)]),
        ("7 * 8 = 56 \\frac{m}{s}", []),  # not a mixed number: the side is not arithmetic, as before
    ],
)
def test_a_result_ends_where_another_number_follows_after_a_space(text: str, found: list[tuple[str, bool]]) -> None:
    """A wrong result cannot be hidden by writing a number after it (`= 50 5 boxes`): the result is the first
    number, and the next starts a run of its own."""
    assert checked(text) == found


def test_a_wrong_result_with_a_number_after_it_is_invalid() -> None:
    assert judged("12 * 4 = 50 5 boxes") == (0.0, "invalid_step")
    assert judged("12 * 4 = 48 5 boxes") == (1.0, "valid")
    assert judged("2+2=5 3+3=6", aggregate="mean") == (0.5, "invalid_step")


def test_chains_are_running_totals_or_all_equal() -> None:
    assert checked("2 + 3 = 5 + 4 = 9") == [("2 + 3 = 5", True), ("5 + 4 = 9", True)]
    assert checked("2 + 3 = 6 + 4 = 10") == [("2 + 3 = 6 + 4", False), ("6 + 4 = 10", True)]
    assert checked("48 / 2 = 24 = 24.0") == [("48 / 2 = 24", True), ("24 = 24.0", True)]
    assert checked("3 * 4 = 2 * 6 = 12") == [("3 * 4 = 2 * 6", True), ("2 * 6 = 12", True)]


def test_gsm8k_annotations_are_claims_of_their_own() -> None:
    text = "She makes 9 * 2 = $<<9*2=18>>18 every day."
    assert checked(text) == [("9 * 2 = $<<9*2=18>>18", True), ("9*2=18", True)]
    assert checked("It is <<100=1000>>1000 bees") == [("100=1000", False)]  # in a calculation, a lone = is checked
    assert checked("the prose says <<48/2=24>>25") == [("48/2=24", True)]  # no `=` before it: no prose claim


@pytest.mark.parametrize(
    ("text", "right"),
    [
        ("10 / 3 = 3.33", True),  # fewer decimals: the exact value rounds to it
        ("10 / 3 = 3.3", True),
        ("10 / 3 = 3", True),
        ("10 / 3 = 3.4", False),
        ("2 / 3 = 0.67", True),
        ("2 / 3 = 0.66", False),  # truncated, not rounded
        ("7 / 2 = 3.5", True),
        ("7 / 2 = 4", True),  # half a unit either way
        ("12 * 2 = 25", False),  # the exact value needs no more decimals than written: it must be equal
        ("0.1 + 0.2 = 0.30000000000000004", True),  # a calculator's float
        ("10 / 3 ≈ 3.4", True),  # ≈: within one unit of the last digit
        ("10 / 3 \\approx 3.4", True),
        ("10 / 3 ~ 3.4", True),
        ("1000 / 3 ≈ 330", True),  # ≈: or within 1%
        ("10 / 3 ≈ 3.5", False),
    ],
)
def test_rounding(text: str, right: bool) -> None:
    [(_, found)] = checked(text)
    assert found is right


@pytest.mark.parametrize(
    "text",
    [
        "x + 3 = 5",
        "2x = 10",
        "3x + 2 = 11",
        "Let x = 5",
        "n = 12",
        "1 hour = 60 minutes",
        "The ratio 3:2 = 6:4 holds",
        "At 10:30 = half past ten",
        "f(2) = 4",
        "5! = 120",
        "\\sqrt{16} = 4",
        "Read pages 1-5 = the first chapter",
        "Weeks 3-4 = 96 - 71 hours",
        "1. First, note the numbers.\n2. Then add them.",
        "He left at 0900-0130 = 0730 hours",
        "The answer is 42.",
        "2023-01-05 was a Thursday",
        "Drop 8 degrees = 2 - 8 = -6 degrees",
        "$$a_3 = 2, a_{37} = 19$$",  # subscripts
        "1121 \\div 3 = 373 \\text{ remainder } 2",  # a division with remainder
        "1121 / 3 = 373 R 2",
        "\\[ (2 + 3) \\] \\[ \\text{Total sum} = 24 \\times 5 \\]",  # a new display block is a new context
    ],
)
def test_look_alikes_are_not_steps(text: str) -> None:
    assert [claim for claim, _ in checked(text) if claim.startswith(("x", "2x", "3x"))] == []
    assert all(right for _, right in checked(text)), checked(text)
    assert not any("1-5" in claim or "3-4" in claim or ":" in claim for claim, _ in checked(text))


def test_definitions_and_unknowns_have_no_steps_at_all() -> None:
    for text in ("x + 3 = 5", "2x = 10", "Let x = 5", "n = 12", "f(2) = 4", "3:2 = 6:4", "1 hour = 60 minutes"):
        assert claims(text) == [], text


def test_min_mean_and_no_steps() -> None:
    completion = "<think>48 / 2 = 24, and 24 + 5 = 30, and 30 * 2 = 60, and 60 - 1 = 59</think>59"
    assert judged(completion) == (0.0, "invalid_step")
    assert judged(completion, aggregate="mean") == (0.75, "invalid_step")
    assert judged(completion.replace("= 59", "= 58"), aggregate="mean") == (0.5, "invalid_step")
    assert judged(completion.replace("= 30", "= 29"), aggregate="mean") == (1.0, "valid")
    assert judged("<think>48 / 2 = 24</think>24") == (1.0, "valid")
    assert judged("<think>48 / 2 = 24</think>24", aggregate="mean") == (1.0, "valid")
    assert judged("The answer is 24.") == (1.0, "no_steps")


def test_the_result_lists_each_step_span_in_the_completion() -> None:
    completion = "<think>So 48 / 2 = 24.</think>Then 24 + 5 = 30."
    spec = StepsSpec()
    found = score(ScoreItem(completion=completion, steps=spec), spec)
    assert found.steps is not None
    assert [(completion[step.start : step.end], step.score) for step in found.steps] == [
        ("48 / 2 = 24", 1.0),
        ("24 + 5 = 30", 0.0),
    ]
    assert "24 + 5" not in (found.detail or "")  # the detail never quotes the completion
    reasoning = StepsSpec(scope="reasoning")
    inner = score(ScoreItem(completion=completion, steps=reasoning), reasoning)
    assert inner.verdict == "valid" and inner.steps is not None
    assert [(completion[step.start : step.end], step.score) for step in inner.steps] == [("48 / 2 = 24", 1.0)]


def test_reasoning_scope_of_a_completion_without_tags_has_no_steps() -> None:
    assert judged("48 / 2 = 25", scope="reasoning") == (1.0, "no_steps")
    assert judged("48 / 2 = 25</think>ok", scope="reasoning") == (0.0, "invalid_step")


def solutions(name: str) -> list[str]:
    return [json.loads(line)["answer"] for line in (DATA / name).read_text().splitlines()]


def test_no_false_alarm_on_gsm8k_reference_solutions() -> None:
    """Each of 300 GSM8K test solutions, as written (with its calculator annotations) and with them stripped (the
    prose alone), scores 1."""
    texts = solutions("gsm8k_test_300.jsonl")
    assert len(texts) == 300
    alarms = []
    checked_steps = 0
    for text in texts:
        for variant in (text, ANNOTATION.sub("", text)):
            spec = StepsSpec()
            found = score(ScoreItem(completion=variant, steps=spec), spec)
            checked_steps += len(found.steps or ())
            if found.score != 1.0:
                alarms.append(variant)
    print(f"steps: {len(alarms)} false alarms on 600 GSM8K solution texts ({checked_steps} steps checked)")
    assert alarms == []
    assert checked_steps > 2000  # the solutions' steps were read, not passed over


def test_gsm8k_own_arithmetic_errors_are_found() -> None:
    first, second = solutions("gsm8k_test_errors.jsonl")
    assert [claim for claim, right in checked(first) if not right] == ["364 / 4 = <<3/4*364=273>>273"]
    assert [claim for claim, right in checked(second) if not right] == ["32 - $20 = $300"]


@pytest.mark.parametrize("stripped", [False, True], ids=["annotated", "prose_only"])
def test_planted_errors_are_caught(stripped: bool) -> None:
    rows = [json.loads(line) for line in (DATA / "planted.jsonl").read_text().splitlines()]
    kinds = {row["kind"] for row in rows}
    assert len(rows) >= 250 and kinds == {"off_by_one", "digit_swap", "times_ten", "wrong_operator"}
    caught = 0
    for row in rows:
        text = ANNOTATION.sub("", row["solution"]) if stripped else row["solution"]
        spec = StepsSpec()
        caught += score(ScoreItem(completion=text, steps=spec), spec).verdict == "invalid_step"
    rate = caught / len(rows)
    variant = "prose only" if stripped else "annotated"
    print(f"steps: planted errors caught ({variant}): {caught}/{len(rows)} = {rate:.1%}")
    assert rate >= 0.95


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    "text",
    [
        "1" * 100_000,
        "1+" * 50_000,
        "=" * 100_000,
        "1=" * 50_000,
        "1+" * 50_000 + "1=50001",
        "(" * 50_000 + "1" + ")" * 50_000 + " = 1",
        "2^" * 10_000 + "2 = 4",
        "9" * 99 + "^" + "9" * 99 + " = 1",
        "10^100000 = 1",
        "1,000" * 20_000 + " = 1",
        "<<" * 50_000 + "=",
        "\\frac{" * 30_000 + "= 2",
        "a " * 200_000 + "= 1",
        "1 x " * 50_000 + "= 1",
        "1.5 apples per day " * 20_000 + "= 3",
    ],
    ids=lambda text: repr(text[:12]),
)
def test_inputs_shaped_to_run_away_finish_with_a_verdict(text: str) -> None:
    assert judged(text)[1] in ("valid", "invalid_step", "no_steps")


@pytest.mark.timeout(120)
def test_a_megabyte_completion_is_scored_up_to_the_token_budget() -> None:
    line = "She makes 9 * 2 = $<<9*2=18>>18 every day, so 18 * 7 = 126 a week; "
    text = "<think>" + line * (1_000_000 // len(line)) + "</think>126"
    assert len(text) >= 990_000
    spec = StepsSpec()
    found = score(ScoreItem(completion=text, steps=spec), spec)
    assert found.verdict == "valid" and found.steps is not None
    # MAX_TOKENS bounds the work: the first claims are read, those past it are not
    assert 1000 < len(found.steps) < 3 * (1_000_000 // len(line))
    assert text[found.steps[0].start : found.steps[0].end] == "9 * 2 = $<<9*2=18>>18"
    wrong_at_the_end = "1 + 1 = 2. " * (MAX_TOKENS // 5) + "1 + 1 = 3."
    assert judged(wrong_at_the_end) == (1.0, "valid")  # the documented limit: past the budget, nothing is checked
    assert judged("1 + 1 = 3. " + wrong_at_the_end) == (0.0, "invalid_step")


def test_claims_past_the_bounds_are_skipped() -> None:
    assert claims("2^100000 = 1") == []  # too many bits to compute: no step
    assert claims("1" * 101 + " + 1 = 2") == []  # a number of more than 100 digits
    assert checked("2^4095 - 2^4095 = 0") == [("2^4095 - 2^4095 = 0", True)]
    assert claims("(" * 70 + "1" + ")" * 70 + " + 1 = 2") == []  # nested deeper than 64


def test_random_arithmetic_looking_text_never_fails() -> None:
    """Seeded strings of the pieces the reader treats specially: a verdict for each, every span inside the text."""
    pieces = [*"0123456789+-*/^=().,%$ xX<>:;!{}[]~≈×÷·−–²³\n\t", "\\frac", "\\times", "<<", ">>", "of", "apples"]
    pieces += ["per", "\\left(", "\\right)", "\\text{kg}", "</think>", "<think>", "١٢", "\x00", "1,000", "0.5", "**"]
    rng = random.Random(24)
    for _ in range(5000):
        text = "".join(rng.choice(pieces) for _ in range(rng.randint(1, 40)))
        assert all(0 <= start < end <= len(text) for start, end, _ in claims(text)), text


@pytest.mark.parametrize(
    ("text", "claim"),
    [
        ("\\[ 3 \\times 4 = 12 \\]", "3 \\times 4 = 12"),
        ("So, \\(5 \\times 6 = 30\\).", "5 \\times 6 = 30"),
        ("**Step 2:** 30 + 12 = 42", "30 + 12 = 42"),
        ("**2 + 3 = 5**", "2 + 3 = 5"),
        ("- 30 + 12 = 42", "30 + 12 = 42"),  # a bullet, not a minus
        ("1) 30 + 12 = 42", "30 + 12 = 42"),
        ("12 - 4 = 8 (since 4 = 2 * 2)", "12 - 4 = 8"),
        ("12 \\times 4 = 48 \\text{ dollars}", "12 \\times 4 = 48"),
    ],
)
def test_markdown_and_latex_around_a_claim(text: str, claim: str) -> None:
    assert checked(text) == [(claim, True)]


def test_a_latex_alignment_is_a_chain() -> None:
    text = "\\begin{align} 2+3 &= 5 \\\\ &= 5 \\end{align}"
    assert [right for _, right in checked(text)] == [True, True]
