"""Where a GRPO step's time goes, in the training script's logged metrics: TRL's own timed blocks, which it sends
only to Weights & Biases, MLflow or Trackio, logged next to its `step_time` for every run.

- `timing/generation`: seconds in the model's generate call (transformers, or vLLM when `--use_vllm`);
- `timing/rewards`: seconds in the reward functions, as the trainer waits for them (all of them, one generation
  batch; TRL's `_calculate_rewards`), which with the verifier is the time spent waiting for it;
- `timing/weight_sync`: seconds pushing weights to vLLM (with `--use_vllm`);
- `gpu/peak_memory_gib`: the most GPU memory torch has held since the start (with CUDA).

Each timing is the mean over the logged steps of one generation batch's seconds; TRL generates one batch per
optimizer step unless `--steps_per_generation` says otherwise. `step_time` (TRL's) is the whole step, generation and
rewards included, so `timing/rewards / step_time` is the share of the step spent waiting for rewards.
"""

from __future__ import annotations

import time
from types import TracebackType
from typing import Any

# TRL's names for its timed blocks -> the metric they are logged as
PARTS = {
    "transformers.generate": "timing/generation",
    "transformers.generate_batch": "timing/generation",  # TRL's paged generation (--use_transformers_paged)
    "vLLM.generate": "timing/generation",
    "_calculate_rewards": "timing/rewards",
    "sync_weights": "timing/weight_sync",
}


class _Timed:
    """One of TRL's timed blocks, also adding its seconds to the trainer's metrics."""

    def __init__(self, inner: Any, trainer: Any, metric: str) -> None:
        self.inner, self.trainer, self.metric = inner, trainer, metric

    def __enter__(self) -> _Timed:
        self.inner.__enter__()
        self.started = time.perf_counter()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, traceback: TracebackType | None
    ) -> bool:
        seconds = time.perf_counter() - self.started
        if kind is None:
            mode = "train" if self.trainer.model.training else "eval"
            self.trainer._metrics[mode][self.metric].append(seconds)
        return bool(self.inner.__exit__(kind, error, traceback))


def log_timings(trainer: Any) -> bool:
    """Log `trainer`'s (a GRPOTrainer) timed blocks and peak GPU memory with its metrics, as the module says. False,
    and nothing changed, where this TRL has no such blocks (they moved): the run goes on without these metrics."""
    try:
        from trl.extras import profiling
        from trl.trainer import grpo_trainer
    except ImportError:
        return False
    original = getattr(grpo_trainer, "profiling_context", None)
    if original is None or getattr(profiling, "profiling_context", None) is None or not hasattr(trainer, "_metrics"):
        return False
    original = getattr(original, "__wrapped_timings__", original)

    def profiling_context(owner: Any, name: str) -> Any:
        context = original(owner, name)
        metric = PARTS.get(name)  # the block's own name; TRL prefixes the class name inside
        return _Timed(context, owner, metric) if owner is trainer and metric is not None else context

    profiling_context.__wrapped_timings__ = original  # type: ignore[attr-defined]
    # grpo_trainer calls its own imported name; profiling_decorator (_calculate_rewards) calls profiling's
    grpo_trainer.profiling_context = profiling_context  # type: ignore[assignment]
    profiling.profiling_context = profiling_context  # type: ignore[assignment]

    log = trainer.log

    def log_with_memory(logs: dict[str, float], *args: Any, **kwargs: Any) -> None:
        import torch

        if torch.cuda.is_available() and torch.cuda.is_initialized():
            logs = {**logs, "gpu/peak_memory_gib": round(torch.cuda.max_memory_allocated() / 2**30, 3)}
        log(logs, *args, **kwargs)

    trainer.log = log_with_memory
    return True
