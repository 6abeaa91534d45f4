"""Prometheus metrics, one registry per app (so several apps in one process do not collide)."""

from __future__ import annotations

from collections import Counter as Tally
from collections.abc import Callable, Collection, Iterator
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from verifier_service.schema import ItemResult


class Metrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.requests = Counter(
            "verifier_requests",
            "Score requests answered, by HTTP status (499: the client went away first)",
            ["status"],
            registry=r,
        )
        self.items = Counter("verifier_items", "Items scored", ["status"], registry=r)
        self.verdicts = Counter("verifier_verdicts", "Component verdicts", ["component", "verdict"], registry=r)
        self.batch_seconds = Histogram(
            "verifier_batch_seconds",
            "Time to score one request",
            registry=r,
            buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120),
        )
        self.math_tasks = Counter("verifier_math_tasks", "Math comparisons sent to workers", registry=r)
        self.deduplicated = Counter("verifier_math_deduplicated", "Math items that reused a batch twin", registry=r)
        self.cache_hits = Counter("verifier_math_cache_hits", "Math items answered from the cache", registry=r)
        self.timeouts = Counter("verifier_math_timeouts", "Math items past their deadline", registry=r)
        self.worker_crashes = Counter("verifier_worker_crashes", "Workers that died under an item", registry=r)
        self.workers_alive = Gauge("verifier_workers_alive", "Math worker processes alive", registry=r)
        self.sandbox = SandboxPoolCollector()
        r.register(self.sandbox)

    def observe_results(self, results: list[ItemResult]) -> None:
        statuses = Tally(result.status for result in results)
        verdicts = Tally((name, c.verdict) for result in results for name, c in result.components.items())
        for status, count in statuses.items():
            self.items.labels(status=status).inc(count)
        for (name, verdict), count in verdicts.items():
            self.verdicts.labels(component=name, verdict=verdict).inc(count)


# The sandbox pool's status() keys shown as gauges and counters, each labelled with the backend (local or docker).
SANDBOX_GAUGES = {
    "pool_size": "Sandboxes the pool keeps (VERIFIER_SANDBOX__POOL_SIZE)",
    "up": "Sandboxes running, idle or busy",
    "idle": "Sandboxes waiting for a program",
    "busy": "Sandboxes running a program",
    "starting": "Sandboxes starting (at start-up, or replacing one)",
    "ready": "1 when the sandbox can run code",
}
SANDBOX_COUNTERS = {
    "replaced": "Sandboxes retired (a program broke one, a job was left midway, or jobs_per_sandbox) and started anew",
    "destroyed": "Sandboxes destroyed: replaced, or at shutdown",
    "failed_starts": "Attempts to start a sandbox that failed",
}


class SandboxPoolCollector:
    """The sandbox pool's gauges and counters, read from its status() at each scrape: nothing to keep in step.
    `status` is set once the runtime exists (the app's lifespan); none while code scoring is off."""

    def __init__(self) -> None:
        self.status: Callable[[], dict[str, Any]] | None = None

    def collect(self) -> Iterator[Metric]:
        status = self.status() if self.status is not None else {}
        if not status.get("enabled", False):
            return
        backend = [str(status.get("backend"))]
        for key, help_text in SANDBOX_GAUGES.items():
            gauge = GaugeMetricFamily(f"verifier_sandbox_{key}", help_text, labels=["backend"])
            gauge.add_metric(backend, float(status.get(key) or 0))
            yield gauge
        for key, help_text in SANDBOX_COUNTERS.items():
            counter = CounterMetricFamily(f"verifier_sandbox_{key}", help_text, labels=["backend"])
            counter.add_metric(backend, float(status.get(key) or 0))
            yield counter


class CountResponses:
    """ASGI middleware: count every answer to one of `paths` by its HTTP status, whoever produced it (the route, a 401
    or 422 from its dependencies, the body-size limit, an error handler). An unhandled error passes through here on its
    way to Starlette's outermost middleware, which answers 500: it is counted as that."""

    def __init__(self, app: Any, metrics: Metrics, paths: Collection[str]) -> None:
        self.app, self.metrics, self.paths = app, metrics, paths

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope.get("path") not in self.paths:
            await self.app(scope, receive, send)
            return
        started = False

        async def counted_send(message: dict[str, Any]) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
                self.metrics.requests.labels(status=str(message["status"])).inc()
            await send(message)

        try:
            await self.app(scope, receive, counted_send)
        except Exception:
            if not started:
                self.metrics.requests.labels(status="500").inc()
            raise
