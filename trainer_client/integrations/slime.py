"""slime: the verifier as a custom reward model, set on the command line only.

    --custom-rm-path trainer_client.integrations.slime.rm --rm-url http://verifier:8088   [--group-rm]

slime calls `await rm(args, sample)` for each sample, or `await rm(args, samples)` for a whole group (`--group-rm`,
or a custom generate function that returns lists); both work. A group is scored in one `/v1/score` request, and
per-sample calls made at the same time coalesce. The completion is `sample.response`; the gold answer is
`sample.label` (a math answer, a dict or JSON of component specs, or code tests), unless `sample.metadata` holds a
`verifier` spec (and a `data_source`, as for verl). The verifier's address is `--rm-url` (its base URL), else
$VERIFIER_URL; its key $VERIFIER_API_KEY.

slime can drop a sample from the loss, so a sample the verifier cannot judge gets `sample.remove_sample = True`
(loss mask zeroed) instead of a reward. It still counts in the group's advantage normalisation, so its reward is
the mean of the judged samples of its group, which leaves the baseline unbiased (0.0 when none was judged, as for
a single-sample call: use `--group-rm` to score groups). The return value is a float per sample, or, with
`--reward-key` (or `--eval-reward-key`), a dict with `reward`, `acc` and `verifier_judged`.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from trainer_client.integrations.coalesce import coalescer_for
from trainer_client.integrations.common import AdapterConfig, adapter_config, build_item, correctness, unjudged_reason
from verifier_service.schema import ItemResult, ScoreItem

logger = logging.getLogger("trainer_client")
KEYS = ("reward", "acc", "verifier_judged")  # of the dict returned with --reward-key


async def rm(args: Any, sample_or_samples: Any, **kwargs: Any) -> Any:
    """slime's reward function: one reward for one sample, a list for a list of samples."""
    keyed = _reward_keys(args)
    config = adapter_config({"url": getattr(args, "rm_url", None)}, "trainer_client.integrations.slime.rm")
    group = isinstance(sample_or_samples, list)
    samples = sample_or_samples if group else [sample_or_samples]
    coalescer = await coalescer_for(config)
    results = await coalescer.score_many([_item(sample, config) for sample in samples])
    rewards = group_rewards(samples, results)
    values: list[Any] = [_keyed(*pair) for pair in zip(rewards, results, strict=True)] if keyed else list(rewards)
    return values if group else values[0]


def group_rewards(samples: list[Any], results: list[ItemResult]) -> list[float]:
    """Each sample's reward; an unjudged sample is marked `remove_sample` and given the judged samples' mean."""
    judged = [result.reward for result in results if result.reward is not None]
    mean = sum(judged) / len(judged) if judged else 0.0
    rewards = []
    for sample, result in zip(samples, results, strict=True):
        if result.reward is None:
            sample.remove_sample = True
            logger.warning("slime rm: %s; the sample is removed from the loss (remove_sample) with reward %.3f, "
                           "its group's judged mean", unjudged_reason(result), mean)  # fmt: skip
        rewards.append(mean if result.reward is None else result.reward)
    return rewards


def _item(sample: Any, config: AdapterConfig) -> ScoreItem:
    metadata = getattr(sample, "metadata", None)
    metadata = metadata if isinstance(metadata, Mapping) else {}
    response = getattr(sample, "response", "") or ""
    return build_item(
        response, sample.label, config, data_source=metadata.get("data_source"), spec=metadata.get("verifier")
    )


def _keyed(value: float, result: ItemResult) -> dict[str, float]:
    judged = result.reward is not None
    return {"reward": value, "acc": correctness(result) if judged else value, "verifier_judged": float(judged)}


def _reward_keys(args: Any) -> bool:
    """Whether slime reads a key of the reward (`--reward-key`, `--eval-reward-key`); a key we do not give fails."""
    keys = [key for key in (getattr(args, "reward_key", None), getattr(args, "eval_reward_key", None)) if key]
    unknown = [key for key in keys if key not in KEYS]
    if unknown:
        raise ValueError(f"--reward-key/--eval-reward-key {unknown} is not one of this reward's keys {list(KEYS)}")
    return bool(keys)
