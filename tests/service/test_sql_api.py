"""The `sql` component through a real server: a batch mixing every outcome gets each its own result in order, a
write to a named database changes nothing, the server answers while a runaway query is being interrupted, bad
options and unknown database names are 422s that name the field, and a database that is not its pinned file stops
the server from starting."""

from __future__ import annotations

import hashlib
import json
import sqlite3
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import Server, running_server

SCHEMA = "CREATE TABLE t (x INTEGER, y TEXT); INSERT INTO t VALUES (1, 'a'), (2, 'b'), (3, 'c');"
FOREVER = "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT count(*) FROM c"


def sql(query: str) -> str:
    return f"<think>Look at t.</think>Here:\n```sql\n{query}\n```"


@pytest.fixture(scope="module")
def database(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("sql") / "shop.sqlite"
    with sqlite3.connect(path) as connection:
        connection.executescript(SCHEMA)
    connection.close()
    return path


@pytest.fixture(scope="module")
def sql_server(tmp_path_factory: pytest.TempPathFactory, database: Path) -> Iterator[Server]:
    pinned = {"shop": {"path": str(database), "sha256": hashlib.sha256(database.read_bytes()).hexdigest()}}
    settings: dict[str, Any] = {"math_workers": 2, "code_enabled": "false", "sql_databases": json.dumps(pinned)}
    with running_server(tmp_path_factory.mktemp("sql-server"), **settings) as server:
        yield server


def score(server: Server, items: list[dict[str, Any]]) -> httpx.Response:
    return httpx.post(f"{server.url}/v1/score", json={"items": items}, timeout=60)


def test_a_mixed_batch_gets_each_item_its_own_result_in_order(sql_server: Server, database: Path) -> None:
    on_schema = {"schema_sql": SCHEMA, "gold_sql": "SELECT x FROM t WHERE x > 1", "timeout_s": 1}
    on_file = {"db": "shop", "gold_sql": "SELECT count(*) FROM t", "timeout_s": 1}
    before = database.read_bytes()
    cases = [
        (sql("SELECT x FROM t WHERE x >= 2 ORDER BY x DESC"), on_schema, 1.0, "match"),
        (sql("SELECT x FROM t"), on_schema, 0.0, "mismatch"),
        (sql("DELETE FROM t"), on_file, 0.0, "write_attempt"),
        (sql("DROP TABLE t"), on_schema, 0.0, "write_attempt"),
        (sql(FOREVER), on_schema, 0.0, "timeout"),
        (sql("SELEC x FROM t"), on_schema, 0.0, "pred_error"),
        ("SELECT x FROM t", on_schema, 0.0, "no_sql"),
        (sql("SELECT 1"), {**on_schema, "gold_sql": "SELECT nope FROM t"}, None, "gold_error"),
        (sql("SELECT 3"), on_file, 1.0, "match"),  # the DELETE above removed nothing
    ]
    items = [{"id": str(i), "completion": text, "sql": spec} for i, (text, spec, _, _) in enumerate(cases)]
    response = score(sql_server, items)
    assert response.status_code == 200, response.text
    results = response.json()["results"]
    assert [r["id"] for r in results] == [str(i) for i in range(len(cases))]
    got = [(r["components"]["sql"]["score"], r["components"]["sql"]["verdict"]) for r in results]
    assert got == [(expected, verdict) for _, _, expected, verdict in cases]
    assert [r["reward"] for r in results] == [expected for _, _, expected, _ in cases]
    assert database.read_bytes() == before


def test_the_server_answers_while_a_runaway_query_runs_to_its_interrupt(sql_server: Server) -> None:
    item = {"completion": sql(FOREVER), "sql": {"schema_sql": SCHEMA, "gold_sql": "SELECT 1", "timeout_s": 3}}
    answers: list[httpx.Response] = []
    runaway = threading.Thread(target=lambda: answers.append(score(sql_server, [item])))
    runaway.start()
    health: list[int] = []
    while runaway.is_alive() and len(health) < 5:
        health.append(httpx.get(f"{sql_server.url}/healthz", timeout=10).status_code)
    answered_meanwhile = not answers  # the runaway request had not come back when /healthz answered
    runaway.join(timeout=60)
    assert health and set(health) == {200} and answered_meanwhile
    [result] = answers[0].json()["results"]
    assert (result["components"]["sql"]["score"], result["components"]["sql"]["verdict"]) == (0.0, "timeout")


@pytest.mark.parametrize(
    ("spec", "field"),
    [
        ({"db": "not_listed_here", "gold_sql": "SELECT 1"}, "items.0.sql.db"),
        ({"db": "shop", "schema_sql": SCHEMA, "gold_sql": "SELECT 1"}, "items.0.sql"),
        ({"gold_sql": "SELECT 1"}, "items.0.sql"),
        ({"schema_sql": SCHEMA, "gold_sql": "SELECT 1", "timeout_s": 999}, "items.0.sql.timeout_s"),
    ],
)
def test_bad_sql_options_are_a_422_naming_the_field_never_the_value(
    sql_server: Server, spec: dict[str, Any], field: str
) -> None:
    response = score(sql_server, [{"completion": sql("SELECT 1"), "sql": spec}])
    assert response.status_code == 422
    errors = response.json()["errors"]
    assert [e["loc"] for e in errors] == [field]
    assert "not_listed_here" not in response.text and "999" not in response.text


def test_a_database_that_is_not_its_pinned_file_stops_the_server_starting(tmp_path: Path, database: Path) -> None:
    pinned = {"shop": {"path": str(database), "sha256": "0" * 64}}
    settings: dict[str, Any] = {"code_enabled": "false", "math_workers": 1, "sql_databases": json.dumps(pinned)}
    with pytest.raises(RuntimeError, match="does not have the sha256"), running_server(tmp_path, **settings):
        pass


@pytest.mark.parametrize("as_json", [False, True])
def test_a_trainer_route_takes_an_sql_label(sql_server: Server, as_json: bool) -> None:
    """slime's body, its label the item's specs (a JSON string as datasets store it, or the object)."""
    label: Any = {"sql": {"db": "shop", "gold_sql": "SELECT y FROM t WHERE x = 3"}}
    body = {"prompt": "q", "response": sql("SELECT 'c'"), "label": json.dumps(label) if as_json else label}
    answer = httpx.post(f"{sql_server.url}/v1/compat/slime", json=body, timeout=60)
    assert answer.status_code == 200, answer.text
    assert answer.json()["reward"] == 1.0 and answer.json()["verifier_judged"] == 1.0  # extra keys: the URL's (math)
    wrong = httpx.post(f"{sql_server.url}/v1/compat/slime", json={**body, "response": sql("DELETE FROM t")}, timeout=60)
    assert wrong.json()["reward"] == 0.0
