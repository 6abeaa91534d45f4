"""One model's settings, as `VERIFIER_MODELS` gives them: a JSON object, name -> spec. Imports pydantic only, so the
service's settings read it without loading any model code.

A model runs in the service (`backend: "local"`, the default: transformers on `device`), or is served by an engine
named by `url` (`backend: "vllm"` or `"sglang"`): then the service loads only the tokenizer from `path`, lays out and
tokenizes each input itself, exactly as for a local model, and sends the token ids."""

from __future__ import annotations

from typing import Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, model_validator

# A sequence-classification reward model; a process reward model as a token-classification model (num_labels 2:
# PRMTrainer's, Qwen2.5-Math-PRM's layout); one as a causal LM read at its good and bad tokens (Math-Shepherd's).
ModelKind = Literal["rm", "prm", "prm_lm"]
PRM_KINDS = ("prm", "prm_lm")
ModelDtype = Literal["auto", "float32", "bfloat16", "float16"]
# Where the forward passes run: in the service (transformers), or on an engine's server named by `url`.
Backend = Literal["local", "vllm", "sglang"]
REMOTE_BACKENDS = ("vllm", "sglang")
# The kinds each engine serves: vLLM's /classify (rm) and /pooling token_classify (prm); SGLang's /classify (rm) only,
# SGLang has no token-classification pooling. A causal LM read at two tokens (prm_lm) is served locally only.
REMOTE_KINDS = {"vllm": ("rm", "prm"), "sglang": ("rm",)}
LOCAL_ONLY = ("device", "dtype")  # settings of a model the service loads itself
REMOTE_ONLY = ("url", "api_key_env", "served_model", "timeout_s", "max_concurrency")
ENV_NAME = r"^[A-Za-z_][A-Za-z0-9_]{0,127}$"  # as VERIFIER_JUDGES' api_key_env
MODEL_NAME = r"^[A-Za-z0-9][\w.-]{0,63}$"  # what requests name a model by (`"model": NAME`)
DEVICE_PATTERN = r"^(cpu|cuda(:[0-9]{1,2})?)$"
DEFAULT_BATCH_TOKENS = 16_384


class ModelSpec(BaseModel):
    """A model the service loads at start (or whose tokenizer it loads, for one an engine serves) and serves to the
    components that name it."""

    model_config = ConfigDict(extra="forbid", frozen=True, hide_input_in_errors=True)  # a url may hold a password

    path: str = Field(
        ...,
        min_length=1,
        max_length=1000,
        description="A local checkpoint directory (as save_pretrained writes it), or a hub id where the hub is "
        "reachable. Its tokenizer is loaded from it too; for a model an engine serves (url), only its tokenizer.",
    )
    kind: ModelKind = Field(
        "rm",
        description="rm: a sequence-classification reward model (num_labels 1); prm: a process reward model as a "
        "token-classification model (num_labels 2); prm_lm: a process reward model as a causal LM (Math-Shepherd's).",
    )
    backend: Backend = Field(
        "local",
        description="local: the service runs the model (transformers); vllm or sglang: the engine's server at `url` "
        "runs it, the service sends it token ids.",
    )
    device: str = Field("cpu", pattern=DEVICE_PATTERN, description="cpu, cuda or cuda:N (a local model).")
    dtype: ModelDtype = Field("auto", description="The weights' dtype; auto: as the checkpoint stores them (local).")
    max_tokens: int | None = Field(
        None,
        ge=1,
        le=1_000_000,
        description="The longest input the model is given; a longer one keeps its end or is null, as the request "
        "says. Default: the model's max_position_embeddings (required for a model an engine serves).",
    )
    batch_tokens: int = Field(
        DEFAULT_BATCH_TOKENS,
        ge=1,
        le=100_000_000,
        description="Tokens in one forward pass at most, padding counted: bounds the memory a batch takes (for an "
        "engine, the tokens in one request to it).",
    )
    policy_tokenizer: str | None = Field(
        None,
        min_length=1,
        max_length=1000,
        description="prm, prm_lm: the tokenizer of the policy whose token ids items carry (completion_ids), a local "
        "directory or a hub id, loaded at start: with it each step gets its token indices. Default: the model's own "
        "tokenizer.",
    )
    url: str | None = Field(
        None,
        min_length=1,
        max_length=1000,
        description="The engine's server, http(s)://host:port (vllm, sglang); credentials in it (user:password@, "
        "sent as basic auth) are never shown.",
    )
    api_key_env: str | None = Field(
        None,
        pattern=ENV_NAME,
        description="The environment variable holding the engine's key (its --api-key), read at start and sent as "
        "'Authorization: Bearer <key>'; never logged nor shown. Not with credentials in the url.",
    )
    served_model: str | None = Field(
        None,
        min_length=1,
        max_length=1000,
        description="The model's name on the engine (vLLM's --served-model-name). Default: path.",
    )
    timeout_s: float = Field(
        30.0, gt=0, le=3600, description="One request to the engine at most (connect, send, answer): then model_error."
    )
    max_concurrency: int = Field(4, ge=1, le=256, description="Requests to the engine in flight at once, at most.")

    @model_validator(mode="after")
    def _one_input_fits(self) -> ModelSpec:
        if self.max_tokens is not None and self.max_tokens > self.batch_tokens:
            raise ValueError("max_tokens must be at most batch_tokens: the longest input must fit in one forward pass")
        if self.policy_tokenizer is not None and self.kind not in PRM_KINDS:
            raise ValueError("policy_tokenizer: applies to a process reward model (kind prm or prm_lm) only")
        return self

    @model_validator(mode="after")
    def _backend_fits(self) -> ModelSpec:
        remote = self.backend in REMOTE_BACKENDS
        if remote and self.url is None:
            raise ValueError(f"url: backend {self.backend} needs the engine's url")
        if not remote and self.url is not None:
            raise ValueError("backend: a model named by url is served by an engine: set backend to vllm or sglang")
        given = self.model_fields_set
        if remote:
            if misplaced := [field for field in LOCAL_ONLY if field in given]:
                raise ValueError(f"{misplaced[0]}: applies to a local model only (the engine sets it)")
            if self.kind not in REMOTE_KINDS[self.backend]:
                raise ValueError(f"kind: backend {self.backend} serves kind {' or '.join(REMOTE_KINDS[self.backend])}")
            if self.max_tokens is None:
                raise ValueError("max_tokens: required for a model an engine serves (the engine's max_model_len)")
            check_url(self.url or "")
            if self.api_key_env is not None and has_credentials(self.url or ""):
                # one Authorization header: a key and a user:password would each claim it
                raise ValueError("api_key_env: the url holds credentials too: give the engine's key one way")
        elif misplaced := [field for field in REMOTE_ONLY if field in given]:
            raise ValueError(f"{misplaced[0]}: applies to a model an engine serves (backend vllm or sglang) only")
        return self

    @property
    def remote(self) -> bool:
        return self.backend in REMOTE_BACKENDS


def check_url(url: str) -> None:
    """An engine's base URL: http or https, a host, no query or fragment (the routes are appended to it)."""
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises on a port that is not a number
    except ValueError:
        raise ValueError("url: not a URL") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError("url: must be http(s)://host[:port][/prefix]")
    if parts.query or parts.fragment:
        raise ValueError("url: must have no query or fragment")


def has_credentials(url: str) -> bool:
    """Whether the URL has userinfo (user:password@).

    >>> has_credentials("http://user:secret@gpu-3:8000"), has_credentials("http://gpu-3:8000")
    (True, False)
    """
    parts = urlsplit(url)
    return parts.username is not None or parts.password is not None


def shown_url(url: str) -> str:
    """The URL without its credentials, for /readyz, GET /v1/models and the logs.

    >>> shown_url("http://user:secret@gpu-3:8000/v1")
    'http://gpu-3:8000/v1'
    """
    parts = urlsplit(url)
    host = parts.hostname or ""
    host = f"[{host}]" if ":" in host else host
    netloc = f"{host}:{parts.port}" if parts.port is not None else host
    return parts._replace(netloc=netloc).geturl()
