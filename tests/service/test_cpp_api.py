"""C++ code items through a real server on loopback (`python -m verifier_service`), on each sandbox backend: right,
wrong, slow, crashing and non-compiling programs score what they earn, hostile ones (compile bombs included) earn
nothing and leave the service healthy, a GRPO group's identical programs compile once, and /readyz says C++ runs."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import pytest

from tests.conftest import Server
from tests.service.conftest import sandbox_status  # `service`: tests/service/conftest.py's server per backend
from tests.service.test_code_api import results

pytestmark = pytest.mark.timeout(300, func_only=True)  # func_only: building the image may take longer

SUM = "#include <bits/stdc++.h>\nusing namespace std;\nint main() { long long a, b; cin >> a >> b; cout << a + b; }\n"
TESTS = [
    {"type": "stdio", "stdin": "2 3\n", "stdout": "5\n"},
    {"type": "stdio", "stdin": "-4 4\n", "stdout": "0\n"},
    {"type": "stdio", "stdin": "100 1\n", "stdout": "101\n"},
]
PROGRAMS = {  # id -> (source, per-test verdicts, component verdict, score)
    "right": (SUM, ["passed"] * 3, "passed", 1.0),
    "wrong": (SUM.replace("a + b", "(a > 50 ? a : a + b)"), ["passed", "passed", "wrong_answer"], "failed", 2 / 3),
    "slow": ("int main() { volatile long x = 0; for (;;) x++; }\n", ["timeout"] * 3, "failed", 0.0),
    "crashing": ("#include <cstdlib>\nint main() { abort(); }\n", ["runtime_error"] * 3, "failed", 0.0),
    "compile-error": ("int main() { return nope; }\n", [], "compile_error", 0.0),
    "fork-bomb": ("#include <unistd.h>\nint main() { for (;;) fork(); }\n", ["timeout"] * 3, "failed", 0.0),
    "memory": (
        "#include <vector>\nint main() { std::vector<long> v; for (;;) v.push_back(1); }\n",
        ["memory_limit"] * 3,
        "failed",
        0.0,
    ),
    "flood": ('#include <cstdio>\nint main() { for (;;) puts("5"); }\n', ["output_limit"] * 3, "failed", 0.0),
    "dev-zero": ('#include "/dev/zero"\nint main() {}\n', [], "compile_error", 0.0),
    "template-bomb": (
        "template <int N> struct F { enum { v = F<N - 1>::v + F<N - 2>::v }; };\n"
        "template <> struct F<0> { enum { v = 0 }; };\ntemplate <> struct F<1> { enum { v = 1 }; };\n"
        "int main() { return F<100000>::v; }\n",
        [],
        "compile_error",
        0.0,
    ),
}


def completion(source: str, fence: str = "cpp") -> str:
    """As a model writes it: a draft in the reasoning (it would fail every test), then the answer's block."""
    return (
        "<think>First try:\n```cpp\nint main() { return 1; }\n```\nNo, read both numbers.</think>\n"
        f"Here is my solution:\n\n```{fence}\n{source.rstrip()}\n```\n\nIt reads a and b."
    )


def cpp_item(source: str, fence: str = "cpp", **spec: Any) -> dict[str, Any]:
    return {"completion": completion(source, fence), "code": {"language": "cpp", "tests": TESTS, **spec}}


def test_readyz_says_cpp_runs(service: Server) -> None:
    assert sandbox_status(service)["cpp"] is True


def test_readyz_says_the_precompiled_header_is_used(service: Server) -> None:
    """sandbox.cpp_pch: null until the service's check compile has run (the local backend may build the .gch
    first), then whether g++ in the sandbox read the precompiled bits/stdc++.h."""
    deadline = time.monotonic() + 120
    while (used := sandbox_status(service)["cpp_pch"]) is None and time.monotonic() < deadline:
        time.sleep(0.2)
    assert used is True


def test_programs_right_wrong_slow_crashing_and_hostile_score_what_they_earn(service: Server) -> None:
    items = [{"id": name, **cpp_item(source, timeout_s=1, memory_mb=128)} for name, (source, *_) in PROGRAMS.items()]
    got = {r["id"]: r["components"]["code"] for r in results(service, items)}
    for name, (_, tests, verdict, score) in PROGRAMS.items():
        code = got[name]
        assert [t["verdict"] for t in code.get("tests") or []] == tests, (name, code)
        assert (code["verdict"], code["score"]) == (verdict, pytest.approx(score)), (name, code)
    assert "nope" in got["compile-error"]["detail"] and "error" in got["compile-error"]["detail"]
    assert "SIGABRT" in got["crashing"]["tests"][0]["detail"]
    # the service is healthy, and the next program unaffected
    assert results(service, [cpp_item(SUM)])[0]["reward"] == 1.0
    assert httpx.get(f"{service.url}/readyz", timeout=10).status_code == 200


def test_the_program_is_the_last_cpp_or_cxx_block_and_no_block_is_no_code(service: Server) -> None:
    items = [
        cpp_item(SUM, fence="c++"),
        {"completion": f"Just compile this:\n{SUM}", "code": {"language": "cpp", "tests": TESTS}},
        {"completion": completion(SUM, fence="python"), "code": {"language": "cpp", "tests": TESTS}},
    ]
    got = [r["components"]["code"] for r in results(service, items)]
    assert [(c["verdict"], c["score"]) for c in got] == [("passed", 1.0), ("no_code", 0.0), ("no_code", 0.0)], got


def test_a_grpo_group_of_identical_programs_compiles_once(service: Server) -> None:
    source = SUM.replace("int main", "int grpo_group_marker;\nint main")  # compiled by no other test
    before = sandbox_status(service)["binaries"]
    group = [cpp_item(source) for _ in range(6)] + [cpp_item(source, timeout_s=2.0)] * 2  # two specs, one source
    assert [r["reward"] for r in results(service, group)] == [1.0] * 8
    after = sandbox_status(service)["binaries"]
    assert after["misses"] - before["misses"] == 1, (before, after)
    assert results(service, [cpp_item(source)])[0]["reward"] == 1.0  # a later request: from the cache
    assert sandbox_status(service)["binaries"]["misses"] == after["misses"]


def test_cpp_and_python_items_mix_in_one_batch(service: Server) -> None:
    python = {
        "completion": "```python\na, b = map(int, input().split())\nprint(a + b)\n```",
        "code": {"tests": TESTS},
    }
    got = results(service, [cpp_item(SUM), python, {"completion": "\\boxed{4}", "math": {"gold": "4"}}])
    assert [r["reward"] for r in got] == [1.0, 1.0, 1.0]


PAIR_CHECKER = """
import sys
n = int(open(sys.argv[1]).read())
tokens = open(sys.argv[2]).read().split()
if len(tokens) != 2:
    sys.exit(2)
a, b = map(int, tokens)
sys.exit(0 if a >= 0 and b >= 0 and a + b == n else 1)
"""
PAIR_TESTS = [{"type": "stdio", "stdin": "10\n", "stdout": "5 5\n"}, {"type": "stdio", "stdin": "3\n", "stdout": "1 2"}]


def test_a_checker_judges_many_right_answers_and_a_broken_one_is_null(service: Server) -> None:
    def item(source: str, checker: dict[str, Any]) -> dict[str, Any]:
        return {"completion": completion(source), "code": {"language": "cpp", "tests": PAIR_TESTS, "checker": checker}}

    right = '#include <cstdio>\nint main() { int n; scanf("%d", &n); printf("0 %d\\n", n); }\n'
    wrong = right.replace('"0 %d', '"1 %d')
    got = results(
        service,
        [
            item(right, {"source": PAIR_CHECKER}),
            item(wrong, {"source": PAIR_CHECKER}),
            item(right, {"source": "import sys\nsys.exit(3)\n"}),
            item(right, {"language": "cpp", "source": '#include "mine.h"\nint main() { return ZERO; }\n',
                         "files": {"mine.h": "#define ZERO 0\n"}}),
        ],
    )  # fmt: skip
    codes = [r["components"]["code"] for r in got]
    assert [(c["verdict"], c["score"]) for c in codes] == [
        ("passed", 1.0), ("failed", 0.0), ("invalid_test", None), ("passed", 1.0)
    ], codes  # fmt: skip
    assert [t["detail"] for t in codes[1]["tests"]] == ["the checker rejected the output"] * 2
    assert got[2]["reward"] is None and "checker" in codes[2]["detail"]


def test_the_service_answers_while_compile_bombs_compile(service: Server) -> None:
    bombs = [cpp_item(PROGRAMS[name][0]) for name in ("dev-zero", "template-bomb")]
    bombs.append(cpp_item('#include "/dev/random"\nint main() {}\n'))
    with ThreadPoolExecutor(1) as pool:
        pending = pool.submit(results, service, bombs)
        time.sleep(0.3)  # the compiles are under way (each takes a second or more)
        started = time.monotonic()
        assert httpx.get(f"{service.url}/healthz", timeout=10).status_code == 200
        assert time.monotonic() - started < 2.0, "the service held its event loop while compiling"
        got = pending.result(timeout=180)
    assert [r["components"]["code"]["verdict"] for r in got] == ["compile_error"] * 3
