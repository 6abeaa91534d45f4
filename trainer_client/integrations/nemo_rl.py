"""NeMo-RL: the verifier as an environment (`EnvironmentInterface`), one `/v1/score` request per step.

In the run script, before the environments are created (NeMo-RL finds environments in a registry, so this takes
one line of code besides the configuration):

    from trainer_client.integrations.nemo_rl import register
    register()  # the environment "reward_verifier"

and in the YAML configuration: `data.default.env_name: reward_verifier`, and the environment's options (those of
`common.AdapterConfig`: `url`, `api_key`, `on_unjudged`, `components`, each component's options, ...):

    env:
      reward_verifier:
        url: http://verifier:8088

`step` grades the last assistant message of each message log against `metadata[i]["ground_truth"]` (or a
`metadata[i]["verifier"]` spec, and a `data_source`, as for verl). NeMo-RL has no way to drop one sample on this
path, so a sample the verifier cannot judge raises, unless `on_unjudged: <float>` asks for a fallback, flagged in
the returned metadata (`verifier_judged: 0.0`). Nothing here imports ray, torch or nemo_rl until it is used.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

from trainer_client.inputs import completion_text
from trainer_client.integrations.coalesce import coalescer_for, run_sync
from trainer_client.integrations.common import AdapterConfig, Outcome, build_item
from verifier_service.schema import ItemResult, ScoreItem

ENV_NAME = "reward_verifier"
ACTOR_FQN = f"{__name__}.RewardVerifierActor"  # the Ray actor class NeMo-RL creates (see __getattr__)
STEP_BATCH = 4096  # a step's samples go in one request (the verifier's default VERIFIER_MAX_BATCH_ITEMS)
HINT = "fix the ground truth in the dataset, or set on_unjudged: <float> in the environment's config"


class EnvironmentResult(NamedTuple):
    """The fields of NeMo-RL's `EnvironmentReturn`, used when nemo_rl is not installed (tests, other trainers)."""

    observations: list[dict[str, str]]
    metadata: list[Any]
    next_stop_strings: list[list[str] | None] | list[None]
    rewards: Any  # torch.Tensor[B]
    terminateds: Any  # torch.Tensor[B]
    answers: list[str | None] | None


class RewardVerifierEnvironment:
    """A NeMo-RL environment that asks the verifier for each sample's reward; every episode ends after one turn."""

    def __init__(self, cfg: Mapping[str, Any] | None = None) -> None:
        self.config = AdapterConfig.from_kwargs({"max_batch": STEP_BATCH, **(cfg or {})}, "RewardVerifierEnvironment")

    def step(self, message_log_batch: Sequence[Sequence[Mapping[str, Any]]], metadata: Sequence[Any]) -> Any:
        """Rewards for a batch of message logs, in one request; NeMo-RL's `EnvironmentReturn`."""
        import torch

        if len(message_log_batch) != len(metadata):
            raise ValueError(f"{len(message_log_batch)} message logs and {len(metadata)} metadata entries")
        rows = [meta if isinstance(meta, Mapping) else {} for meta in metadata]
        items = [self._item(log, row) for log, row in zip(message_log_batch, rows, strict=True)]
        results = run_sync(self._score(items))
        outcomes = [Outcome.of(result, self.config.on_unjudged, HINT) for result in results]
        return environment_return(
            observations=[_observation(outcome) for outcome in outcomes],
            metadata=[{**row, "verifier_judged": float(o.judged)} for row, o in zip(rows, outcomes, strict=True)],
            next_stop_strings=[None] * len(items),
            rewards=torch.tensor([outcome.score for outcome in outcomes], dtype=torch.float32),
            terminateds=torch.ones(len(items), dtype=torch.float32),
            answers=[_answer(result) for result in results],
        )

    def global_post_process_and_metrics(self, batch: Any) -> tuple[Any, dict[str, float]]:
        """The batch unchanged, and its mean reward (and the share of samples that ended properly, when known)."""
        rewards = batch["rewards"]
        metrics = {"accuracy": float(rewards.float().mean()) if len(rewards) else 0.0}
        if "is_end" in batch:
            metrics["fraction_of_samples_properly_ended"] = float(batch["is_end"].float().mean())
        return batch, metrics

    def shutdown(self) -> None:
        """Nothing to stop: the HTTP client belongs to the process's background loop."""

    def _item(self, log: Sequence[Mapping[str, Any]], row: Mapping[str, Any]) -> ScoreItem:
        completion = completion_text(list(log))
        data_source, spec = row.get("data_source"), row.get("verifier")
        return build_item(completion, row.get("ground_truth"), self.config, data_source=data_source, spec=spec)

    async def _score(self, items: list[ScoreItem]) -> list[ItemResult]:
        coalescer = await coalescer_for(self.config)
        return await coalescer.score_many(items)


def environment_return(**fields: Any) -> Any:
    """NeMo-RL's `EnvironmentReturn` when nemo_rl is installed, else the same fields as an `EnvironmentResult`."""
    try:
        from nemo_rl.environments.interfaces import EnvironmentReturn
    except ImportError:
        return EnvironmentResult(**fields)
    return EnvironmentReturn(**fields)


def register(name: str = ENV_NAME) -> None:
    """Make the environment known to NeMo-RL as `name`: its registry entry, and the Python its Ray actor runs on
    (the driver's, as for NeMo-RL's own math environment)."""
    from nemo_rl.distributed.ray_actor_environment_registry import ACTOR_ENVIRONMENT_REGISTRY
    from nemo_rl.distributed.virtual_cluster import PY_EXECUTABLES
    from nemo_rl.environments.utils import register_env

    ACTOR_ENVIRONMENT_REGISTRY[ACTOR_FQN] = PY_EXECUTABLES.SYSTEM
    register_env(name, ACTOR_FQN)


def __getattr__(name: str) -> Any:
    """`RewardVerifierActor`: the environment as a Ray actor class, made on first use so that importing this module
    does not import ray. Concurrent steps (NeMo-RL's async rollouts step one sample at a time) run on threads."""
    if name != "RewardVerifierActor":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import ray

    actor = ray.remote(max_concurrency=64)(RewardVerifierEnvironment)
    globals()[name] = actor
    return actor


def _observation(outcome: Outcome) -> dict[str, str]:
    verdict = "correct" if outcome.judged and outcome.acc == 1.0 else "incorrect" if outcome.judged else "not judged"
    return {"role": "environment", "content": f"Environment: {verdict}"}


def _answer(result: ItemResult) -> str | None:
    math = result.components.get("math")
    return math.extracted if math is not None else None
