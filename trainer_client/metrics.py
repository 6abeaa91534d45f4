"""Verdict rates and null rates of one reward call, as scalars for TRL's `log_metric`.

The set of metric names depends only on the reward's configuration, never on the batch: TRL averages each name
across processes with a collective call per name, so every rank must log the same names on every call.
"""

from __future__ import annotations

from collections.abc import Sequence

from verifier_service.schema import VERDICTS as SERVICE_VERDICTS
from verifier_service.schema import ItemResult, Verdict

# The verdicts worth a time series, per component: every verdict the service gives for it except its own failures,
# which count as "other" and, being null rewards, show in `null_rate`.
SERVICE_FAILURES = (Verdict.INTERNAL_ERROR, Verdict.WORKER_CRASHED, Verdict.DEADLINE_EXCEEDED)
VERDICTS: dict[str, tuple[str, ...]] = {
    component: tuple(v for v in verdicts if v not in SERVICE_FAILURES)
    for component, verdicts in SERVICE_VERDICTS.items()
}

UNREACHABLE = "unreachable"  # the verdict shown for a row when the verifier gave no answer
SKIPPED = "skipped"  # the row has no gold answer / tests: the reward does not apply to it


def verdict_metrics(
    name: str,
    components: Sequence[str],
    results: Sequence[ItemResult | None],
    sent: Sequence[bool],
    values: Sequence[float | None],
) -> dict[str, float]:
    """Rates over all completions of the call: `<name>/null_rate`, `<name>/unreachable_rate` and
    `<name>/<component>/<verdict>` for every verdict in `VERDICTS` plus `other`.

    `results[i]` is the verifier's answer for completion i, None where nothing came back; `sent[i]` says whether
    completion i was sent at all (a row without gold answer or tests is not); `values[i]` is what the reward
    function returns for it.

    >>> verdict_metrics("r", ["format"], [None, None], [True, False], [None, None])["r/unreachable_rate"]
    0.5
    """
    total = max(1, len(results))
    unreachable = sum(1 for result, was_sent in zip(results, sent, strict=True) if was_sent and result is None)
    judged_null = sum(1 for result, value in zip(results, values, strict=True) if result is not None and value is None)
    metrics = {
        f"{name}/null_rate": (unreachable + judged_null) / total,
        f"{name}/unreachable_rate": unreachable / total,
    }
    for component in components:
        known = VERDICTS.get(component, ())
        counts = dict.fromkeys([*known, "other"], 0)
        for result in results:
            if result is not None and component in result.components:
                verdict = result.components[component].verdict
                counts[verdict if verdict in known else "other"] += 1
        metrics |= {f"{name}/{component}/{verdict}": count / total for verdict, count in counts.items()}
    return metrics


def row_verdicts(component: str, results: Sequence[ItemResult | None], sent: Sequence[bool]) -> list[str]:
    """One verdict per completion for TRL's completions table (`log_extra`)."""
    verdicts = []
    for result, was_sent in zip(results, sent, strict=True):
        if not was_sent:
            verdicts.append(SKIPPED)
        elif result is None:
            verdicts.append(UNREACHABLE)
        else:
            found = result.components.get(component)
            verdicts.append(found.verdict if found is not None else "missing")
    return verdicts
