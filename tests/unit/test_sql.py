"""The `sql` component: a query's rows against the gold's on real SQLite, run as a worker runs them (SqlTask.run in
this process); writes, ATTACH, pragmas and extension loads refused, runaway queries interrupted, results capped, and
the peers' own test cases (tests/data/sql/peers.jsonl) as oracles."""

from __future__ import annotations

import hashlib
import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from verifier_service.metrics import Metrics
from verifier_service.pool import WorkerPool
from verifier_service.resources import MathWorkers
from verifier_service.runtime import check_sql_databases, item_problem
from verifier_service.schema import ScoreItem, SqlSpec
from verifier_service.scoring import POOLED, sql
from verifier_service.scoring.pooled import Resources
from verifier_service.scoring.sql import MAX_ROWS, SqlComponent, SqlTask, extract_sql
from verifier_service.scoring.sql_compare import rows_match
from verifier_service.settings import VerifierSettings

PEERS = Path(__file__).resolve().parents[1] / "data" / "sql" / "peers.jsonl"
SCHEMA = (
    "CREATE TABLE t (x INTEGER, y TEXT, z REAL);"
    "INSERT INTO t VALUES (1, 'a', 0.5), (2, 'b', 1.0), (3, 'c', 0.1), (3, 'c', 0.1);"
)
WRITES = [
    "DELETE FROM t",
    "DROP TABLE t",
    "INSERT INTO t VALUES (9, 'z', 9.0)",
    "UPDATE t SET x = 0",
    "CREATE TABLE u (a)",
    "CREATE TEMP TABLE u (a)",
    "ATTACH DATABASE ':memory:' AS other",
    "ATTACH DATABASE '/tmp/verifier-sql-attach.db' AS other",
    "VACUUM INTO '/tmp/verifier-sql-vacuum.db'",
    "PRAGMA writable_schema = ON",
    "PRAGMA query_only = OFF",
    "SELECT * FROM pragma_table_info('t')",
    "SELECT load_extension('/tmp/evil.so')",
]


def run(pred: str, gold: str = "SELECT x FROM t", **options: Any) -> tuple[float | None, str, str]:
    result = SqlTask(gold_sql=gold, pred_sql=pred, schema_sql=options.pop("schema_sql", SCHEMA), **options).run()
    return result.score, result.verdict, result.detail or ""


@pytest.mark.parametrize("pred", WRITES)
def test_a_write_or_a_reach_past_the_database_is_refused_and_changes_nothing(pred: str) -> None:
    assert run(pred)[:2] == (0.0, "write_attempt")
    assert not Path("/tmp/verifier-sql-attach.db").exists() and not Path("/tmp/verifier-sql-vacuum.db").exists()


@pytest.mark.parametrize("pred", WRITES)
def test_a_write_to_a_named_database_file_changes_nothing_and_the_next_query_sees_it_whole(
    pred: str, tmp_path: Path
) -> None:
    path = database_file(tmp_path)
    before = hashlib.sha256(path.read_bytes()).hexdigest()
    task: dict[str, Any] = {"gold_sql": "SELECT count(*) FROM t", "db_path": str(path), "db_sha256": before}
    assert SqlTask(pred_sql=pred, **task).run().verdict == "write_attempt"
    assert SqlTask(pred_sql="SELECT 4", **task).run().verdict == "match"  # all four rows still there
    assert hashlib.sha256(path.read_bytes()).hexdigest() == before


def test_a_runaway_recursive_query_is_interrupted_at_its_deadline() -> None:
    forever = "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT count(*) FROM c"
    assert run(forever, timeout_s=0.2) == (0.0, "timeout", "the query was interrupted after 0.2s")
    assert run("SELECT x FROM t", timeout_s=0.2)[1] == "match"  # the worker goes on


def test_a_schema_that_runs_forever_is_interrupted_and_is_the_gold_s_fault() -> None:
    forever = "CREATE TABLE n (x); WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) INSERT INTO n " \
              "SELECT x FROM c;"  # fmt: skip
    assert run("SELECT 1", schema_sql=forever, timeout_s=0.2)[:2] == (None, "gold_error")


def test_a_cross_join_of_millions_of_rows_is_capped() -> None:
    schema = "CREATE TABLE d (v); WITH RECURSIVE c(v) AS (SELECT 0 UNION ALL SELECT v + 1 FROM c LIMIT 1000) " \
             "INSERT INTO d SELECT v FROM c;"  # fmt: skip
    pred = "SELECT a.v, b.v FROM d a, d b"  # 1,000,000 rows
    score, verdict, detail = run(pred, gold="SELECT count(*) FROM d", schema_sql=schema)
    assert (score, verdict) == (0.0, "mismatch") and f"more than {MAX_ROWS} rows" in detail
    assert run("SELECT 1", gold=pred, schema_sql=schema)[:2] == (None, "gold_error")


RUNAWAY = "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT count(*) FROM c"
BONUS_CASES = [  # (predicted query, verdict, its score with executable_bonus 0.1)
    ("SELECT x FROM t", "match", 1.0),
    ("SELECT y FROM t", "mismatch", 0.1),
    ("SELECT x FROM t WHERE x > 5", "mismatch", 0.1),  # no rows: it ran
    ("SELEC x FROM t", "pred_error", 0.0),
    ("SELECT nothing FROM t", "pred_error", 0.0),
    ("DELETE FROM t", "write_attempt", 0.0),
    (RUNAWAY, "timeout", 0.0),
    # stopped at the row cap: it did not run to its end
    ("WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c LIMIT 200000) SELECT x FROM c", "mismatch", 0.0),
]


@pytest.mark.parametrize(("pred", "verdict", "score"), BONUS_CASES)
def test_an_executable_bonus_scores_a_query_that_ran_to_its_end_with_other_rows_and_nothing_else(
    pred: str, verdict: str, score: float
) -> None:
    """Arctic-Text2SQL-R1's reward: 1 correct, 0.1 executable, 0 otherwise; without the option, 0 for all but match."""
    timeout_s = 0.3 if pred == RUNAWAY else 5.0
    assert run(pred, timeout_s=timeout_s, executable_bonus=0.1)[:2] == (score, verdict)
    assert run(pred, timeout_s=timeout_s)[:2] == (1.0 if verdict == "match" else 0.0, verdict)


def test_the_executable_bonus_goes_from_the_spec_to_the_task_and_makes_sql_partial_credit() -> None:
    spec = SqlSpec(schema_sql=SCHEMA, gold_sql="SELECT x FROM t", executable_bonus=0.1)
    task = component().prepare(ScoreItem(completion="```sql\nSELECT y FROM t\n```", sql=spec), spec)
    assert isinstance(task, SqlTask) and (task.run().score, task.run().verdict) == (0.1, "mismatch")
    assert spec.partial_credit() and not SqlSpec(schema_sql=SCHEMA, gold_sql="SELECT 1").partial_credit()


def test_values_too_large_to_hold_are_refused_not_built() -> None:
    assert run("SELECT zeroblob(1000000000)")[:2] == (0.0, "pred_error")


def test_a_row_too_wide_to_hold_is_refused_before_any_value_is_built() -> None:
    wide = "SELECT " + ", ".join(f"zeroblob(1000000) AS c{i}" for i in range(600))  # 600 MB in one row
    score, verdict, detail = run(wide)
    assert (score, verdict) == (0.0, "pred_error") and "OperationalError" in detail  # too many columns
    assert run("SELECT 1", gold=wide)[:2] == (None, "gold_error")
    # A table wider than a query may be is still readable, a few columns at a time.
    schema = f"CREATE TABLE w ({', '.join(f'c{i}' for i in range(150))}); INSERT INTO w (c0, c149) VALUES (1, 2);"
    assert run("SELECT c149 FROM w", gold="SELECT 2", schema_sql=schema)[:2] == (1.0, "match")


def test_a_chunk_that_could_pass_what_is_left_of_the_cap_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    # With a 5 MB cap, one row of 10 columns could hold 10 MB: refused before it is fetched, however small it is.
    monkeypatch.setattr(sql, "MAX_RESULT_BYTES", 5_000_000)
    narrow, wide = "SELECT 1, 2, 3, 4", "SELECT 1, 2, 3, 4, 5, 6, 7, 8, 9, 10"
    assert run(narrow, gold=narrow)[:2] == (1.0, "match")
    assert run(wide, gold=wide)[:2] == (None, "gold_error")
    score, verdict, detail = run(wide, gold=narrow)
    assert (score, verdict) == (0.0, "mismatch") and "5 MB" in detail


@pytest.mark.parametrize(
    ("pred", "error"),
    [
        ("SELECT x FRM t", "OperationalError"),
        ("SELECT nope FROM t", "OperationalError"),
        ("SELECT 1; SELECT 2", "ProgrammingError"),
    ],
)
def test_a_failing_query_is_pred_error_naming_the_error_class_never_the_sql(pred: str, error: str) -> None:
    score, verdict, detail = run(pred)
    assert (score, verdict) == (0.0, "pred_error") and detail == f"the query failed ({error})"


@pytest.mark.parametrize(
    ("schema", "gold", "why"),
    [
        ("CREATE TABLE t (x", "SELECT 1", "the schema failed to build (OperationalError)"),
        (SCHEMA, "SELECT nope FROM t", "the gold query failed (OperationalError)"),
        (SCHEMA, "DELETE FROM t", "the gold query is not read-only"),
        ("ATTACH '/tmp/verifier-sql-schema.db' AS x;", "SELECT 1", "the schema failed to build (DatabaseError)"),
    ],
)
def test_a_gold_that_cannot_run_is_null(schema: str, gold: str, why: str) -> None:
    assert run("SELECT 1", gold=gold, schema_sql=schema) == (None, "gold_error", why)
    assert not Path("/tmp/verifier-sql-schema.db").exists()


def test_a_schema_of_a_megabyte_builds() -> None:
    rows = ",".join(f"({i}, 'name number {i:08d}')" for i in range(30_000))
    schema = f"CREATE TABLE big (id INTEGER, name TEXT); INSERT INTO big VALUES {rows};"
    assert 800_000 < len(schema) <= 1_000_000
    SqlSpec(schema_sql=schema, gold_sql="SELECT 1")  # within the spec's limit
    assert run("SELECT count(*) FROM big", gold="SELECT 30000", schema_sql=schema)[1] == "match"


def test_a_schema_that_builds_a_value_too_long_is_the_gold_s_fault() -> None:
    schema = "CREATE TABLE b (x); INSERT INTO b VALUES (zeroblob(2000000));"  # 2 MB from 60 characters
    assert run("SELECT 1", gold="SELECT 1", schema_sql=schema) == (
        None, "gold_error", "the schema failed to build (DataError)"
    )  # fmt: skip


@pytest.mark.parametrize("table", ["TABLE", "TEMP TABLE"])
def test_a_schema_that_builds_past_the_size_cap_fails(monkeypatch: pytest.MonkeyPatch, table: str) -> None:
    monkeypatch.setattr(sql, "MAX_DATABASE_BYTES", 4_000_000)  # 20 rows of half a megabyte pass it
    rows = f"CREATE {table} b (x); WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM c LIMIT 20) " \
           "INSERT INTO b SELECT zeroblob(500000) FROM c;"  # fmt: skip
    assert run("SELECT 1", gold="SELECT 1", schema_sql=rows)[:2] == (None, "gold_error")
    assert run("SELECT 1", gold="SELECT 1", schema_sql=rows.replace("LIMIT 20", "LIMIT 4"))[:2] == (1.0, "match")
    # Nor can the schema lift the cap.
    for pragma in ("PRAGMA max_page_count = 1000000000;", "PRAGMA page_size = 65536;"):
        assert run("SELECT 1", gold="SELECT 1", schema_sql=pragma + rows)[:2] == (None, "gold_error")


@pytest.mark.parametrize(
    ("gold", "pred", "compare", "tol", "same"),
    [
        ([(1,), (2,)], [(2,), (1,)], "set", 1e-6, True),
        ([(1,), (1,), (2,)], [(2,), (1,)], "set", 1e-6, True),
        ([(1,), (1,), (2,)], [(2,), (1,)], "multiset", 1e-6, False),
        ([(1,), (2,), (1,)], [(1,), (1,), (2,)], "multiset", 1e-6, True),
        ([(1,), (2,)], [(2,), (1,)], "ordered", 1e-6, False),
        ([(1, "a")], [(1.0, "a")], "ordered", 0.0, True),  # int 1 == float 1.0
        ([(0.3,)], [(0.1 + 0.2,)], "set", 1e-6, True),  # BIRD's set() says no
        ([(0.3,)], [(0.1 + 0.2,)], "set", 0.0, False),
        ([(1000.0,)], [(1000.5,)], "set", 1e-3, True),  # relative
        ([(0.0,)], [(1e-7,)], "set", 1e-6, True),  # absolute near 0
        ([(1.0,)], [(1.1,)], "set", 1e-6, False),
        ([("1",)], [(1,)], "set", 1e-6, False),  # text is not a number
        ([(None,)], [(0,)], "set", 1e-6, False),
        ([(b"\x00",)], [("\x00",)], "set", 1e-6, False),
        ([(1, 2)], [(1,)], "set", 1e-6, False),
        ([(0.5, "b"), (1.25, "a")], [(1.2500001, "a"), (0.5000001, "b")], "multiset", 1e-6, True),
        ([], [], "ordered", 0.0, True),
    ],
)
def test_rows_compare_by_value(gold: list[Any], pred: list[Any], compare: Any, tol: float, same: bool) -> None:
    assert rows_match(gold, pred, compare, tol) is same


def test_column_names_are_never_compared() -> None:
    assert run("SELECT x AS anything_else FROM t")[1] == "match"


@pytest.mark.parametrize(
    ("completion", "sql"),
    [
        ("```sql\nSELECT 1\n```", "SELECT 1\n"),
        ("```SQLite\nSELECT 1\n```", "SELECT 1\n"),
        ("<think>```sql\nSELECT 1\n```</think>no block here", None),
        ("```sql\nSELECT 1\n```\n```python\nprint(1)\n```", "SELECT 1\n"),
        ("```sql\nSELECT 1\n```\nor\n```sql\nSELECT 2\n```", "SELECT 2\n"),
        ("```sql\n   \n```", None),
        ("SELECT 1", None),
        ("<think>unfinished", None),
    ],
)
def test_the_query_is_the_last_sql_block_after_the_reasoning(completion: str, sql: str | None) -> None:
    assert extract_sql(completion) == sql


PEER_CASES = [json.loads(line) for line in PEERS.read_text().splitlines()]


@pytest.mark.parametrize("case", PEER_CASES, ids=[f"{c['peer']}:{c['case']}" for c in PEER_CASES])
def test_the_peers_cases_score_as_they_do_or_as_documented(case: dict[str, Any]) -> None:
    """Each peer test case scored by our component. Where a row says `differs`, our verdict is a deliberate
    departure (the row says why); otherwise our score is the peer's reward."""
    spec = SqlSpec(schema_sql=case["schema_sql"], gold_sql=case["gold_sql"])
    item = ScoreItem(completion=case["completion"], sql=spec)
    prepared = component().prepare(item, spec)
    result = prepared.run() if isinstance(prepared, SqlTask) else prepared
    assert result.verdict == case["verdict"]
    if case["differs"] is None:
        assert result.score == case["peer_reward"]


def component(**settings: Any) -> SqlComponent:
    metrics = Metrics()  # a pool never started: these tests run the tasks themselves
    parts = {"math_workers": MathWorkers(WorkerPool(1, "unused:run"), metrics)}
    return SqlComponent(Resources(VerifierSettings(**settings), metrics, parts))


def test_sql_is_a_pooled_primary_component_and_a_missing_block_never_reaches_a_worker() -> None:
    assert POOLED["sql"] is SqlComponent and SqlSpec.role == "primary"
    spec = SqlSpec(schema_sql=SCHEMA, gold_sql="SELECT 1")
    result = component().prepare(ScoreItem(completion="SELECT 1", sql=spec), spec)
    assert not isinstance(result, SqlTask) and (result.score, result.verdict) == (0.0, "no_sql")
    task = SqlTask(gold_sql="x", pred_sql="y", timeout_s=5)
    assert component().timeout_s(task) == 25  # the backstop: the schema, the gold and the query, and 10 s to spare
    # The pool killed a worker an interrupt did not stop, perhaps before the model's query ran: not judged.
    stopped = component().timed_out(task, 25)
    assert (stopped.score, stopped.verdict) == (None, "worker_crashed") and stopped.verdict in SqlSpec.null_verdicts


@pytest.mark.parametrize(
    "fields",
    [
        {"gold_sql": "SELECT 1"},
        {"gold_sql": "SELECT 1", "schema_sql": "", "db": "bird"},
        {"gold_sql": "SELECT 1", "schema_sql": "x" * 1_000_001},
        {"gold_sql": "S" * 10_001, "schema_sql": ""},
        {"gold_sql": "SELECT 1", "schema_sql": "", "timeout_s": 31},
        {"gold_sql": "SELECT 1", "schema_sql": "", "float_tol": 2},
        {"gold_sql": "SELECT 1", "schema_sql": "", "compare": "bag"},
        {"gold_sql": "SELECT 1", "schema_sql": "", "executable_bonus": 1},
        {"gold_sql": "SELECT 1", "schema_sql": "", "executable_bonus": -0.1},
        {"gold_sql": "SELECT 1", "schema_sql": "", "executable_bonus": "0.1"},
        {"gold_sql": "SELECT 1", "schema_sql": "", "executable_bonus": True},
        {"gold_sql": "SELECT 1", "db": "../etc/passwd"},
    ],
)
def test_a_bad_spec_is_refused(fields: dict[str, Any]) -> None:
    with pytest.raises(ValidationError):
        SqlSpec.model_validate(fields)


def database_file(tmp_path: Path) -> Path:
    path = tmp_path / "bird.sqlite"
    with sqlite3.connect(path) as connection:
        connection.executescript(SCHEMA)
    connection.close()
    return path


def test_a_named_database_runs_from_its_file_and_an_unknown_name_is_refused_naming_the_field(tmp_path: Path) -> None:
    path = database_file(tmp_path)
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    settings: dict[str, Any] = {"sql_databases": {"bird": {"path": str(path), "sha256": digest}}}
    check_sql_databases(VerifierSettings(**settings))
    spec = SqlSpec(db="bird", gold_sql="SELECT y FROM t WHERE x = 2")
    item = ScoreItem(completion="```sql\nSELECT 'b'\n```", sql=spec)
    task = component(**settings).prepare(item, spec)
    assert isinstance(task, SqlTask) and task.run().verdict == "match"
    unknown = ScoreItem(completion="x", sql=SqlSpec(db="secret_name", gold_sql="SELECT 1"))
    problem = item_problem(unknown, VerifierSettings(**settings))
    assert problem is not None and problem[0] == "sql.db" and "secret_name" not in problem[1]


def test_the_service_refuses_to_start_on_a_database_that_is_not_the_pinned_file(tmp_path: Path) -> None:
    path = database_file(tmp_path)
    settings = VerifierSettings(sql_databases={"bird": {"path": str(path), "sha256": "0" * 64}})
    with pytest.raises(RuntimeError, match="does not have the sha256"):
        check_sql_databases(settings)
    missing = VerifierSettings(sql_databases={"bird": {"path": str(tmp_path / "none"), "sha256": "0" * 64}})
    with pytest.raises(RuntimeError, match="cannot be read"):
        check_sql_databases(missing)


def test_gold_rows_are_cached_per_worker() -> None:
    from verifier_service.scoring import sql

    schema = SCHEMA + "-- cache test"
    sql._GOLD.pop((schema, "SELECT x FROM t"), None)
    run("SELECT 1", schema_sql=schema)
    assert sql._GOLD[(schema, "SELECT x FROM t")] == [(1,), (2,), (3,), (3,)]


@pytest.mark.parametrize("schema", ["", "-- nothing", "CREATE TABLE t (x);"])
def test_an_empty_database_serves_queries_that_need_no_table(schema: str) -> None:
    for _ in range(2):  # built, then from the worker's cache
        assert run("SELECT 1 + 1", gold="SELECT 2", schema_sql=schema)[:2] == (1.0, "match")


def test_every_item_of_a_schema_gets_the_same_fresh_copy_the_first_included() -> None:
    """A schema is built once per worker and each item queries its own copy: what is outside the main database (a
    temp table) is in no copy, for the first item as for the later ones."""
    schema = "CREATE TEMP TABLE scratch (a); INSERT INTO scratch VALUES (1); CREATE TABLE kept (a); " \
             "INSERT INTO kept VALUES (2);"  # fmt: skip
    for _ in range(2):
        assert run("SELECT a FROM scratch", gold="SELECT a FROM kept", schema_sql=schema)[1] == "pred_error"
        assert run("SELECT 2", gold="SELECT a FROM kept", schema_sql=schema)[1] == "match"


def test_built_schemas_are_kept_within_a_byte_budget(monkeypatch: pytest.MonkeyPatch) -> None:
    """A worker keeps the databases it built for reuse, but at most IMAGE_CACHE_BYTES of them: the oldest go first,
    and an image larger than the budget is used and not kept (32 images of a 256 MB schema would be 8 GB)."""
    monkeypatch.setattr(sql, "_IMAGES", type(sql._IMAGES)())
    monkeypatch.setattr(sql, "IMAGE_CACHE_BYTES", 200_000)

    def run(schema: str) -> str:
        return (
            SqlTask(schema_sql=schema, gold_sql="SELECT count(*) FROM t", pred_sql="SELECT count(*) FROM t")
            .run()
            .verdict
        )

    small = [f"CREATE TABLE t (a); INSERT INTO t VALUES ({i});" for i in range(3)]
    big = "CREATE TABLE t (a); INSERT INTO t VALUES (zeroblob(300000));"
    assert [run(schema) for schema in small] == ["match"] * 3
    assert list(sql._IMAGES) == small
    assert run(big) == "match" and big not in sql._IMAGES  # used once, not kept
    rows = ", ".join("(zeroblob(60000))" for _ in range(1))
    medium = [f"CREATE TABLE t (a); INSERT INTO t VALUES {rows}; -- {i}" for i in range(4)]
    for schema in medium:
        assert run(schema) == "match"
    assert sum(map(len, sql._IMAGES.values())) <= 200_000 and medium[-1] in sql._IMAGES and small[0] not in sql._IMAGES
