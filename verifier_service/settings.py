"""Service settings, read from `VERIFIER_*` environment variables.

One class, read in one place (`__main__` or whoever calls `create_app`); never instantiated at import time.
Tests pass values to the constructor.
"""

from __future__ import annotations

import difflib
import os
import re
from collections.abc import Mapping
from typing import Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, SecretStr, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from reward_models.spec import MODEL_NAME, ModelSpec
from sandbox.api import POOL_NAME_PATTERN
from sandbox.uids import BLOCK as UID_BLOCK
from verifier_service.compat_mapping import SPECIAL_TOKENS

DEFAULT_SPECIAL_TOKENS = SPECIAL_TOKENS  # what the trainer routes strip by default (one list: compat_mapping)


def _default_workers() -> int:
    return max(1, os.cpu_count() or 1)


class SandboxSettings(BaseModel):
    """`VERIFIER_SANDBOX__*`: the code sandbox. Requests choose limits per test, capped by the maxima here."""

    pool_size: int = Field(  # each sandbox has its own uid, in one block of uids
        default_factory=_default_workers, ge=1, le=UID_BLOCK, description="Programs run at once."
    )
    image: str = "verifier-sandbox:latest"
    pool_name: str = Field(
        "default",
        pattern=POOL_NAME_PATTERN,
        description="Docker label and container names (<pool name>-sandbox-<i>); distinct per service.",
    )
    jobs_per_sandbox: int = Field(1000, ge=1, description="A sandbox is replaced after this many submissions.")
    uid_base: int = Field(
        10001, ge=1000, le=2**31 - 1024, description="Sandbox i runs as uid_base + i; distinct per service on a host."
    )
    require_isolation: bool = Field(False, description="local: refuse to start without bubblewrap.")
    max_wall_s: float = Field(60.0, gt=0, le=600)
    max_memory_mb: int = Field(4096, ge=16)
    max_processes: int = Field(256, ge=1)
    max_output_bytes: int = Field(64 * 1024 * 1024, ge=1024)
    max_file_mb: int = Field(256, ge=1)
    compile_cache_mb: int = Field(256, ge=0, description="C++ binaries kept by the hash of source and flags.")
    compile_wall_s: float = Field(30.0, gt=0, le=600, description="A C++ compile's wall clock.")
    compile_cpu_s: float = Field(20.0, gt=0, le=600, description="A C++ compile's CPU time.")
    compile_memory_mb: int = Field(1024, ge=256, le=65536, description="A C++ compile's address space, per process.")
    compile_max_binary_mb: int = Field(
        16, ge=1, le=256, description="The largest binary (and file) a C++ compile may write; in the 256 MB scratch."
    )

    @model_validator(mode="after")
    def _compile_fits(self) -> SandboxSettings:
        # a Docker sandbox holds max_memory_mb (and its scratch): a compiler allowed more would meet the container's
        # OOM killer, which is the sandbox's failure (null), not the source's compile error. Unless set, the compile
        # limit follows a MAX_MEMORY_MB set below it (a deployment that lowered it for Python still starts).
        if "compile_memory_mb" not in self.model_fields_set:
            self.compile_memory_mb = min(self.compile_memory_mb, self.max_memory_mb)
        if self.compile_memory_mb > self.max_memory_mb:
            raise ValueError("VERIFIER_SANDBOX__COMPILE_MEMORY_MB must not exceed VERIFIER_SANDBOX__MAX_MEMORY_MB")
        return self


class SqlDatabase(BaseModel):
    """A read-only SQLite file that `sql` items may name (`"db": NAME`), pinned by its content's hash."""

    path: str = Field(..., min_length=1, description="The file; opened read-only and immutable by the workers.")
    sha256: str = Field(..., pattern=r"^[0-9a-fA-F]{64}$", description="Its SHA-256; checked at start-up.")


class JudgeSettings(BaseModel):
    """A generative judge `judge` items may name (VERIFIER_JUDGES): any OpenAI-compatible chat endpoint (vLLM,
    SGLang, `transformers serve`, a hosted API). The key is read from the environment variable `api_key_env` names,
    at start; it is never logged nor shown."""

    # an error never shows the input: a base_url may hold a password (an error's text showed the settings' ends)
    model_config = ConfigDict(extra="forbid", hide_input_in_errors=True)

    base_url: str = Field(
        ..., pattern=r"^https?://[^\s]+$", max_length=1000, description="Ends before /chat/completions (often .../v1)."
    )
    model: str = Field(..., min_length=1, max_length=200, description="The `model` sent in each request.")
    api_key_env: str | None = Field(
        None, pattern=r"^[A-Za-z_][A-Za-z0-9_]{0,127}$", description="The variable holding the key (Bearer), if any."
    )
    max_concurrency: int = Field(16, ge=1, le=1024, description="Requests to this judge in flight at once, at most.")
    timeout_s: float = Field(30.0, gt=0, le=600, description="One request's limit; past it the item is judge_timeout.")
    max_tokens: int = Field(256, ge=1, le=32_768, description="The judge's generation cap (max_tokens).")
    context_chars: int = Field(
        8_000, ge=500, le=2_000_000, description="The prompt at most, in characters: a longer answer keeps its end."
    )

    @model_validator(mode="after")
    def _check_credentials(self) -> JudgeSettings:
        parts = urlsplit(self.base_url)
        if self.api_key_env is not None and (parts.username is not None or parts.password is not None):
            # one Authorization header: a key and a user:password would each claim it
            raise ValueError("api_key_env: the base_url holds credentials too: give the judge's key one way")
        return self


class VerifierSettings(BaseSettings):
    model_config = SettingsConfigDict(
        env_prefix="VERIFIER_", env_nested_delimiter="__", extra="ignore", hide_input_in_errors=True
    )  # an error never shows the input: a judge's or a model engine's URL may hold a password

    host: str = "127.0.0.1"
    port: int = Field(8088, ge=1, le=65535)
    log_level: Literal["critical", "error", "warning", "info", "debug"] = "info"
    api_key: SecretStr | None = Field(None, description="When set, requests need 'Authorization: Bearer <key>'.")
    published_address: str | None = Field(
        None, max_length=200, description="host:port where Docker publishes the port (compose sets it); for the log."
    )

    math_workers: int = Field(default_factory=_default_workers, ge=1, le=256)
    math_timeout_s: float = Field(5.0, gt=0, le=300, description="Hard deadline per math item, from its start.")
    batch_timeout_s: float = Field(120.0, gt=0, le=3600, description="Items not finished by then are null.")
    math_cache_size: int = Field(100_000, ge=0, description="Scored (gold, answer, options) kept across requests.")

    max_connections: int = Field(
        2048, ge=1, description="Open connections at most; past it, one with no request in flight is closed, or 503."
    )
    header_timeout_s: float = Field(10.0, gt=0, le=600, description="A request's headers must arrive within this.")
    body_timeout_s: float = Field(60.0, gt=0, le=3600, description="A request's body must follow its headers within.")
    max_header_bytes: int = Field(
        64 * 1024, ge=1024, le=16 * 1024 * 1024, description="A request's line and headers at most; past it, 431."
    )

    max_batch_items: int = Field(4096, ge=1)
    max_request_bytes: int = Field(64 * 1024 * 1024, ge=1024)
    max_completion_chars: int = Field(
        1_000_000, ge=1, description="Longer completions get 413; only the last answer_window_chars are searched."
    )
    max_answer_chars: int = Field(2_000, ge=1, description="Longer extracted answers are scored wrong.")
    answer_window_chars: int = Field(20_000, ge=100, description="The answer is searched in this many final chars.")

    compat_special_tokens: tuple[str, ...] = Field(
        DEFAULT_SPECIAL_TOKENS,
        max_length=64,
        description="Special tokens stripped from the end of a completion by the trainer routes (/v1/compat/...), "
        "whose trainers send text decoded with them; a JSON list.",
    )

    procedural_fork: bool = Field(
        True,
        description="Run each item of the nine reasoning-gym scorers that compile the answer (countdown, puzzle24, "
        "n_queens, ...) in a throwaway fork of its worker, so that code which got past procedural_guard cannot change "
        "how the worker scores later items; a fork costs 4 to 25 ms, growing with the worker's memory. False: in the "
        "worker itself, as the other 96 datasets' scorers run (guarded answers only, but no second wall).",
    )
    code_enabled: bool = Field(
        True, description="Score code: start the sandbox. False: a math/format-only service; code items get 422."
    )
    sandbox_backend: Literal["local", "docker"] = Field(
        "local", description="Where model-written code runs: bubblewrap/rlimits on this host, or Docker containers."
    )
    sandbox: SandboxSettings = Field(default_factory=lambda: SandboxSettings())
    sql_databases: dict[str, SqlDatabase] = Field(
        default_factory=dict,
        description="Databases `sql` items may name: a JSON object, name -> {path, sha256}. The service refuses to "
        "start when a file's hash differs.",
    )
    models: dict[str, ModelSpec] = Field(
        default_factory=dict,
        description="Models `rm` and `prm` items may name: a JSON object, name -> {path, kind, device, dtype, "
        "max_tokens, batch_tokens}, or for a model vLLM or SGLang serves, {url, backend, served_model, path (its "
        "tokenizer), kind, max_tokens, batch_tokens, timeout_s, max_concurrency}. Each is loaded at start (torch and "
        "transformers only then; for an engine's, its tokenizer); one that cannot be loaded stops the service from "
        "starting (an engine that cannot be reached does not: its inputs are null until it can).",
    )

    judges: dict[str, JudgeSettings] = Field(
        default_factory=dict,
        description="Judges `judge` items may name: a JSON object, name -> {base_url, model, api_key_env, "
        "max_concurrency, timeout_s, max_tokens, context_chars}. One that cannot be reached does not stop the start "
        "(/readyz shows it); its items are null (judge_error) until it can.",
    )
    judge_cache_size: int = Field(
        100_000,
        ge=0,
        description="Judged (question, reference, answer) kept across requests, by a 32-byte digest: "
        "about 200 bytes an entry whatever the answers' size.",
    )

    model_roots: tuple[str, ...] = Field(
        (),
        max_length=64,
        description="Directories under which POST /v1/models/{name}/reload may load a checkpoint named by its path: "
        "a JSON list of absolute paths. Empty: a reload reads only the model's configured path again.",
    )

    @model_validator(mode="after")
    def _check_model_roots(self) -> VerifierSettings:
        if any(not root.startswith("/") or len(root) > 1000 for root in self.model_roots):
            raise ValueError("VERIFIER_MODEL_ROOTS: each root must be an absolute path (at most 1000 characters)")
        return self

    @model_validator(mode="after")
    def _check_deadlines(self) -> VerifierSettings:
        if self.math_timeout_s >= self.batch_timeout_s:
            raise ValueError("VERIFIER_MATH_TIMEOUT_S must be shorter than VERIFIER_BATCH_TIMEOUT_S")
        for name, spec in self.models.items():
            if spec.remote and spec.timeout_s >= self.batch_timeout_s:
                why = "timeout_s must be shorter than VERIFIER_BATCH_TIMEOUT_S"
                raise ValueError(f"VERIFIER_MODELS: model {name[:40]!r}: {why}")
        for name, judge in self.judges.items():
            if judge.timeout_s >= self.batch_timeout_s:
                why = "timeout_s must be shorter than VERIFIER_BATCH_TIMEOUT_S"
                raise ValueError(f"VERIFIER_JUDGES: judge {name[:40]!r}: {why}")
        return self

    @model_validator(mode="after")
    def _check_model_names(self) -> VerifierSettings:
        for name in self.models:
            if not re.fullmatch(MODEL_NAME, name):
                raise ValueError(f"VERIFIER_MODELS: model name {name[:40]!r} must match {MODEL_NAME}")
        for name in self.judges:
            if not re.fullmatch(MODEL_NAME, name):
                raise ValueError(f"VERIFIER_JUDGES: judge name {name[:40]!r} must match {MODEL_NAME}")
        return self

    @model_validator(mode="after")
    def _check_special_tokens(self) -> VerifierSettings:
        if any(not token.strip() or len(token) > 64 for token in self.compat_special_tokens):
            raise ValueError("VERIFIER_COMPAT_SPECIAL_TOKENS: each token must be 1 to 64 characters, not blank")
        return self

    @model_validator(mode="after")
    def _check_api_key(self) -> VerifierSettings:
        # An empty key (`VERIFIER_API_KEY=` in an .env, a secret that did not render) is a mistake, not "no auth":
        # refuse to start rather than guess which was meant.
        if self.api_key is not None and not self.api_key.get_secret_value().strip():
            raise ValueError("VERIFIER_API_KEY is set but empty: set a key, or unset the variable to run without auth")
        return self


ENV_PREFIX = "VERIFIER_"
# VERIFIER_* names that other parts of the project read (compose, the client, the tests): not the service's, not typos.
NOT_SERVICE_SETTINGS = frozenset(
    {"VERIFIER_BIND", "VERIFIER_HOST_PORT", "VERIFIER_IMAGE", "VERIFIER_TEST_BASE_IMAGE", "VERIFIER_URL"}
)


def setting_names() -> list[str]:
    """Every environment variable the service reads, e.g. VERIFIER_API_KEY, VERIFIER_SANDBOX__POOL_SIZE."""
    names = [ENV_PREFIX + name.upper() for name in VerifierSettings.model_fields]
    names += [f"{ENV_PREFIX}SANDBOX__{name.upper()}" for name in SandboxSettings.model_fields]
    return names


def unknown_settings(environ: Mapping[str, str]) -> dict[str, str | None]:
    """VERIFIER_* variables in `environ` that set nothing (a mistyped VERIFIER_APIKEY would silently run without
    auth), each with the closest real name, if one is close."""
    known = setting_names()
    unknown: dict[str, str | None] = {}
    for name in environ:
        upper = name.upper()
        if upper.startswith(ENV_PREFIX) and upper not in known and upper not in NOT_SERVICE_SETTINGS:
            close = difflib.get_close_matches(upper, known, n=1, cutoff=0.85)
            unknown[name] = close[0] if close else None
    return unknown
