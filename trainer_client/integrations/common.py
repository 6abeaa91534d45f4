"""What the trainer adapters share: their options (`AdapterConfig`), the item for one sample (`build_item`), and what
the verifier's answer becomes (`Outcome`): a score, or an error when the verifier could not judge the item.

The failure policy: most trainers cannot skip one sample (verl crashes on None, OpenRLHF after its retries), and a
0 for an item nobody judged trains the model on noise. So an unjudged item (reward null) raises
`VerifierUnjudgedError`, naming the verdicts; a numeric fallback exists only when asked for (`on_unjudged=0.0`), and
is flagged (`verifier_judged: 0`) in the extra keys, which are the same for every sample (verl builds its columns
from the first sample's keys).
"""

from __future__ import annotations

import functools
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from trainer_client.config import API_KEY_ENV, DEFAULT_URL, ClientConfig, api_key_or_env
from trainer_client.core import base_of
from trainer_client.errors import VerifierUnjudgedError
from trainer_client.inputs import completion_text
from trainer_client.integrations.ground_truth import component_for, plain, row_specs, specs_from_ground_truth
from trainer_client.options import describe
from verifier_service.schema import COMPONENTS, PRIMARIES, ItemResult, ScoreItem

URL_ENV = "VERIFIER_URL"  # the verifier's address when none is given (the key: VERIFIER_API_KEY)
EXTRA_KEYS = ("score", "acc", "verifier_judged")  # what `Outcome.extra` holds, for every sample
# Keyword arguments verl adds to every call when it runs a reward-model router: nothing the adapters use.
IGNORED_KWARGS = frozenset({"reward_router_address", "reward_model_tokenizer"})
SETTINGS = ("url", "api_key", "on_unjudged", "components", "weights", "max_retries", "timeout_s", "window_ms",
            "idle_ms", "max_batch")  # fmt: skip
DEFAULT_WINDOW_MS = 5.0  # a coalesced batch waits at most this long for more calls ...
DEFAULT_IDLE_MS = 1.0  # ... and goes out sooner when no call has come for this long
DEFAULT_MAX_BATCH = 256


def base_url(url: str | None) -> str:
    """The verifier's base URL: `url`, else $VERIFIER_URL, else the client's default. A URL given with the score
    route (`.../v1/score`) is taken as its base.

    >>> base_url("http://verifier:8088/v1/score/")
    'http://verifier:8088'
    """
    return base_of(url or os.environ.get(URL_ENV) or DEFAULT_URL)


def adapter_config(kwargs: Mapping[str, Any], caller: str) -> AdapterConfig:
    """`AdapterConfig.from_kwargs`, remembered for hashable options (verl passes the same few on every call; parsing
    them each time cost ~15 us a sample). The environment variables it reads are part of the key."""
    try:
        key = (caller, frozenset(kwargs.items()), os.environ.get(URL_ENV), os.environ.get(API_KEY_ENV))
    except TypeError:  # a dict of options (format={}): parse it every time
        return AdapterConfig.from_kwargs(kwargs, caller)
    return _config_for(key)


@functools.lru_cache(maxsize=64)
def _config_for(key: tuple[str, frozenset[tuple[str, Any]], str | None, str | None]) -> AdapterConfig:
    caller, items, _, _ = key
    return AdapterConfig.from_kwargs(dict(items), caller)


@dataclass(frozen=True)
class AdapterConfig:
    """An adapter's options, from its keyword arguments (verl's `reward_kwargs`, NeMo-RL's env config).

    `components`: the components each item asks for; the correctness one among them (math, code, choice or answer)
    is fed the ground truth, the others (format, overlong, ...) are added to every item. Default: the one the data
    source implies (`ground_truth.component_for`). `options`: per component, its options (`format={"tag": "think"}`,
    `math={"options": {"float_rounding": 2}}`, `code={"timeout_s": 2}`); options of a component that is not a
    correctness one also add it to every item. A sample's own spec wins over both.

    >>> config = AdapterConfig.from_kwargs({"url": "http://v:8088", "format": {}, "on_unjudged": 0})
    >>> config.on_unjudged, config.components, dict(config.options)
    (0.0, (), {'format': {}})
    """

    url: str
    api_key: str | None = None
    on_unjudged: float | None = None  # None: raise VerifierUnjudgedError
    components: tuple[str, ...] = ()
    options: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    weights: Mapping[str, float] = field(default_factory=dict)
    window_s: float = DEFAULT_WINDOW_MS / 1000
    idle_s: float = DEFAULT_IDLE_MS / 1000
    max_batch: int = DEFAULT_MAX_BATCH
    client: ClientConfig = field(default_factory=ClientConfig)

    @classmethod
    def from_kwargs(cls, kwargs: Mapping[str, Any], caller: str = "the reward function") -> AdapterConfig:
        values = {key: plain(value) for key, value in kwargs.items() if key not in IGNORED_KWARGS}
        unknown = sorted(set(values) - set(SETTINGS) - set(COMPONENTS))
        if unknown:
            raise TypeError(f"{caller} got unknown options {unknown}; it takes {', '.join(SETTINGS)}, and each "
                            f"component's options by its name ({', '.join(COMPONENTS)})")  # fmt: skip
        options = {name: _options(name, values[name]) for name in COMPONENTS if name in values}
        max_batch = int(values.get("max_batch", DEFAULT_MAX_BATCH))
        # a coalesced batch is one request: chunks as large as the batches
        client = {"max_retries": values.get("max_retries"), "read_timeout_s": values.get("timeout_s")}
        return cls(
            url=base_url(values.get("url")),
            api_key=api_key_or_env(values.get("api_key")),
            on_unjudged=fallback(values.get("on_unjudged")),
            components=_components(values.get("components")),
            options=options,
            weights=dict(values.get("weights") or {}),
            window_s=float(values.get("window_ms", DEFAULT_WINDOW_MS)) / 1000,
            idle_s=float(values.get("idle_ms", DEFAULT_IDLE_MS)) / 1000,
            max_batch=max_batch,
            client=ClientConfig(
                chunk_size=max_batch, **{key: value for key, value in client.items() if value is not None}
            ),
        )

    def __post_init__(self) -> None:
        if not (self.window_s >= 0 and self.idle_s >= 0) or self.max_batch < 1:
            raise ValueError("window_ms and idle_ms must be >= 0, max_batch >= 1")

    @property
    def client_key(self) -> tuple[Any, ...]:
        """What tells two coalescers apart: the verifier, the key and how requests are made."""
        return (self.url, self.api_key, self.client, self.window_s, self.idle_s, self.max_batch)

    @property
    def primary(self) -> str | None:
        """The correctness component named in `components`, if any."""
        return next((name for name in self.components if name in PRIMARIES), None)

    def specs(self, row: Mapping[str, Any]) -> dict[str, Any]:
        """The item's fields: the row's specs, with this config's options under them and its extra components."""
        specs = dict(row)
        for name in COMPONENTS:
            extra = name in self.components or name in self.options
            if name in specs:
                specs[name] = _merge(self.options.get(name, {}), specs[name])
            elif extra and name not in PRIMARIES:
                specs[name] = dict(self.options.get(name, {}))
        weights = {name: weight for name, weight in self.weights.items() if name in specs}
        if weights or "weights" in specs:
            specs["weights"] = {**weights, **(specs.get("weights") or {})}
        return specs


def build_item(
    completion: Any, ground_truth: Any, config: AdapterConfig, *, data_source: Any = None, spec: Any = None
) -> ScoreItem:
    """The item for one sample. An explicit `spec` (verl's `extra_info["verifier"]`) wins over the ground truth; the
    ground truth feeds the correctness component of `config.components`, else the one `data_source` implies.

    >>> build_item("#### 72", 72, AdapterConfig("http://v"), data_source="openai/gsm8k").math.gold
    '72'
    """
    if spec is not None:
        row = row_specs(spec)
    elif config.components and config.primary is None:
        row = {}  # shaping components only: the ground truth is not used
    else:
        row = specs_from_ground_truth(ground_truth, config.primary or component_for(data_source))
    try:
        text = completion_text(completion if isinstance(completion, str | list | tuple) else str(completion))
        return ScoreItem.model_validate({"completion": text, **config.specs(row)})
    except ValidationError as exc:
        raise ValueError(f"the verifier item for this sample is invalid: {describe(exc)}") from None


@dataclass(frozen=True)
class Outcome:
    """What one item's result means to a trainer: `score` (the reward), `acc` (the correctness component's score,
    for accuracy metrics) and whether the verifier judged it."""

    score: float
    acc: float
    judged: bool

    @classmethod
    def of(cls, result: ItemResult, on_unjudged: float | None, hint: str = "") -> Outcome:
        """The outcome of `result`; an unjudged one raises, unless `on_unjudged` gives a (flagged) fallback."""
        if result.reward is None:
            if on_unjudged is None:
                raise unjudged_error(result, hint)
            return cls(on_unjudged, on_unjudged, judged=False)
        return cls(result.reward, correctness(result), judged=True)

    def extra(self) -> dict[str, float]:
        """The same keys for every sample: `EXTRA_KEYS`."""
        return {"score": self.score, "acc": self.acc, "verifier_judged": 1.0 if self.judged else 0.0}


def correctness(result: ItemResult) -> float:
    """The score of the item's correctness component (math, code, choice, answer), else its reward."""
    for name in PRIMARIES:
        part = result.components.get(name)
        if part is not None and part.score is not None:
            return part.score
    return result.reward if result.reward is not None else math.nan


UNJUDGED_HINT = "fix the dataset, or pass on_unjudged=<float> to train on a flagged fallback (verifier_judged 0)"


def unjudged_error(result: ItemResult, hint: str = "") -> VerifierUnjudgedError:
    """The error for an item the verifier could not judge: its null components, their verdicts and details."""
    verdicts = {name: part.verdict for name, part in result.components.items() if part.score is None}
    return VerifierUnjudgedError(f"{unjudged_reason(result)}: {hint or UNJUDGED_HINT}", verdicts=verdicts)


def unjudged_reason(result: ItemResult) -> str:
    """Why the verifier could not judge an item, from its null components' verdicts and details (never the
    completion: the verifier's details name what it could not do, not what the model wrote)."""
    why = "; ".join(f"{name}: {part.verdict}" + (f" ({part.detail[:200]})" if part.detail else "")
                    for name, part in result.components.items() if part.score is None)  # fmt: skip
    return f"the verifier could not judge this sample (reward null; {why or 'no component judged'})"


def fallback(value: Any) -> float | None:
    """`on_unjudged`: None or "raise" (the default: raise), or the reward to give instead, as a finite number.

    >>> fallback(None), fallback("raise"), fallback(0), fallback("-1.5")
    (None, None, 0.0, -1.5)
    """
    if value is None or (isinstance(value, str) and value.strip().lower() == "raise"):
        return None
    if isinstance(value, bool):
        raise ValueError("on_unjudged must be 'raise' or a number, not a boolean")
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"on_unjudged must be 'raise' or a number, got {value!r}") from None
    if not math.isfinite(number):
        raise ValueError("on_unjudged must be a finite number")
    return number


def _components(value: Any) -> tuple[str, ...]:
    names = (value,) if isinstance(value, str) else tuple(value or ())
    unknown = [name for name in names if name not in COMPONENTS]
    primaries = [name for name in names if name in PRIMARIES]
    if unknown or len(primaries) > 1:
        raise ValueError(f"components must be names from {', '.join(COMPONENTS)}, with at most one of "
                         f"{', '.join(PRIMARIES)} (the one the ground truth feeds); got {list(names)}")  # fmt: skip
    return names


def _options(name: str, value: Any) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ValueError(f"the options of {name} must be a dict (e.g. {name}={{}} for its defaults), got {value!r}")
    return value


def _merge(options: Mapping[str, Any], row: Any) -> Any:
    """The row's spec over the configured options, one level deep (math's `options` dict merges too)."""
    if not isinstance(row, Mapping):
        return row
    merged = dict(options)
    for key, value in row.items():
        below = merged.get(key)
        merged[key] = {**below, **value} if isinstance(below, Mapping) and isinstance(value, Mapping) else value
    return merged
