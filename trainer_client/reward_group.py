"""Several components as TRL reward functions, one each, scored in one request per batch: `VerifierRewards`.

TRL calls its reward functions one after the other with the same batch (the async ones together, on one event
loop). The group's first call for a batch sends every component in one item per completion; each function returns
its own component's score from that answer, and logs its own verdict rates. So correctness is judged once (the
length reward reads the very math result the accuracy reward returns), code runs once, and the verifier sees the
whole reward: its order guard checks the weights TRL applies (`reward_weights`), not each function alone.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from typing import Any

from trainer_client.reward_core import DEFAULT_NAMES, Batch, RewardSpec
from trainer_client.rewards import AsyncVerifierReward, CoroutineFunctionLike, VerifierReward
from verifier_service.schema import ItemResult

Answer = tuple[Batch, list[ItemResult | None]]


class VerifierRewards:
    """`components` scored together; `functions` holds one TRL reward function per component, in order (named
    `verifier_<component>`), to pass as `GRPOTrainer(reward_funcs=rewards.functions, ...)`.

    `reward_weights` are the weights TRL gives the functions (GRPOConfig's, in the same order; default 1.0 each):
    the verifier checks with them that a wrong answer can never outscore a right one. `asynchronous=True` makes the
    functions async (TRL runs them together on its event loop). Every other argument is `VerifierReward`'s.

    >>> rewards = VerifierRewards(["math", "format"], base_url=VERIFIER_URL)
    >>> [function.__name__ for function in rewards.functions]
    ['verifier_math', 'verifier_format']
    >>> batch = {"prompts": ["Q"], "completions": ["<think>6*7</think>42"], "solution": ["42"]}
    >>> [function(**batch) for function in rewards.functions]  # one request for both
    [[1.0], [1.0]]
    """

    def __init__(
        self,
        components: Sequence[str],
        *,
        reward_weights: Sequence[float] | None = None,
        asynchronous: bool = False,
        **reward_arguments: Any,
    ) -> None:
        names = list(components)
        if not names or len(set(names)) != len(names):
            raise ValueError(f"components must be distinct and at least one, got {names}")
        if reward_weights is not None and len(reward_weights) != len(names):
            raise ValueError(f"reward_weights has {len(reward_weights)} weights for {len(names)} components")
        weights = dict(zip(names, reward_weights, strict=True)) if reward_weights is not None else None
        kind = AsyncVerifierReward if asynchronous else VerifierReward
        self.scorer: VerifierReward | AsyncVerifierReward = kind(
            names, weights=weights, name="verifier", **reward_arguments
        )
        function = AsyncComponentReward if asynchronous else ComponentReward
        self.functions: list[ComponentReward | AsyncComponentReward] = [function(self, name) for name in names]
        self._last: tuple[Sequence[Any], Any, Any] | None = None  # (completions, completion_ids, answer or task)

    def set_token_ids(self, eos_token_id: int | Sequence[int] | None, pad_token_id: int | None = None) -> None:
        """As `VerifierReward.set_token_ids`, for every function of the group."""
        self.scorer.set_token_ids(eos_token_id, pad_token_id)

    def answer(
        self, completions: Sequence[Any], completion_ids: Any, kwargs: Mapping[str, Any], prompts: Sequence[Any] | None
    ) -> Answer:
        """The verifier's answer for this batch: asked for by the first function TRL calls with it, kept for the
        others. A batch is the `completions` list TRL hands every function of one step."""
        if self._is_last(completions, completion_ids):
            assert self._last is not None
            return self._last[2]
        assert isinstance(self.scorer, VerifierReward)
        found = self.scorer.results(completions, completion_ids, kwargs, prompts)
        self._last = (completions, completion_ids, found)
        return found

    async def answer_async(
        self, completions: Sequence[Any], completion_ids: Any, kwargs: Mapping[str, Any], prompts: Sequence[Any] | None
    ) -> Answer:
        """`answer` for async functions, which TRL runs together: the first starts the request, the others await it."""
        if not self._is_last(completions, completion_ids):
            assert isinstance(self.scorer, AsyncVerifierReward)
            task = asyncio.ensure_future(self.scorer.results(completions, completion_ids, kwargs, prompts))
            self._last = (completions, completion_ids, task)
        assert self._last is not None
        return await asyncio.shield(self._last[2])

    def _is_last(self, completions: Sequence[Any], completion_ids: Any) -> bool:
        return self._last is not None and self._last[0] is completions and self._last[1] is completion_ids

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_last": None}  # a batch's answer (and its task) stays behind


class ComponentReward:
    """One component of a `VerifierRewards` group, as a TRL reward function: that component's score per
    completion, None where the verifier could not judge it or was not reached."""

    def __init__(self, group: VerifierRewards, component: str) -> None:
        self.group = group
        self.component = component
        self.__name__ = DEFAULT_NAMES[(component,)]

    def __call__(
        self, prompts: Sequence[Any], completions: Sequence[Any], completion_ids: Any = None, **kwargs: Any
    ) -> list[float | None]:
        batch, per_row = self.group.answer(completions, completion_ids, kwargs, prompts)
        return self.group.scorer._core.values(batch, per_row, kwargs, self.component)

    @property
    def spec(self) -> RewardSpec:
        """What the group asks the verifier for (every function of the group shares one request)."""
        return self.group.scorer.spec

    def set_token_ids(self, eos_token_id: int | Sequence[int] | None, pad_token_id: int | None = None) -> None:
        self.group.set_token_ids(eos_token_id, pad_token_id)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.component!r}, of {list(self.group.scorer.spec.components)})"


class AsyncComponentReward(CoroutineFunctionLike, ComponentReward):
    """The async twin of `ComponentReward`, a coroutine function to TRL as `AsyncVerifierReward` is."""

    async def __call__(  # type: ignore[override]
        self, prompts: Sequence[Any], completions: Sequence[Any], completion_ids: Any = None, **kwargs: Any
    ) -> list[float | None]:
        batch, per_row = await self.group.answer_async(completions, completion_ids, kwargs, prompts)
        return self.group.scorer._core.values(batch, per_row, kwargs, self.component)
