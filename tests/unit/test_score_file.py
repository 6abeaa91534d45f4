"""`reward-verifier score`'s reading and scoring loop (verifier_service/score_file.py) over a verifier that fails on
one item: that item gets an error line in its place, the others are scored, in order."""

from __future__ import annotations

import asyncio
import io
import json
from collections.abc import Sequence
from typing import Any

from verifier_service.schema import ItemResult, ScoreItem
from verifier_service.score_file import Progress, score_lines
from verifier_service.settings import VerifierSettings


class FailingOn:
    """An `AsyncVerifier` stand-in: reward 1.0 for every item, but any call that holds the item `bad` raises, as a
    verifier bug on one degenerate item would."""

    def __init__(self, bad: str) -> None:
        self.bad = bad
        self.settings = VerifierSettings()
        self.calls: list[list[str | None]] = []

    async def score(self, items: Sequence[ScoreItem]) -> list[ItemResult]:
        self.calls.append([item.id for item in items])
        if any(item.id == self.bad for item in items):
            raise ValueError("Exceeds the limit (4300 digits) for integer string conversion")
        return [ItemResult(id=item.id, reward=1.0, status="ok", components={}) for item in items]


def run(verifier: Any, lines: list[bytes], chunk_size: int) -> tuple[list[dict[str, Any]], Any]:
    out = io.StringIO()
    progress = Progress(None, io.StringIO(), enabled=False)
    summary = asyncio.run(score_lines(verifier, lines, out, progress, chunk_size))
    return [json.loads(line) for line in out.getvalue().splitlines()], summary


def item(name: str) -> bytes:
    return json.dumps({"id": name, "completion": "4", "math": {"gold": "4"}}).encode()


def test_an_item_the_verifier_fails_on_gets_an_error_line_and_the_rest_are_scored() -> None:
    verifier = FailingOn("b")
    lines = [item("a"), b"{not json", item("b"), item("c"), item("d")]
    results, summary = run(verifier, lines, chunk_size=4)
    assert [r["id"] for r in results] == ["a", None, "b", "c", "d"]
    assert [r["reward"] for r in results] == [1.0, None, None, 1.0, 1.0]
    assert results[2] == {
        "id": "b",
        "reward": None,
        "status": "error",
        "components": {},
        "error": "line 3: the verifier failed on this item (internal error: ValueError)",
    }
    assert (summary.invalid, summary.failed) == (1, 1)
    # the first chunk failed whole, then went item by item; the next chunk was sent whole
    assert verifier.calls == [["a", "b", "c"], ["a"], ["b"], ["c"], ["d"]]
    assert summary.lines()[0] == "5 items: 3 ok, 2 error (1 invalid lines, 1 failed); mean reward 1"


GSM8K_ROW = {"question": "Tom has 3 apples and buys 4 more. How many?", "answer": "3 + 4 = 7\n#### 7"}


def test_a_dataset_row_piped_in_is_told_apart_from_an_item() -> None:
    """GSM8K's `answer` column is a whole solution; the `answer` component is an object: the error says which is which
    and where to check a dataset, and never repeats the row's text."""
    lines = [json.dumps(GSM8K_ROW).encode(), json.dumps({"completion": "7", "answer": GSM8K_ROW["answer"]}).encode()]
    results, summary = run(FailingOn("-"), lines, chunk_size=8)
    row, answer = (result["error"] for result in results)
    assert row.startswith("line 1.completion: Field required") and "looks like a dataset row, not an item" in row
    assert "--check_data true" in row
    assert answer.startswith("line 2.answer: Input should be an object (`answer` is the short-answer component")
    assert '{"math": {"gold": "72"}}' in answer
    assert not any(text in row + answer for text in ("Tom has", "#### 7", "3 + 4"))
    assert summary.invalid == 2
