"""The json_schema component's cost: in process, and through the service.

    .venv/bin/python bench/json_schema.py                     # starts a verifier on a free loopback port
    .venv/bin/python bench/json_schema.py --repeats 2000 --no-service

A realistic structured-output answer: an order of about 2 KB (a customer, an address, a dozen line items), fenced in
```json after a short reasoning block, against a typical extraction schema (nested objects, an array of objects,
required fields, enums, a pattern, bounds, additionalProperties false). Timed:

1. **In process**, the scorer called directly, `--repeats` times: a valid answer, an invalid one (an error deep in
   the items) and prose with no JSON; and a GRPO group of 8 items sharing the schema, validated from JSON as the
   service does (the schema is checked once: later items hit the cache). p50 and p99 per call.
2. **Through the service**: 64 items per request (a group of 8 for each of 8 prompts, one schema each), ms per item.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import platform
import random
import statistics
import time
from typing import Any

import httpx
from components import percentile, time_calls
from machine import load_average, verifier

from verifier_service.schema import ScoreItem
from verifier_service.scoring import json_schema

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "order_id": {"type": "string", "pattern": "^ORD-[0-9]{6}$"},
        "status": {"enum": ["pending", "paid", "shipped", "delivered", "cancelled"]},
        "customer": {
            "type": "object",
            "properties": {
                "name": {"type": "string", "minLength": 1},
                "email": {"type": "string", "format": "email"},
                "address": {
                    "type": "object",
                    "properties": {
                        "street": {"type": "string"},
                        "city": {"type": "string"},
                        "postcode": {"type": "string"},
                        "country": {"type": "string", "minLength": 2, "maxLength": 2},
                    },
                    "required": ["street", "city", "country"],
                    "additionalProperties": False,
                },
            },
            "required": ["name", "address"],
            "additionalProperties": False,
        },
        "items": {
            "type": "array",
            "minItems": 1,
            "items": {
                "type": "object",
                "properties": {
                    "sku": {"type": "string"},
                    "description": {"type": "string"},
                    "quantity": {"type": "integer", "minimum": 1},
                    "unit_price": {"type": "number", "exclusiveMinimum": 0},
                    "tags": {"type": "array", "items": {"type": "string"}, "uniqueItems": True},
                },
                "required": ["sku", "quantity", "unit_price"],
                "additionalProperties": False,
            },
        },
        "notes": {"type": ["string", "null"]},
    },
    "required": ["order_id", "status", "customer", "items"],
    "additionalProperties": False,
}


def order(rng: random.Random, lines: int = 12) -> dict[str, Any]:
    return {
        "order_id": f"ORD-{rng.randint(0, 999_999):06d}",
        "status": rng.choice(["pending", "paid", "shipped"]),
        "customer": {
            "name": "Ada Lovelace",
            "email": "ada@example.org",
            "address": {"street": "12 St James's Square", "city": "London", "postcode": "SW1Y 4JH", "country": "GB"},
        },
        "items": [
            {
                "sku": f"SKU-{rng.randint(1000, 9999)}",
                "description": "Analytical engine spare part, brass",
                "quantity": rng.randint(1, 5),
                "unit_price": round(rng.uniform(1, 200), 2),
                "tags": ["brass", "engine"],
            }
            for _ in range(lines)
        ],
        "notes": None,
    }


def answers(rng: random.Random) -> dict[str, str]:
    good = order(rng)
    bad = order(rng)
    bad["items"][-1]["quantity"] = 0
    reasoning = "<think>The text names the customer, her address and twelve lines; I fill the schema.</think>\n"
    return {
        "valid": f"{reasoning}```json\n{json.dumps(good, indent=2)}\n```",
        "invalid": f"{reasoning}```json\n{json.dumps(bad, indent=2)}\n```",
        "no_json": reasoning + "The order has twelve lines for Ada Lovelace, shipped to London. " * 30,
    }


def in_process(texts: dict[str, str], repeats: int) -> None:
    print(f"\n1. in process, {repeats} calls each: ms per call (p50 / p99)")
    for name, text in texts.items():
        item = ScoreItem(completion=text, json_schema={"schema": SCHEMA})
        spec = item.json_schema
        assert spec is not None
        verdict = json_schema.score(item, spec).verdict
        assert verdict == name, (name, verdict)
        times = time_calls(functools.partial(json_schema.score, item, spec), repeats)
        print(f"   score, {name:<8} ({len(text):>5} chars) {percentile(times, 0.5) * 1e3:7.3f} / "
              f"{percentile(times, 0.99) * 1e3:7.3f}")  # fmt: skip
    body = [json.dumps({"completion": texts["valid"], "json_schema": {"schema": SCHEMA}})] * 8

    def group() -> None:
        for raw in body:
            item = ScoreItem.model_validate_json(raw)
            json_schema.score(item, item.json_schema)  # type: ignore[arg-type]

    times = [t / 8 for t in time_calls(group, max(1, repeats // 8))]
    print(f"   a group of 8 sharing the schema, validated from JSON and scored: per item "
          f"{percentile(times, 0.5) * 1e3:7.3f} / {percentile(times, 0.99) * 1e3:7.3f}")  # fmt: skip


def through_service(texts: dict[str, str], requests: int) -> None:
    print(f"\n2. through the service, 64 items per request, {requests} requests: ms per item (median)")
    with verifier() as url, httpx.Client(base_url=url, timeout=300) as client:
        for name, text in texts.items():
            items = [{"completion": text, "json_schema": {"schema": SCHEMA}}] * 64
            content = json.dumps({"items": items}).encode()
            times = []
            for _ in range(requests + 1):
                started = time.perf_counter()
                response = client.post("/v1/score", content=content, headers={"content-type": "application/json"})
                times.append(time.perf_counter() - started)
                response.raise_for_status()
            print(f"   {name:<8} {statistics.median(times[1:]) / 64 * 1e3:7.3f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=1000, help="in-process calls per answer")
    parser.add_argument("--requests", type=int, default=10, help="service requests per answer")
    parser.add_argument("--no-service", action="store_true", help="in process only")
    args = parser.parse_args()
    print(f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, Python "
          f"{platform.python_version()}; load average {load_average()}")  # fmt: skip
    texts = answers(random.Random(0))
    print(f"valid answer: {len(json.dumps(order(random.Random(0))))} bytes of JSON (compact)")
    in_process(texts, args.repeats)
    if not args.no_service:
        through_service(texts, args.requests)


if __name__ == "__main__":
    main()
