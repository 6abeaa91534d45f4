"""The token ids a reward model sees, laid out as it was trained, so that the score is the one the model learnt to give.

A sequence-classification reward model (rm), for a prompt and a completion: what TRL's RewardTrainer trained it on
(trl/trainer/reward_trainer.py, `_prepare_dataset`):

- `raw` (a non-conversational dataset): the completion gets the EOS token's text appended unless it already ends
  with it, the prompt goes in front, and the text is tokenized as the tokenizer does by default, special tokens added
  (BOS on Llama);
- `chat` (a conversational one): the tokenizer's chat template over a user turn (the prompt) and an assistant turn
  (the completion), tokenized by `apply_chat_template`, with no generation prompt.

GRPOTrainer's own reward-model path lays the text out otherwise (no special tokens, no EOS): the service does not
copy it.

A process reward model (prm, prm_lm), for a prompt and the completion's steps: the ids and each step's position,
as PRMTrainer (`trl`), Qwen2.5-Math-PRM (`qwen_prm`) or Math-Shepherd (`step_tag`) lay them out (below).
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


# --- Process reward models: a score per step -----------------------------------------------------------------------
# A layout gives the ids the model sees and, for each step, the position whose logits score it. The positions are
# found as the layout builds the ids (trl), or by the tag token's id in the ids, checked to occur once per step
# (qwen_prm, step_tag: the model cards find them so): a step that itself holds the tag would shift every score after
# it, so such an input is refused, never scored shifted.

StepLayout = Literal["trl", "qwen_prm", "step_tag"]
QWEN_PRM_SYSTEM = "Please reason step by step, and put your final answer within \\boxed{}."
QWEN_PRM_TAG = "<extra_0>"


class LayoutError(ValueError):
    """The input cannot be laid out as the model reads it (a step holds the tag token, a tag is not one token)."""


def step_spans(text: str, separator: str) -> list[tuple[int, int]]:
    """The character spans of the steps of `text`: the pieces between separators, leaving out those that are empty or
    only whitespace.

    >>> step_spans("a = 1\\n\\n  \\nb = 2\\n", "\\n")
    [(0, 5), (10, 15)]
    """
    if not separator:  # it would be found at every position, and the loop never end
        raise ValueError("the separator is empty")
    spans, start = [], 0
    while start <= len(text):
        end = text.find(separator, start)
        end = len(text) if end < 0 else end
        if text[start:end].strip():
            spans.append((start, end))
        start = end + len(separator)
    return spans


def trl_steps(tokenizer: Any, prompt: str | None, steps: Sequence[str], separator: str) -> tuple[list[int], list[int]]:
    """PRMTrainer's training layout (its `tokenize_row`): BOS (if the tokenizer has one) and the prompt's ids, then each
    step tokenized alone followed by the separator's ids, all without special tokens; each step is read at the last
    token of its separator. Tokenized one by one, a step never merges with the separator as the joined text might."""
    separator_ids = list(tokenizer(separator, add_special_tokens=False)["input_ids"])
    if not separator_ids:
        raise LayoutError("the separator has no tokens")
    ids = [] if tokenizer.bos_token_id is None else [tokenizer.bos_token_id]
    ids += tokenizer(prompt or "", add_special_tokens=False)["input_ids"]
    positions = []
    for step_ids in tokenizer(list(steps), add_special_tokens=False)["input_ids"]:
        ids += [*step_ids, *separator_ids]
        positions.append(len(ids) - 1)
    return ids, positions


def qwen_prm_steps(tokenizer: Any, prompt: str | None, steps: Sequence[str]) -> tuple[list[int], list[int]]:
    """Qwen2.5-Math-PRM's layout (its model card): the chat template over its system turn, a user turn (the prompt)
    and an assistant turn of the steps, each followed by `<extra_0>`, tokenized as the card does; each step is read at
    its `<extra_0>`."""
    tag = tag_id(tokenizer, QWEN_PRM_TAG, whole=True)
    turns = [{"role": "system", "content": QWEN_PRM_SYSTEM}]
    turns += [{"role": "user", "content": prompt}] if prompt is not None else []
    turns += [{"role": "assistant", "content": "".join(step + QWEN_PRM_TAG for step in steps)}]
    text = tokenizer.apply_chat_template(turns, tokenize=False, add_generation_prompt=False)
    ids = list(tokenizer(text)["input_ids"])
    return ids, tagged(ids, tag, len(steps))


def step_tag_steps(
    tokenizer: Any, prompt: str | None, steps: Sequence[str], separator: str, step_tag: str
) -> tuple[list[int], list[int]]:
    """Math-Shepherd's layout (its model card): `prompt + " " + output`, where the output is the steps joined by the
    separator, each followed by a space and the step tag, tokenized with special tokens; each step is read at the
    tag's last token."""
    output = separator.join(f"{step} {step_tag}" for step in steps)
    ids = list(tokenizer(output if prompt is None else f"{prompt} {output}")["input_ids"])
    return ids, tagged(ids, tag_id(tokenizer, step_tag), len(steps))


def step_layout(
    tokenizer: Any,
    layout: StepLayout,
    prompt: str | None,
    steps: Sequence[str],
    separator: str = "\n",
    step_tag: str = "\u043a\u0438",
) -> tuple[list[int], list[int]]:
    """The ids and each step's read position in `layout`: what the service scores, and what the online update
    (trainer_client/online_rm.py) labels, from this one function."""
    if layout == "trl":
        return trl_steps(tokenizer, prompt, steps, separator)
    if layout == "qwen_prm":
        return qwen_prm_steps(tokenizer, prompt, steps)
    return step_tag_steps(tokenizer, prompt, steps, separator, step_tag)


def tag_id(tokenizer: Any, text: str, whole: bool = False) -> int:
    """The id a tag is found by: the last of its ids tokenized alone (as Math-Shepherd's card takes it); with
    `whole`, it must be one token."""
    ids = list(tokenizer(text, add_special_tokens=False)["input_ids"])
    if not ids or (whole and len(ids) != 1):
        raise LayoutError(f"{text!r} is not one token of this tokenizer")
    return int(ids[-1])


def tagged(ids: Sequence[int], tag: int, steps: int) -> list[int]:
    """The positions of `tag` in `ids`, one per step, or LayoutError."""
    positions = [position for position, token in enumerate(ids) if token == tag]
    if len(positions) != steps:
        raise LayoutError(f"the tag token occurs {len(positions)} times for {steps} steps")
    return positions
