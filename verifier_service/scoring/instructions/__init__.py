"""The `instructions` component: IFEval-style verifiable instructions (Google IFEval's 25 checks, `ifeval.py`, and
IFEvalG's training-only ones, `ifevalg.py`), graded on the answer after the reasoning.

Each id is checked with its kwargs (a null kwargs, or a null value in one, is the same as absent). Strict mode checks
the answer; loose mode, as IFEval defines it, counts an instruction followed when any of 8 variants passes: the
answer, without its first line, without its last, without both, and each of those with every '*' removed. An empty
answer follows nothing. `grading: all` scores 1 when every instruction is followed, else 0; `fraction` the share
followed. An unknown id, or kwargs a check cannot use (a missing key, a wrong type), leave the item unjudged (`null`):
never a free pass, never a silent 0.

>>> spec = InstructionsSpec(instruction_ids=["punctuation:no_comma", "detectable_format:title"], grading="fraction")
>>> found = score(ScoreItem(completion="<think>a, b</think><<Tea>> is hot.", instructions=spec), spec)
>>> found.score, found.verdict
(1.0, 'followed')
>>> found = score(ScoreItem(completion="<<Tea>>, hot.", instructions=spec), spec)
>>> found.score, found.verdict, found.detail
(0.5, 'not_followed', 'Not followed: punctuation:no_comma.')
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from verifier_service.schema import ComponentResult, InstructionsSpec, ScoreItem, Verdict
from verifier_service.scoring.extract import final_answer_region
from verifier_service.scoring.instructions import ifeval, ifevalg
from verifier_service.scoring.text import result

Check = Callable[[str, dict[str, Any]], bool]


CHECKS: dict[str, Check] = {**ifeval.CHECKS, **ifevalg.CHECKS}  # instruction id -> its check: IFEval's, IFEvalG's
_ID = re.compile(r"^[a-z_]+:[a-z_0-9]+$")


def variants(answer: str, mode: str) -> list[str]:
    """The texts an instruction may pass on: the answer (strict), or IFEval's 8 loose variants. Empty ones are
    dropped: an empty text follows nothing."""
    if mode == "strict":
        return [answer] if answer.strip() else []
    lines = answer.split("\n")
    trimmed = [answer, "\n".join(lines[1:]).strip(), "\n".join(lines[:-1]).strip(), "\n".join(lines[1:-1]).strip()]
    texts = trimmed + [text.replace("*", "") for text in trimmed]
    return list(dict.fromkeys(text for text in texts if text.strip()))  # each distinct text checked once


def _named(instruction_id: str) -> str:
    return instruction_id if _ID.match(instruction_id) else "an unknown id"


def score(item: ScoreItem, spec: InstructionsSpec) -> ComponentResult:
    """The `instructions` component of an item."""
    kwargs = spec.kwargs or (None,) * len(spec.instruction_ids)
    checks = []
    for instruction_id, given in zip(spec.instruction_ids, kwargs, strict=True):
        check = CHECKS.get(instruction_id)
        if check is None:
            return result(None, Verdict.UNKNOWN_INSTRUCTION, f"Unknown instruction: {_named(instruction_id)}.")
        checks.append((instruction_id, check, {k: v for k, v in (given or {}).items() if v is not None}))
    region = final_answer_region(item.completion, spec.think_tag)
    texts = variants(region, spec.mode) if region is not None else []
    failed = []
    for instruction_id, check, cleaned in checks:
        try:
            followed = any(check(text, cleaned) for text in texts) if texts else _validated(check, cleaned)
        except (ValueError, KeyError, TypeError) as exc:  # ifeval.BadKwargs, or a check's own complaint about kwargs
            return result(None, Verdict.BAD_KWARGS, f"Bad kwargs for {_named(instruction_id)}: {_reason(exc)}.")
        if not followed:
            failed.append(instruction_id)
    if not failed:
        return result(1.0, Verdict.FOLLOWED)
    share = 1 - len(failed) / len(checks)
    detail = "The reasoning was opened and never closed." if region is None else None
    if detail is None:
        named = list(dict.fromkeys(_named(i) for i in failed))
        more = f" and {len(named) - 5} more" if len(named) > 5 else ""
        detail = f"Not followed: {', '.join(named[:5])}{more}."
    return result(share if spec.grading == "fraction" else 0.0, Verdict.NOT_FOLLOWED, detail)


def _validated(check: Check, kwargs: dict[str, Any]) -> bool:
    """Not followed (no text to follow it); the check still runs, on a placeholder, so that bad kwargs are reported
    the same whatever the answer."""
    check(".", kwargs)
    return False


def _reason(exc: Exception) -> str:
    """The check's message when it is ours (it names a key, never a value), else a generic one."""
    return str(exc) if isinstance(exc, ifeval.BadKwargs) else "the check could not use them"
