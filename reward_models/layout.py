"""The token ids a sequence-classification reward model sees for a prompt and a completion: what TRL's
RewardTrainer trained it on (trl/trainer/reward_trainer.py, `_prepare_dataset`), so that the score is the one the
model learnt to give:

- `raw` (a non-conversational dataset): the completion gets the EOS token's text appended unless it already ends
  with it, the prompt goes in front, and the text is tokenized as the tokenizer does by default, special tokens added
  (BOS on Llama);
- `chat` (a conversational one): the tokenizer's chat template over a user turn (the prompt) and an assistant turn
  (the completion), tokenized by `apply_chat_template`, with no generation prompt.

GRPOTrainer's own reward-model path lays the text out otherwise (no special tokens, no EOS): the service does not
copy it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

Template = Literal["raw", "chat"]


def raw_text(prompt: str | None, completion: str, eos_token: str | None) -> str:
    """The text RewardTrainer tokenizes for a non-conversational row.

    >>> raw_text("Q: 1+1? ", "2", "</s>"), raw_text(None, "2</s>", "</s>")
    ('Q: 1+1? 2</s>', '2</s>')
    """
    if eos_token and not completion.endswith(eos_token):
        completion += eos_token
    return (prompt or "") + completion


def messages(prompt: str | None, completion: str) -> list[dict[str, str]]:
    """The conversation RewardTrainer renders with the chat template: a user turn, when there is a prompt, then the
    assistant's."""
    turns = [{"role": "user", "content": prompt}] if prompt is not None else []
    return [*turns, {"role": "assistant", "content": completion}]


def token_ids(tokenizer: Any, template: Template, pairs: Sequence[tuple[str | None, str]]) -> list[list[int]]:
    """The ids of each (prompt, completion) pair, laid out as `template` says."""
    if not pairs:
        return []
    if template == "raw":
        texts = [raw_text(prompt, completion, tokenizer.eos_token) for prompt, completion in pairs]
        return [list(ids) for ids in tokenizer(texts)["input_ids"]]
    conversations = [messages(prompt, completion) for prompt, completion in pairs]
    rendered = tokenizer.apply_chat_template(conversations, tokenize=True, return_dict=True)
    return [list(ids) for ids in rendered["input_ids"]]
