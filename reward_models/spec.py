"""One model's settings, as `VERIFIER_MODELS` gives them: a JSON object, name -> spec. Imports pydantic only, so the
service's settings read it without loading any model code."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

# A sequence-classification reward model; a process reward model as a token-classification model (num_labels 2:
# PRMTrainer's, Qwen2.5-Math-PRM's layout); one as a causal LM read at its good and bad tokens (Math-Shepherd's).
ModelKind = Literal["rm", "prm", "prm_lm"]
PRM_KINDS = ("prm", "prm_lm")
ModelDtype = Literal["auto", "float32", "bfloat16", "float16"]
MODEL_NAME = r"^[A-Za-z0-9][\w.-]{0,63}$"  # what requests name a model by (`"model": NAME`)
DEVICE_PATTERN = r"^(cpu|cuda(:[0-9]{1,2})?)$"
DEFAULT_BATCH_TOKENS = 16_384


class ModelSpec(BaseModel):
    """A model the service loads at start and serves to the components that name it."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    path: str = Field(
        ...,
        min_length=1,
        max_length=1000,
        description="A local checkpoint directory (as save_pretrained writes it), or a hub id where the hub is "
        "reachable. Its tokenizer is loaded from it too.",
    )
    kind: ModelKind = Field(
        "rm",
        description="rm: a sequence-classification reward model (num_labels 1); prm: a process reward model as a "
        "token-classification model (num_labels 2); prm_lm: a process reward model as a causal LM (Math-Shepherd's).",
    )
    device: str = Field("cpu", pattern=DEVICE_PATTERN, description="cpu, cuda or cuda:N.")
    dtype: ModelDtype = Field("auto", description="The weights' dtype; auto: as the checkpoint stores them.")
    max_tokens: int | None = Field(
        None,
        ge=1,
        le=1_000_000,
        description="The longest input the model is given; a longer one keeps its end or is null, as the request "
        "says. Default: the model's max_position_embeddings.",
    )
    batch_tokens: int = Field(
        DEFAULT_BATCH_TOKENS,
        ge=1,
        le=100_000_000,
        description="Tokens in one forward pass at most, padding counted: bounds the memory a batch takes.",
    )

    @model_validator(mode="after")
    def _one_input_fits(self) -> ModelSpec:
        if self.max_tokens is not None and self.max_tokens > self.batch_tokens:
            raise ValueError("max_tokens must be at most batch_tokens: the longest input must fit in one forward pass")
        return self
