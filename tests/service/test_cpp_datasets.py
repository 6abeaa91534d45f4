"""Competitive-programming rows end to end: open-r1 Codeforces and CodeContests rows (tests/data/contests) loaded as
the training script loads them (`load_prompts` on local files), and right and wrong C++ answers scored by the
training client's code reward through a real server on each sandbox backend, open-r1's generated checker included."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import Server
from tests.service.test_cpp_api import completion  # `service`: tests/service/conftest.py's server per backend
from trainer_client import VerifierReward
from trainer_client.data import load_prompts
from trainer_client.domains import SPEC_COLUMN

pytestmark = pytest.mark.timeout(300, func_only=True)

DATA = Path(__file__).parents[1] / "data" / "contests"
# <iostream>, not bits/stdc++.h: a compile quick enough for a loaded machine
SUM = "#include <iostream>\nint main() { long long a, b; std::cin >> a >> b; std::cout << a + b; }\n"
OVERFLOW = SUM.replace("a + b", "(a < 1000 ? a + b : a)")  # as if it overflowed: wrong on 10^9 + 10^9
SPLIT = '#include <cstdio>\nint main() { long long n; scanf("%lld", &n); printf("%lld 1\\n", n - 1); }\n'
ZERO_SPLIT = SPLIT.replace('"%lld 1\\n", n - 1', '"0 %lld\\n", n')  # sums to n, but 0 is not positive


def rewards(server: Server, name: str, sources: list[str]) -> list[float | None]:
    """Each prepared row of `name` answered by each source (TRL's call: one value per completion per column)."""
    rows = list(load_prompts(str(DATA / name), components=["code"])["train"])
    pairs = [(row, source) for row in rows for source in sources]
    reward = VerifierReward("code", base_url=server.url, spec_column=SPEC_COLUMN)
    return reward(
        prompts=[row["prompt"] for row, _ in pairs],
        completions=[completion(source) for _, source in pairs],
        **{SPEC_COLUMN: [row[SPEC_COLUMN] for row, _ in pairs]},
    )


def test_codeforces_rows_score_right_and_wrong_cpp_and_the_generated_checker_judges(service: Server) -> None:
    # rows kept: 9001A (a + b, official tests) and 9001B (any split of n, open-r1's generated checker)
    got = rewards(service, "codeforces.jsonl", [SUM, OVERFLOW, SPLIT, ZERO_SPLIT])
    a_plus_b, split = got[:4], got[4:]
    assert a_plus_b[:2] == [1.0, pytest.approx(2 / 3)]  # the overflow fails the 10^9 test
    assert a_plus_b[2:] == [0.0, 0.0]
    assert split == [0.0, 0.0, 1.0, 0.0]  # "9 1" is not the sample's "5 5", and the checker takes it


def test_code_contests_rows_score_right_and_wrong_cpp(service: Server) -> None:
    got = rewards(service, "code_contests.jsonl", [SUM, OVERFLOW])
    assert got[:2] == [1.0, 0.75]  # 4 tests: public, private and 2 generated; the overflow fails one
    assert got[2:] == [0.0, 0.0]  # the row with only its sample: popcount, which neither program computes
