"""TRL reward functions scored by the verifier: `VerifierReward` (sync) and `AsyncVerifierReward`.

Both follow `GRPOTrainer`'s contract: called with `prompts`, `completions`, `completion_ids` and the batch's
dataset columns as keyword arguments; return one `float | None` per completion, in order. They pickle (the client
is rebuilt after unpickling) and carry a `__name__`, which TRL logs as `rewards/<name>/mean`.

What comes back, per completion:
- the verifier's reward (0.0 when the model was wrong, in any of its ways);
- None when the verifier cannot judge the item, or cannot be reached after its retries (a warning is logged; TRL
  then leaves this reward out for that completion instead of training on a made-up 0);
- None, silently, for a row without gold answer / tests: the reward does not apply to it (multi-task datasets).

What raises, and stops the step:
- `VerifierRequestError` (HTTP 4xx): the request itself is wrong (a missing or wrong API key, a component the
  server does not offer, a batch over its limits). Every later step would fail the same way, so it is not hidden
  as None.
- `VerifierResponseError`: the server does not speak this client's wire contract.
- `VerifierUnavailableError` at the first call when the verifier cannot be reached and has never answered this
  reward function (a wrong URL, a verifier not started: nothing could ever be scored); once it has answered, after
  `max_consecutive_failures` calls in a row got no reward at all. `max_consecutive_failures=None` turns both off.
- `ValueError` for a missing dataset column or malformed code tests.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Mapping, Sequence
from typing import Any, Generic, TypeVar

from trainer_client.async_client import AsyncVerifierClient
from trainer_client.client import VerifierClient
from trainer_client.config import DEFAULT_URL, ClientConfig, api_key_or_env
from trainer_client.errors import VerifierRequestError, VerifierUnavailableError
from trainer_client.reward_core import DEFAULT_NAMES, RewardCore, RewardSpec, auth_error
from verifier_service.schema import FormatOptions, MathOptions

ClientT = TypeVar("ClientT", VerifierClient, AsyncVerifierClient)


class _RewardBase(Generic[ClientT]):
    """Configuration shared by the two reward callables (their `__init__` arguments).

    `api_key` is the verifier's key (it is sent as a bearer token); None reads the VERIFIER_API_KEY environment
    variable, as the training script does. `client` injects a ready client (a test transport, a shared connection
    pool); it is not pickled, and a copy made by unpickling connects to `base_url` with `api_key` and
    `client_config` instead.
    """

    def __init__(
        self,
        components: str | Sequence[str] = "math",
        *,
        base_url: str = DEFAULT_URL,
        api_key: str | None = None,
        name: str | None = None,
        gold_column: str = "solution",
        tests_column: str = "tests",
        math_options: MathOptions | None = None,
        format_options: FormatOptions | None = None,
        code_timeout_s: float = 5.0,
        code_memory_mb: int = 512,
        weights: Mapping[str, float] | None = None,
        max_consecutive_failures: int | None = 10,
        client_config: ClientConfig | None = None,
        client: ClientT | None = None,
    ) -> None:
        parts = (components,) if isinstance(components, str) else tuple(components)
        self.spec = RewardSpec(
            components=parts,
            name=name or DEFAULT_NAMES.get(parts, "verifier"),
            gold_column=gold_column,
            tests_column=tests_column,
            math_options=math_options or MathOptions(),
            format_options=format_options or FormatOptions(),
            code_timeout_s=code_timeout_s,
            code_memory_mb=code_memory_mb,
            weights=dict(weights) if weights else None,
            max_consecutive_failures=max_consecutive_failures,
        )
        self.__name__ = self.spec.name
        self.base_url = base_url
        self.api_key = api_key_or_env(api_key)
        self.client_config = client_config or ClientConfig()
        self._core = RewardCore(self.spec)
        self._client: ClientT | None = client
        self._client_injected = client is not None

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.spec.components!r}, name={self.__name__!r}, base_url={self.base_url!r})"

    def _auth_error(self, error: VerifierRequestError) -> VerifierRequestError:
        key_sent = self._client.core.sends_key if self._client is not None else bool(self.api_key)
        return auth_error(self.__name__, type(self).__name__, error, key_sent)

    def __getstate__(self) -> dict[str, Any]:
        # The HTTP client (sockets, locks, an event loop) stays behind; the copy opens its own on first use.
        state = {key: value for key, value in self.__dict__.items() if not key.startswith("_client")}
        return state | {"_client": None, "_client_injected": False}


class VerifierReward(_RewardBase[VerifierClient]):
    """A TRL reward function that scores `components` ("math", "format", "code", or several) with the verifier.

    With one component the reward is that component's score; with several, their weighted sum (`weights`,
    default 1.0 each). The gold answer comes from dataset column `gold_column`, code tests from `tests_column`.

    >>> accuracy = VerifierReward("math", base_url=VERIFIER_URL)
    >>> accuracy.__name__
    'verifier_math'
    >>> completions = [[{"role": "assistant", "content": "<think>6*7</think>The answer is 42."}], "It is 41."]
    >>> accuracy(prompts=["Q", "Q"], completions=completions, completion_ids=None, solution=["42", "42"])
    [1.0, 0.0]
    """

    def __call__(
        self, prompts: Sequence[Any], completions: Sequence[Any], completion_ids: Any = None, **kwargs: Any
    ) -> list[float | None]:
        batch = self._core.prepare(completions, kwargs)
        if not batch.items:
            return self._core.finish(batch, [], None, kwargs)
        try:
            results = self.client().score(batch.items)
        except VerifierUnavailableError as exc:
            return self._core.finish(batch, None, exc, kwargs)
        except VerifierRequestError as exc:
            if exc.status_code == 401:
                raise self._auth_error(exc) from exc
            raise
        return self._core.finish(batch, results, None, kwargs)

    def client(self) -> VerifierClient:
        """The client this reward sends with (made on first use)."""
        if self._client is None:
            self._client = VerifierClient(self.base_url, api_key=self.api_key, config=self.client_config)
        return self._client

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None


class AsyncVerifierReward(_RewardBase[AsyncVerifierClient]):
    """The async twin of `VerifierReward`: same arguments and results; TRL awaits it on its event loop.

    `inspect.iscoroutinefunction(reward)` is true: TRL (before 1.13, and other trainers) detects async reward
    functions with exactly that call, which looks at the object itself, not its `__call__`. So the object carries
    the attributes `inspect` reads from a function (`__code__` of the async `__call__`, `__defaults__`,
    `__kwdefaults__`), the duck typing that `inspect` documents for Cython functions.

    >>> import asyncio, inspect
    >>> reward = AsyncVerifierReward("format", base_url=VERIFIER_URL)
    >>> inspect.iscoroutinefunction(reward), reward.__name__
    (True, 'verifier_format')
    >>> asyncio.run(reward(prompts=["Q"], completions=["<think>2+2</think>4"]))
    [1.0]
    """

    __defaults__ = None
    __kwdefaults__ = None
    _client_loop: asyncio.AbstractEventLoop | None = None

    @property
    def __code__(self) -> Any:
        return type(self).__call__.__code__

    @property
    def __signature__(self) -> inspect.Signature:
        return inspect.signature(self.__call__)

    async def __call__(
        self, prompts: Sequence[Any], completions: Sequence[Any], completion_ids: Any = None, **kwargs: Any
    ) -> list[float | None]:
        batch = self._core.prepare(completions, kwargs)
        if not batch.items:
            return self._core.finish(batch, [], None, kwargs)
        try:
            results = await self.client().score(batch.items)
        except VerifierUnavailableError as exc:
            return self._core.finish(batch, None, exc, kwargs)
        except VerifierRequestError as exc:
            if exc.status_code == 401:
                raise self._auth_error(exc) from exc
            raise
        return self._core.finish(batch, results, None, kwargs)

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
