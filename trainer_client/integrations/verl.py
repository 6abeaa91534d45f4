"""verl: the verifier as verl's custom reward function, set in the trainer's configuration only.

    reward.custom_reward_function.path=pkg://trainer_client.integrations.verl
    reward.custom_reward_function.name=compute_score
    +reward.custom_reward_function.reward_kwargs.url=http://verifier:8088

verl 0.9's reward loop calls `compute_score` once per sample, concurrently: each reward worker gathers its chunk on
its event loop, and those calls coalesce into one `/v1/score` request (`coalesce`). `reward_kwargs` are the options
of `common.AdapterConfig`: `url`, `api_key` (else $VERIFIER_URL, $VERIFIER_API_KEY), `on_unjudged`, `components`,
`weights`, each component's options (`format={}` adds the format check), `max_retries`, `timeout_s`, `window_ms`,
`max_batch`.

Every call returns the same keys (`score`, `acc`, `verifier_judged`): verl builds its `reward_extra_info` columns from
the first sample's keys. A sample the verifier cannot judge raises (verl stops the step: better than a reward of 0
for a sample nobody judged), unless `on_unjudged=<float>` asks for a fallback, flagged with `verifier_judged: 0`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from trainer_client.integrations.coalesce import coalescer_for, run_sync
from trainer_client.integrations.common import AdapterConfig, Outcome, adapter_config, build_item
from verifier_service.schema import ItemResult, ScoreItem

HINT = ("fix the dataset, or set +reward.custom_reward_function.reward_kwargs.on_unjudged=<float> to train on a "
        "fallback flagged in the verifier_judged column")  # fmt: skip


async def compute_score(
    data_source: Any, solution_str: str, ground_truth: Any, extra_info: Any = None, **reward_kwargs: Any
) -> dict[str, float]:
    """verl's `compute_score` for one sample: `{"score", "acc", "verifier_judged"}`.

    >>> import asyncio
    >>> asyncio.run(compute_score("openai/gsm8k", "6 * 7 = 42\\n#### 42", "42", url=VERIFIER_URL))
    {'score': 1.0, 'acc': 1.0, 'verifier_judged': 1.0}
    """
    config = adapter_config(reward_kwargs, "verl compute_score")
    item = _item(data_source, solution_str, ground_truth, extra_info, config)
    coalescer = await coalescer_for(config)
    return _extra(await coalescer.score(item), config)


def compute_score_sync(
    data_source: Any, solution_str: str, ground_truth: Any, extra_info: Any = None, **reward_kwargs: Any
) -> dict[str, float]:
    """`compute_score` for callers that cannot await (verl's `remote` reward manager refuses async functions; the
    legacy managers). Concurrent calls from several threads still coalesce (on a background event loop)."""
    return run_sync(compute_score(data_source, solution_str, ground_truth, extra_info, **reward_kwargs))


def compute_score_batch(
    data_sources: Sequence[Any],
    solution_strs: Sequence[str],
    ground_truths: Sequence[Any],
    extra_infos: Sequence[Any] | None = None,
    **reward_kwargs: Any,
) -> list[dict[str, float]]:
    """The batch signature of verl's `BatchRewardManager`: one request for the batch, one dict per sample."""
    config = AdapterConfig.from_kwargs(reward_kwargs, "verl compute_score_batch")
    infos = list(extra_infos) if extra_infos is not None else [None] * len(solution_strs)
    if not len(data_sources) == len(solution_strs) == len(ground_truths) == len(infos):
        raise ValueError("compute_score_batch needs as many data sources, ground truths and extra infos as solutions")
    items = [_item(*row, config) for row in zip(data_sources, solution_strs, ground_truths, infos, strict=True)]
    return [_extra(result, config) for result in run_sync(_score_many(items, config))]


async def _score_many(items: list[ScoreItem], config: AdapterConfig) -> list[ItemResult]:
    coalescer = await coalescer_for(config)
    return await coalescer.score_many(items)


def _item(data_source: Any, solution: str, ground_truth: Any, extra_info: Any, config: AdapterConfig) -> ScoreItem:
    spec = extra_info.get("verifier") if isinstance(extra_info, Mapping) else None
    return build_item(solution, ground_truth, config, data_source=data_source, spec=spec)


def _extra(result: ItemResult, config: AdapterConfig) -> dict[str, float]:
    return Outcome.of(result, config.on_unjudged, HINT).extra()
