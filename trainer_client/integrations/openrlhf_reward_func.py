"""OpenRLHF: the verifier as a reward-function file, set on the command line only.

    --reward.remote_url "$(python -c 'import trainer_client.integrations.openrlhf_reward_func as m; print(m.__file__)')"
    VERIFIER_URL=http://verifier:8088  VERIFIER_API_KEY=...   (in the environment of OpenRLHF's Ray workers)

OpenRLHF 0.11 loads a `--reward.remote_url` ending in `.py` as a file and calls its `reward_func(queries, prompts,
labels)` for each generated sample, in a worker thread, many at once; those calls coalesce into shared `/v1/score`
requests (`coalesce.run_sync`). A query is the prompt (chat template included) followed by the response, decoded
with its special tokens: the completion is the query after its prompt, less the end-of-turn tokens it ends in. The
label is the dataset's `--data.label_key` column: a math answer, a dict (or JSON) of component specs, or code tests.

A sample the verifier cannot judge raises. OpenRLHF logs it and leaves the sample without a reward, and the step then
stops with an error: the run stops rather than train on a reward nobody judged. So does a verifier that cannot be
reached, after the client's retries.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from trainer_client.integrations.coalesce import coalescer_for, run_sync
from trainer_client.integrations.common import AdapterConfig, Outcome, adapter_config, build_item
from verifier_service.schema import ItemResult, ScoreItem

# End-of-turn and end-of-text tokens a decoded response may end in (Qwen, Llama 2/3, Mistral, Gemma, Phi, DeepSeek,
# gpt-oss), stripped from its end in any order.
SPECIAL_TOKENS = ("<|im_end|>", "<|endoftext|>", "</s>", "<|eot_id|>", "<|end_of_text|>", "<|end|>", "<end_of_turn>",
                  "<eos>", "<|return|>", "<｜end▁of▁sentence｜>", "<pad>")  # fmt: skip
HINT = "fix the label in the dataset (--data.label_key); OpenRLHF cannot skip a sample, so the step stops"
PROMPT_TAIL = 200  # characters of a prompt that identify it in a query whose prompt was truncated on the left


def reward_func(queries: Sequence[str], prompts: Sequence[str], labels: Sequence[Any], **kwargs: Any) -> dict[str, Any]:
    """OpenRLHF's reward function: `{"rewards": [...], "scores": [...], "extra_logs": {...}}`, one value per query.

    `scores` (used by OpenRLHF's dynamic filtering) is the correctness component's score, in [0, 1]. The verifier
    is at $VERIFIER_URL, with the key $VERIFIER_API_KEY.
    """
    if not len(queries) == len(prompts) == len(labels):
        raise ValueError(f"{len(queries)} queries, {len(prompts)} prompts and {len(labels)} labels")
    config = adapter_config({}, "openrlhf_reward_func")
    items = [
        build_item(completion_of(q, p), label, config) for q, p, label in zip(queries, prompts, labels, strict=True)
    ]
    outcomes = [Outcome.of(result, None, HINT) for result in run_sync(_score(items, config))]
    return {
        "rewards": [outcome.score for outcome in outcomes],
        "scores": [outcome.acc for outcome in outcomes],
        "extra_logs": {"acc": [outcome.acc for outcome in outcomes]},
    }


def completion_of(query: str, prompt: str) -> str:
    """The response in an OpenRLHF query: what follows the prompt, less trailing end-of-turn tokens.

    >>> completion_of("<s>Q: 6*7?\\nA: 42</s><pad>", "<s>Q: 6*7?\\nA:")
    ' 42'
    """
    return strip_special_tokens(query[_prompt_end(query, prompt) :])


def _prompt_end(query: str, prompt: str) -> int:
    """Where the prompt ends in the query. OpenRLHF truncates a prompt that is too long on the left, so the query
    may hold only the prompt's end: its last PROMPT_TAIL characters, or, when less of it is left, a suffix of it."""
    if query.startswith(prompt):
        return len(prompt)
    tail = prompt[-PROMPT_TAIL:]
    at = query.find(tail) if tail else -1
    if at >= 0:
        return at + len(tail)
    head = query[: min(len(query), PROMPT_TAIL)]
    start = prompt.find(head[:32]) if head else -1
    while start >= 0:
        if query.startswith(prompt[start:]):
            return len(prompt) - start
        start = prompt.find(head[:32], start + 1)
    raise ValueError("the query does not contain its prompt, so its response cannot be told apart")


def strip_special_tokens(text: str) -> str:
    """`text` without the end-of-turn tokens (and whitespace) it ends in."""
    while True:
        stripped = text.rstrip()
        for token in SPECIAL_TOKENS:
            stripped = stripped.removesuffix(token)
        if stripped == text:
            return text
        text = stripped


async def _score(items: list[ScoreItem], config: AdapterConfig) -> list[ItemResult]:
    coalescer = await coalescer_for(config)
    return await coalescer.score_many(items)
