"""What the sync and async reward callables share, without I/O: which items to send for a TRL batch, how the
answers become rewards, what is logged, and when repeated failures stop the run.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from trainer_client.domains import parse_specs
from trainer_client.errors import (
    RETRYABLE_ERRORS,
    VerifierConnectionError,
    VerifierError,
    VerifierRequestError,
    VerifierUnavailableError,
)
from trainer_client.inputs import GOLD_FIELDS, GOLD_READERS, code_spec, column, completion_text, option_texts
from trainer_client.metrics import row_verdicts, verdict_metrics
from trainer_client.options import ROW_FIELDS, Options, check_request, correctness_component, describe, row_fields
from trainer_client.tokens import StopTokens, length_fields
from verifier_service.schema import COMPONENTS, PROMPT_READERS, ItemResult, ScoreItem, Verdict

logger = logging.getLogger("trainer_client")

DEFAULT_NAMES: dict[tuple[str, ...], str] = {(name,): f"verifier_{name}" for name in COMPONENTS}


@dataclass(frozen=True)
class RewardSpec:
    """What a reward function asks the verifier for. Frozen; checked on construction, against the wire schema.

    `options` holds each sent component's options (its spec's fields less those read from the row). A gated
    component (length) without a correctness component among `components` gets one, `correctness` (`correct_from`,
    else math), sent in the same item with weight 0: it is scored once, and the reward is the gated score alone.
    `stop` (the EOS and pad ids) decides `truncated`; without it only `completion_tokens` is sent.

    `spec_column` names a dataset column of per-row specs, `{component: spec}` (a dict or its JSON string): a
    component the row's specs name takes its fields from there (over its options); one they do not name reads its
    own columns (gold, tests) as without a spec column, and is skipped for that row (None) when it needs row fields
    (`options.row_fields`) and those columns are not in the batch. With a spec column in the batch, the gold and
    tests columns are read only when present.
    """

    components: tuple[str, ...]
    name: str
    gold_column: str = "solution"
    tests_column: str = "tests"
    options_column: str | None = None
    spec_column: str | None = None
    options: Options = field(default_factory=dict)
    weights: Mapping[str, float] | None = None
    allow_order_inversion: bool = False
    stop: StopTokens | None = None
    max_consecutive_failures: int | None = 10
    correctness: str | None = field(init=False, default=None)

    def __post_init__(self) -> None:
        unknown = [c for c in self.components if c not in COMPONENTS]
        if not self.components or unknown or len(set(self.components)) != len(self.components):
            raise ValueError(f"components must be distinct names from {COMPONENTS}, got {self.components}")
        if self.weights and set(self.weights) - set(self.components):
            raise ValueError(f"weights name components this reward does not request: {sorted(self.weights)}")
        if self.max_consecutive_failures is not None and self.max_consecutive_failures < 1:
            raise ValueError("max_consecutive_failures must be >= 1, or None to never raise")
        object.__setattr__(self, "correctness", correctness_component(self.components, self.options))
        if self.spec_column is None:
            for name in self.components:
                fields = row_fields(name, self.options.get(name, {}))
                if name not in ROW_FIELDS and fields:
                    names = ", ".join(repr(field) for field in fields)
                    raise ValueError(
                        f"{self.name}: {name} needs the option{'s' if len(fields) > 1 else ''} {names}, or a dataset "
                        "column of per-row specs that gives it (spec_column=, --spec_column)"
                    )
        unsent = sorted(set(self.options) - set(self.sent))
        if unsent:
            raise ValueError(f"options name components this reward does not send: {', '.join(unsent)}")
        check_request(self.name, self.sent, self.options, self.item_weights, self.allow_order_inversion)

    @property
    def sent(self) -> tuple[str, ...]:
        """The components each item asks for: the rewarded ones, and the correctness one a gated one reads."""
        return (*self.components, self.correctness) if self.correctness else self.components

    @property
    def item_weights(self) -> dict[str, float] | None:
        weights = {**(self.weights or {}), **({self.correctness: 0.0} if self.correctness else {})}
        return weights or None


@dataclass
class Batch:
    """The items to send for one TRL call; `rows[i]` is the completion that `items[i]` scores."""

    items: list[ScoreItem]
    rows: list[int]
    total: int


class RewardCore:
    """Builds a call's items and turns the verifier's answer (or its absence) into rewards, logs and warnings."""

    def __init__(self, spec: RewardSpec) -> None:
        self.spec = spec
        self.consecutive_failures = 0
        self.answered = False  # has the verifier ever answered this reward function?

    def prepare(
        self,
        completions: Sequence[Any],
        kwargs: Mapping[str, Any],
        completion_ids: Any = None,
        prompts: Sequence[Any] | None = None,
    ) -> Batch:
        """One item per completion that has what the components need; rows without it are skipped (reward None).
        `completion_ids` (TRL's: one list of token ids per completion) gives each item its length fields, and when
        prm is sent, the ids themselves (each step then gets its token indices; other components never read them, so
        ordinary requests do not carry them); `prompts` (TRL's, text or messages) go into the items when a sent
        component judges the prompt too (rm)."""
        spec, total = self.spec, len(completions)
        prompts = prompts if prompts is not None and set(spec.sent) & set(PROMPT_READERS) else None
        if prompts is not None and len(prompts) != total:
            raise ValueError(f"{spec.name}: {len(prompts)} prompts for {total} completions")
        ids = self._ids(completion_ids, total)
        needed, optional = self._columns(kwargs)
        data = {name: column(kwargs, name, total) for name in needed}
        data |= {name: column(kwargs, name, total) for name in optional if name in kwargs}
        row_specs = data.get(spec.spec_column) if spec.spec_column else None
        entry_points = kwargs.get("entry_point") if "code" in spec.sent else None
        batch = Batch([], [], total)
        for row, completion in enumerate(completions):
            specs = self._row_specs(row_specs, row)
            fields = {name: self._spec_fields(name, row, specs, data, entry_points) for name in spec.sent}
            if any(value is None for value in fields.values()):  # no gold / tests: the reward does not apply
                continue
            prompt = {"prompt": prompts[row]} if prompts is not None else {}
            lengths = length_fields(ids[row], spec.stop)
            if ids[row] is not None and "prm" in spec.sent:  # prm's steps get their token indices; no other reads them
                lengths["completion_ids"] = [int(token) for token in ids[row]]
            batch.items.append(self._item(row, completion, fields | prompt, lengths))
            batch.rows.append(row)
        return batch

    def _columns(self, kwargs: Mapping[str, Any]) -> tuple[list[str], list[str]]:
        """The dataset columns the sent components read: those the batch must have, and those read when present (a
        spec column in the batch makes the gold and tests columns optional)."""
        spec, sent = self.spec, self.spec.sent
        own = [spec.gold_column] if set(sent) & set(GOLD_READERS) else []
        own += [spec.tests_column] if "code" in sent else []
        own += [spec.options_column] if "choice" in sent and spec.options_column else []
        if spec.spec_column is None:
            return own, []
        generic = [name for name in sent if name not in ROW_FIELDS and row_fields(name, spec.options.get(name, {}))]
        if spec.spec_column in kwargs or generic:  # a component that only a spec column can feed needs it
            return [spec.spec_column], own
        return own, []

    def _row_specs(self, values: list[Any] | None, row: int) -> dict[str, Any]:
        if values is None:
            return {}
        try:
            return parse_specs(values[row], str(self.spec.spec_column))
        except ValueError as exc:  # a dataset's bug: said with where it is, never the value
            raise ValueError(f"{self.spec.name}: row of completion {row}: {exc}") from None

    def _spec_fields(
        self, name: str, row: int, specs: Mapping[str, Any], data: Mapping[str, list[Any]], entry_points: Any
    ) -> Any:
        """Component `name`'s spec fields for one row: the row's spec for it over its options; else what it reads
        from its own columns (`_fields`); None when the row has nothing for a component that needs it."""
        options = self.spec.options.get(name, {})
        if name in specs:
            return {**options, **specs[name]}
        if name in ROW_FIELDS:
            own = self.spec.tests_column if name == "code" else self.spec.gold_column
            return self._fields(name, row, data, entry_points) if own in data else None
        return None if row_fields(name, options) else options

    def _fields(self, name: str, row: int, data: Mapping[str, list[Any]], entry_points: Any) -> Any:
        """Component `name`'s spec fields for one row: its options, plus what it reads from the row; None when the
        row has none of that (no gold, no tests)."""
        spec = self.spec
        options = spec.options.get(name, {})
        if name == "code":
            # HumanEval's tests need the name of the function they check (TRL passes every dataset column)
            entry_point = entry_points[row] if entry_points else None
            value = data[spec.tests_column][row]
            return code_spec(value, options=options, column=spec.tests_column, entry_point=entry_point)
        if name not in GOLD_READERS:
            return options
        try:
            gold = GOLD_READERS[name](data[spec.gold_column][row])
        except ValueError as exc:  # a dataset's bug, the same every time: said with where it is, never the value
            where = f"dataset column {spec.gold_column!r}, row of completion {row}"
            raise ValueError(f"{spec.name}: {where}: {exc}") from None
        if gold is None:
            return None
        texts = None
        if name == "choice" and spec.options_column and spec.options_column in data:
            texts = option_texts(data[spec.options_column][row], spec.options_column)
        return {**options, GOLD_FIELDS.get(name, "gold"): gold, **({"options": texts} if texts else {})}

    def _item(self, row: int, completion: Any, fields: dict[str, Any], lengths: dict[str, Any]) -> ScoreItem:
        spec = self.spec
        try:
            return ScoreItem.model_validate(
                {
                    "id": str(row),
                    "completion": completion_text(completion),
                    **lengths,
                    **fields,
                    "weights": spec.item_weights,
                    "allow_order_inversion": spec.allow_order_inversion,
                }
            )
        except ValidationError as exc:
            raise ValueError(f"{spec.name}: the dataset row of completion {row} makes an invalid item: "
                             f"{describe(exc)}") from None  # fmt: skip

    @staticmethod
    def _ids(completion_ids: Any, total: int) -> list[Any]:
        if completion_ids is None:
            return [None] * total
        ids = list(completion_ids)
        if len(ids) != total:
            raise ValueError(f"completion_ids has {len(ids)} entries for {total} completions")
        return ids

    def values(
        self,
        batch: Batch,
        per_row: Sequence[ItemResult | None],
        kwargs: Mapping[str, Any],
        component: str | None = None,
    ) -> list[float | None]:
        """What the reward function returns for each completion, logged: the item's reward (the weighted sum of the
        spec's components), or `component`'s score alone; None where there is none."""
        if component is None:
            values = [None if result is None else result.reward for result in per_row]
            self.report(self.spec.name, self.spec.components, batch, per_row, values, kwargs)
            return values
        # A completion whose item could not be judged (reward null) is None for every function of the group, as for a
        # combined reward: TRL then leaves it out of the group's baseline and gives it no advantage. A None from one
        # function alone would count as 0 in TRL's sum of the others.
        values = [None if result is None or result.reward is None else result.components[component].score
                  for result in per_row]  # fmt: skip
        self.report(DEFAULT_NAMES[(component,)], (component,), batch, per_row, values, kwargs)
        return values

    def settle(
        self, batch: Batch, results: Sequence[ItemResult] | None, error: VerifierError | None
    ) -> list[ItemResult | None]:
        """Each completion's result, in order (None where nothing was sent or nothing came back). Once per request:
        warns of what could not be judged and counts failed calls, raising when they are too many."""
        per_row: list[ItemResult | None] = [None] * batch.total
        for row, result in zip(batch.rows, results or [], strict=False):
            per_row[row] = result
        self._check_first_answer(batch, error)
        self._warn(batch, per_row, error)
        self._check_failures(batch, per_row, error)
        return per_row

    def report(
        self,
        name: str,
        components: Sequence[str],
        batch: Batch,
        per_row: Sequence[ItemResult | None],
        values: Sequence[float | None],
        kwargs: Mapping[str, Any],
    ) -> None:
        """Log one reward function's verdict rates (`log_metric`) and its completions-table column (`log_extra`)."""
        sent = [False] * batch.total
        for row in batch.rows:
            sent[row] = True
        log_metric: Callable[[str, float], None] | None = kwargs.get("log_metric")
        if log_metric is not None:
            for metric, value in verdict_metrics(name, components, per_row, sent, values).items():
                log_metric(metric, value)
        log_extra: Callable[[str, list[Any]], None] | None = kwargs.get("log_extra")
        if log_extra is not None:
            for component in components:
                log_extra(f"{name}/{component}", row_verdicts(component, per_row, sent))

    def _warn(self, batch: Batch, per_row: list[ItemResult | None], error: VerifierError | None) -> None:
        name = self.spec.name
        if error is not None:
            logger.warning(
                "%s: no answer from the verifier (%s: %s); the %d rewards of this call are None",
                name,
                type(error).__name__,
                error,
                len(batch.items),
            )
            return
        nulls = [result for result in per_row if result is not None and result.reward is None]
        if nulls:
            why = Counter(
                f"{component}={part.verdict}"
                for result in nulls
                for component, part in result.components.items()
                if part.score is None
            )
            logger.warning(
                "%s: the verifier could not judge %d of %d completions (%s); their rewards are None",
                name,
                len(nulls),
                batch.total,
                ", ".join(f"{reason}: {count}" for reason, count in why.most_common()),
            )

    def _check_first_answer(self, batch: Batch, error: VerifierError | None) -> None:
        """Nothing listening at the verifier's address, before it has ever answered this reward function, is not an
        outage to ride out but a setup that cannot work (a wrong URL, a verifier not started): stop at the first
        call instead of after `max_consecutive_failures` steps. A verifier that answers anything (a 503 while busy,
        a slow batch that times out, a dropped connection) is there: those calls give None, as later outages do."""
        if not batch.items:  # nothing was sent
            return
        if not nothing_listens(error):
            self.answered = True
        elif not self.answered and self.spec.max_consecutive_failures is not None:
            raise VerifierUnavailableError(
                f"{self.spec.name}: the verifier has not answered this reward function once, so nothing can be "
                f"scored ({error}). Is it running, and is base_url= (--verifier_url) its address? One that is still "
                "starting can be waited for first: VerifierClient(url).wait_until_ready()"
            ) from error

    def _check_failures(self, batch: Batch, per_row: list[ItemResult | None], error: VerifierError | None) -> None:
        """Count calls in which the verifier judged nothing for a fault of its own (no answer, or every item null
        with a failure of the service: a crashed worker, a deadline, no sandbox); raise after
        `max_consecutive_failures` in a row. Items the data leaves unjudgeable (an unparseable gold, a gated
        component whose primary could not judge) say nothing about the verifier and do not count."""
        if not batch.items:
            return
        failed = error is not None or all(_service_failed(per_row[row]) for row in batch.rows)
        self.consecutive_failures = self.consecutive_failures + 1 if failed else 0
        limit = self.spec.max_consecutive_failures
        if limit is not None and self.consecutive_failures >= limit:
            last = f"; last error: {error}" if error is not None else "; the verifier failed on every item"
            raise VerifierUnavailableError(
                f"{self.spec.name}: {self.consecutive_failures} reward calls in a row got no reward{last}"
            ) from error


SERVICE_FAILURES = frozenset(
    {Verdict.INTERNAL_ERROR, Verdict.WORKER_CRASHED, Verdict.DEADLINE_EXCEEDED, Verdict.SANDBOX_UNAVAILABLE}
)


def _service_failed(result: ItemResult | None) -> bool:
    """No answer for the item, or a null reward that some component owes to a failure of the service."""
    if result is None:
        return True
    return result.reward is None and any(part.verdict in SERVICE_FAILURES for part in result.components.values())


def auth_error(name: str, kind: str, error: VerifierRequestError, key_sent: bool) -> VerifierRequestError:
    """The error for a 401 from the verifier, saying how to give a reward function the key."""
    problem = "the API key it was given was refused" if key_sent else "no API key was sent"
    return VerifierRequestError(
        f"{name}: the verifier refused the request (HTTP 401: {error.detail}): {problem}. Pass the verifier's key "
        f"as {kind}(..., api_key=...) or set the VERIFIER_API_KEY environment variable",
        status_code=401,
        detail=error.detail,
    )


def nothing_listens(error: VerifierError | None) -> bool:
    """The request never reached a server: the connection was refused, or the host is unknown or unreachable."""
    return isinstance(error, VerifierConnectionError) and isinstance(error.__cause__, RETRYABLE_ERRORS)
