"""The `instructions` component: its verdicts, loose mode, the fixes to Google's checker (seeded language detection
that fails closed, kwargs never drawn at random), and inputs shaped to make regular expressions slow."""

from __future__ import annotations

import random
import re
from typing import Any

import pytest
from pydantic import ValidationError

from verifier_service.schema import InstructionsSpec, ScoreItem
from verifier_service.scoring.instructions import CHECKS, detect, ifeval, score, variants
from verifier_service.scoring.instructions import text as split
from verifier_service.scoring.instructions.text import count_capital_words, count_sentences, count_words, word_tokens


def judged(completion: str, ids: list[str], kwargs: list[Any] | None = None, **options: Any) -> tuple[Any, ...]:
    spec = InstructionsSpec(instruction_ids=ids, kwargs=kwargs, **options)
    found = score(ScoreItem(completion=completion, instructions=spec), spec)
    return found.score, found.verdict, found.detail


def test_all_and_fraction_grading() -> None:
    ids = ["punctuation:no_comma", "detectable_format:title", "startend:end_checker"]
    kwargs = [None, None, {"end_phrase": "Any other questions?"}]
    text = "<<Tea>>\nTea is hot, and good. Any other questions?"
    assert judged(text, ids, kwargs) == (0.0, "not_followed", "Not followed: punctuation:no_comma.")
    assert judged(text, ids, kwargs, grading="fraction")[:2] == (pytest.approx(2 / 3), "not_followed")
    assert judged(text.replace(",", ""), ids, kwargs) == (1.0, "followed", None)


def test_the_detail_names_five_failed_ids_at_most() -> None:
    ids = ["keywords:existence"] * 8
    kwargs = [{"keywords": [f"word{i}"]} for i in range(8)]
    assert judged("none of them", ids, kwargs)[2] == "Not followed: keywords:existence."  # each id once
    ids = [
        "detectable_format:title",
        "punctuation:no_comma",
        "startend:quotation",
        "detectable_format:json_format",
        "combination:two_responses",
        "change_case:english_capital",
        "detectable_format:constrained_response",
    ]
    assert judged("a, b", ids)[2] == (
        "Not followed: detectable_format:title, punctuation:no_comma, startend:quotation, "
        "detectable_format:json_format, combination:two_responses and 2 more."
    )


def test_the_answer_after_the_reasoning_is_graded() -> None:
    assert judged("<think>a, b, c</think>No commas here.", ["punctuation:no_comma"])[1] == "followed"
    assert judged("<think>never closed, so no answer", ["punctuation:no_comma"])[:2] == (0.0, "not_followed")
    assert judged("<r>x</r>fine", ["punctuation:no_comma"], think_tag="r")[1] == "followed"


def test_an_empty_answer_follows_nothing() -> None:
    """Even an instruction an empty text trivially meets (no commas): Google's `response.strip() and ...`."""
    assert judged("<think>x</think>  \n", ["punctuation:no_comma"])[:2] == (0.0, "not_followed")


def test_an_unknown_id_is_unjudged_and_named_only_when_it_looks_like_an_id() -> None:
    assert judged("x", ["punctuation:no_comma", "made_up:thing"]) == (
        None, "unknown_instruction", "Unknown instruction: made_up:thing.")  # fmt: skip
    assert judged("x", ["<script>alert(1)</script>"]) == (
        None,
        "unknown_instruction",
        "Unknown instruction: an unknown id.",
    )


@pytest.mark.parametrize(
    ("instruction_id", "kwargs"),
    [
        ("length_constraints:number_words", None),  # Google would draw a random number and relation
        ("length_constraints:number_words", {"num_words": 300}),
        ("length_constraints:number_words", {"num_words": "300", "relation": "at least"}),
        ("length_constraints:number_words", {"num_words": 300, "relation": "about"}),
        ("keywords:existence", {"keywords": []}),
        ("keywords:letter_frequency", {"letter": "ab", "let_frequency": 2, "let_relation": "at least"}),
        ("length_constraints:nth_paragraph_first_word", {"num_paragraphs": 2, "nth_paragraph": 3, "first_word": "a"}),
    ],
)
def test_kwargs_a_check_cannot_use_leave_the_item_unjudged(instruction_id: str, kwargs: Any) -> None:
    for answer in ("Some answer.", ""):  # the same verdict whatever the answer, an empty one included
        found = judged(answer, [instruction_id], [kwargs])
        assert found[:2] == (None, "bad_kwargs")
        assert instruction_id in found[2] and "300" not in found[2]


def test_null_values_in_kwargs_are_absent_keys() -> None:
    """IFEval rows on the Hub give every instruction every key, null where unused."""
    kwargs = {"num_words": 2, "relation": "at least", "keywords": None, "language": None}
    assert judged("two words", ["length_constraints:number_words"], [kwargs])[1] == "followed"


def test_kwargs_of_another_length_than_the_ids_is_refused_naming_the_field() -> None:
    with pytest.raises(ValidationError, match="kwargs must have one entry"):
        InstructionsSpec(instruction_ids=["punctuation:no_comma", "detectable_format:title"], kwargs=[None])
    with pytest.raises(ValidationError):
        InstructionsSpec(instruction_ids=["punctuation:no_comma"] * 65)
    with pytest.raises(ValidationError):
        InstructionsSpec(instruction_ids=[])


def test_loose_mode_tries_ifeval_s_eight_variants() -> None:
    answer = "Sure! Here it is:\n*The title*\nhello, world"
    assert variants(answer, "strict") == [answer]
    assert set(variants(answer, "loose")) == {
        answer, "*The title*\nhello, world", "Sure! Here it is:\n*The title*", "*The title*",
        answer.replace("*", ""), "The title\nhello, world", "Sure! Here it is:\nThe title", "The title",
    }  # fmt: skip
    # a preamble line before the answer starts with the word asked for: only loose forgives it
    kwargs = [{"num_paragraphs": 1, "nth_paragraph": 1, "first_word": "tea"}]
    text = "Here you go:\nTea is good."
    assert judged(text, ["length_constraints:nth_paragraph_first_word"], kwargs)[1] == "not_followed"
    assert judged(text, ["length_constraints:nth_paragraph_first_word"], kwargs, mode="loose")[1] == "followed"


ENGLISH = "The quick brown fox jumps over the lazy dog while the farmer watches from the old wooden porch."


@pytest.fixture(params=["compiled", "python"])
def detection(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Each test that takes it runs with langdetect in C (scoring/instructions/_langdetect.c), and again with
    langdetect's Python (tests/unit/test_instructions_detect.py compares the two)."""
    if request.param == "compiled" and detect.COMPILED is None:
        pytest.skip("scoring/instructions/_langdetect.c is not built")
    if request.param == "python":
        monkeypatch.setattr(detect, "COMPILED", None)
    return str(request.param)


def test_language_detection_is_deterministic(detection: str) -> None:
    """langdetect#120: an all-caps English sentence was en 96 times and de 4 in 100 unseeded runs."""
    text = "HELLO MY FRIEND, HOW ARE YOU TODAY? I HOPE YOU ARE WELL AND HAPPY."
    assert len({ifeval._language_of(text) for _ in range(100)}) == 1
    verdicts = {judged(ENGLISH.lower(), ["change_case:english_lowercase"])[1] for _ in range(20)}
    assert verdicts == {"followed"}


@pytest.mark.parametrize("answer", ["12345 67890", "!!! ??? ...", "1 + 1 = 2"])
def test_text_whose_language_cannot_be_decided_follows_no_language_instruction(answer: str, detection: str) -> None:
    """Google counts langdetect's exception as followed: a free pass for digits and symbols."""
    assert ifeval._language_of(answer) is None
    assert judged(answer, ["language:response_language"], [{"language": "en"}])[1] == "not_followed"
    assert not CHECKS["change_case:english_capital"](answer, {})
    assert not CHECKS["change_case:english_lowercase"](answer.lower(), {})


def test_the_case_checks_read_ascii_text_as_str_does() -> None:
    """ifeval._is_upper and _is_lower read ASCII text as bytes: the same answers as str.isupper and str.islower."""
    rng = random.Random(2)
    alphabet = ["a", "A", "z", "Z", "1", " ", ".", "\n", "_", "@", "[", "`", "{", "é", "É", "ß", "ǅ", "Σ"]
    for _ in range(5000):
        letters = alphabet[: rng.choice([13, len(alphabet)])]  # ASCII only, or not
        text = "".join(rng.choice(letters) for _ in range(rng.randint(0, 8)))
        assert ifeval._is_upper(text) == text.isupper(), repr(text)
        assert ifeval._is_lower(text) == text.islower(), repr(text)


def test_language_checks(detection: str) -> None:
    french = "Le chat dort sur le canapé pendant que la pluie tombe doucement sur la ville endormie."
    assert CHECKS["language:response_language"](french, {"language": "fr"})
    assert not CHECKS["language:response_language"](ENGLISH, {"language": "fr"})
    assert CHECKS["change_case:english_capital"](ENGLISH.upper(), {})
    assert not CHECKS["change_case:english_capital"](ENGLISH, {})


def test_keywords_are_literal_case_insensitive_substrings() -> None:
    """As Google's: "cat" is found in "Category" (a substring, case-insensitive); a keyword's regex metacharacters
    are literal text here (Google splices the keyword into a regex unescaped)."""
    assert CHECKS["keywords:existence"]("Category theory", {"keywords": ["cat"]})
    assert not CHECKS["keywords:existence"]("cost is 5 dollars", {"keywords": ["$5"]})
    assert CHECKS["keywords:existence"]("it costs $5", {"keywords": ["$5"]})
    frequency = {"keyword": "a.b", "frequency": 2, "relation": "at least"}
    assert not CHECKS["keywords:frequency"]("axb a.b", frequency)
    assert CHECKS["keywords:frequency"]("A.B a.b", frequency)
    assert not CHECKS["keywords:forbidden_words"]("I like Cats.", {"forbidden_words": ["cats"]})
    assert CHECKS["keywords:forbidden_words"]("I like cats.", {"forbidden_words": ["cat"]})  # \b: words only


def _google_bullets(text: str) -> int:
    return len(re.findall(r"^\s*\*[^\*].*$", text, re.MULTILINE)) + len(re.findall(r"^\s*-.*$", text, re.MULTILINE))


def _google_placeholders(text: str) -> int:
    return len(re.findall(r"\[.*?\]", text))


def _google_title(text: str) -> bool:
    return any(title.lstrip("<").rstrip(">").strip() for title in re.findall(r"<<[^\n]+>>", text))


def test_the_linear_scans_find_what_google_s_regexes_find() -> None:
    """On random texts of the characters that matter, the scans that replace Google's quadratic regexes agree."""
    rng = random.Random(24)
    for _ in range(5000):
        text = "".join(rng.choice("*- \n\tab[]<>") for _ in range(rng.randint(0, 30)))
        bullets = _google_bullets(text)
        assert CHECKS["detectable_format:number_bullet_lists"](text, {"num_bullets": bullets}), text
        placeholders = _google_placeholders(text)
        assert CHECKS["detectable_content:number_placeholders"](text, {"num_placeholders": placeholders}), text
        assert not CHECKS["detectable_content:number_placeholders"](text, {"num_placeholders": placeholders + 1})
        assert CHECKS["detectable_format:title"](text, {}) == _google_title(text), text


BOMBS = [
    "\n" * 1_000_000,  # Google's bullet regex: every line start rescans the run of newlines
    " " * 1_000_000,  # its postscript regex: `\s*p\.` from every position
    "[" * 1_000_000,  # its placeholder regex: `\[.*?\]` from every '['
    "<<" * 500_000,  # its title regex: `<<[^\n]+>>` from every '<<'
    "[" * 1_000_000 + "]",
    "a." * 500_000,
    "*" * 1_000_000,
    "{" * 1_000_000,  # json: nesting deeper than the parser goes
    "Aa " * 350_000,
]


@pytest.mark.parametrize("bomb", BOMBS, ids=range(len(BOMBS)))
def test_one_megabyte_regex_bomb_shaped_answers_get_a_verdict(bomb: str) -> None:
    ids = [instruction_id for instruction_id in CHECKS if instruction_id in ifeval.CHECKS]
    kwargs = [_EXAMPLE_KWARGS.get(instruction_id) for instruction_id in ids]
    for mode in ("strict", "loose"):
        found = judged(bomb, ids, kwargs, mode=mode, grading="fraction")
        assert found[1] in ("followed", "not_followed")


_EXAMPLE_KWARGS: dict[str, dict[str, Any]] = {
    "keywords:existence": {"keywords": ["tea", "cup"]},
    "keywords:frequency": {"keyword": "tea", "frequency": 2, "relation": "at least"},
    "keywords:forbidden_words": {"forbidden_words": ["coffee"]},
    "keywords:letter_frequency": {"letter": "a", "let_frequency": 3, "let_relation": "less than"},
    "language:response_language": {"language": "en"},
    "length_constraints:number_sentences": {"num_sentences": 3, "relation": "less than"},
    "length_constraints:number_paragraphs": {"num_paragraphs": 2},
    "length_constraints:number_words": {"num_words": 100, "relation": "at least"},
    "length_constraints:nth_paragraph_first_word": {"num_paragraphs": 2, "nth_paragraph": 1, "first_word": "tea"},
    "detectable_content:number_placeholders": {"num_placeholders": 2},
    "detectable_content:postscript": {"postscript_marker": "P.S."},
    "detectable_format:number_bullet_lists": {"num_bullets": 3},
    "detectable_format:number_highlighted_sections": {"num_highlights": 2},
    "detectable_format:multiple_sections": {"section_spliter": "Section", "num_sections": 2},
    "combination:repeat_prompt": {"prompt_to_repeat": "Write about tea."},
    "startend:end_checker": {"end_phrase": "Any other questions?"},
    "change_case:capital_word_frequency": {"capital_frequency": 2, "capital_relation": "at least"},
}


def test_every_one_of_google_s_25_ids_is_checked() -> None:
    assert len(ifeval.CHECKS) == 25
    assert set(ifeval.CHECKS) <= set(CHECKS)


def test_the_sentence_counter_reads_punkt_s_cases() -> None:
    """NLTK's English punkt model on these (its output, recorded): a period after an ordinary word ends a sentence
    whatever follows, "Mr." does not, "e.g." does (punkt's model does not list it), a list number does."""
    assert count_sentences("hope this finds you well. let's vote.") == 2
    assert count_sentences("Mr. Smith went home. He slept.") == 2
    assert count_sentences("Use tea (e.g. green). It helps.") == 3
    assert count_sentences("1. Log in.\n2. Click save.") == 4
    assert count_sentences('He said "Hello." Then left.') == 2
    assert count_sentences("Wait... What happened?") == 1  # an ellipsis ends one only before a frequent starter
    assert count_sentences("Wait... The end.") == 2
    assert count_sentences("") == 0


def test_words_are_counted_as_google_s_regex_counts_them() -> None:
    rng = random.Random(7)
    for _ in range(5000):
        text = "".join(rng.choice("ab _-\n.\t\x0b\x1c1'\x7f\x00é") for _ in range(rng.randint(0, 20)))
        assert count_words(text) == len(re.findall(r"\w+", text)), repr(text)


def test_capital_words_are_counted_as_nltk_tokenizes_them() -> None:
    assert [w for w in word_tokens("I'm DON'T CANNOT stop, OK?") if w.isupper()] == [
        "I",
        "DO",
        "N'T",
        "CAN",
        "NOT",
        "OK",
    ]


# Treebank's rules as NLTK writes them (a look-behind or \b first), which text.py reorders to be fast.
_PLAIN_TREEBANK = [
    (r"(?i)(?<=\w)('s|'m|'d|'ll|'re|'ve|n't)(?=\s|$)", r" \1"),
    (r"(?i)\b(can)(not)\b", r"\1 \2"),
    (r"(?i)(?<!\S)'(?=\w)", r"' "),
]


def test_capital_words_are_counted_as_the_whole_text_tokenized_would_count_them() -> None:
    """count_capital_words tokenizes only the runs that may hold a capital, with the reordered contraction rules:
    the same count, and word_tokens the same tokens, as the plain rules on the whole text (capitals, non-ASCII
    capitals and white space, ASCII text's own white space, contractions next to punctuation)."""
    rng = random.Random(11)
    alphabet = list("aAbCnNtT'sSmMdDlLrReEvV \n\t.,:;!?-\"`«»“’()[]{}<>@#$%&*09éÉſ𝐀ǅ\u2003\xa0_")
    pieces = ["can", "not", "CANNOT", "n't", "N'T", "'s", "'LL", "...", "--", "1,000", "10:30", "I", "OK"]
    ascii_alphabet = [char for char in alphabet if char.isascii()] + list("\x1c\x1f\x0b\x00\x7f")
    for index in range(20000):
        chars = alphabet if index % 2 else ascii_alphabet  # ASCII text has its own pattern
        text = "".join(rng.choice(chars if rng.random() < 0.7 else pieces) for _ in range(rng.randint(0, 25)))
        plain = text
        for pattern, replacement in split._WORD_SPLITS[:5]:
            plain = pattern.sub(replacement, plain)
        for pattern_text, replacement in _PLAIN_TREEBANK:
            plain = re.sub(pattern_text, replacement, plain)
        assert word_tokens(text) == plain.split(), repr(text)
        assert count_capital_words(text) == sum(1 for word in plain.split() if word.isupper()), repr(text)


def test_langdetect_s_n_grams_are_found_as_langdetect_finds_them() -> None:
    """ifeval._ngrams is langdetect's own n-gram list, in its order (its seeded sampling draws from it): capitals,
    several scripts, the characters it normalizes (Romanian, Farsi, Vietnamese, kana, Hangul), runs of spaces."""
    factory, _, _ = ifeval._langdetect()
    rng = random.Random(5)
    alphabet = [*"aAbBé É  ñ.,'-ДдЖ中文ひカ한ṃṂ\u0219\u06cc1", "THE ", "the ", "Der ", "NASA"]
    for _ in range(3000):
        text = "".join(rng.choice(alphabet) for _char in range(rng.randint(0, 40)))
        detector = factory.create()
        detector.append(text)
        detector.cleaning_text()
        assert ifeval._ngrams(detector) == detector._extract_ngrams(), repr(text)


def test_a_langdetect_failure_other_than_no_letters_is_never_a_silent_not_followed(
    monkeypatch: pytest.MonkeyPatch, detection: str
) -> None:
    """langdetect's own loading race (NeedLoadProfileError: a thread that finds the factory before its profiles) or any
    error but "no letters" leaves the item unjudged (internal_error, null), never a quiet 0. (In C, the detector is
    created once, when the profiles are copied: the first call of a process.)"""
    from langdetect.detector_factory import DetectorFactory
    from langdetect.lang_detect_exception import ErrorCode, LangDetectException

    from verifier_service.scoring import TEXT

    def broken(factory: DetectorFactory) -> None:
        raise LangDetectException(ErrorCode.NeedLoadProfileError, "Need to load profiles.")

    monkeypatch.setattr(DetectorFactory, "_create_detector", broken)
    detect._model.cache_clear()
    ids = {"instruction_ids": ["language:response_language"], "kwargs": [{"language": "en"}]}
    item = ScoreItem.model_validate({"completion": "This is plainly English text.", "instructions": ids})
    with pytest.raises(LangDetectException):  # scoring.texts makes a scorer's raise internal_error (null)
        TEXT["instructions"](item, item.instructions)
