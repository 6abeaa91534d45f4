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
from verifier_service.compat_mapping import SPECIAL_TOKENS, CompatConfig, Invalid, openrlhf_answer, openrlhf_completion
from verifier_service.schema import ItemResult, ScoreItem

HINT = "fix the label in the dataset (--data.label_key); OpenRLHF cannot skip a sample, so the step stops"
# What OpenRLHF reads back is defined once, for this file and the route /v1/compat/openrlhf: `scores`, the extra
# keys (those of the route's default URL: verifier_judged, verifier_math) and the special tokens stripped.
ANSWER = CompatConfig()


def reward_func(queries: Sequence[str], prompts: Sequence[str], labels: Sequence[Any], **kwargs: Any) -> dict[str, Any]:
    """OpenRLHF's reward function: `{"rewards": [...], "scores": [...], "extra_logs": {...}}`, one value per query,
    as the route `/v1/compat/openrlhf` answers (`compat_mapping.openrlhf_answer`): `scores` (OpenRLHF's dynamic
    filtering reads them) is the reward over the sum of the item's positive weights, clipped into [0, 1];
    `extra_logs` holds `verifier_judged` and `verifier_math`. The verifier is at $VERIFIER_URL, with the key
    $VERIFIER_API_KEY.
    """
    if not len(queries) == len(prompts) == len(labels):
        raise ValueError(f"{len(queries)} queries, {len(prompts)} prompts and {len(labels)} labels")
    config = adapter_config({}, "openrlhf_reward_func")
    items = [
        build_item(completion_of(q, p), label, config) for q, p, label in zip(queries, prompts, labels, strict=True)
    ]
    results = run_sync(_score(items, config))
    for result in results:
        Outcome.of(result, None, HINT)  # a sample the verifier could not judge raises, naming its verdicts
    return openrlhf_answer(items, results, ANSWER)


def completion_of(query: str, prompt: str) -> str:
    """The response in an OpenRLHF query, as the route `/v1/compat/openrlhf` finds it
    (`compat_mapping.openrlhf_completion`): what follows the prompt, found too when OpenRLHF truncated it on the left,
    less trailing end-of-turn tokens (`compat_mapping.SPECIAL_TOKENS`). A query that does not hold its prompt is a
    ValueError, as the route's 422.

    >>> completion_of("<s>Q: 6*7?\\nA: 42</s><pad>", "<s>Q: 6*7?\\nA:")
    ' 42'
    """
    try:
        return openrlhf_completion(query, prompt, SPECIAL_TOKENS)
    except Invalid as exc:
        raise ValueError(f"the query {exc.errors[0]['msg']}") from None


async def _score(items: list[ScoreItem], config: AdapterConfig) -> list[ItemResult]:
    coalescer = await coalescer_for(config)
    return await coalescer.score_many(items)
