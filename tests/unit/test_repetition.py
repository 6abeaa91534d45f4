"""The `repetition` component: TRL's and open-r1's formula, CJK units, loops at the end."""

from __future__ import annotations

import itertools
import math
import random
import shutil
import sysconfig
from typing import Any

import numpy as np
import pytest
from trl.rewards import get_repetition_penalty_reward

from verifier_service.schema import RepetitionSpec, ScoreItem
from verifier_service.scoring import ngrams, repetition
from verifier_service.scoring.ngrams import repeated_share, repeated_share_of, units
from verifier_service.scoring.repetition import LOOP_MIN_CHARS, end_loop, score


def require_compiled() -> None:
    """Skip when the C part could not be built for want of a compiler; fail when it should have been."""
    if ngrams.COUNT_NGRAMS is not None and repetition.END_LOOP is not None:
        return
    compiler = (sysconfig.get_config_var("CC") or "cc").split()[0]
    if shutil.which(compiler) is None:
        pytest.skip(f"no C compiler ({compiler}) here to build verifier_service/scoring/_repetition.c")
    pytest.fail(f"{compiler} is here but verifier_service/scoring/_repetition.c was not built: run make install")


@pytest.fixture(params=["compiled", "python"])
def counting(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Each test that takes it runs with the C part (the n-gram count and the loop check), and again with Python and
    numpy only."""
    if request.param == "compiled":
        require_compiled()
    else:
        monkeypatch.setattr(ngrams, "COUNT_NGRAMS", None)
        monkeypatch.setattr(repetition, "END_LOOP", None)
    return str(request.param)


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
def test_equal_to_trl_on_the_same_units(seed: int, counting: str) -> None:
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
def test_open_r1_cases(text: str, n: int, expected: float, counting: str) -> None:
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
def test_a_completion_that_ends_in_a_loop(completion: str, counting: str) -> None:
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
def test_ordinary_endings_are_not_loops(completion: str, counting: str) -> None:
    assert scored(completion)[1] != "loop"


def test_scope(counting: str) -> None:
    loop_inside = "<think>" + "again and again " * 30 + "</think>The answer is 42, as the sum of six sevens shows."
    assert scored(loop_inside, scope="answer") == (0.0, "no_repetition")
    assert scored(loop_inside, scope="reasoning") == (-1.0, "loop")
    assert scored(loop_inside, scope="all")[0] < -0.5  # type: ignore[operator]


def test_detail_never_quotes_the_text() -> None:
    spec = RepetitionSpec()
    found = score(ScoreItem(completion="secret words here " * 5 + "end", repetition=spec), spec)
    assert found.verdict == "repetitive" and found.detail is not None and "secret" not in found.detail


def test_a_megabyte_returns(counting: str) -> None:
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


def test_loop_detection_agrees_with_the_definition(counting: str) -> None:
    rng = random.Random(3)
    for _ in range(3000):
        span = "".join(rng.choice("ab \n") for _ in range(rng.randint(1, 30)))
        head = "".join(rng.choice("abc \n") for _ in range(rng.randint(0, 100)))
        text = head + span * rng.randint(0, 12) + span[: rng.randint(0, len(span))]
        assert end_loop(text) == naive_loop(text), repr(text)


# The fast count (numpy, for texts past ngrams.SHORT_CHARS) against the definition, on texts built to find where they
# could part: words of every length around the 8 characters packed into one code, upper case that lowers to more
# characters, every kind of whitespace str.split knows, Han, kana, Thai and fullwidth runs glued to words, lone
# surrogates, and n from 1 to 8.
_PIECES = [
    "a", "ab", "abcdefg", "abcdefgh", "abcdefghi", "abcdefghijklmnopq", "ABCDEFGHI", "x+y", "42", "4242424242",
    "İstanbul", "straße", "ÉTÉ", "café", "你", "好", "你好", "答案是", "これは", "ペン", "ｶﾀｶﾅ", "สวัสดี", "ĳ",
    "，", "。", "\\frac{1}{2}", "\ud800", "😀", "\u0e3f",
]  # fmt: skip
_GAPS = [" ", "  ", "\t", "\n", "\r\n", "\x0b", "\x0c", "\x1c", "\x1f", "\x85", "\xa0", "\u2003", "\u3000", ""]


def random_units_text(rng: random.Random, size: int) -> str:
    near_misses = ["".join(rng.choice("aB") for _ in range(rng.randint(6, 10))) for _ in range(4)]  # around 8 bytes
    vocabulary = rng.sample(_PIECES, rng.randint(2, 8)) + near_misses
    gaps = _GAPS
    if rng.random() < 0.4:  # ASCII text takes a path of its own
        vocabulary = [piece for piece in vocabulary if piece.isascii()] or near_misses
        gaps = [gap for gap in gaps if gap.isascii()]
    parts = []
    while sum(map(len, parts)) < size:
        parts.append(rng.choice(vocabulary))
        parts.append(rng.choice(gaps) if rng.random() < 0.9 else "")
    return "".join(parts)


@pytest.mark.parametrize("seed", range(60))
def test_the_fast_count_is_the_definition(seed: int) -> None:
    rng = random.Random(seed)
    text = random_units_text(rng, rng.choice([1, 50, 400, 3000]))
    for kind in ("auto", "words"):
        parts = units(text, kind)
        ids, bound = ngrams.unit_ids(text, kind)
        assert len(ids) == len(parts)
        assert len(ids) == 0 or (ids.min() >= 0 and ids.max() < bound)
        for n in range(1, 9):
            expected = repeated_share_of(parts, n)
            found = None if len(parts) < n else 1.0 - ngrams.distinct_ngrams(ids, n, bound) / (len(parts) - n + 1)
            assert found == expected, (kind, n)
    assert repeated_share(text, "auto", 3) == repeated_share_of(units(text, "auto"), 3)


@pytest.mark.parametrize("seed", range(20))
def test_a_batch_counts_each_text_as_the_definition_does(seed: int, counting: str) -> None:
    """Texts of a batch share one numpy pass; no n-gram may reach from one text into the next."""
    rng = random.Random(seed)
    texts = [random_units_text(rng, rng.choice([0, 1, 5, 30, 300])) for _ in range(rng.randint(1, 40))]
    texts += ["a b", "b a"] * 3  # n-grams that would span two texts
    rng.shuffle(texts)
    for kind, n in itertools.product(("auto", "words"), (1, 2, 3, 5)):
        expected = [repeated_share_of(units(text, kind), n) for text in texts]
        ids, bound, counts = ngrams.unit_ids_of([text.lower() for text in texts], kind)
        assert counts == [len(units(text, kind)) for text in texts]
        distinct = ngrams._distinct_per_text(ids, bound, counts, n).tolist()
        found = [None if c < n else 1.0 - d / (c - n + 1) for c, d in zip(counts, distinct, strict=True)]
        assert found == expected, (kind, n)
    ascii_words = ["ab", "abcdefghij", "x", "Ab"]
    long = [random_units_text(rng, 2_500), " ".join(rng.choice(ascii_words) for _ in range(3_000))]  # numpy's sizes
    assert len(long[1]) > ngrams.SHORT_ASCII_CHARS
    mixed = [*texts, *long, *texts]
    assert ngrams.repeated_shares(mixed, "auto", 3) == [repeated_share_of(units(t, "auto"), 3) for t in mixed]


def test_equal_units_get_equal_ids_and_no_others() -> None:
    ascii_text = "Cat cat CAT dog abcdefghi abcdefghj abcdefgh abcdefg abcdefgh\x00 dog x"
    for text, kind in itertools.product((ascii_text, ascii_text + " 你 你 好"), ("auto", "words")):
        ids, _ = ngrams.unit_ids(text, kind)
        parts = units(text, kind)
        pairs = {(a, b) for a in range(len(parts)) for b in range(len(parts))}
        assert all((parts[a] == parts[b]) == (ids[a] == ids[b]) for a, b in pairs)


def test_codes_that_keep_colliding_are_numbered_by_a_sort(monkeypatch: pytest.MonkeyPatch) -> None:
    text = " ".join(f"w{i % 300}" for i in range(5000))
    expected = repeated_share_of(units(text, "auto"), 3)
    monkeypatch.setattr(ngrams, "COUNT_NGRAMS", None)  # numpy's path is taken only without the C count
    monkeypatch.setattr(ngrams, "_MAX_PROBES", 1)
    assert repeated_share(text, "auto", 3) == expected


def test_keys_past_63_bits_are_renumbered() -> None:
    rng = random.Random(5)
    ids = np.array([rng.randrange(50_000) for _ in range(4000)] * 2, dtype=np.int64)  # the second half repeats
    parts = [str(i) for i in ids.tolist()]
    for n in (4, 5, 8):
        assert ngrams.distinct_ngrams(ids, n, 50_000) == len(set(zip(*(parts[i:] for i in range(n)), strict=False)))


def test_keys_between_32_and_63_bits_are_sorted_whole() -> None:
    """70,000 distinct ids make bigram keys past 2**32: (0, 0) and (61356, 47296) differ by exactly 2**32."""
    ids = np.array([*range(70_000), 0, 0, 61_356, 47_296], dtype=np.int64)
    assert 61_356 * 70_000 + 47_296 == 2**32
    bigrams = set(zip(ids.tolist(), ids[1:].tolist(), strict=False))
    assert ngrams.distinct_ngrams(ids, 2, 70_000) == len(bigrams)


def test_the_class_table_is_str_isspace_and_the_unspaced_scripts() -> None:
    spaces = [code for code in range(0x110000) if chr(code).isspace()]
    assert max(spaces) < 0x10000  # the table covers the Basic Multilingual Plane only
    assert [code for code in range(0x10000) if ngrams.CLASSES[code] == 1] == spaces
    unspaced = ngrams._HAS_UNSPACED  # the regex the definition uses
    assert all((ngrams.CLASSES[code] == 2) == bool(unspaced.match(chr(code))) for code in range(0x10000))
    assert not any(unspaced.match(chr(code)) for code in range(0x10000, 0x110000, 7))


# The C count (_repetition.c) against the definition: every ASCII character in words and as whitespace, and the texts of
# `random_units_text` (every kind of whitespace, Han, kana, Thai, fullwidth, upper case that lowers to more characters,
# lone surrogates, characters past the Basic Multilingual Plane), in both kinds of units.
_ASCII_SPACES = [chr(code) for code in range(128) if chr(code).isspace()]
_ASCII_INK = [chr(code) for code in range(128) if not chr(code).isspace()]


def random_ascii_text(rng: random.Random) -> str:
    letters = [*rng.sample(_ASCII_INK, rng.randint(1, 6)), "a", "A"]  # few letters: words that repeat
    vocabulary = ["".join(rng.choice(letters) for _ in range(rng.randint(1, 12))) for _ in range(rng.randint(1, 8))]
    parts = [rng.choice(_ASCII_SPACES) * rng.randint(0, 2)]
    for _ in range(rng.randint(0, 300)):
        parts += [rng.choice(vocabulary), "".join(rng.choices(_ASCII_SPACES, k=rng.randint(1, 3)))]
    return "".join(parts)[: None if rng.random() < 0.5 else -1]


def definition(text: str, n: int, kind: str = "words") -> tuple[int, int]:
    parts = units(text, kind)
    return len(parts), len(set(zip(*(parts[i:] for i in range(n)), strict=False)))


def compiled() -> Any:
    require_compiled()
    from verifier_service.scoring import _repetition

    return _repetition.count_ngrams


@pytest.mark.parametrize("seed", range(200))
def test_the_compiled_count_is_the_definition(seed: int) -> None:
    count = compiled()
    rng = random.Random(seed)
    text = random_ascii_text(rng) if seed % 2 else random_units_text(rng, rng.choice([1, 50, 400, 3000]))
    for n, kind in itertools.product({1, 2, 3, rng.randint(4, 32)}, ("auto", "words")):
        expected = definition(text, n, kind)
        assert count(text, n, kind == "auto") == expected, (text, n, kind)
        # a hash of a few bits makes different n-grams collide: the units themselves must tell them apart
        assert count(text, n, kind == "auto", seed % 4) == expected, (text, n, kind)


def test_the_compiled_count_classes_every_character_as_the_definition_does() -> None:
    count = compiled()
    for code in [*range(0x10000), *range(0x10000, 0x110000, 97)]:  # the planes above hold no space nor unspaced script
        char = chr(code)
        for text in (f"a{char}b", f"{char}a {char}", f"{char} {char.lower()} {char.upper()}", char * 3):
            for kind in ("auto", "words"):
                assert count(text, 1, kind == "auto") == definition(text, 1, kind), (hex(code), kind)
    assert count("", 1, True) == (0, 0)
    assert count("a b", 3, False) == (2, 0)


def test_the_compiled_count_refuses_what_it_cannot_count() -> None:
    count = compiled()
    with pytest.raises(ValueError, match="at least 1"):
        count("a b", 0, True)
    with pytest.raises(TypeError):
        count(b"a b", 2, True)
    with pytest.raises(ValueError, match="hash_bits"):
        count("a b", 1, True, 65)


def test_the_compiled_loop_check_takes_any_text_and_refuses_bad_limits() -> None:
    require_compiled()
    check = repetition.END_LOOP
    assert check is not None
    ends = ("a" * 40 + "x", "ab" * 20 + "b", "\U0001f600" * 40, "x\ud800" * 40, "é" * 31, "é" * 32, "答" + "案是" * 40)
    for text in ("", "a", "ab" * 3, *ends):  # the last character alone breaks the first two
        assert check(text, 200, 4, 32) == naive_loop(text), repr(text)
    with pytest.raises(ValueError, match="at least 1"):
        check("a b", 0, 4, 32)
    with pytest.raises(TypeError):
        check(b"a b", 200, 4, 32)
