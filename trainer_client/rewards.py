"""TRL reward functions scored by the verifier: `VerifierReward` (sync) and `AsyncVerifierReward`.

Both follow `GRPOTrainer`'s contract: called with `prompts`, `completions`, `completion_ids` and the batch's
dataset columns as keyword arguments; return one `float | None` per completion, in order. They pickle (the client
is rebuilt after unpickling) and carry a `__name__`, which TRL logs as `rewards/<name>/mean`.

What comes back, per completion:
- the verifier's reward (0.0 when the model was wrong, in any of its ways);
- None when the verifier cannot judge the item, or cannot be reached after its retries (a warning is logged; TRL
  then leaves this reward out for that completion instead of training on a made-up 0);
- None, silently, for a row without gold answer / tests: the reward does not apply to it (multi-task datasets);
- for `overlong` and `length`, None when the length is unknown (no `completion_ids`, and `unit` is not "chars").

What raises, and stops the step:
- `VerifierRequestError` (HTTP 4xx): the request itself is wrong (a missing or wrong API key, a component the
  server does not offer, a batch over its limits). Every later step would fail the same way, so it is not hidden
  as None.
- `VerifierResponseError`: the server does not speak this client's wire contract.
- `VerifierUnavailableError` at the first call when the verifier cannot be reached and has never answered this
  reward function (a wrong URL, a verifier not started: nothing could ever be scored); once it has answered, after
  `max_consecutive_failures` calls in a row got no reward at all. `max_consecutive_failures=None` turns both off.
- `ValueError` for a missing dataset column, malformed code tests, or a row whose gold the wire schema refuses.

Bad options (a typo, a missing `max_tokens`, weights that let a wrong answer outscore a right one) raise
`ValueError` when the reward function is made, before training starts.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any, Generic, TypeVar

from trainer_client.async_client import AsyncVerifierClient
from trainer_client.client import VerifierClient
from trainer_client.config import DEFAULT_URL, ClientConfig, api_key_or_env
from trainer_client.errors import VerifierRequestError, VerifierUnavailableError
from trainer_client.options import gather_options, legacy_options
from trainer_client.reward_core import DEFAULT_NAMES, Batch, RewardCore, RewardSpec, auth_error
from trainer_client.tokens import StopTokens
from verifier_service.schema import ComponentSpec, FormatOptions, ItemResult, MathOptions

ClientT = TypeVar("ClientT", VerifierClient, AsyncVerifierClient)
# Sees each call's prompts, completions, the verifier's result per completion and its other arguments (`add_observer`).
Observer = Callable[[Sequence[Any] | None, Sequence[Any], Sequence[ItemResult | None], Mapping[str, Any]], None]
logger = logging.getLogger("trainer_client")


class _RewardBase(Generic[ClientT]):
    """Configuration shared by the two reward callables (their `__init__` arguments).

    Components and their options: `components` is one name of `verifier_service.schema.COMPONENTS` or several
    (their weighted sum, `weights`). A component's options are its spec's fields (`GET /v1/components` lists
    them) less those read from the dataset row: with one component, as keywords (`VerifierReward("overlong",
    max_tokens=1024)`); in general, `options={"overlong": {"max_tokens": 1024}, ...}` (a dict or a spec object per
    component). `math_options`, `format_options`, `code_timeout_s` and `code_memory_mb` are the older spelling of
    the same. Options are checked when the reward is made: a typo, a missing option or weights under which a wrong
    answer could outscore a right one (unless `allow_order_inversion`) raise ValueError there, not mid-training.

    Dataset columns: the gold answer of math, choice (a letter, a list of letters, or a 0-based index) and answer
    (a string or a list of aliases) comes from `gold_column`; code tests from `tests_column`; the option texts of
    choice from `options_column`, when given. `spec_column` names a column of per-row specs (`{component: spec}`, a
    dict or its JSON string): the way in for every component whose spec comes from the row (instructions, sql,
    json_schema, procedural, ... as `trainer_client.domains` maps their datasets), and a way for any other; a row's
    spec wins over the options. A component whose spec the row lacks is skipped for that row (None) when it needs
    row fields.

    `length` reads correctness from a primary component (`correct_from=`, default math); when the reward does not
    score that one itself, it sends it in the same item with weight 0, so the reward is the length score alone.

    Length inputs: each item carries `completion_tokens`, the length of TRL's `completion_ids`, and `truncated`,
    TRL's own test (the last id is neither EOS nor pad) when the ids are known: `eos_token_id=` (one or several)
    and `pad_token_id=`, or `tokenizer=` (its EOS and pad), or `set_token_ids()` once the trainer is built.
    Without them `truncated` is left unset, never guessed.

    `api_key` is the verifier's key (it is sent as a bearer token); None reads the VERIFIER_API_KEY environment
    variable, as the training script does. `client` injects a ready client (a test transport, a shared connection
    pool); it is not pickled, and a copy made by unpickling connects to `base_url` with `api_key` and
    `client_config` instead.
    """

    def __init__(
        self,
        components: str | Sequence[str] = "math",
        *,
        base_url: str | Sequence[str] = DEFAULT_URL,
        api_key: str | None = None,
        name: str | None = None,
        gold_column: str = "solution",
        tests_column: str = "tests",
        options_column: str | None = None,
        spec_column: str | None = None,
        options: Mapping[str, Mapping[str, Any] | ComponentSpec] | None = None,
        math_options: MathOptions | None = None,
        format_options: FormatOptions | None = None,
        code_timeout_s: float | None = None,
        code_memory_mb: int | None = None,
        weights: Mapping[str, float] | None = None,
        allow_order_inversion: bool = False,
        eos_token_id: int | Sequence[int] | None = None,
        pad_token_id: int | None = None,
        tokenizer: Any = None,
        max_consecutive_failures: int | None = 10,
        client_config: ClientConfig | None = None,
        client: ClientT | None = None,
        **component_options: Any,
    ) -> None:
        parts = (components,) if isinstance(components, str) else tuple(components)
        if tokenizer is not None and (eos_token_id is not None or pad_token_id is not None):
            raise ValueError("give tokenizer= or eos_token_id=/pad_token_id=, not both")
        stop = (
            StopTokens.from_tokenizer(tokenizer) if tokenizer is not None else StopTokens.of(eos_token_id, pad_token_id)
        )
        self.spec = RewardSpec(
            components=parts,
            name=name or DEFAULT_NAMES.get(parts, "verifier"),
            gold_column=gold_column,
            tests_column=tests_column,
            options_column=options_column,
            spec_column=spec_column,
            options=gather_options(
                parts,
                options,
                component_options,
                legacy_options(math_options, format_options, code_timeout_s, code_memory_mb),
            ),
            weights=dict(weights) if weights else None,
            allow_order_inversion=allow_order_inversion,
            stop=stop,
            max_consecutive_failures=max_consecutive_failures,
        )
        self.__name__ = self.spec.name
        if parts == ("overlong",) and self.spec.options.get("overlong", {}).get("on_truncated") == "null":
            logger.warning(
                '%s: on_truncated "null" leaves a cut-off completion out of TRL\'s training only when every reward '
                "function returns None for it; beside other reward functions TRL adds this None as 0, overlong's best "
                "score. Put the components in one VerifierRewards group (its functions return None together), or "
                "use GRPOConfig(mask_truncated_completions=True)",
                self.__name__,
            )
        self.base_url = base_url
        self.api_key = api_key_or_env(api_key)
        self.client_config = client_config or ClientConfig()
        self._core = RewardCore(self.spec)
        self._client: ClientT | None = client
        self._client_injected = client is not None
        self._observers: list[Observer] = []

    def add_observer(self, observer: Observer) -> None:
        """Call `observer(prompts, completions, results, kwargs)` with each TRL call's prompts (None when the caller
        gave none), completions, the verifier's result per completion (None where there is none) and the call's other
        keyword arguments (the dataset columns, TRL's `log_metric`), after the call is scored: how
        `online_rm.OnlineRewardModel` keeps the rule outcomes it trains on. Observers stay behind when the reward is
        pickled (a copy in another process has its own)."""
        self._observers.append(observer)

    def _observed(
        self,
        prompts: Sequence[Any] | None,
        completions: Sequence[Any],
        kwargs: Mapping[str, Any],
        per_row: list[ItemResult | None],
    ) -> list[ItemResult | None]:
        for observer in self._observers:
            observer(prompts, completions, per_row, kwargs)
        return per_row

    def set_token_ids(self, eos_token_id: int | Sequence[int] | None, pad_token_id: int | None = None) -> None:
        """Set the EOS ids (one or several) and the pad id that tell a finished completion from a truncated one,
        as the trainer holds them (`trainer.eos_token_ids`, its tokenizer's `pad_token_id`); None forgets them
        (`truncated` is then left unset). Call it before training, once the trainer is built."""
        self.spec = replace(self.spec, stop=StopTokens.of(eos_token_id, pad_token_id))
        self._core.spec = self.spec

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.spec.components!r}, name={self.__name__!r}, base_url={self.base_url!r})"

    def _auth_error(self, error: VerifierRequestError) -> VerifierRequestError:
        key_sent = self._client.core.sends_key if self._client is not None else bool(self.api_key)
        return auth_error(self.__name__, type(self).__name__, error, key_sent)

    def __getstate__(self) -> dict[str, Any]:
        # The HTTP client (sockets, locks, an event loop) stays behind; the copy opens its own on first use.
        state = {key: value for key, value in self.__dict__.items() if not key.startswith("_client")}
        return state | {"_client": None, "_client_injected": False, "_observers": []}


class VerifierReward(_RewardBase[VerifierClient]):
    """A TRL reward function that scores `components` (one name of `verifier_service.schema.COMPONENTS`: "math",
    "code", "choice", "answer", "format", "overlong", "length", "repetition", ..., or several) with the verifier.

    With one component the reward is that component's score; with several, their weighted sum (`weights`,
    default 1.0 each). The gold answer comes from dataset column `gold_column`, code tests from `tests_column`.
    One reward function per component lets TRL log each (`rewards/verifier_<component>/mean`) and weigh them
    (`reward_weights`).

    >>> accuracy = VerifierReward("math", base_url=VERIFIER_URL)
    >>> accuracy.__name__
    'verifier_math'
    >>> completions = [[{"role": "assistant", "content": "<think>6*7</think>The answer is 42."}], "It is 41."]
    >>> accuracy(prompts=["Q", "Q"], completions=completions, completion_ids=None, solution=["42", "42"])
    [1.0, 0.0]

    DAPO's overlong penalty, with the length and truncation read from TRL's `completion_ids` (EOS id 2): 0 up to
    6 tokens, -0.5 at 8 (halfway through the 4-token buffer), -1 for a completion cut off at the cap.

    >>> overlong = VerifierReward("overlong", base_url=VERIFIER_URL, max_tokens=10, buffer_tokens=4, eos_token_id=2)
    >>> overlong(prompts=["Q"] * 3, completions=["a", "b", "c"], completion_ids=[[5, 2], [5] * 7 + [2], [5] * 10])
    [0.0, -0.5, -1.0]
    """

    def __call__(
        self, prompts: Sequence[Any], completions: Sequence[Any], completion_ids: Any = None, **kwargs: Any
    ) -> list[float | None]:
        batch, per_row = self.results(completions, completion_ids, kwargs, prompts)
        return self._core.values(batch, per_row, kwargs)

    def results(
        self,
        completions: Sequence[Any],
        completion_ids: Any,
        kwargs: Mapping[str, Any],
        prompts: Sequence[Any] | None = None,
    ) -> tuple[Batch, list[ItemResult | None]]:
        """The verifier's answer for each completion of a TRL call (None where nothing was sent or came back), seen
        by the observers too."""
        batch = self._core.prepare(completions, kwargs, completion_ids, prompts)
        if not batch.items:
            return batch, self._observed(prompts, completions, kwargs, self._core.settle(batch, [], None))
        try:
            results = self.client().score(batch.items)
        except VerifierUnavailableError as exc:
            return batch, self._observed(prompts, completions, kwargs, self._core.settle(batch, None, exc))
        except VerifierRequestError as exc:
            if exc.status_code == 401:
                raise self._auth_error(exc) from exc
            raise
        return batch, self._observed(prompts, completions, kwargs, self._core.settle(batch, results, None))

    def client(self) -> VerifierClient:
        """The client this reward sends with (made on first use)."""
        if self._client is None:
            self._client = VerifierClient(self.base_url, api_key=self.api_key, config=self.client_config)
        return self._client

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None


class CoroutineFunctionLike:
    """An object whose async `__call__` makes `inspect.iscoroutinefunction(obj)` true: TRL (before 1.13, and other
    trainers) detects async reward functions with exactly that call, which looks at the object itself, not its
    `__call__`. So the object carries the attributes `inspect` reads from a function (`__code__` of the async
    `__call__`, `__defaults__`, `__kwdefaults__`), the duck typing that `inspect` documents for Cython functions."""

    __defaults__ = None
    __kwdefaults__ = None
    __call__: Any  # the subclass's async __call__

    @property
    def __code__(self) -> Any:
        return type(self).__call__.__code__

    @property
    def __signature__(self) -> inspect.Signature:
        return inspect.signature(self.__call__)


class AsyncVerifierReward(CoroutineFunctionLike, _RewardBase[AsyncVerifierClient]):
    """The async twin of `VerifierReward`: same arguments and results; TRL awaits it on its event loop, and sees it
    as a coroutine function (`CoroutineFunctionLike`).

    >>> import asyncio, inspect
    >>> reward = AsyncVerifierReward("format", base_url=VERIFIER_URL)
    >>> inspect.iscoroutinefunction(reward), reward.__name__
    (True, 'verifier_format')
    >>> asyncio.run(reward(prompts=["Q"], completions=["<think>2+2</think>4"]))
    [1.0]
    """

    _client_loop: asyncio.AbstractEventLoop | None = None

    async def __call__(
        self, prompts: Sequence[Any], completions: Sequence[Any], completion_ids: Any = None, **kwargs: Any
    ) -> list[float | None]:
        batch, per_row = await self.results(completions, completion_ids, kwargs, prompts)
        return self._core.values(batch, per_row, kwargs)

    async def results(
        self,
        completions: Sequence[Any],
        completion_ids: Any,
        kwargs: Mapping[str, Any],
        prompts: Sequence[Any] | None = None,
    ) -> tuple[Batch, list[ItemResult | None]]:
        """The verifier's answer for each completion of a TRL call (None where nothing was sent or came back), seen
        by the observers too."""
        batch = self._core.prepare(completions, kwargs, completion_ids, prompts)
        if not batch.items:
            return batch, self._observed(prompts, completions, kwargs, self._core.settle(batch, [], None))
        try:
            results = await self.client().score(batch.items)
        except VerifierUnavailableError as exc:
            return batch, self._observed(prompts, completions, kwargs, self._core.settle(batch, None, exc))
        except VerifierRequestError as exc:
            if exc.status_code == 401:
                raise self._auth_error(exc) from exc
            raise
        return batch, self._observed(prompts, completions, kwargs, self._core.settle(batch, results, None))

    def client(self) -> AsyncVerifierClient:
        """The client for the running event loop (an httpx.AsyncClient cannot move between loops)."""
        loop = asyncio.get_running_loop()
        if self._client is None or (self._client_loop is not loop and not self._client_injected):
            self._client = AsyncVerifierClient(self.base_url, api_key=self.api_key, config=self.client_config)
            self._client_loop = loop
        return self._client

    async def aclose(self) -> None:
        if self._client is not None:
            await self._client.aclose()
            self._client = None
