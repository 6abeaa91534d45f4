"""DESIGN.md section 4, bullet by bullet: each rule a user relies on, as a table of real answer shapes."""

from __future__ import annotations

import pytest

from verifier_service.schema import MathOptions, Verdict
from verifier_service.scoring.math import MathResult, MathTask, prepare_math, score_math

RIGHT, WRONG = 1.0, 0.0

FINAL_ANSWER_ONLY = [
    ("<think>is it \\boxed{5}?</think>The answer is \\boxed{6}.", "5", WRONG),
    ("<think>is it \\boxed{5}?</think>The answer is \\boxed{6}.", "6", RIGHT),
    ("<think>a</think><think>b \\boxed{7}</think>So \\boxed{8}", "8", RIGHT),
    ("<think>I think \\boxed{5} but I never finish", "5", WRONG),
    ("</think>\\boxed{5}", "5", RIGHT),  # a template that opened the tag itself
]

EXTRACTION_FORMS = [
    ("So the total is \\boxed{42}.", "42", RIGHT),
    ("So the total is \\fbox{42}.", "42", RIGHT),
    ("She pays 3 * 24 = 72 dollars.\n#### 72", "72", RIGHT),
    ("She pays 3 * 24 = 72 dollars.\n#### 1,234", "1234", RIGHT),
    ("First 3 + 4 = 7, then 7 * 2 = 14. The answer is 14.", "14", RIGHT),
    ("First 3 + 4 = 7, then 7 * 2 = 14. The answer is 14.", "7", WRONG),
    ("Adding up, we get **73** apples in total.", "73", RIGHT),
    ("The final answer is $\\frac{1}{3}.$", "\\frac13", RIGHT),
    ("The value is $\\sqrt{2},$ as shown", "\\sqrt{2}", RIGHT),
    ("He ran 4 4/9 miles, so the answer is 4 4/9.", "40/9", RIGHT),
    ("The answer is 4 4/9.", "4", WRONG),
    ("Total: 7,425,000 people. The answer is 7,425,000", "7425000", RIGHT),
    ("The answer is 1 000 000.", "1000000", RIGHT),
    ("Answer: 2.50", "2.5", RIGHT),
    ("The answer is -3.", "-3", RIGHT),
    ("There is no way to know.", "4", WRONG),
    ("", "4", WRONG),
]

BARE_LATEX_GOLD = [
    ("\\boxed{\\frac{1}{3}}", "\\dfrac{1}{3}", RIGHT),
    ("\\boxed{\\sqrt{3}}", "\\sqrt3", RIGHT),
    ("\\boxed{2\\pi}", "2\\pi", RIGHT),
    ("\\boxed{2}", "2\\pi", WRONG),
    ("\\boxed{\\frac{1}{2^{99}}}", "1/2^{98}", WRONG),
    ("\\boxed{(1,2),(2,1)}", "(1,2),(2,1)", RIGHT),
    ("\\boxed{x^2+2x+1}", "(x+1)^2", RIGHT),
    ("\\boxed{(-\\infty, 2]}", "(-\\infty,2]", RIGHT),
]

MULTI_PART_AND_HEDGES = [
    ("\\boxed{(1,2)}, \\boxed{(2,1)}", "(1,2),(2,1)", RIGHT),
    ("\\boxed{1} and \\boxed{2}", "1, 2", RIGHT),
    ("\\boxed{5} or \\boxed{6}", "5", WRONG),
    ("\\boxed{6} or \\boxed{5}", "5", WRONG),
    ("It is $x = 5 = 6$", "5", WRONG),
    ("It is $x = 6 = 5$", "5", WRONG),
    ("Earlier \\boxed{3}. Then, after checking again, the result is \\boxed{5}", "5", RIGHT),
]

PARTIAL_PARSES = [
    ("$\\boxed{1-\\frac1{\\mathrm e}}$", "1", WRONG),
    ("$\\boxed{1-\\frac1{\\mathrm e}}$", "1 - \\frac{1}{e}", RIGHT),
    ("$\\boxed{1,2,\\ldots,n}$", "2", WRONG),
    ("$\\boxed{4\\sqrt(2)}$", "4", WRONG),
    ("$\\boxed{4\\sqrt(2)}$", "4\\sqrt{2}", RIGHT),
    ("$\\boxed{3x+4y+14=0}$", "0", WRONG),
    ("$\\boxed{1/2^{99}}$", "1/2^{98}", WRONG),
    ("The answer is 1e-3", "0.001", RIGHT),
    ("\\boxed{1e-3}", "0.001", RIGHT),
    ("\\boxed{500}", "5", WRONG),
    ("\\boxed{10001}", "10000", WRONG),
    ("\\boxed{[1,2]}", "(1,2)", WRONG),
    ("\\boxed{3.14}", "\\pi", WRONG),
    ("$\\boxed{x = 5}$", "5", RIGHT),
]


@pytest.mark.parametrize(
    ("completion", "gold", "expected"),
    FINAL_ANSWER_ONLY + EXTRACTION_FORMS + BARE_LATEX_GOLD + MULTI_PART_AND_HEDGES + PARTIAL_PARSES,
)
def test_rule(completion: str, gold: str, expected: float) -> None:
    result = score_math(completion, gold)
    assert result.score == expected, result


def test_hedge_verdict_names_it() -> None:
    assert score_math("\\boxed{5} or \\boxed{6}", "5").verdict in (Verdict.WRONG, Verdict.HEDGED)
    assert score_math("$x = 6 = 5$", "5").verdict == Verdict.HEDGED


def test_unclosed_reasoning_says_so() -> None:
    result = score_math("<think>so \\boxed{5}", "5")
    assert (result.verdict, result.detail) == (Verdict.NO_ANSWER, "the reasoning was opened and never closed")


@pytest.mark.parametrize(
    ("completion", "gold"),
    [
        ("#### 72", "72"),
        ("The answer is 1,234.", "1234"),
        ("\\boxed{-0.5}", "-0.5"),
        ("**73**", "73"),
        ("\\boxed{1000.0}", "1000"),
        ("#### 71", "72"),
        ("so $12$.", "12.5"),
        ("The answer is $576.", "576"),
        ("\\boxed{\\$58}", "58"),
        ("**Answer: $82**.", "82"),
        ("#### 7.50", "7.5"),
        ("#### 7.4", "7.5"),
        ("The answer is 3/4.", "0.75"),
        ("\\boxed{\\frac{6}{8}}", "\\frac34"),
        ("\\boxed{\\frac{5}{8}}", "\\frac34"),
        ("The answer is 2.000001", "2"),
    ],
)
def test_plain_numbers_need_no_worker(completion: str, gold: str) -> None:
    """The fast path settles plain-number pairs in the service process, and agrees with math-verify."""
    prepared = prepare_math(completion, gold, MathOptions())
    if gold == "12.5" or completion.endswith("2.000001"):  # close decimals: math-verify's rounding decides
        assert isinstance(prepared, MathTask)
        return
    assert isinstance(prepared, MathResult)
    from math_verify import parse, verify

    gold_parsed = parse(f"${gold}$" if "\\" in gold else gold)
    assert (prepared.score == 1.0) == verify(gold_parsed, parse(completion)), (completion, gold)


def test_an_answer_without_numbers_needs_no_worker() -> None:
    prepared = prepare_math("<think>hmm</think>I am not sure, maybe seven.", "7", MathOptions())
    assert isinstance(prepared, MathResult) and prepared.verdict == Verdict.NO_ANSWER
    # LaTeX can denote a number without digits: that goes to math-verify
    assert isinstance(prepare_math("$e^{i\\pi}$", "-1", MathOptions()), MathTask)


def test_custom_think_tag() -> None:
    options = MathOptions(think_tag="reasoning")
    assert score_math("<reasoning>\\boxed{1}</reasoning>\\boxed{2}", "2", options).score == RIGHT
    assert score_math("<reasoning>\\boxed{1}</reasoning>\\boxed{2}", "1", options).score == WRONG


def test_answer_length_is_capped() -> None:
    prepared = prepare_math("\\boxed{" + "1+" * 2000 + "1}", "4001", MathOptions(), max_answer=1000)
    assert isinstance(prepared, MathResult) and prepared.verdict == Verdict.ANSWER_TOO_LONG


def test_nesting_is_capped() -> None:
    deep = "\\boxed{" + "{" * 60 + "1" + "}" * 60 + "}"
    prepared = prepare_math(deep, "1", MathOptions())
    assert isinstance(prepared, MathResult) and prepared.verdict == Verdict.ANSWER_TOO_LONG


def test_gsm8k_solution_as_gold() -> None:
    gold = "Natalia sold 48/2 = 24 clips in May.\nAltogether she sold 48+24 = 72 clips.\n#### 72"
    assert score_math("<think>48+24</think>#### 72", gold).score == RIGHT
    assert score_math("<think>48+24</think>#### 24", gold).score == WRONG


@pytest.mark.parametrize(
    ("options", "completion", "gold", "expected"),
    [
        (MathOptions(float_rounding=2), "\\boxed{3.141}", "3.14", RIGHT),
        (MathOptions(float_rounding=6), "\\boxed{3.141}", "3.14", WRONG),
        (MathOptions(strict=False), "\\boxed{y+1}", "x+1", RIGHT),
        (MathOptions(strict=True), "\\boxed{y+1}", "x+1", WRONG),
        (
            MathOptions(extraction=("string",), string_choices=("A", "B", "C", "D")),
            "The answer is B.",
            "B",
            RIGHT,
        ),
        (
            MathOptions(extraction=("string",), string_choices=("A", "B", "C", "D")),
            "The answer is C.",
            "B",
            WRONG,
        ),
        (MathOptions(allow_set_relation_comp=True), "$\\boxed{1 < x < 2}$", "(1,2)", RIGHT),
        (MathOptions(allow_set_relation_comp=False), "$\\boxed{1 < x < 2}$", "(1,2)", WRONG),
        (MathOptions(language="zh"), "所以答案是42。", "42", RIGHT),
        (MathOptions(language="fr"), "Réponse: il reste 220 $ à payer sur 12 mois.", "220", RIGHT),
    ],
)
def test_options(options: MathOptions, completion: str, gold: str, expected: float) -> None:
    assert score_math(completion, gold, options).score == expected
