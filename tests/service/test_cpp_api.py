"""C++ code items through a real server on loopback (`python -m verifier_service`), on each sandbox backend: right,
wrong, slow, crashing and non-compiling programs score what they earn, hostile ones (compile bombs included) earn
nothing and leave the service healthy, a GRPO group's identical programs compile once, and /readyz says C++ runs."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import Server, running_server
from tests.service.conftest import (
    BACKENDS,
    pool_name,
    sandbox_status,
)  # `service`: tests/service/conftest.py's server per backend
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


SCORE_CHECKER = (
    "import sys\nline = open(sys.argv[2]).read()\nsys.exit(1) if line.startswith('reject') else print(line)\n"
)
ECHO = "#include <cstdio>\nint main() { int c; while ((c = getchar()) != EOF) putchar(c); }\n"


def test_a_checker_with_points_gives_partial_credit(service: Server) -> None:
    """CMS style: the accepting checker's first line is the test's score; the item's score is the tests' mean."""
    tests = [{"type": "stdio", "stdin": text, "stdout": "x"} for text in ("1\n", "0.5\n", "reject\n", "0.25\n")]

    def item(points: object, *extra: str) -> dict[str, Any]:
        spec_tests = tests + [{"type": "stdio", "stdin": text, "stdout": "x"} for text in extra]
        checker = {"source": SCORE_CHECKER, "points": points}
        return {"completion": completion(ECHO), "code": {"language": "cpp", "tests": spec_tests, "checker": checker}}

    got = [r["components"]["code"] for r in results(service, [item(True), item(False), item(True, "two\n")])]
    assert (got[0]["verdict"], got[0]["score"], got[0]["passed"]) == ("failed", pytest.approx(1.75 / 4), 1), got[0]
    assert "0.5" in got[0]["tests"][1]["detail"]
    assert (got[1]["verdict"], got[1]["score"]) == ("failed", 0.75), got[1]  # no points: exit 0 is a pass
    assert (got[2]["verdict"], got[2]["score"]) == ("invalid_test", None), got[2]  # "two" is no score: null
    response = httpx.post(f"{service.url}/v1/score", json={"items": [item("yes-please")]}, timeout=30)
    assert response.status_code == 422 and "points" in response.json()["detail"], response.text
    assert "yes-please" not in response.text


# Ten constant evaluations, each up to GCC's default budget of 2**33 operations: the compiler runs for many minutes.
SLOW_COMPILE = (
    "constexpr long f(int k) { long s = 0; for (int i = 0; i < 200000; i++) for (int j = 0; j < 200000; j++)"
    " s += i ^ j ^ k; return s; }\n"
    + "".join(f"constexpr long v{k} = f({k});\n" for k in range(10))
    + "int main() { return (int)(v0 + v9); }\n"
)


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_compile_past_the_batch_deadline_stops_and_the_item_is_deadline_exceeded(
    request: pytest.FixtureRequest, tmp_path: Path, backend: str
) -> None:
    """The compile limits are settings (here 10 minutes); the batch's deadline (8 s) stops the compile all the same,
    the item is null like any code item past the deadline, and the sandbox is free again for the next batch."""
    settings: dict[str, object] = {
        "sandbox_backend": backend, "sandbox__pool_size": 1, "sandbox__pool_name": pool_name(),
        "batch_timeout_s": 8, "math_timeout_s": 1, "sandbox__compile_wall_s": 600, "sandbox__compile_cpu_s": 600,
    }  # fmt: skip
    if backend == "docker":
        settings["sandbox__image"] = request.getfixturevalue("docker_image")
    with running_server(tmp_path, None, **settings) as server:  # type: ignore[arg-type]
        if backend == "local" and sandbox_status(server)["isolation"] != "bubblewrap":
            pytest.skip("bubblewrap cannot run here (apt-get install bubblewrap; needs user namespaces)")
        code = results(server, [cpp_item(SLOW_COMPILE)])[0]["components"]["code"]
        assert (code["verdict"], code["score"]) == ("deadline_exceeded", None), code
        for _ in range(300):  # the compiler's sandbox is replaced: no compile runs on
            status = sandbox_status(server)
            if status["binaries"]["compiling"] == 0 and status["idle"] == 1:
                break
            time.sleep(0.1)
        assert status["binaries"]["compiling"] == 0 and status["replaced"] >= 1, status
        quick = '#include <cstdio>\nint main() { long a, b; scanf("%ld %ld", &a, &b); printf("%ld", a + b); }\n'
        assert results(server, [cpp_item(quick)])[0]["components"]["code"]["score"] == 1.0
