"""The `repetition` component: TRL's and open-r1's formula, CJK units, loops at the end."""

from __future__ import annotations

import math
import random

import pytest
from trl.rewards import get_repetition_penalty_reward

from verifier_service.schema import RepetitionSpec, ScoreItem
from verifier_service.scoring.repetition import LOOP_MIN_CHARS, end_loop, score, units


def scored(completion: str, **options: object) -> tuple[float | None, str]:
    spec = RepetitionSpec(**options)
    found = score(ScoreItem(completion=completion, repetition=spec), spec)
    return found.score, found.verdict


def ids(text: str, kind: str = "words") -> list[int]:
    vocabulary: dict[str, int] = {}
    return [vocabulary.setdefault(unit, len(vocabulary)) for unit in units(text, kind)]


def random_text(rng: random.Random) -> str:
    vocabulary = [rng.choice(["cat", "Dog", "sat", "on", "the", "mat", "42", "x+y", "Mat"]) for _ in range(6)]
    return " ".join(rng.choice(vocabulary) for _ in range(rng.randint(0, 60)))


@pytest.mark.parametrize("seed", range(40))
def test_equal_to_trl_on_the_same_units(seed: int) -> None:
    """TRL counts n-grams of token ids; given one id per word, it must agree with ours to the bit."""
    rng = random.Random(seed)
    text, n, penalty = random_text(rng), rng.randint(1, 4), rng.choice([-1.0, -0.5, -2.0])
    [theirs] = get_repetition_penalty_reward(ngram_size=n, max_penalty=penalty)([ids(text)])
    ours, _ = scored(text, n=n, max_penalty=penalty, units="words")
    assert end_loop(text) is None or len(text) < LOOP_MIN_CHARS
    assert ours == theirs


@pytest.mark.parametrize(
    ("text", "n", "expected"),
    [
        ("", 3, 0.0),  # open-r1: empty text scores 0
        ("only two", 3, 0.0),  # fewer words than n
        ("a b c d e f", 3, 0.0),  # no repeat
        ("A b c a B c", 3, -0.25),  # case folded: 4 trigrams, 3 unique
        ("a b a b a b", 2, -0.6),  # 5 bigrams, 2 unique
    ],
)
def test_open_r1_cases(text: str, n: int, expected: float) -> None:
    found, _ = scored(text, n=n, units="words")
    assert math.isclose(found or 0.0, expected, abs_tol=1e-12)


def test_chinese_and_japanese_are_measured_in_auto_units() -> None:
    chinese = "我们计算总数然后检查" + "答案是四十二。" * 3 + "结束了吗没有"
    auto, verdict = scored(chinese)
    assert auto is not None and auto < -0.2 and verdict == "repetitive"
    words, verdict = scored(chinese, units="words")  # one "word": whitespace splitting sees nothing
    assert (words, verdict) == (0.0, "too_short")
    japanese = "これはペンです。" * 2 + "それは本です。"
    assert scored(japanese)[0] < 0  # type: ignore[operator]


@pytest.mark.parametrize(
    "completion",
    [
        "<think>Compute 6 * 7.</think>The answer is 42." + "\n" * 100,
        "The answer is 42. " + "Let me check this again. " * 10 + "Let me ch",  # cut mid-copy, as truncation cuts
        "答案是四十二。" + "你好" * 40,
        "the " * 50,
    ],
)
def test_a_completion_that_ends_in_a_loop(completion: str) -> None:
    assert scored(completion, max_penalty=-0.7) == (-0.7, "loop")


@pytest.mark.parametrize(
    "completion",
    [
        "It is four!!!!",
        "The answer is 4444.",
        "ha ha ha ha",
        # a loop in the middle, then plenty of distinct text: only the end counts
        "Let me see. " + "Let me check. " * 20 + " ".join(f"word{i}" for i in range(200)),
    ],
)
def test_ordinary_endings_are_not_loops(completion: str) -> None:
    assert scored(completion)[1] != "loop"


def test_scope() -> None:
    loop_inside = "<think>" + "again and again " * 30 + "</think>The answer is 42, as the sum of six sevens shows."
    assert scored(loop_inside, scope="answer") == (0.0, "no_repetition")
    assert scored(loop_inside, scope="reasoning") == (-1.0, "loop")
    assert scored(loop_inside, scope="all")[0] < -0.5  # type: ignore[operator]


def test_detail_never_quotes_the_text() -> None:
    spec = RepetitionSpec()
    found = score(ScoreItem(completion="secret words here " * 5 + "end", repetition=spec), spec)
    assert found.verdict == "repetitive" and found.detail is not None and "secret" not in found.detail


def test_a_megabyte_returns() -> None:
    rng = random.Random(1)
    text = " ".join(str(rng.randint(0, 10**6)) for _ in range(150_000))
    assert scored(text)[1] in {"no_repetition", "repetitive"}
    assert scored("x" * 1_000_000) == (-1.0, "loop")


def naive_loop(text: str) -> tuple[int, int] | None:
    """The loop definition, spelled out character by character."""
    size = len(text)
    for period in range(1, min(200, size // 4) + 1):
        length = period
        while length < size and text[size - length - 1] == text[size - length - 1 + period]:
            length += 1
        if length >= 4 * period and length >= LOOP_MIN_CHARS:
            return period, length
    return None


def test_loop_detection_agrees_with_the_definition() -> None:
    rng = random.Random(3)
    for _ in range(3000):
        span = "".join(rng.choice("ab \n") for _ in range(rng.randint(1, 30)))
        head = "".join(rng.choice("abc \n") for _ in range(rng.randint(0, 100)))
        text = head + span * rng.randint(0, 12) + span[: rng.randint(0, len(span))]
        assert end_loop(text) == naive_loop(text), repr(text)
