"""The text components of a batch (every component in `scoring.TEXT`), scored in the service process or, for a large
batch, in chunks by the worker pool (`TextTask`, beside the math tasks): the same function either way.

A chunk travels as plain values (the completion, its length fields, the component specs) and comes back as plain
tuples, which costs a few microseconds per item against the tens a large batch's text scoring takes: the service's
event loop stays free, and every worker process shares the work.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from verifier_service.schema import ComponentResult, ComponentSpec, ScoreItem, Verdict
from verifier_service.scoring import BATCHED, TEXT
from verifier_service.scoring.pooled import ITEM_FAILED
from verifier_service.scoring.text import component

log = logging.getLogger(__name__)

Found = tuple[float | None, str, str | None, str | None]  # a ComponentResult as plain values: score ... extracted


def safely(name: str, scorer: Callable[..., ComponentResult], *args: Any) -> ComponentResult:
    """A scorer's result; a bug in one is that component's `internal_error` (null), never the whole batch's 500."""
    try:
        return scorer(*args)
    except Exception:
        log.exception("the %s scorer failed", name)
        return failed(Verdict.INTERNAL_ERROR, ITEM_FAILED)


def failed(verdict: Verdict, detail: str) -> ComponentResult:
    return component(None, verdict.value, detail, None)


def score_texts(items: Sequence[ScoreItem]) -> list[dict[str, ComponentResult]]:
    """Every text component of every item: component by component, in one call where the component scores
    batches, else (and when that call fails, so one bad item costs only its own result) item by item."""
    found: list[dict[str, ComponentResult]] = [{} for _ in items]
    for name in TEXT:
        indexes = [index for index, item in enumerate(items) if getattr(item, name) is not None]
        if not indexes:
            continue
        chosen = [items[index] for index in indexes]
        for index, result in zip(indexes, _score_component(name, chosen), strict=True):
            found[index][name] = result
    return found


def _score_component(name: str, items: list[ScoreItem]) -> list[ComponentResult]:
    specs = [getattr(item, name) for item in items]
    batched = BATCHED.get(name)
    if batched is not None:
        try:
            return batched(items, specs)
        except Exception:
            log.exception("the %s batch scorer failed; scoring its items one by one", name)
    return [safely(name, TEXT[name], item, spec) for item, spec in zip(items, specs, strict=True)]


@dataclass(frozen=True)
class TextTask:
    """The text components of a chunk of items, for a worker: per item its completion, `completion_tokens`,
    `truncated` and (component, spec) pairs."""

    items: tuple[tuple[str, int | None, bool | None, tuple[tuple[str, ComponentSpec], ...]], ...]

    @classmethod
    def of(cls, items: Sequence[ScoreItem]) -> TextTask:
        # Equal specs become one object, which pickle sends once: a batch's items mostly repeat a few specs, and a
        # spec model costs microseconds to pickle, the chunk's largest cost in the service process. Equal means equal
        # options, compared as plain values (the models' own __eq__ and __hash__ cost more than pickling them).
        shared: dict[tuple[Any, ...], tuple[str, ComponentSpec]] = {}
        rows = []
        for item in items:
            specs = []
            for name in TEXT:
                spec = getattr(item, name)
                if spec is not None:
                    try:
                        specs.append(shared.setdefault((name, *spec.__dict__.values()), (name, spec)))
                    except TypeError:  # an option that cannot be hashed (none today): sent as it is
                        specs.append((name, spec))
            rows.append((item.completion, item.completion_tokens, item.truncated, tuple(specs)))
        return cls(tuple(rows))


def text_components(item: ScoreItem) -> list[str]:
    """The text components the item asks for."""
    return [name for name in TEXT if getattr(item, name) is not None]


# What an item with a `json_schema` spec counts as: not linear in what it reads, its validation may take up to its
# 1 s deadline (a pattern that backtracks), so it is past any batch size scored on the event loop (the engine's
# INLINE_PREPARE_CHARS), and a batch holding one is scored in a thread.
SLOW_ITEM_CHARS = 1_000_000


def text_chars(item: ScoreItem) -> int:
    """About how many characters scoring the item's text components reads (each scorer is linear in them): the
    completion once per component, and the texts of their specs (golds, aliases, options).

    >>> text_chars(ScoreItem(completion="abc", format={}, answer={"gold": ["Paris", "Rome"]}))
    34
    """
    specs = [spec for name in TEXT if (spec := getattr(item, name)) is not None]
    slow = SLOW_ITEM_CHARS if item.json_schema is not None else 0
    return (
        slow
        + len(item.completion) * len(specs)
        + sum(_chars(value) for spec in specs for value in spec.__dict__.values())
    )


def _chars(value: object) -> int:
    if isinstance(value, str):
        return len(value)
    if isinstance(value, tuple | list):
        return len(value) + sum(_chars(part) for part in value)
    return 1


def run_text_task(task: TextTask) -> list[list[tuple[str, Found]]]:
    """In a worker: the task's items scored; per item, (component, result as plain values) pairs. Equal results are
    one result object (`text.component`), and become one tuple, which pickle sends once."""
    # The service validated these items; what the scorers read is rebuilt without validating again.
    items = [_item(text, tokens, truncated, specs) for text, tokens, truncated, specs in task.items]
    plain: dict[int, Found] = {}  # by the result's id: every result stays alive until this returns
    answer = []
    for found in score_texts(items):
        pairs = []
        for name, result in found.items():
            values = plain.get(id(result))
            if values is None:
                values = plain[id(result)] = (result.score, result.verdict, result.detail, result.extracted)
            pairs.append((name, values))
        answer.append(pairs)
    return answer


_BLANK = ScoreItem.model_construct(completion="")  # every field at its default, for `_item` to copy


def _item(
    text: str, tokens: int | None, truncated: bool | None, specs: Iterable[tuple[str, ComponentSpec]]
) -> ScoreItem:
    # A copy of a blank item costs a fifth of model_construct, which resolves every default again.
    fields: dict[str, Any] = {"completion": text, "completion_tokens": tokens, "truncated": truncated, **dict(specs)}
    return _BLANK.model_copy(update=fields)


def results_of(outcome: list[list[tuple[str, Found]]]) -> list[dict[str, ComponentResult]]:
    """`run_text_task`'s answer as component results again, one for each distinct tuple."""
    made: dict[int, ComponentResult] = {}  # by the tuple's id: `outcome` holds every tuple until this returns
    found = []
    for pairs in outcome:
        results = {}
        for name, values in pairs:
            result = made.get(id(values))
            if result is None:
                result = made[id(values)] = component(*values)
            results[name] = result
        found.append(results)
    return found
