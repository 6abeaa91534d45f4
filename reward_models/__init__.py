"""Model code: the reward models the verifier serves beside its rules (DESIGN.md section 2: a package of its own,
below the engine; it knows nothing about HTTP or rewards' wire format).

- `spec.ModelSpec`: one model's settings (`VERIFIER_MODELS` maps names to them); imports pydantic only.
- `runtime.ModelRuntime`: loads the configured checkpoints and runs their forward passes, batched under a token
  budget, in a thread per device, off the event loop. It imports torch and transformers when it starts, never at
  import time: a service with no models starts without them.
- `model.ScoredModel`: what every model does wherever it runs (layout, tokenizing, cut to max_tokens, batching,
  outcomes); a backend (`runtime.BACKENDS`: local, vllm, sglang) gives only the forward over token-id rows.
- `remote`: models an engine's server runs (vLLM's /classify and /pooling, SGLang's /classify), sent token ids over
  HTTP; imports httpx only when one is configured.
- `layout`: the token ids a reward model sees for a prompt and a completion, as TRL's RewardTrainer laid them out.
- `batching`: sequences cut into batches under a token budget (pure, no torch).
"""

from reward_models.spec import ModelSpec

__all__ = ["ModelSpec"]
