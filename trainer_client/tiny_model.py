"""A tiny random Qwen2-style model, tokenizer and GSM8K-style data, built locally (no hub) for end-to-end runs:
`python -m trainer_client.tiny_model DIR` builds them in DIR in a few seconds, to try the training script on CPU
against a running verifier (README, "Try it on CPU in a minute"). The test suite and bench/learning.py build theirs
with the same functions. Needs the `train` extra.

The tokenizer is a byte-level BPE trained here on a few hundred lines; `<think>` and `</think>` are ordinary
text (TRL decodes completions with `skip_special_tokens=True`, which would strip them if they were special).
The model's weights are random: it writes nonsense, which the verifier scores (mostly 0); what a run shows is that
the whole path works, not that a model learns (bench/learning.py shows that, in half an hour).
"""

from __future__ import annotations

import argparse
import json
import random
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

CHAT_TEMPLATE = (
    "{%- for message in messages %}"
    "{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}"
)
SPECIAL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]


def gsm8k_rows(count: int, seed: int = 0) -> list[dict[str, str]]:
    """GSM8K-shaped rows: a question and a solution ending in a `#### N` line."""
    rng = random.Random(seed)
    rows = []
    for _ in range(count):
        a, b = rng.randint(2, 60), rng.randint(2, 60)
        question = f"Tom has {a} apples and buys {b} more. How many apples does Tom have now?"
        answer = f"Tom has {a} + {b} = <<{a}+{b}={a + b}>>{a + b} apples.\n#### {a + b}"
        rows.append({"question": question, "answer": answer})
    return rows


def training_text(rows: list[dict[str, str]]) -> list[str]:
    lines = []
    for row in rows:
        total = row["answer"].rsplit("####", 1)[1].strip()
        lines += [row["question"], row["answer"], f"<think>{row['answer']}</think>The answer is {total}."]
    return lines


def build_tokenizer(
    path: Path, lines: Sequence[str], vocab_size: int = 600, split_digits: bool = False, split_words: bool = True
) -> None:
    """A byte-level BPE trained on `lines`; with `split_digits`, each digit a token of its own (numbers spelt digit by
    digit); without `split_words`, merges cross word and whitespace boundaries (GPT-2's split is off): a frequent
    `.\n` becomes one token."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    core = Tokenizer(models.BPE(unk_token=None))
    byte_level = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=split_words)
    core.pre_tokenizer = (
        pre_tokenizers.Sequence([pre_tokenizers.Digits(individual_digits=True), byte_level])
        if split_digits
        else byte_level
    )
    core.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size, special_tokens=SPECIAL, initial_alphabet=pre_tokenizers.ByteLevel.alphabet()
    )
    core.train_from_iterator(lines, trainer=trainer)
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=core,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        additional_special_tokens=["<|im_start|>"],
    )
    tokenizer.chat_template = CHAT_TEMPLATE
    tokenizer.save_pretrained(path)


def build_model(
    path: Path,
    *,
    seed: int = 0,
    hidden: int = 32,
    intermediate: int = 64,
    layers: int = 2,
    heads: int = 2,
    kv_heads: int = 1,
    max_positions: int = 1024,
    device: str = "cpu",
) -> None:
    """A Qwen2-style model with random weights for the tokenizer in `path`; by default hidden size 32 and two layers:
    a few hundred kB, fast on CPU. `device` is where the weights are drawn (a GPU draws a big model's in a moment)."""
    import torch
    from transformers import AutoTokenizer, GenerationConfig, Qwen2Config, Qwen2ForCausalLM

    tokenizer = AutoTokenizer.from_pretrained(path)
    config = Qwen2Config(
        vocab_size=len(tokenizer),
        hidden_size=hidden,
        intermediate_size=intermediate,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        num_key_value_heads=kv_heads,
        max_position_embeddings=max_positions,
        tie_word_embeddings=True,
        bos_token_id=tokenizer.pad_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    torch.manual_seed(seed)
    with torch.device(device):
        model = Qwen2ForCausalLM(config)
    model.generation_config = GenerationConfig(
        eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id, do_sample=True
    )
    model.save_pretrained(path)


def build_reward_model(
    path: Path,
    *,
    seed: int = 0,
    hidden: int = 32,
    intermediate: int | None = None,
    layers: int = 2,
    heads: int = 2,
    kv_heads: int = 1,
    max_positions: int = 1024,
    vocab_size: int | None = None,
    device: str = "cpu",
) -> None:
    """A Qwen2-style sequence-classification reward model with random weights for the tokenizer in `path`, shaped as
    TRL's RewardTrainer saves one: num_labels 1 and pad_token_id in its config. The score head is drawn at unit scale
    (not the usual 0.02), so that scores differ by more than rounding. By default tiny (hidden 32, MLP twice that);
    `vocab_size` (default: the tokenizer's) sizes the embedding as a real model's is, beyond the tokenizer's ids;
    `device` is where the weights are drawn (a GPU draws a big model's in a moment)."""
    import torch
    from transformers import Qwen2ForSequenceClassification

    config = scorer_config(path, hidden, intermediate, layers, heads, kv_heads, max_positions, vocab_size)
    config.num_labels = 1  # one score per sequence
    torch.manual_seed(seed)
    with torch.device(device):
        model = Qwen2ForSequenceClassification(config)
    with torch.no_grad():
        model.score.weight.normal_(0.0, 1.0)
    model.save_pretrained(path)


def build_process_reward_model(
    path: Path,
    *,
    causal_lm: bool = False,
    seed: int = 0,
    hidden: int = 32,
    intermediate: int | None = None,
    layers: int = 2,
    heads: int = 2,
    kv_heads: int = 1,
    max_positions: int = 1024,
    vocab_size: int | None = None,
) -> None:
    """A Qwen2-style process reward model with random weights for the tokenizer in `path`: a token-classification
    model with two labels, as PRMTrainer trains one and Qwen2.5-Math-PRM's head is (kind prm), or with `causal_lm` a
    causal LM read at its good and bad tokens, as Math-Shepherd's (kind prm_lm). The head is drawn at scale 0.3 (not
    0.02), so that step scores differ by more than rounding; the shape is build_reward_model's."""
    import torch
    from transformers import Qwen2ForCausalLM, Qwen2ForTokenClassification

    config = scorer_config(path, hidden, intermediate, layers, heads, kv_heads, max_positions, vocab_size)
    config.num_labels = 2  # a bad and a good step
    torch.manual_seed(seed)
    model = Qwen2ForCausalLM(config) if causal_lm else Qwen2ForTokenClassification(config)
    head: Any = model.get_output_embeddings() if causal_lm else model.score
    with torch.no_grad():
        head.weight.normal_(0.0, 0.3)
    model.save_pretrained(path)


def scorer_config(
    path: Path,
    hidden: int,
    intermediate: int | None,
    layers: int,
    heads: int,
    kv_heads: int,
    max_positions: int,
    vocab_size: int | None,
) -> Any:
    """The Qwen2 config of a scoring model (a reward or process reward model) for the tokenizer in `path`: by default
    tiny (hidden 32, MLP twice that); `vocab_size` (default: the tokenizer's) sizes the embedding as a real model's
    is, beyond the tokenizer's ids; pad_token_id set, as RewardTrainer sets it."""
    from transformers import AutoTokenizer, Qwen2Config

    tokenizer = AutoTokenizer.from_pretrained(path)
    return Qwen2Config(
        vocab_size=vocab_size or len(tokenizer),
        hidden_size=hidden,
        intermediate_size=intermediate or 2 * hidden,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        num_key_value_heads=kv_heads,
        max_position_embeddings=max_positions,
        tie_word_embeddings=False,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )


def build_tiny_model(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    build_tokenizer(path, training_text(gsm8k_rows(300, seed=1)))
    build_model(path)
    return path


def write_jsonl(path: Path, rows: Sequence[Mapping[str, object]]) -> Path:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


DATA_FILE = "gsm8k.jsonl"  # the rows `main` writes beside the model


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m trainer_client.tiny_model",
        description="Build a tiny random Qwen2-style model and its tokenizer in DIR, and 16 GSM8K-style rows in "
        f"DIR/{DATA_FILE}, with no hub access: enough to run the training script on CPU in a minute.",
    )
    parser.add_argument("dir", type=Path, help="where to build them (made if missing)")
    parser.add_argument("--rows", type=int, default=16, help="GSM8K-style rows to write (default 16)")
    args = parser.parse_args(argv)
    build_tiny_model(args.dir)
    data = write_jsonl(args.dir / DATA_FILE, gsm8k_rows(args.rows, seed=7))
    print(f"built a tiny random model in {args.dir} and {args.rows} GSM8K-style rows in {data}")


if __name__ == "__main__":
    main()
