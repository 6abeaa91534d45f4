"""The trainer side of `sql`: BIRD and Spider rows become prompts and `sql` specs (trainer_client/data.py with the
`bird` shape of trainer_client/domains.py), the sql reward reads each row's spec from the spec column and sends it
(judged here by the real SqlTask, in process), and the trainer routes take an `{"sql": {...}}` label as the item's
specs."""

from __future__ import annotations

import hashlib
import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from tests.client.fakes import FakeVerifier
from tests.client.test_rewards import call, make_reward
from trainer_client.data import (
    SQL_SYSTEM_PROMPT,
    Columns,
    database_schemas,
    load_prompts,
    system_prompt_for,
    to_row,
)
from trainer_client.domains import SPEC_COLUMN, detect_shape
from verifier_service.compat_mapping import CompatConfig, score_item
from verifier_service.schema import ItemResult, ScoreItem
from verifier_service.scoring.sql import SqlTask, extract_sql

SCHEMA = "CREATE TABLE singer (name TEXT, age INTEGER); INSERT INTO singer VALUES ('Ann', 30), ('Bo', 41);"
# Rows as the datasets ship them (BIRD dev.json; Spider train_spider.json, less its token lists).
BIRD = {
    "question_id": 0,
    "db_id": "california_schools",
    "question": "What is the highest eligible free rate for K-12 students in the schools in Alameda County?",
    "evidence": "Eligible free rate for K-12 = `Free Meal Count (K-12)` / `Enrollment (K-12)`",
    "SQL": "SELECT `Free Meal Count (K-12)` / `Enrollment (K-12)` FROM frpm WHERE `County Name` = 'Alameda' "
    "ORDER BY (CAST(`Free Meal Count (K-12)` AS REAL) / `Enrollment (K-12)`) DESC LIMIT 1",
    "difficulty": "simple",
}
SPIDER = {"db_id": "concert_singer", "query": "SELECT count(*) FROM singer", "question": "How many singers do we have?"}


def test_a_bird_row_names_its_database_and_keeps_its_evidence_in_the_prompt() -> None:
    assert detect_shape(list(BIRD)) == "bird"
    row = to_row(BIRD, columns=Columns(), components=("sql",), system_prompt=system_prompt_for(["sql"]), shape="bird")
    assert json.loads(row[SPEC_COLUMN]) == {"sql": {"gold_sql": BIRD["SQL"], "db": "california_schools"}}
    system, user = row["prompt"]
    assert system == {"role": "system", "content": SQL_SYSTEM_PROMPT}
    assert user["content"] == f"{BIRD['question']}\n\nEvidence: {BIRD['evidence']}"


def test_a_spider_row_with_its_schema_runs_on_that_schema_shown_in_the_prompt() -> None:
    spider = {**SPIDER, "schema": SCHEMA}
    row = to_row(spider, columns=Columns(), components=("sql", "format"), system_prompt="", shape="bird")
    assert json.loads(row[SPEC_COLUMN]) == {"sql": {"gold_sql": SPIDER["query"], "schema_sql": SCHEMA}}
    assert row["prompt"] == [{"role": "user", "content": f"{SPIDER['question']}\n\nSchema:\n{SCHEMA}"}]


def run_sql(item: ScoreItem) -> ItemResult:
    """The verifier's judgement of an sql item, in process (the worker's own task, no pool)."""
    assert item.sql is not None and item.sql.schema_sql is not None
    pred = extract_sql(item.completion) or ""
    task = SqlTask(gold_sql=item.sql.gold_sql, pred_sql=pred, schema_sql=item.sql.schema_sql, compare=item.sql.compare)
    result = task.run()
    return ItemResult(id=item.id, reward=result.score, status="ok", components={"sql": result})


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_the_sql_reward_sends_each_rows_spec_with_the_rewards_options(mode: str) -> None:
    fake = FakeVerifier(rule=run_sql)
    reward = make_reward(mode, fake, "sql", compare="multiset", spec_column=SPEC_COLUMN)
    spec = json.dumps({"sql": {"gold_sql": "SELECT name FROM singer WHERE age > 35", "schema_sql": SCHEMA}})
    completions = ["```sql\nSELECT name FROM singer WHERE age >= 41\n```", "```sql\nSELECT name FROM singer\n```"]
    assert call(reward, completions=[*completions, "x"], spec=[spec, spec, None]) == [1.0, 0.0, None]
    [first, *_] = fake.score_bodies[-1]["items"]
    assert first["sql"]["compare"] == "multiset" and first["sql"]["schema_sql"] == SCHEMA


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_malformed_spec_in_the_dataset_names_the_column_and_row_not_the_value(mode: str) -> None:
    reward = make_reward(mode, FakeVerifier(rule=run_sql), "sql", spec_column=SPEC_COLUMN)
    good = json.dumps({"sql": {"gold_sql": "SELECT 1", "schema_sql": SCHEMA}})
    with pytest.raises(ValueError, match=r"row of completion 1") as caught:
        call(reward, completions=["a", "b"], spec=[good, "{S3cr3t"])
    assert "S3cr3t" not in str(caught.value)


@pytest.mark.parametrize("as_json", [False, True])
def test_a_trainer_route_label_can_be_sql_specs(as_json: bool) -> None:
    label: Any = {"sql": {"schema_sql": SCHEMA, "gold_sql": "SELECT 1"}}
    item = score_item("```sql\nSELECT 1\n```", json.dumps(label) if as_json else label, CompatConfig(), "labels.0")
    assert item.requested() == ["sql"] and item.sql is not None and item.sql.gold_sql == "SELECT 1"
    assert run_sql(item).reward == 1.0


def make_database(path: Path, statements: str) -> str:
    """A SQLite file made by `statements`; returns its SHA-256 (to show nothing wrote to it)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    connection = sqlite3.connect(path)
    connection.executescript(statements)
    connection.commit()
    connection.close()
    return hashlib.sha256(path.read_bytes()).hexdigest()


FRPM = "CREATE TABLE frpm (`County Name` TEXT, `Enrollment (K-12)` REAL, `Free Meal Count (K-12)` REAL)"


def test_a_bird_row_without_a_schema_is_shown_its_databases_from_sql_databases(tmp_path: Path) -> None:
    """BIRD's rows name their database and carry no schema: with --sql_databases the prompt gets the database's
    CREATE statements (BIRD's dev_databases/NAME/NAME.sqlite layout), read without writing to the file."""
    databases = tmp_path / "dev_databases"
    digest = make_database(databases / "california_schools" / "california_schools.sqlite", f"{FRPM};")
    make_database(databases / "concert_singer.sqlite", SCHEMA)  # Spider's files may also lie flat
    data = tmp_path / "bird.jsonl"
    data.write_text(json.dumps(BIRD) + "\n" + json.dumps(SPIDER) + "\n")
    rows = load_prompts(str(data), components=["sql"], system_prompt="", sql_databases=str(databases))["train"]
    assert rows[0]["prompt"][-1]["content"] == (
        f"{BIRD['question']}\n\nEvidence: {BIRD['evidence']}\n\nSchema:\n{FRPM};"
    )
    assert rows[1]["prompt"][-1]["content"].endswith("Schema:\nCREATE TABLE singer (name TEXT, age INTEGER);")
    assert json.loads(rows[0][SPEC_COLUMN]) == {"sql": {"gold_sql": BIRD["SQL"], "db": "california_schools"}}
    path = databases / "california_schools" / "california_schools.sqlite"
    assert hashlib.sha256(path.read_bytes()).hexdigest() == digest
    without = load_prompts(str(data), components=["sql"], system_prompt="")["train"]
    assert "Schema:" not in without[0]["prompt"][-1]["content"]  # as before: the option is what adds it


def test_sql_databases_must_hold_every_database_the_rows_name(tmp_path: Path) -> None:
    make_database(tmp_path / "dbs" / "concert_singer.db", SCHEMA)
    data = tmp_path / "bird.jsonl"
    data.write_text(json.dumps(BIRD) + "\n" + json.dumps(SPIDER) + "\n")
    with pytest.raises(ValueError, match="has no database 'california_schools' that rows name"):
        load_prompts(str(data), components=["sql"], system_prompt="", sql_databases=str(tmp_path / "dbs"))
    make_database(
        tmp_path / "odd" / "odd.sqlite",
        "CREATE TABLE sqlite3_cache (k TEXT); CREATE TRIGGER t AFTER INSERT ON sqlite3_cache BEGIN SELECT 1; END;",
    )
    # a table whose name LIKE 'sqlite_%' would match (its _ is any character) is the user's; a trigger is no schema
    assert database_schemas(tmp_path / "odd") == {"odd": "CREATE TABLE sqlite3_cache (k TEXT);"}
    (tmp_path / "broken.sqlite").write_bytes(b"not a database" * 100)
    with pytest.raises(ValueError, match=r"broken\.sqlite is not a readable SQLite database"):
        database_schemas(tmp_path)
