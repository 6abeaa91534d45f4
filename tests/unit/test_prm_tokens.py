"""A prm step's token indices (reward_models/tokens.py): the character spans of a completion's steps mapped onto the
policy's token ids, over tokenizers built here (no downloads): a byte-level BPE (each token bytes; Chinese and emoji
characters span several tokens, and a step's boundary falls inside a token) and a SentencePiece-like one (a token
alone decodes otherwise than in context). Every range equals a brute-force reference from each prefix of the ids
decoded, and is the smallest one whose tokens hold the step; ids that do not produce the completion get none and the
reason; the item field is validated."""

from __future__ import annotations

import string
from typing import Any

import pytest
from pydantic import ValidationError

from reward_models.layout import step_spans
from verifier_service.schema import ScoreItem

pytest.importorskip("transformers", reason="the `models` extra (torch, transformers) is not installed")

from transformers import AutoTokenizer, PreTrainedTokenizerFast

from reward_models.tokens import REPLACEMENT, Unmapped, byte_decoder, token_bytes, token_spans
from trainer_client.tiny_model import build_tokenizer, gsm8k_rows, training_text

TEXTS = [
    "Tom has 3 apples.\nHe buys 4 more.\nSo he has 3 + 4 = 7 apples.\nThe answer is 7.\n",
    "汤姆有3个苹果。\n他又买了4个🍎🍎。\n\n所以他有7个 🙂\n答案是7",
    "<think>3 + 4 = 7</think>\n\n  \nThe answer is 7.\nNaïve café: 7 €.",
    "\n\nstarts with separators\nthen 👍🏽 a skin-toned emoji\n",
]


@pytest.fixture(scope="module")
def byte_level(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """A byte-level BPE whose merges cross whitespace (`.\\n` is one token: steps end inside a token), never trained
    on Chinese or emoji (each of their characters is several tokens)."""
    path = tmp_path_factory.mktemp("byte-level")
    build_tokenizer(path, training_text(gsm8k_rows(300, seed=1)), split_words=False)
    return AutoTokenizer.from_pretrained(path)


@pytest.fixture(scope="module")
def metaspace() -> Any:
    """A SentencePiece-like tokenizer (Metaspace, no byte fallback): the decoder strips the first token's space."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    core = Tokenizer(models.BPE(unk_token="<unk>"))
    core.pre_tokenizer = pre_tokenizers.Metaspace()
    core.decoder = decoders.Metaspace()
    lines = training_text(gsm8k_rows(200, seed=2))
    alphabet = [*string.printable, *"汤姆有个苹果。他又买了所以答案是🍎🙂"]
    trainer = trainers.BpeTrainer(vocab_size=400, special_tokens=["<unk>", "</s>"], initial_alphabet=alphabet)
    core.train_from_iterator(lines, trainer)
    return PreTrainedTokenizerFast(tokenizer_object=core, eos_token="</s>", unk_token="<unk>")


def reference(tokenizer: Any, ids: list[int], text: str, spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Every prefix decoded (quadratic; small inputs): a span starts at the last token whose prefix has begun at most
    its first character, and ends after the first prefix that holds its last character whole."""
    whole, begun = [], []
    for k in range(len(ids) + 1):
        decoded = str(tokenizer.decode(ids[:k], skip_special_tokens=True))
        kept = decoded.rstrip(REPLACEMENT)
        assert text.startswith(kept)
        whole.append(len(kept))
        begun.append(len(kept) + (decoded != kept))
    return [
        (max(k for k in range(len(ids)) if begun[k] <= start), min(k for k in range(len(ids) + 1) if whole[k] >= end))
        for start, end in spans
    ]


@pytest.mark.parametrize("text", TEXTS)
def test_byte_level_ranges_equal_the_reference_and_are_the_smallest_holding_each_step(
    byte_level: Any, text: str
) -> None:
    ids = [*byte_level(text, add_special_tokens=False)["input_ids"], byte_level.eos_token_id]  # TRL's: EOS kept
    spans = step_spans(text, "\n")
    found = token_spans(byte_level, ids, text, spans)
    assert found == reference(byte_level, ids, text, spans)
    pieces = token_bytes(byte_level, ids)
    assert pieces is not None
    for (start, end), (first, last) in zip(spans, found, strict=True):
        step = text[start:end].encode()
        assert step in b"".join(pieces[first:last])
        assert step not in b"".join(pieces[first + 1 : last]) and step not in b"".join(pieces[first : last - 1])


def test_multi_byte_characters_span_several_tokens_and_steps_end_inside_a_token(byte_level: Any) -> None:
    """The cases the test is for do occur in it: a character of several tokens, a step's end inside a token."""
    text = TEXTS[1]
    ids = byte_level(text, add_special_tokens=False)["input_ids"]
    pieces = token_bytes(byte_level, ids)
    assert pieces is not None
    assert any(len(piece) and not _utf8_whole(piece) for piece in pieces)  # a character cut across tokens
    english = TEXTS[0]
    ids = byte_level(english, add_special_tokens=False)["input_ids"]
    joined = token_bytes(byte_level, ids)
    assert joined is not None and any(piece.endswith(b".\n") for piece in joined)  # "." and "\n" in one token
    spans = step_spans(english, "\n")
    found = token_spans(byte_level, ids, english, spans)
    _, last = found[0]
    assert joined[last - 1].endswith(b".\n")  # the step's last token holds the separator too


def _utf8_whole(piece: bytes) -> bool:
    try:
        piece.decode()
    except UnicodeDecodeError:
        return False
    return True


@pytest.mark.parametrize("text", [TEXTS[0], "Tom has 3 apples .\nHe buys 4 more\nSo 7", TEXTS[1]])
def test_a_tokenizer_that_is_not_byte_level_is_searched_and_equals_the_reference(metaspace: Any, text: str) -> None:
    ids = metaspace(text, add_special_tokens=False)["input_ids"]
    if metaspace.decode(ids) != text:  # Metaspace may not give every text back (its first space): a text it does
        pytest.fail("the test's text does not round-trip through its tokenizer")
    assert token_bytes(metaspace, ids) is None
    spans = step_spans(text, "\n")
    assert token_spans(metaspace, ids, text, spans) == reference(metaspace, ids, text, spans)


def test_ids_that_do_not_produce_the_completion_get_no_ranges_and_the_reason(byte_level: Any, metaspace: Any) -> None:
    text = TEXTS[0]
    ids = byte_level(text, add_special_tokens=False)["input_ids"]
    spans = step_spans(text, "\n")
    with pytest.raises(Unmapped, match="do not decode to the completion"):
        token_spans(byte_level, ids[:-3], text, spans)  # cut short
    with pytest.raises(Unmapped, match="do not decode to the completion"):
        token_spans(byte_level, ids, text.replace("Tom", "Tim"), spans)
    with pytest.raises(Unmapped, match="not in the tokenizer's vocabulary"):
        token_spans(byte_level, [*ids, len(byte_level) + 5], text, spans)
    other = metaspace(text, add_special_tokens=False)["input_ids"]
    with pytest.raises(Unmapped, match="do not decode"):
        token_spans(metaspace, other[1:], text, spans)


def test_the_byte_alphabet_is_gpt2s() -> None:
    decoder = byte_decoder()
    assert len(decoder) == 256 and sorted(decoder.values()) == list(range(256))
    assert decoder["Ġ"] == ord(" ") and decoder["Ċ"] == ord("\n") and decoder["a"] == ord("a")


@pytest.mark.parametrize(
    ("ids", "where"),
    [
        ("1 2 3", ("completion_ids",)),
        ([1, "2"], ("completion_ids", 1)),
        ([1, 2.5], ("completion_ids", 1)),
        ([1, True], ("completion_ids", 1)),
        ([-1], ("completion_ids", 0)),
        ([2**31], ("completion_ids", 0)),
    ],
)
def test_completion_ids_of_the_wrong_type_are_refused_naming_the_field(ids: Any, where: tuple[Any, ...]) -> None:
    with pytest.raises(ValidationError) as caught:
        ScoreItem.model_validate({"completion": "7", "completion_ids": ids, "prm": {"model": "m"}})
    assert [error["loc"] for error in caught.value.errors()] == [where]


def test_completion_ids_are_bounded() -> None:
    from verifier_service.schema import MAX_COMPLETION_IDS

    with pytest.raises(ValidationError) as caught:
        ScoreItem.model_validate(
            {"completion": "7", "completion_ids": [0] * (MAX_COMPLETION_IDS + 1), "prm": {"model": "m"}}
        )
    assert [error["loc"] for error in caught.value.errors()] == [("completion_ids",)]


def test_a_long_completion_is_mapped_without_decoding_each_prefix(byte_level: Any, monkeypatch: Any) -> None:
    """Over 8,000 tokens: the byte-level path never decodes; the searched path (the one a tokenizer that is not
    byte-level takes, forced here) decodes O(log(step length)) prefixes per boundary and finds the same ranges."""
    from reward_models import tokens

    text = "".join(f"Step {n}: 3 + 4 = 7, 苹果 🍎." + ("\n" if n % 20 == 19 else " ") for n in range(400))
    ids = byte_level(text, add_special_tokens=False)["input_ids"]
    assert len(ids) > 8000
    spans = step_spans(text, "\n")
    calls = []
    decode = byte_level.decode

    def counted(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        return decode(*args, **kwargs)

    monkeypatch.setattr(byte_level, "decode", counted)
    fast = token_spans(byte_level, ids, text, spans)
    assert calls == []
    assert tokens._searched_spans(byte_level, ids, text, spans) == fast
    assert len(calls) <= 1 + 2 * len(spans) * 2 * 10  # gallop and halve over a step of about 450 tokens: < 2 x 10


def test_the_searched_path_gives_up_past_its_budget_with_the_reason(byte_level: Any, monkeypatch: Any) -> None:
    from reward_models import tokens

    text = "".join(f"Step {n}: 3 + 4 = 7.\n" for n in range(200))
    ids = byte_level(text, add_special_tokens=False)["input_ids"]
    monkeypatch.setattr(tokens, "SEARCH_BUDGET", 10 * len(ids))
    with pytest.raises(Unmapped, match="too many steps"):
        tokens._searched_spans(byte_level, ids, text, step_spans(text, "\n"))


def test_policy_tokenizer_is_for_process_reward_models_only() -> None:
    from reward_models.spec import ModelSpec

    assert ModelSpec(path="/m", kind="prm", policy_tokenizer="/policy").policy_tokenizer == "/policy"
    with pytest.raises(ValidationError, match="policy_tokenizer: applies to a process reward model"):
        ModelSpec(path="/m", kind="rm", policy_tokenizer="/policy")
