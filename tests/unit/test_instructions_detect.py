"""langdetect's detection in C (scoring/instructions/_langdetect.c, detect.py) against langdetect's own Python, seeded
as ifeval seeds it: the same probabilities to the bit (not only the same language) on Google's IFEval responses and
their all-caps and lowercase forms, on text in many languages and scripts, on short, empty and letterless text, and on
random text made of what langdetect treats specially (capitals, runs of spaces, web and e-mail addresses, Vietnamese
combining marks, text past its 10,000 characters)."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest

from verifier_service.scoring.instructions import detect, ifeval

DATA = Path(__file__).parents[1] / "data" / "instructions"
RESPONSES = "input_response_data_gpt4_20231107_145030.jsonl"  # what test_instructions_google.py reads

SAMPLES = [
    "The quick brown fox jumps over the lazy dog while the farmer watches from the old wooden porch.",
    "Le renard brun rapide saute par-dessus le chien paresseux pendant que le fermier regarde.",
    "Der schnelle braune Fuchs springt über den faulen Hund, während der Bauer zuschaut.",
    "El rápido zorro marrón salta sobre el perro perezoso mientras el granjero mira desde el porche.",
    "A raposa marrom rápida pula sobre o cão preguiçoso enquanto o fazendeiro observa.",
    "La volpe marrone veloce salta sopra il cane pigro mentre il contadino guarda.",
    "Быстрая коричневая лиса прыгает через ленивую собаку, пока фермер смотрит с крыльца.",
    "Швидка бура лисиця стрибає через ледачого пса.",
    "敏捷的棕色狐狸跳过了懒惰的狗，农夫在旧木门廊上看着。",
    "敏捷的棕色狐狸跳過了懶惰的狗。",
    "素早い茶色の狐が怠け者の犬を飛び越え、農夫が古い木のポーチから見ている。",
    "빠른 갈색 여우가 게으른 개를 뛰어넘고 농부는 오래된 나무 현관에서 지켜본다.",
    "الثعلب البني السريع يقفز فوق الكلب الكسول بينما يراقب المزارع من الشرفة.",
    "روباه قهوه‌ای سریع از روی سگ تنبل می‌پرد و کشاورز نگاه می‌کند. یی",
    "तेज़ भूरी लोमड़ी आलसी कुत्ते के ऊपर कूदती है जबकि किसान पुराने बरामदे से देखता है।",
    "দ্রুত বাদামী শিয়াল অলস কুকুরের উপর লাফ দেয়।",
    "สุนัขจิ้งจอกสีน้ำตาลกระโดดข้ามสุนัขขี้เกียจ",
    "Η γρήγορη καφέ αλεπού πηδάει πάνω από τον τεμπέλη σκύλο.",
    "השועל החום המהיר קופץ מעל הכלב העצלן בזמן שהחוואי מסתכל.",
    "Con cáo nâu nhanh nhẹn nhảy qua con chó lười trong khi người nông dân nhìn từ hiên nhà.",
    "Con ca\u0301o nâu nhanh nhe\u0323n nha\u0309y qua con cho\u0301 lươ\u0300i.",  # combining marks (normalize_vi)
    "Mbweha wa kahawia mwepesi anaruka juu ya mbwa mvivu wakati mkulima anaangalia.",
    "Hızlı kahverengi tilki tembel köpeğin üzerinden atlar, çiftçi eski verandadan izler.",
    "Szybki brązowy lis przeskakuje nad leniwym psem, a rolnik patrzy z ganku.",
    "Rychlá hnědá liška skáče přes líného psa, zatímco farmář se dívá.",
    "A gyors barna róka átugrik a lusta kutya felett, miközben a gazda figyel.",
    "Vulpea maro rapidă sare peste câinele leneș în timp ce fermierul privește din ș ț.",
    "De snelle bruine vos springt over de luie hond terwijl de boer toekijkt.",
    "Den snabba bruna räven hoppar över den lata hunden medan bonden tittar.",
    "Nopea ruskea kettu hyppää laiskan koiran yli, kun maanviljelijä katselee.",
    "Pantas rubah coklat melompat ke atas anjing malas sementara petani melihat.",
    "HELLO MY FRIEND, HOW ARE YOU TODAY? I HOPE YOU ARE WELL AND HAPPY.",
    "NASA and the ESA said THE LAUNCH is on.",
    "Write to jane.doe@example.com or see https://example.com/a?b=c for the full report.",
    "ok",
    "a",
    "É",
    "😀 🎉 👍 emoji then words",
    "𝐁𝐨𝐥𝐝 𝐦𝐚𝐭𝐡 letters and ancient 𐌰𐌱𐌲",
    "a lone \ud800 surrogate, a \x00 and a \ufffd",
    # mostly not Latin: cleaning_text drops the Latin letters
    "这是一段比较长的中文文本 with English words 混合在一起的内容，拉丁字母在这里会被清除掉。",
    "Это текст with English words внутри русского предложения, и их меньше.",
    "",
    " ",
    "12345 67890",
    "!!! ??? ...",
    "1 + 1 = 2",
    "@@@ http://x.y",
]

# what langdetect treats specially, for random text
ALPHABET = [
    *"aAbBzZéÉ  ñ.,'-_@ДдЖ中文ひカ한ṃṂ\u0219\u021b\u06cc1",
    *"\u0300\u0301\u0303\u0309\u0323",  # Vietnamese combining marks
    "THE ",
    "the ",
    "Der ",
    "NASA",
    "x@y.z ",
    "first.last@mail.example.org",
    "http://example.com/path?q=1 ",
    "https://",
    "   ",
    "\n",
]


def require_compiled() -> None:
    if detect.COMPILED is None:
        pytest.skip("scoring/instructions/_langdetect.c is not built (make install builds it where a C compiler is)")


def langdetect_s(text: str) -> tuple[list[float] | None, str | None]:
    """langdetect's own `langprob` for the text and the language `detect` gives (None for CantDetectError), by the
    calls `langdetect.detect_langs` makes (init_factory, create, append, get_probabilities), seeded as ifeval seeds."""
    from langdetect.lang_detect_exception import ErrorCode, LangDetectException

    factory, _, _ = ifeval._langdetect()
    detector = factory.create()
    detector.append(text)
    try:
        found = detector.get_probabilities()
    except LangDetectException as exc:
        assert exc.get_code() == ErrorCode.CantDetectError
        return None, None
    return detector.langprob, (found[0].lang if found else detector.UNKNOWN_LANG).split("-")[0]


def assert_same(texts: list[str]) -> None:
    require_compiled()
    factory, _, _ = ifeval._langdetect()
    for text in texts:
        probabilities, language = langdetect_s(text)
        assert detect.probabilities(factory, text) == probabilities, repr(text[:200])
        assert detect.language_of(factory, text) == language, repr(text[:200])


def _responses() -> list[str]:
    lines = (DATA / RESPONSES).read_text(encoding="utf-8").splitlines()
    return [json.loads(line)["response"] for line in lines]


@pytest.mark.parametrize("form", ["as written", "upper", "lower"])
def test_google_s_ifeval_responses_get_langdetect_s_probabilities(form: str) -> None:
    """The 541 archived GPT-4 responses, as written and in the forms english_capital and english_lowercase see."""
    responses = _responses()
    assert len(responses) == 541
    change = {"as written": str, "upper": str.upper, "lower": str.lower}[form]
    assert_same([change(response) for response in responses])


def test_languages_scripts_and_text_without_letters_get_langdetect_s_probabilities() -> None:
    import langdetect
    from langdetect.lang_detect_exception import LangDetectException

    texts = SAMPLES + [sample.upper() for sample in SAMPLES] + [sample.lower() for sample in SAMPLES]
    assert_same(texts)
    factory, _, _ = ifeval._langdetect()  # and langdetect.detect_langs itself, seeded
    for text in texts:
        found = detect.probabilities(factory, text)
        if found is None:
            with pytest.raises(LangDetectException):
                langdetect.detect_langs(text)
            assert ifeval._language_of(text) is None
            continue
        ours = [(lang, p) for lang, p in zip(factory.langlist, found, strict=True) if p > 0.1]
        theirs = [(language.lang, language.prob) for language in langdetect.detect_langs(text)]
        assert sorted(ours, key=lambda pair: -pair[1]) == theirs, repr(text)
        assert ifeval._language_of(text) == langdetect.detect(text).split("-")[0]


def test_random_text_of_what_langdetect_treats_specially_gets_langdetect_s_probabilities() -> None:
    rng = random.Random(7)
    texts = ["".join(rng.choice(ALPHABET) for _ in range(rng.randint(0, 60))) for _ in range(800)]
    assert_same(texts)


def test_text_past_langdetect_s_10_000_characters_gets_langdetect_s_probabilities() -> None:
    """langdetect reads the first 10,000 characters after its substitutions and with runs of spaces made one: text
    that the substitutions shorten, and a run of spaces across the limit."""
    rng = random.Random(11)
    words = ["the", "cat", "sat", "le", "chat", "Der", "Hund", "NASA", "x@y.z", "http://a.b/c", "ca\u0301o", "  "]
    texts = [" ".join(rng.choice(words) for _ in range(rng.randint(2000, 4000))) for _ in range(12)]
    texts += ["a" * 9_998 + "      b c d", "word " * 1999 + "  " + "mot " * 100, "x@y.z " * 3000 + " le chat noir"]
    assert_same(texts)


def test_threads_detecting_at_once_get_what_one_thread_gets() -> None:
    """The C part works without the GIL on a model that threads share (and fill, the normalized characters, with it)."""
    require_compiled()
    from concurrent.futures import ThreadPoolExecutor

    factory, _, _ = ifeval._langdetect()
    texts = [sample * 40 for sample in SAMPLES] * 4
    alone = [detect.probabilities(factory, text) for text in texts]
    with ThreadPoolExecutor(4) as pool:
        together = list(pool.map(lambda text: detect.probabilities(factory, text), texts))
    assert together == alone


def test_e_mail_addresses_are_replaced_as_langdetect_s_pattern_replaces_them() -> None:
    """detect._without_mail runs MAIL_RE on the spans around each "@" only: the same text as MAIL_RE.sub on all of it,
    for addresses with the longest parts the pattern takes, and longer, cut, adjacent, or packed with "@"."""
    from langdetect.detector import Detector

    rng = random.Random(3)
    parts = ["a" * 70, "a" * 64, "b" * 300, "c" * 600, ".", "-", "_", "@", "@@", " ", "x@y", "é", "1.2", "A.b-c_d"]
    texts = ["".join(rng.choice(parts) for _ in range(rng.randint(1, 30))) for _ in range(3000)]
    texts += ["a" * 64 + "@" + "b" * 255 + "." * 255 + "c", "a" * 65 + "@" + "b" * 256 + "c" * 256, "@" * 2000]
    for text in texts:
        assert detect._without_mail(text) == Detector.MAIL_RE.sub(" ", text), repr(text[:200])


def test_the_model_refuses_what_it_cannot_use() -> None:
    require_compiled()
    from langdetect.utils.ngram import NGram

    compiled: Any = detect.COMPILED
    state = tuple(random.Random(0).getstate()[1])
    settings = (0.5, 0.05, 7, 1000, 0.99999, 10000.0, 10000)
    with pytest.raises(ValueError, match="a probability per language"):
        compiled.load({"ab": [0.1]}, 2, state, NGram.normalize, settings)
    with pytest.raises(TypeError, match="floats"):
        compiled.load({"ab": [1, 0]}, 2, state, NGram.normalize, settings)
    with pytest.raises(ValueError, match="625 integers"):
        compiled.load({"ab": [0.1, 0.0]}, 2, state[:-1], NGram.normalize, settings)
    model = compiled.load({"ab": [0.1, 0.0]}, 2, state, lambda char: "xy", settings)
    with pytest.raises(ValueError, match="one character"):
        compiled.probabilities(model, "ab")
