"""The `sql` component's cost per item on a small database, in process.

    .venv/bin/python bench/sql_speed.py                  # --repeats 2000 --batch 64

Three numbers, p50 and p99 over `--repeats` runs:

1. **The worker's own work** (`SqlTask.run` called directly): build the database from `schema_sql` (3 tables, about
   200 rows), run the predicted query (a join with GROUP BY), compare with the gold rows (cached after the first
   run, as in a worker); the predicted queries vary, so nothing is cached for them.
2. **One item through the in-process verifier** (`verifier_service.Verifier`): the whole path, the engine, the
   worker pool and its process hop included, one item per call.
3. **A batch of `--batch` items** through it: the time per item.
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Any

from verifier_service import Verifier
from verifier_service.scoring.sql import SqlTask


def schema() -> str:
    singers = ",".join(f"({i}, 'singer {i}', {20 + i % 40}, 'country {i % 7}')" for i in range(100))
    concerts = ",".join(f"({i}, 'concert {i}', {2000 + i % 20})" for i in range(50))
    links = ",".join(f"({i % 50}, {i % 100})" for i in range(60))
    return (
        "CREATE TABLE singer (id INTEGER PRIMARY KEY, name TEXT, age INTEGER, country TEXT);"
        "CREATE TABLE concert (id INTEGER PRIMARY KEY, name TEXT, year INTEGER);"
        "CREATE TABLE singer_in_concert (concert_id INTEGER, singer_id INTEGER);"
        f"INSERT INTO singer VALUES {singers}; INSERT INTO concert VALUES {concerts};"
        f"INSERT INTO singer_in_concert VALUES {links};"
    )


GOLD = (
    "SELECT c.year, count(*) FROM concert c JOIN singer_in_concert s ON s.concert_id = c.id "
    "JOIN singer g ON g.id = s.singer_id WHERE g.age > 30 GROUP BY c.year"
)


def predicted(i: int) -> str:
    return GOLD.replace("> 30", f"> {30 + i % 3}") + f" -- {i}"  # a distinct query each time


def percentiles(seconds: list[float]) -> str:
    ms = sorted(s * 1000 for s in seconds)
    return f"p50 {statistics.median(ms):.3f} ms, p99 {ms[int(len(ms) * 0.99) - 1]:.3f} ms (n={len(ms)})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=2000)
    parser.add_argument("--batch", type=int, default=64)
    args = parser.parse_args()
    ddl = schema()

    times = []
    for i in range(args.repeats):
        task = SqlTask(gold_sql=GOLD, pred_sql=predicted(i), schema_sql=ddl)
        start = time.perf_counter()
        task.run()
        times.append(time.perf_counter() - start)
    print(f"SqlTask.run (the worker's work): {percentiles(times)}")

    def item(i: int) -> dict[str, Any]:
        return {
            "completion": f"<think>join</think>```sql\n{predicted(i)}\n```",
            "sql": {"schema_sql": ddl, "gold_sql": GOLD},
        }

    with Verifier(math_workers=2, code_enabled=False) as verifier:
        verifier.score([item(-1)])  # warm the workers
        times = []
        for i in range(args.repeats):
            start = time.perf_counter()
            [result] = verifier.score([item(i)])
            times.append(time.perf_counter() - start)
            assert result.components["sql"].verdict in ("match", "mismatch"), result
        print(f"one item through the in-process verifier: {percentiles(times)}")
        times = []
        for r in range(max(1, args.repeats // args.batch)):
            batch = [item(r * args.batch + i) for i in range(args.batch)]
            start = time.perf_counter()
            verifier.score(batch)
            times.append((time.perf_counter() - start) / args.batch)
        print(f"a batch of {args.batch}, per item: {percentiles(times)}")


if __name__ == "__main__":
    main()
