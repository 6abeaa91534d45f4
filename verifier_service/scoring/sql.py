"""The `sql` component: text-to-SQL execution match. The answer's last ```sql (or ```sqlite) block runs on SQLite
and its rows are compared with the gold query's, by value.

Unlike the peers (NeMo-Gym's bird_sql, SkyRL-SQL), a query can change nothing and cannot outlive its deadline:

- the database is a fresh in-memory one built from the spec's `schema_sql` for each item, or a server-named file
  opened read-only and immutable (`db`), so no write ever reaches anything shared;
- `PRAGMA query_only` and an authorizer that allows only reading (tables, functions, recursive CTEs; no pragma,
  not even the reading ones) refuse writes, ATTACH (and so VACUUM INTO), pragma changes and load_extension: the item
  scores 0 as `write_attempt`;
- a progress handler interrupts the query at its deadline (the peers' thread timeouts abandon it, still running);
- rows are fetched in chunks up to a cap, so a cross join of millions of rows is refused, not held in memory, and
  so is a row of hundreds of 1 MB blobs (a result has at most MAX_COLUMNS columns, a value at most MAX_VALUE_BYTES).

It all runs in the worker processes (`SqlTask.run`), never on the event loop; the pool kills a worker that overruns
even so. Gold rows are cached per worker, and so is each schema's built database, as an image every item gets its own
copy of.
"""

from __future__ import annotations

import collections
import sqlite3
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from verifier_service.schema import ComponentResult, ScoreItem, SqlCompare, SqlSpec, Verdict
from verifier_service.scoring.code import fenced_blocks
from verifier_service.scoring.extract import final_answer_region
from verifier_service.scoring.pooled import WorkerComponent
from verifier_service.scoring.sql_compare import rows_match

SQL_LANGS = {"sql", "sqlite"}
MAX_ROWS = 100_000  # rows a query may return; a predicted query past it is a mismatch, a gold one gold_error
FETCH_CHUNK = 10_000
MAX_VALUE_BYTES = 1_000_000  # the longest string or blob a query may build (zeroblob(1e9) must not fill memory)
MAX_RESULT_BYTES = 256_000_000  # the text and blobs of a result at most, counted as they are fetched
MAX_DATABASE_BYTES = 256_000_000  # what a schema may build (PRAGMA max_page_count), main and temp databases each
MAX_COLUMNS = 100  # columns of a result (SQLite's own limit is 2000): a row is at most this many MB
PROGRESS_OPS = 1_000  # SQLite VM steps between deadline checks
GOLD_CACHE_SIZE = 256
GOLD_CACHE_ROWS = 10_000  # golds of more rows are not cached
IMAGE_CACHE_SIZE = 32  # built databases kept per worker (a 1 MB schema makes an image of a few MB)
IMAGE_CACHE_BYTES = 64 * 1024 * 1024  # and at most this much of them: a larger image is used once and not kept
_READ_ACTIONS = frozenset({sqlite3.SQLITE_READ, sqlite3.SQLITE_SELECT, sqlite3.SQLITE_RECURSIVE})
_SIZE_PRAGMAS = frozenset({"max_page_count", "page_size"})


def extract_sql(completion: str, think_tag: str = "think") -> str | None:
    """The last ```sql or ```sqlite block after the reasoning, None when there is none (or it is blank).

    >>> extract_sql("<think>```sql\\nSELECT 1\\n```</think>So:\\n```sql\\nSELECT 2;\\n```")
    'SELECT 2;\\n'
    """
    region = final_answer_region(completion, think_tag)
    if region is None:
        return None
    blocks = [code for lang, code in fenced_blocks(region) if lang.lower() in SQL_LANGS]
    return blocks[-1] if blocks and blocks[-1].strip() else None


# --- Running queries (in a worker) --------------------------------------------------------------------------------


class _Refused(Exception):
    """The query tried something the authorizer refused."""


class _TooMany(Exception):
    """The query returned more than MAX_ROWS rows, or more than MAX_RESULT_BYTES."""


class _Deadline(Exception):
    """The query was interrupted at its deadline."""


def _read_only(refused: list[str]) -> Callable[..., int]:
    """An authorizer that allows reading only, noting what it refused (the action's code, never the SQL)."""

    def authorize(action: int, arg1: str | None, arg2: str | None, db: str | None, source: str | None) -> int:
        if action in _READ_ACTIONS:
            return sqlite3.SQLITE_OK
        if action == sqlite3.SQLITE_FUNCTION and (arg2 or "").lower() != "load_extension":
            return sqlite3.SQLITE_OK
        refused.append(str(action))
        return sqlite3.SQLITE_DENY

    return authorize


def _no_attach(action: int, arg1: str | None, arg2: str | None, db: str | None, source: str | None) -> int:
    """While the schema is built: anything but ATTACH (which VACUUM INTO also asks for) and load_extension, which
    would reach files outside the in-memory database, and the pragmas that would lift the size cap."""
    if action in (sqlite3.SQLITE_ATTACH, sqlite3.SQLITE_DETACH):
        return sqlite3.SQLITE_DENY
    if action == sqlite3.SQLITE_PRAGMA and (arg1 or "").lower() in _SIZE_PRAGMAS:
        return sqlite3.SQLITE_DENY
    if action == sqlite3.SQLITE_FUNCTION and (arg2 or "").lower() == "load_extension":
        return sqlite3.SQLITE_DENY
    return sqlite3.SQLITE_OK


def _set_deadline(connection: sqlite3.Connection, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    connection.set_progress_handler(lambda: int(time.monotonic() > deadline), PROGRESS_OPS)


def _query(connection: sqlite3.Connection, sql: str, seconds: float, refused: list[str]) -> list[tuple[Any, ...]]:
    """The rows of one statement, by the deadline; raises _Refused, _Deadline, _TooMany or sqlite3's own error."""
    _set_deadline(connection, seconds)
    rows: list[tuple[Any, ...]] = []
    try:
        cursor = connection.execute(sql)
        width, size = len(cursor.description or ()) or 1, 0
        # Chunks small enough that, even with every value as long as SQLite lets a query make it, the cap is never
        # passed: when not even one such row fits in what is left, the result is refused before it is fetched.
        while True:
            room = min(FETCH_CHUNK, (MAX_RESULT_BYTES - size) // (width * MAX_VALUE_BYTES))
            if room < 1:
                raise _TooMany
            if not (chunk := cursor.fetchmany(room)):
                break
            rows.extend(chunk)
            size += sum(len(v) if isinstance(v, str | bytes) else 8 for row in chunk for v in row)
            if len(rows) > MAX_ROWS or size > MAX_RESULT_BYTES:
                raise _TooMany
    except sqlite3.Error as exc:
        if refused:
            raise _Refused from exc
        if isinstance(exc, sqlite3.OperationalError) and str(exc) == "interrupted":
            raise _Deadline from exc
        raise
    finally:
        connection.set_progress_handler(None, 0)
    return rows


@dataclass(frozen=True)
class SqlTask:
    """One predicted query against its gold, as a worker runs it; equal tasks of a request run once."""

    gold_sql: str
    pred_sql: str
    compare: SqlCompare = "set"
    float_tol: float = 1e-6
    timeout_s: float = 5.0
    executable_bonus: float = 0.0  # the score of rows that differ from the gold's
    schema_sql: str | None = None  # build a fresh database from this, or open the file:
    db_path: str | None = None
    db_sha256: str | None = field(default=None)

    def connect(self) -> sqlite3.Connection:
        """The item's database, ready for the predicted query; raises _SchemaFailed if it cannot be built."""
        if self.db_path is not None:
            connection = sqlite3.connect(f"{Path(self.db_path).absolute().as_uri()}?mode=ro&immutable=1", uri=True)
        else:
            connection = self._fresh_database(self.schema_sql or "")
        if hasattr(connection, "enable_load_extension"):  # absent where Python's sqlite3 cannot load any
            connection.enable_load_extension(False)
        connection.execute("PRAGMA query_only = ON")
        # The schema is read before the column limit is set: a table wider than a query may be is still readable.
        connection.execute("SELECT 1 FROM sqlite_master LIMIT 0").fetchall()
        connection.setlimit(sqlite3.SQLITE_LIMIT_COLUMN, MAX_COLUMNS)
        connection.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, MAX_VALUE_BYTES)
        connection.setlimit(sqlite3.SQLITE_LIMIT_ATTACHED, 0)
        return connection

    def _fresh_database(self, schema_sql: str) -> sqlite3.Connection:
        """A new in-memory database holding what `schema_sql` builds: built once per worker, then every item, the
        first included, gets its own copy of the image (deserialize: 20x faster than running the schema again, as
        fresh, and the same for each item: what a schema leaves outside the main database, temp tables or a
        connection's pragmas, is in no copy)."""
        image = _IMAGES.get(schema_sql)
        if image is None:
            built = self._build(schema_sql)
            if isinstance(built, sqlite3.Connection):  # no image: each item builds its own
                return built
            image = built
            if len(image) <= IMAGE_CACHE_BYTES:
                _IMAGES[schema_sql] = image
                while len(_IMAGES) > IMAGE_CACHE_SIZE or sum(map(len, _IMAGES.values())) > IMAGE_CACHE_BYTES:
                    _IMAGES.popitem(last=False)
        else:
            _IMAGES.move_to_end(schema_sql)
        connection = sqlite3.connect(":memory:")
        connection.deserialize(image)
        return connection

    def _build(self, schema_sql: str) -> bytes | sqlite3.Connection:
        connection = sqlite3.connect(":memory:")
        # The schema's values and pages are capped as a query's are, so a schema of huge blobs or of rows a recursive
        # CTE makes fails (gold_error) rather than fills the worker's memory (or, for temp tables, the disk).
        connection.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, MAX_VALUE_BYTES)
        pages = MAX_DATABASE_BYTES // connection.execute("PRAGMA page_size").fetchone()[0]
        connection.execute(f"PRAGMA main.max_page_count = {pages}")
        connection.execute(f"PRAGMA temp.max_page_count = {pages}")
        connection.set_authorizer(_no_attach)
        _set_deadline(connection, self.timeout_s)
        try:
            connection.executescript(schema_sql)
        except sqlite3.Error as exc:
            connection.close()
            raise _SchemaFailed(type(exc).__name__) from exc
        connection.set_progress_handler(None, 0)
        connection.set_authorizer(None)
        try:
            image = connection.serialize()
        except (AttributeError, sqlite3.Error):  # a Python that cannot copy, or an empty database (no page to copy)
            return connection
        connection.close()
        return image

    def run(self) -> ComponentResult:
        try:
            connection = self.connect()
        except _SchemaFailed as exc:
            return _result(None, Verdict.GOLD_ERROR, f"the schema failed to build ({exc})")
        try:
            refused: list[str] = []
            connection.set_authorizer(_read_only(refused))
            gold = self._gold(connection, refused)
            if isinstance(gold, ComponentResult):
                return gold
            return self._judge(connection, gold, refused)
        finally:
            connection.close()

    def _gold(self, connection: sqlite3.Connection, refused: list[str]) -> list[tuple[Any, ...]] | ComponentResult:
        key = (self.db_sha256 or self.schema_sql, self.gold_sql)
        cached = _GOLD.get(key)
        if cached is not None:
            _GOLD.move_to_end(key)
            return cached
        try:
            rows = _query(connection, self.gold_sql, self.timeout_s, refused)
        except _Refused:
            return _result(None, Verdict.GOLD_ERROR, "the gold query is not read-only")
        except _Deadline:
            return _result(None, Verdict.GOLD_ERROR, f"the gold query took longer than {self.timeout_s:g}s")
        except _TooMany:
            return _result(
                None,
                Verdict.GOLD_ERROR,
                f"the gold query returned more than {MAX_ROWS} rows or {MAX_RESULT_BYTES // 10**6} MB",
            )
        except (sqlite3.Error, sqlite3.Warning) as exc:
            return _result(None, Verdict.GOLD_ERROR, f"the gold query failed ({type(exc).__name__})")
        if len(rows) <= GOLD_CACHE_ROWS:  # a gold of many rows is recomputed rather than held by every worker
            _GOLD[key] = rows
            if len(_GOLD) > GOLD_CACHE_SIZE:
                _GOLD.popitem(last=False)
        return rows

    def _judge(
        self, connection: sqlite3.Connection, gold: list[tuple[Any, ...]], refused: list[str]
    ) -> ComponentResult:
        try:
            rows = _query(connection, self.pred_sql, self.timeout_s, refused)
        except _Refused:
            return _result(0.0, Verdict.WRITE_ATTEMPT, "the query tried to write or to reach past the database")
        except _Deadline:
            return _result(0.0, Verdict.TIMEOUT, f"the query was interrupted after {self.timeout_s:g}s")
        except _TooMany:
            return _result(
                0.0, Verdict.MISMATCH, f"the query returned more than {MAX_ROWS} rows or {MAX_RESULT_BYTES // 10**6} MB"
            )
        except (sqlite3.Error, sqlite3.Warning) as exc:  # Warning: more than one statement
            return _result(0.0, Verdict.PRED_ERROR, f"the query failed ({type(exc).__name__})")
        if rows_match(gold, rows, self.compare, self.float_tol):
            return _result(1.0, Verdict.MATCH, f"{len(rows)} rows, as the gold query's")
        return _result(self.executable_bonus, Verdict.MISMATCH, f"{len(rows)} rows; the gold query gives {len(gold)}")


class _SchemaFailed(Exception):
    """The schema SQL failed (the error's class is the message)."""


# Built databases per worker process, schema_sql -> its image (serialize), least recently used first.
_IMAGES: collections.OrderedDict[str, bytes] = collections.OrderedDict()
# Gold rows per worker process, (database, gold query) -> rows, least recently used first: the rows of a prompt's
# gold serve all its samples. Only successes are kept (a gold that timed out may pass on a quieter machine).
_GOLD: collections.OrderedDict[tuple[str | None, str], list[tuple[Any, ...]]] = collections.OrderedDict()


def _result(score: float | None, verdict: Verdict, detail: str) -> ComponentResult:
    return ComponentResult(score=score, verdict=verdict.value, detail=detail)


# --- In the service: the pooled component (scoring/pooled.py) -------------------------------------------------------


class SqlComponent(WorkerComponent):
    """SQL as a pooled component: the query found on the loop, run in a worker process, one job per distinct query
    and spec."""

    name = "sql"

    def reads(self, item: ScoreItem, spec: SqlSpec) -> int:
        return len(item.completion)

    def prepare(self, item: ScoreItem, spec: SqlSpec) -> ComponentResult | SqlTask:
        pred = extract_sql(item.completion, spec.think_tag)
        if pred is None:
            return _result(0.0, Verdict.NO_SQL, "no ```sql block after the reasoning")
        task = SqlTask(gold_sql=spec.gold_sql, pred_sql=pred, compare=spec.compare, float_tol=spec.float_tol,
                       timeout_s=spec.timeout_s, executable_bonus=spec.executable_bonus,
                       schema_sql=spec.schema_sql)  # fmt: skip
        if spec.db is not None:  # the runtime refused an unknown name (runtime.item_problem)
            database = self.settings.sql_databases[spec.db]
            task = SqlTask(**{**task.__dict__, "db_path": database.path, "db_sha256": database.sha256.lower()})
        return task

    def timeout_s(self, job: SqlTask) -> float:
        return 3 * job.timeout_s + 10  # the schema, the gold and the query, each interrupted at timeout_s

    def timed_out(self, job: SqlTask, timeout_s: float) -> ComponentResult:
        # Only when an interrupt failed to stop it and the pool killed the worker. From here it cannot be told whether
        # the schema, the gold or the model's query overran, so the item is not judged (null) rather than blamed on
        # the model: worker_crashed, a verdict sql already scores null (`timeout` is the model's query, always 0).
        detail = f"the worker ran past {timeout_s:g}s and was stopped; the item was not judged"
        return _result(None, Verdict.WORKER_CRASHED, detail)
