"""The `language` component (DeepSeek-R1's language-consistency reward) and the language identifier under it."""

from __future__ import annotations

import socket
from typing import Any, get_args

import pytest
from pydantic import ValidationError

from verifier_service.schema import LanguageSpec, LanguageTarget, ScoreItem
from verifier_service.scoring import langid
from verifier_service.scoring.language import SCRIPTS, UNITS, counts, prose, score


def judged(completion: str, **options: Any) -> tuple[float | None, str]:
    spec = LanguageSpec(**options)
    found = score(ScoreItem(completion=completion, language=spec), spec)
    return found.score, found.verdict


# --- the identifier


@pytest.mark.parametrize(
    ("text", "code"),
    [
        ("First, we need to find the total number of apples in the basket.", "en"),
        ("D'abord, nous devons trouver le nombre total de pommes dans le panier.", "fr"),
        ("Zuerst müssen wir die Gesamtzahl der Äpfel im Korb bestimmen.", "de"),
        ("Primero, necesitamos encontrar el número total de manzanas en la cesta.", "es"),
        ("Сначала нужно найти общее количество яблок в корзине.", "ru"),
        ("Спочатку потрібно знайти загальну кількість яблук у кошику.", "uk"),
        ("首先，我们需要求出篮子里苹果的总数。", "zh"),
        ("まず、かごの中のりんごの総数を求める必要があります。", "ja"),
        ("أولاً، نحتاج إلى إيجاد العدد الإجمالي للتفاح في السلة.", "ar"),
    ],
)
def test_identifies_sentences(text: str, code: str) -> None:
    assert langid.identify(text) == code
    assert langid.is_language(text, code)


@pytest.mark.parametrize("text", ["", "   ", "1 + 1 = 2", "$$ \\\\ 42 %", "3.14159"])
def test_no_letters_is_none(text: str) -> None:
    assert langid.identify(text) is None


@pytest.mark.parametrize("text", ["x", "API", "Python", "Hmm, okay"])
def test_too_little_text_is_none_and_never_a_language(text: str) -> None:
    # The model's prior (en at 0.125) is not an answer: is_language fails closed.
    assert langid.identify(text) is None
    assert not langid.is_language(text, "en")


def test_same_text_same_answer() -> None:
    text = "Wait, maybe I should recompute the sum. Attendez, je recommence."
    assert len({(langid.identify(text), tuple(langid.ranked(text, 3))) for _ in range(100)}) == 1


def test_line_breaks_are_read(monkeypatch: pytest.MonkeyPatch) -> None:
    # fastText reads one line; a multi-line text is one text.
    assert langid.identify("Let me check\nwhether this value\nsatisfies the equation.") == "en"


def test_nothing_opens_a_socket(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("the language identifier opened a connection")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket.socket, "connect_ex", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    langid._model.cache_clear()  # loaded again under the patch
    try:
        assert langid.identify("Ceci est une phrase en français, sans aucun doute.") == "fr"
        assert judged("<think>Dies ist ein deutscher Satz über Äpfel.</think>", target="de") == (1.0, "consistent")
    finally:
        langid._model.cache_clear()


# --- what is counted


def test_math_code_urls_and_numbers_count_neither_way() -> None:
    text = (
        "设 $x = 3$，则\n```python\nprint(x + 1)\n```\n得到 4。见 https://example.com/a 和 \\(y^2\\)，"
        "\\[\\frac{a}{b}\\]、$$\\sum_i i$$ 与 `len(s)`。变量 x1 与 my_var 和 3rd 都不算。"
    )
    # 设 则 得到 见 和 与 变量 与 和 都不算: 14 Han characters, nothing else
    assert counts(prose(text), "zh") == (14, 14)


def test_reasoning_tags_are_not_words() -> None:
    assert judged("<think>你好</think>好", target="zh", scope="all") == (1.0, "consistent")


def test_single_letters_are_variables() -> None:
    assert counts(prose("Let x be the sum and y the product"), "en") == (7, 7)  # x and y aside


# --- scores


def test_pure_chinese_is_consistent() -> None:
    assert judged("<think>我们先计算总数。然后再检查一遍答案是否正确。</think>答案是 12", target="zh") == (
        1.0,
        "consistent",
    )


def test_english_with_target_chinese_scores_0() -> None:
    completion = "<think>First we compute the total. Then we check the answer again.</think>12"
    assert judged(completion, target="zh") == (0.0, "other_language")
    assert judged(completion, target="en") == (1.0, "consistent")


def test_chinese_chain_of_thought_with_code_latex_and_numbers_scores_1() -> None:
    completion = (
        "<think>题目要求计算 $\\frac{48}{2} + 3 \\times 4$。先算除法：48 / 2 = 24。\n"
        "再算乘法 \\(3 \\times 4 = 12\\)，所以结果是 24 + 12 = 36。\n"
        "用代码验证：\n```python\nresult = 48 // 2 + 3 * 4\nprint(result)\n```\n"
        "输出 `36`，参考 https://en.wikipedia.org/wiki/Arithmetic 。\n"
        "$$36 = 6^2$$</think>\\boxed{36}"
    )
    assert judged(completion, target="zh") == (1.0, "consistent")


def test_mixed_sentence_share_by_hand() -> None:
    # 首先计算 (4) + 然后相加 (4) Chinese, "the" "total" English: 8 of 10
    assert judged("<think>首先计算 the total 然后相加</think>", target="zh") == (0.8, "mixed")
    # target English: the two English words of 10
    assert judged("<think>首先计算 the total 然后相加</think>", target="en") == (0.2, "mixed")


def test_latin_sentences_are_identified_by_sentence() -> None:
    completion = (
        "<think>D'abord, nous devons trouver le nombre total de pommes. "
        "Wait, let me recompute the sum of both parts.</think>"
    )
    # abord nous devons trouver le nombre total de pommes: 9 French ("D" is a lone letter); 9 English
    assert judged(completion, target="fr") == (0.5, "mixed")
    assert judged(completion, target="en") == (0.5, "mixed")
    assert judged(completion, target="de") == (0.0, "other_language")


def test_shared_script_languages_are_told_apart() -> None:
    russian = "<think>Сначала нужно найти общее количество яблок в корзине.</think>"
    assert judged(russian, target="ru") == (1.0, "consistent")
    assert judged(russian, target="uk") == (0.0, "other_language")


def test_japanese_han_counts_as_japanese_in_sentences_with_kana() -> None:
    japanese = "<think>まず合計を計算します。次に答えを確認します。</think>"
    assert judged(japanese, target="ja") == (1.0, "consistent")
    assert judged(japanese, target="zh") == (0.0, "other_language")
    # A Chinese sentence beside a Japanese one: its Han characters stay Chinese.
    mixed = "<think>首先计算总数。次に答えを確認します。</think>"
    assert judged(mixed, target="zh") == (6 / 16, "mixed")  # 首先计算总数: 6; 次に答えを確認します: 10
    assert judged(mixed, target="ja") == (10 / 16, "mixed")


@pytest.mark.parametrize(
    ("text", "target"),
    [
        ("먼저 바구니에 있는 사과의 총 개수를 구해야 합니다.", "ko"),
        ("ก่อนอื่นเราต้องหาจำนวนแอปเปิ้ลทั้งหมดในตะกร้า", "th"),
        ("सबसे पहले, हमें टोकरी में सेबों की कुल संख्या ज्ञात करनी होगी।", "hi"),
        ("Πρώτα πρέπει να βρούμε τον συνολικό αριθμό των μήλων.", "el"),
    ],
)
def test_other_scripts(text: str, target: str) -> None:
    assert judged(f"<think>{text}</think>", target=target) == (1.0, "consistent")
    assert judged(f"<think>{text}</think>", target="en") == (0.0, "other_language")


def test_scopes() -> None:
    completion = "<think>Let me think about the total.</think>答案是十二。"
    assert judged(completion, target="zh") == (0.0, "other_language")  # default: the reasoning
    assert judged(completion, target="zh", scope="answer") == (1.0, "consistent")
    assert judged(completion, target="zh", scope="all") == (5 / 11, "mixed")  # 5 Han of 6 words + 5


@pytest.mark.parametrize(
    "completion",
    [
        "<think></think>答案",
        "<think>$x^2 + 1 = 5$, 42, 3.14\n```\ncode here\n```</think>",
        "no reasoning block at all",  # scope reasoning: nothing there
    ],
)
def test_no_words_is_null(completion: str) -> None:
    assert judged(completion, target="zh") == (None, "no_text")


def test_deterministic() -> None:
    completion = "<think>Zuerst die Summe. Then the product, enfin le total. 然后检查。</think>"
    assert len({judged(completion, target="de") for _ in range(100)}) == 1


def test_a_megabyte_is_judged() -> None:
    chunk = "我们先计算总数，然后 check the answer again with $x^2$ and `code`. "
    completion = "<think>" + chunk * (1_000_000 // len(chunk)) + "</think>"
    found, verdict = judged(completion, target="zh")
    assert verdict == "mixed"
    assert found == pytest.approx(9 / 15)  # 9 Han characters and 6 English words per chunk


def test_unclosed_delimiters_stay_linear_and_cut_to_the_end() -> None:
    assert judged("<think>你好 " + "\\(" * 200_000 + "</think>", target="zh") == (1.0, "consistent")


@pytest.mark.parametrize("target", ["xx", "EN", "zz", "sco"])
def test_unsupported_target_is_refused(target: str) -> None:
    with pytest.raises(ValidationError) as raised:
        LanguageSpec(target=target)
    assert raised.value.errors()[0]["loc"] == ("target",)


def test_every_target_has_a_script_or_is_counted_by_character() -> None:
    assert set(get_args(LanguageTarget)) == set(SCRIPTS) | set(UNITS)
    assert not set(SCRIPTS) & set(UNITS)


def test_every_target_is_a_language_the_model_names() -> None:
    labels = {code for code, _ in langid.ranked("a text", -1)}
    assert set(get_args(LanguageTarget)) <= labels


@pytest.mark.parametrize(
    "noise",
    [
        "$" * 100_000,
        "`" * 100_000,
        "\\begin{" * 50_000,
        "$$a$" * 30_000,
        "```\n" * 30_000,
        "\ud800\x00\U0001f600𝑥" * 20_000,  # lone surrogates, NUL, emoji, mathematical letters: none is a word
    ],
)
def test_adversarial_text_is_judged(noise: str) -> None:
    found = judged(f"<think>你好{noise}</think>", target="zh")
    assert found == (1.0, "consistent")
