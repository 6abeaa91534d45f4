"""`python -m trainer_client.train --check_data true`: what the training script would read from a dataset, checked
before anything trains. It says which column feeds what (the prompt, each correctness component's gold answer, the
code tests, the option texts) and has the verifier parse every gold answer, so a wrong `--solution_column` or golds
it cannot parse (rows that would get no reward, `gold_unparseable` or `bad_gold`) show up in a minute, not after
hours of generation.

A gold is checked by scoring a fixed answer against it (`PROBES`): whether that answer is right does not matter,
only whether the verifier could judge it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from trainer_client.client import VerifierClient
from trainer_client.data import Columns
from trainer_client.domains import SPEC_COLUMN, parse_specs
from trainer_client.inputs import GOLD_FIELDS, GOLD_READERS, code_spec
from trainer_client.options import ROW_FIELDS, row_fields
from verifier_service.schema import ScoreItem

# A completion each gold-reading component finds an answer in (an answer it cannot find would stop it before the gold).
PROBES = {"math": "\\boxed{1}", "choice": "\\boxed{A}", "answer": "<answer>1</answer>", "json_schema": "{}"}
SHOWN_ROWS = 10  # row numbers listed per problem
# How the dataset's preparation (`trainer_client.data.to_row`) reads each column.
READS = {
    "math": "math's gold: a GSM8K solution's '#### N' number, else the text (a MATH solution's \\boxed{} counts)",
    "choice": "choice's gold: a letter, a list of letters or a 0-based option index",
    "answer": "answer's gold: the answer, or a list of aliases",
    "json_schema": "json_schema's schema: a JSON Schema, or its JSON string",
}


@dataclass
class GoldCheck:
    """What became of one component's gold answers: how many rows had one, the verdicts of those the verifier could
    not judge, and the first rows of each problem."""

    component: str
    rows: int = 0
    without: list[int] = field(default_factory=list)  # rows with no gold: the reward skips them (None)
    refused: list[int] = field(default_factory=list)  # rows whose gold the wire schema refuses
    unjudged: dict[str, list[int]] = field(default_factory=dict)  # verdict -> rows the verifier could not judge

    @property
    def unusable(self) -> int:
        return len(self.refused) + sum(len(rows) for rows in self.unjudged.values())

    def lines(self) -> list[str]:
        usable = self.rows - len(self.without) - self.unusable
        out = [f"{self.component} gold answers: {usable} of {self.rows} rows usable"]
        problems = [("without a gold (the reward skips them)", self.without),
                    ("with a gold the wire schema refuses", self.refused)]  # fmt: skip
        for verdict, rows in self.unjudged.items():
            problems.append((f"with a gold the verifier cannot judge ({verdict})", rows))
        for what, rows in problems:
            if rows:
                out.append(f"  {len(rows)} {what}: rows {row_list(rows)}")
        return out


def row_list(rows: Sequence[int]) -> str:
    """The first row numbers, and how many more.

    >>> row_list(list(range(12)))
    '0, 1, 2, 3, 4, 5, 6, 7, 8, 9 and 2 more'
    """
    shown = ", ".join(str(row) for row in rows[:SHOWN_ROWS])
    return shown + (f" and {len(rows) - SHOWN_ROWS} more" if len(rows) > SHOWN_ROWS else "")


def column_map(columns: Columns, components: Sequence[str], shape: str | None = None) -> list[str]:
    """Which dataset column feeds what, for the components a run sends.

    >>> for line in column_map(Columns("question", "answer"), ["math", "format"]):
    ...     print(line[:65])
      prompt   <- column 'question' (a text gets the system prompt; a
      solution <- column 'answer', read as math's gold: a GSM8K solut
    """
    out = [f"  prompt   <- column {columns.prompt!r} (a text gets the system prompt; a chat is kept as it is)"]
    gold = next((name for name in components if name in READS), None)
    if gold is not None:
        out.append(f"  solution <- column {columns.solution!r}, read as {READS[gold]}")
    if "code" in components:
        out.append(f"  tests    <- column {columns.tests!r}, the code tests")
    if "choice" in components and columns.options:
        out.append(f"  options  <- column {columns.options!r}, the option texts")
    sources = ([f"column {columns.spec!r}"] if columns.spec else []) + ([shape] if shape else [])
    if sources:
        out.append(f"  spec     <- {' and '.join(sources)}: per-row component specs (a row's spec wins)")
    return out


def check_golds(
    client: VerifierClient, component: str, rows: Sequence[Mapping[str, Any]], options: Mapping[str, Any]
) -> GoldCheck:
    """Have the verifier parse the gold of `component` in every row (the prepared rows: `solution`, `options`)."""
    check = GoldCheck(component, rows=len(rows))
    items: list[ScoreItem] = []
    numbers: list[int] = []
    for number, row in enumerate(rows):
        fields = parse_specs(row.get(SPEC_COLUMN)).get(component)  # a row's spec wins over its gold column
        if fields is None:
            try:
                gold = GOLD_READERS[component](row.get("solution"))
            except ValueError:  # no gold at all (a boolean, an infinity)
                check.refused.append(number)
                continue
            if gold is None:
                check.without.append(number)
                continue
            texts = {"options": row["options"]} if component == "choice" and row.get("options") else {}
            fields = {GOLD_FIELDS.get(component, "gold"): gold, **texts}
        try:
            item = ScoreItem.model_validate(
                {"id": str(number), "completion": PROBES[component], component: {**options, **fields}}
            )
        except ValidationError:
            check.refused.append(number)
            continue
        items.append(item)
        numbers.append(number)
    for number, result in zip(numbers, client.score(items) if items else [], strict=True):
        part = result.components[component]
        if part.score is None:
            check.unjudged.setdefault(str(part.verdict), []).append(number)
    return check


def check_tests(rows: Sequence[Mapping[str, Any]], options: Mapping[str, Any]) -> tuple[list[str], int]:
    """The code tests of every row, checked against the wire schema (not run): the report, and how many rows have
    tests the verifier would refuse."""
    without: list[int] = []
    malformed: dict[str, list[int]] = {}  # the first words of the error -> rows
    for number, row in enumerate(rows):
        try:
            spec = code_spec(row.get("tests"), options=options)
        except ValueError as exc:
            malformed.setdefault(str(exc).split(":", 1)[0], []).append(number)
            continue
        if spec is None:
            without.append(number)
    unusable = sum(len(numbers) for numbers in malformed.values())
    out = [f"code tests: {len(rows) - len(without) - unusable} of {len(rows)} rows usable"]
    if without:
        out.append(f"  {len(without)} without tests (the reward skips them): rows {row_list(without)}")
    out += [f"  {len(numbers)} {reason}: rows {row_list(numbers)}" for reason, numbers in malformed.items()]
    return out, unusable


def check_specs(
    component: str, rows: Sequence[Mapping[str, Any]], options: Mapping[str, Any]
) -> tuple[list[str], int] | None:
    """The per-row specs of a component that no gold probe checks (instructions, sql, ..., code from a spec),
    checked against the wire schema (not scored): the report and how many rows cannot be used; None when no row has
    one and the component does not need one. A dataset none of whose rows maps to a spec the component needs is
    unusable as a whole."""
    specs = [parse_specs(row.get(SPEC_COLUMN)).get(component) for row in rows]
    needs = component not in ROW_FIELDS and bool(row_fields(component, options))
    if all(spec is None for spec in specs) and not needs:
        return None
    without = [number for number, spec in enumerate(specs) if spec is None]
    refused = []
    for number, spec in enumerate(specs):
        if spec is not None:
            try:
                ScoreItem.model_validate({"completion": "", component: {**options, **spec}})
            except ValidationError:
                refused.append(number)
    usable = len(rows) - len(without) - len(refused)
    out = [f"{component} specs: {usable} of {len(rows)} rows usable"]
    if without:
        out.append(f"  {len(without)} map to no {component} spec (the reward skips them): rows {row_list(without)}")
    if refused:
        out.append(f"  {len(refused)} with a spec the wire schema refuses: rows {row_list(refused)}")
    return out, len(refused) + (len(without) if usable == 0 and needs else 0)


def check_data(
    client: VerifierClient,
    rows: Sequence[Mapping[str, Any]],
    columns: Columns,
    sent: Sequence[str],
    options: Mapping[str, Mapping[str, Any]],
    where: str,
    shape: str | None = None,
) -> tuple[list[str], int]:
    """The report on the prepared `rows` for the components a run sends, and how many rows have a gold answer,
    tests or a spec the verifier cannot use (no reward for them: each costs its generation). `shape`: the dataset
    shape the rows' specs were mapped from, for the report."""
    report = [f"data check of {where}: {len(rows)} rows", *column_map(columns, sent, shape)]
    unusable = 0
    for component in (name for name in sent if name in PROBES):
        gold = check_golds(client, component, rows, options.get(component, {}))
        report += gold.lines()
        unusable += gold.unusable
    with_code_specs = any(parse_specs(row.get(SPEC_COLUMN)).get("code") is not None for row in rows)
    if "code" in sent and not with_code_specs:
        tests, malformed = check_tests(rows, options.get("code", {}))
        report += tests
        unusable += malformed
    for component in (name for name in sent if name not in PROBES):
        checked = check_specs(component, rows, options.get(component, {}))
        if checked is not None:
            report += checked[0]
            unusable += checked[1]
    return report, unusable
