"""`reward-verifier score FILE.jsonl`: score a JSONL file of items with no server, in order, in bounded memory.

Each non-blank input line is one item of the wire format (a `ScoreItem`); each gives one output line, an
`ItemResult` in the same order. A line that is not a valid item gives a result with `status: "error"`, no components
and an `error` naming the line and the field (never its value); so does a line the verifier fails on (an internal
error, logged): whatever a line holds, it costs that line, and the other lines are scored all the same.
"""

from __future__ import annotations

import json
import logging
import os
import stat
import sys
import time
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import IO, Any

from pydantic import ValidationError

from verifier_service.inprocess import AsyncVerifier
from verifier_service.problems import summarize
from verifier_service.runtime import item_problem
from verifier_service.schema import ItemResult, ScoreItem
from verifier_service.settings import VerifierSettings

log = logging.getLogger("verifier_service.score_file")
# A line that holds no `completion` and is not an item at all: most likely a dataset row piped in as it is.
DATASET_ROW_HINT = (
    " (this line looks like a dataset row, not an item: an item is a completion to score and what to score it "
    'against, such as {"completion": "<the model\'s output>", "math": {"gold": "72"}}. To check a dataset\'s gold '
    "answers and which columns the training script reads, run `python -m trainer_client.train --check_data true "
    "--dataset_name FILE ...` (README, 'Check a dataset before training'))"
)
# `answer` is a component, not a dataset's answer column (GSM8K's holds a whole solution).
ANSWER_COLUMN_HINT = (
    ' (`answer` is the short-answer component, an object such as {"gold": "Paris"}, not a dataset\'s answer '
    'column: a GSM8K solution\'s final number goes in {"math": {"gold": "72"}})'
)


@dataclass
class Summary:
    """What the file held: statuses, verdicts per component, invalid lines, and the mean of the non-null rewards."""

    statuses: Counter[str] = field(default_factory=Counter)
    verdicts: Counter[tuple[str, str]] = field(default_factory=Counter)
    invalid: int = 0
    failed: int = 0  # valid items the verifier failed on (an internal error)
    reward_sum: float = 0.0
    rewarded: int = 0

    def add(self, result: ItemResult) -> None:
        self.statuses[result.status] += 1
        self.verdicts.update((name, part.verdict) for name, part in result.components.items())
        if result.reward is not None:
            self.reward_sum, self.rewarded = self.reward_sum + result.reward, self.rewarded + 1

    def lines(self) -> list[str]:
        total = sum(self.statuses.values())
        mean = f"{self.reward_sum / self.rewarded:.4g}" if self.rewarded else "n/a"
        failed = f", {self.failed} failed" if self.failed else ""
        out = [f"{total} items: {self.statuses['ok']} ok, {self.statuses['error']} error "
               f"({self.invalid} invalid lines{failed}); mean reward {mean}"]  # fmt: skip
        for component in sorted({name for name, _ in self.verdicts}):
            counts = sorted((-n, v) for (c, v), n in self.verdicts.items() if c == component)  # most first
            out.append(f"  {component}: " + ", ".join(f"{verdict} {-n}" for n, verdict in counts))
        return out


class Progress:
    """A progress line on stderr: redrawn in place on a terminal, else a line every 10 seconds."""

    def __init__(self, total: int | None, stream: IO[str], enabled: bool = True) -> None:
        self.total, self.stream, self.enabled = total, stream, enabled
        self.tty = stream.isatty()
        self.started = self.last = time.monotonic()
        self.done = 0

    def update(self, count: int) -> None:
        self.done += count
        now = time.monotonic()
        if self.enabled and (self.tty or now - self.last >= 10):
            self.last = now
            self.stream.write(("\r" if self.tty else "") + self.text() + ("" if self.tty else "\n"))
            self.stream.flush()

    def finish(self) -> None:
        if self.enabled:
            self.stream.write(("\r" if self.tty else "") + self.text() + "\n")

    def text(self) -> str:
        rate = self.done / max(time.monotonic() - self.started, 1e-9)
        if not self.total:
            return f"{self.done} items, {rate:.0f}/s"
        filled = round(30 * self.done / self.total)
        return f"[{'#' * filled}{'.' * (30 - filled)}] {self.done}/{self.total} items, {rate:.0f}/s"


@dataclass(frozen=True)
class Line:
    """One input line: the item, or why it is not one (and its id, if it has a readable one)."""

    number: int
    item: ScoreItem | None
    id: str | None = None
    error: str | None = None


def read_items(lines: Iterable[bytes], settings: VerifierSettings) -> Iterator[Line]:
    """Every non-blank line, as an item to score or as the reason it cannot be scored (bytes: a line that is not
    UTF-8 is an invalid line like any other, not the end of the run)."""
    for number, text in enumerate(lines, start=1):
        if not text.strip():
            continue
        try:
            line = read_line(number, text, settings)
        except Exception as exc:  # whatever a line holds, it costs that line, never the run
            log.warning("line %d could not be read (%s)", number, type(exc).__name__)
            log.debug("line %d could not be read", number, exc_info=True)
            line = Line(number, None, None, f"line {number}: could not be read as an item")
        yield line


def read_line(number: int, text: bytes, settings: VerifierSettings) -> Line:
    try:
        item = ScoreItem.model_validate_json(text)
    except ValidationError as exc:
        errors = exc.errors(include_input=False)
        decoded = _decoded(text)
        error = summarize(errors, ScoreItem, f"line {number}") + _hint(decoded, errors)
        found = decoded.get("id") if isinstance(decoded, dict) else None
        return Line(number, None, found if isinstance(found, str) and len(found) <= 256 else None, error)
    problem = item_problem(item, settings)
    if problem is None:
        return Line(number, item)
    return Line(number, None, item.id, f"line {number}.{problem[0]}: {problem[1]}")


def _decoded(text: bytes) -> Any:
    """The line as JSON, when the standard parser can read it (not nested past its recursion limit), else None."""
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        return None


def _hint(decoded: Any, errors: Iterable[Any]) -> str:
    """What a line that is not an item most likely is: a dataset row, or a dataset's answer column as `answer`."""
    if isinstance(decoded, dict) and "completion" not in decoded:
        return DATASET_ROW_HINT
    if any(tuple(e["loc"]) == ("answer",) and e["type"] == "model_type" for e in errors):
        return ANSWER_COLUMN_HINT
    return ""


async def score_lines(
    verifier: AsyncVerifier, lines: Iterable[bytes], out: IO[str], progress: Progress, chunk_size: int
) -> Summary:
    """Score the items of `lines` in chunks, writing one result line per item to `out` in order."""
    summary = Summary()
    chunk: list[Line] = []

    async def flush() -> None:
        scored = iter(await score_chunk(verifier, [line for line in chunk if line.item is not None]))
        for line in chunk:
            result = next(scored) if line.item is not None else line
            if isinstance(result, ItemResult):
                summary.add(result)
                out.write(result.model_dump_json() + "\n")
                continue
            summary.statuses["error"] += 1
            if line.item is None:
                summary.invalid += 1
            else:
                summary.failed += 1
            refused: dict[str, Any] = {
                "id": result.id,
                "reward": None,
                "status": "error",
                "components": {},
                "error": result.error,
            }
            out.write(json.dumps(refused) + "\n")
        out.flush()
        progress.update(len(chunk))
        chunk.clear()

    for line in read_items(lines, verifier.settings):
        chunk.append(line)
        if len(chunk) >= chunk_size:
            await flush()
    if chunk:
        await flush()
    progress.finish()
    return summary


async def score_chunk(verifier: AsyncVerifier, lines: list[Line]) -> list[ItemResult | Line]:
    """The result of each line's item, in order. When the verifier fails on the chunk as a whole (an item it cannot
    handle: a bug, logged), each item is scored on its own, and one it still fails on gets a `Line` with the error
    in its place: one item's fault costs that item, not its chunk."""
    if not lines:
        return []
    items = [line.item for line in lines if line.item is not None]
    try:
        return list(await verifier.score(items))
    except Exception as exc:
        log.warning("the verifier failed on a chunk of %d items (%s); scoring them one by one", len(items),
                    type(exc).__name__)  # fmt: skip
    return [await _score_one(verifier, line) for line in lines]


async def _score_one(verifier: AsyncVerifier, line: Line) -> ItemResult | Line:
    assert line.item is not None
    try:
        [result] = await verifier.score([line.item])
    except Exception as exc:
        log.warning("line %d: the verifier failed on this item (%s)", line.number, type(exc).__name__)
        log.debug("line %d: the verifier failed on this item", line.number, exc_info=True)
        error = f"line {line.number}: the verifier failed on this item (internal error: {type(exc).__name__})"
        return Line(line.number, None, line.item.id, error)
    return result


def count_lines(path: str) -> int | None:
    """The items in a regular file, for the progress bar; None for stdin, a pipe or a FIFO, which read only once."""
    if path == "-" or not stat.S_ISREG(os.stat(path).st_mode):
        return None
    with open(path, "rb") as f:
        return sum(1 for line in f if line.strip())


async def score_file(
    path: str, output: str, settings: VerifierSettings, *, chunk_size: int = 256, quiet: bool = False
) -> Summary:
    """Score the JSONL file `path` ("-": stdin) into `output` ("-": stdout); a summary goes to stderr."""
    if path != "-" and output != "-" and os.path.exists(output) and os.path.samefile(path, output):
        raise OSError(f"the output {output} is the input file: writing it would destroy the items")
    progress = Progress(count_lines(path), sys.stderr, enabled=not quiet)
    source = sys.stdin.buffer if path == "-" else open(path, "rb")  # noqa: SIM115
    try:
        async with AsyncVerifier(settings) as verifier:
            sink = sys.stdout if output == "-" else open(output, "w", encoding="utf-8")  # noqa: SIM115
            try:
                summary = await score_lines(verifier, source, sink, progress, chunk_size)
            finally:
                if sink is not sys.stdout:
                    sink.close()
    finally:
        if source is not sys.stdin.buffer:
            source.close()
    for line in summary.lines():
        print(line, file=sys.stderr)
    return summary
