"""The components of the other verifiable domains (issue 24): their cost per item, in process and through the service.

    .venv/bin/python bench/domains.py                 # starts a verifier on a free loopback port
    .venv/bin/python bench/domains.py --repeats 300

Two parts, in one run, on realistic inputs (8,000-token completions where the component reads a chain of thought):

1. **In process**: a text component's scorer called directly; a pooled one's job (what a worker process runs) run
   directly in this process, after its preparation (what the event loop does) timed on its own. p50 and p99 per item.
2. **Through the service**: 64 items per request with one component each (distinct completions, so nothing is
   deduplicated or cached); the request's time per item, median over `--requests`.

Targets (issue 24): steps, language and instructions under 1 ms p99 in process on an 8,000-token completion; sql
under 5 ms per item on a small database. The steps text is dense arithmetic (a written calculation every ~150
characters, some 200 claims); the instructions' five need no language detection, the sixth (response_language) does
(langdetect, Google's detector, on the first 10,000 characters).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import statistics
import time
from typing import Any

import httpx
from components import chinese, english, percentile, time_calls, wall_and_cpu
from machine import load_average, verifier

from verifier_service.metrics import Metrics
from verifier_service.pool import WorkerPool
from verifier_service.resources import MathWorkers
from verifier_service.schema import COMPONENTS, ComponentResult, ScoreItem
from verifier_service.scoring import POOLED, TEXT
from verifier_service.scoring.pooled import Resources
from verifier_service.settings import VerifierSettings

TOKENS = 8_000
CHARS_PER_TOKEN = 4


def arithmetic_reasoning(rng: random.Random, chars: int) -> str:
    """GSM8K-like reasoning: prose with a written calculation every sentence or two, all of them right."""
    parts: list[str] = []
    size = 0
    while size < chars:
        a, b = rng.randint(2, 999), rng.randint(2, 99)
        claim = rng.choice([f"{a} + {b} = {a + b}", f"{a} * {b} = {a * b}", f"{a} - {b} = {a - b}",
                            f"${a} × {b} = ${a * b}", f"<<{a}*{b}={a * b}>>{a * b}"])  # fmt: skip
        part = f"{english(rng, 120)}, so {claim}. "
        parts.append(part)
        size += len(part)
    return "".join(parts)


SCHEMA = {
    "type": "object",
    "required": ["order_id", "items", "total"],
    "properties": {
        "order_id": {"type": "string", "pattern": "^[A-Z]{2}-[0-9]{6}$"},
        "items": {
            "type": "array",
            "minItems": 1,
            "items": {
                "type": "object",
                "required": ["sku", "quantity", "price"],
                "properties": {
                    "sku": {"type": "string"},
                    "quantity": {"type": "integer", "minimum": 1},
                    "price": {"type": "number", "minimum": 0},
                },
                "additionalProperties": False,
            },
        },
        "total": {"type": "number"},
        "note": {"type": "string", "maxLength": 500},
    },
}

SCHEMA_SQL = """
CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT, city TEXT);
CREATE TABLE orders (id INTEGER PRIMARY KEY, customer_id INTEGER, amount REAL, placed TEXT);
""" + "\n".join(
    f"INSERT INTO customers VALUES ({i}, 'customer {i}', 'city {i % 7}');" for i in range(1, 51)
) + "\n" + "\n".join(
    f"INSERT INTO orders VALUES ({i}, {1 + i % 50}, {round(10 + (i * 37) % 500 / 3, 2)}, '2024-0{1 + i % 9}-1{i % 9}');"
    for i in range(1, 301)
)  # fmt: skip
GOLD_SQL = "SELECT c.city, SUM(o.amount) FROM customers c JOIN orders o ON o.customer_id = c.id GROUP BY c.city"
PRED_SQL = (
    "SELECT city, SUM(amount) AS total FROM orders JOIN customers ON customers.id = orders.customer_id GROUP BY 1"
)


def cases(rng: random.Random) -> dict[str, list[tuple[str, dict[str, Any]]]]:
    """Per component, (label, item fields) for each input it is measured on; each call to this makes new texts."""
    size = TOKENS * CHARS_PER_TOKEN
    order = {
        "order_id": "AB-123456",
        "items": [{"sku": f"SKU-{i}", "quantity": rng.randint(1, 9), "price": rng.randint(1, 9999) / 100}
                  for i in range(30)],
        "total": 1234.5,
    }  # fmt: skip
    instructions = {
        "instruction_ids": [
            "length_constraints:number_words", "punctuation:no_comma", "detectable_format:number_bullet_lists",
            "change_case:capital_word_frequency", "keywords:existence",
        ],
        "kwargs": [
            {"num_words": 500, "relation": "at least"}, None, {"num_bullets": 3},
            {"capital_frequency": 5, "capital_relation": "less than"}, {"keywords": ["apples"]},
        ],
    }  # fmt: skip
    bullets = "\n".join(f"* {english(rng, 60)}" for _ in range(3))
    response = english(rng, size - 300).replace(",", "") + "\n" + bullets
    return {
        "steps": [("english, 8,000 tokens", {"completion": arithmetic_reasoning(rng, size), "steps": {}})],
        "language": [
            (
                "chinese CoT, target zh",
                {"completion": "<think>" + chinese(rng, TOKENS * 3 // 2) + "</think>42", "language": {"target": "zh"}},
            ),
            (
                "english CoT, target en",
                {"completion": "<think>" + english(rng, size) + "</think>42", "language": {"target": "en"}},
            ),
        ],
        "instructions": [
            ("5 instructions, 8,000 tokens", {"completion": response, "instructions": instructions}),
            ("5, loose", {"completion": response, "instructions": {**instructions, "mode": "loose"}}),
            (
                "+ response_language",
                {
                    "completion": response,
                    "instructions": {
                        "instruction_ids": [*instructions["instruction_ids"], "language:response_language"],
                        "kwargs": [*instructions["kwargs"], {"language": "en"}],
                    },
                },
            ),
        ],
        "json_schema": [
            (
                "2 KB order",
                {"completion": f"```json\n{json.dumps(order, indent=1)}\n```", "json_schema": {"schema": SCHEMA}},
            )
        ],
        "sql": [
            (
                "50 + 300 rows",
                {
                    "completion": f"```sql\n{PRED_SQL} -- {rng.random()}\n```",
                    "sql": {"schema_sql": SCHEMA_SQL, "gold_sql": GOLD_SQL},
                },
            ),
        ],
        "procedural": [
            (
                "countdown",
                {
                    "completion": f"<answer>{(a := rng.randint(1, 50))} + 25 * 4</answer>",
                    "procedural": {
                        "dataset": "countdown",
                        "entry": {
                            "question": "Use 25, 4 and the number to reach the target.",
                            "answer": f"{a} + 25 * 4",
                            "metadata": {"numbers": [a, 25, 4], "target": a + 100, "source_dataset": "countdown"},
                        },
                    },
                },
            ),
        ],
    }


def in_process(repeats: int) -> None:
    print(
        f"\n1. in process, {repeats} calls each: ms per item, p50 / p99 of the wall time, then of this thread's CPU "
        "time (pooled: preparation on the loop; the job; a procedural job's fork is not this thread)"
    )
    metrics = Metrics()  # a pool never started: the jobs run here, one by one
    resources = Resources(
        VerifierSettings(), metrics, {"math_workers": MathWorkers(WorkerPool(1, "unused:run"), metrics)}
    )
    for name, inputs in cases(random.Random(0)).items():
        if name not in COMPONENTS:
            print(f"{name:<13} (not in this build)")
            continue
        for label, fields in inputs:
            item = ScoreItem.model_validate(fields)
            spec = item.spec(name)
            if name in TEXT:
                scorer = TEXT[name]
                wall, cpu = wall_and_cpu(lambda s=scorer, i=item, o=spec: s(i, o), repeats)
                result = scorer(item, spec)
                cell = f"{_ms(wall)}; cpu {_ms(cpu)}"
            else:
                component = POOLED[name](resources)
                prepare = time_calls(lambda c=component, i=item, o=spec: c.prepare(i, o), repeats)
                job = component.prepare(item, spec)
                if isinstance(job, ComponentResult):
                    raise SystemExit(f"{name}: settled without a job ({job.verdict}): the benchmark measures nothing")
                wall, cpu = wall_and_cpu(job.run, repeats)
                result = job.run()
                cell = f"prepare {_ms(prepare)}; job {_ms(wall)}; cpu {_ms(cpu)}"
            print(f"{name:<13} {label:<30} {cell}   [{result.verdict} {result.score}]")


def _ms(times: list[float]) -> str:
    return f"{percentile(times, 0.5) * 1e3:7.3f} / {percentile(times, 0.99) * 1e3:7.3f}"


def through_service(client: httpx.Client, requests: int) -> None:
    print(f"\n2. through the service, 64 items per request, {requests} requests: ms per item (median)")
    for name in cases(random.Random(0)):
        if name not in COMPONENTS:
            continue
        for index, (label, _) in enumerate(cases(random.Random(0))[name]):
            times = []
            for request in range(requests + 1):  # the first is a warm-up
                rng = random.Random(1000 * request + 1)
                items = [cases(rng)[name][index][1] for _ in range(64)]
                body = json.dumps({"items": items}).encode()
                started = time.perf_counter()
                response = client.post("/v1/score", content=body, headers={"content-type": "application/json"})
                elapsed = time.perf_counter() - started
                response.raise_for_status()
                if any(result["reward"] is None for result in response.json()["results"]):
                    raise SystemExit(f"{name}: items were not judged: the benchmark measures nothing")
                if request:
                    times.append(elapsed)
            print(f"{name:<13} {label:<30} {statistics.median(times) / 64 * 1e3:8.3f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=200, help="in-process calls per input")
    parser.add_argument("--requests", type=int, default=5, help="service requests per input")
    args = parser.parse_args()
    print(f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, Python "
          f"{platform.python_version()}; load average {load_average()}")  # fmt: skip
    in_process(args.repeats)
    with verifier() as url, httpx.Client(base_url=url, timeout=300) as client:
        through_service(client, args.requests)
    print(f"load average at the end: {load_average()}")


if __name__ == "__main__":
    main()
