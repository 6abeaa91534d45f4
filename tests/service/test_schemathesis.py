"""A bounded schemathesis pass over the published OpenAPI document, against a real server: requests generated from the
schema alone (seeded and derandomised, and without the constants hypothesis would draw from the project's modules in
memory, so every run sends the same ones) get no 500, every answer is one the document
describes, and no answer repeats what the request sent (an error nothing of it; a result no completion, prompt or
gold).

The schema is what a client generator or a fuzzer reads: a rule it cannot follow (an `if`/`then`) stopped
schemathesis from making a single `/v1/score` request (issue 23), so the test also checks that it makes them."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, given, seed, settings
from schemathesis.checks import response_schema_conformance, status_code_conformance

from tests.conftest import Server, running_server

pytestmark = pytest.mark.usefixtures("no_project_constants")  # the same cases alone and in the suite

EXAMPLES = 25  # per operation: the pass takes tens of seconds
# The server's batch deadline is 10 s (fuzzed): a request unanswered after this long is a problem, and a test's whole
# pass ends within its timeout whatever the server does.
CALL_TIMEOUT_S = 20
MIN_ECHO = 8  # shorter strings may be in an answer by chance (a number, a verdict)
# The routes that give back what they were sent, by design: NeMo-Gym's verify and sessions echo the body (its dataset
# row). Their errors are checked all the same.
ECHOING = {"/v1/compat/nemo-gym/verify", "/v1/compat/nemo-gym/seed_session", "/v1/compat/nemo-gym/close_session"}


@pytest.fixture(scope="module")
def fuzzed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """A server of its own, with short limits: a generated request never waits on a slow one."""
    limits = {"math_timeout_s": 1, "batch_timeout_s": 10, "sandbox__max_wall_s": 1, "math_workers": 1}
    with running_server(tmp_path_factory.mktemp("schemathesis"), **limits) as server:
        yield server


def strings(value: Any, skip: frozenset[str] = frozenset()) -> Iterator[str]:
    """Every string in a JSON value (keys and values), but those under the keys `skip`."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for key, item in value.items():
            if key not in skip:
                yield str(key)
                yield from strings(item, skip)
    elif isinstance(value, list):
        for item in value:
            yield from strings(item, skip)


def echoed(case: schemathesis.Case, status: int, text: str, document: str) -> list[str]:
    """The strings of the request (body and query) found in an answer: those of the document itself (names, enum
    values) and short ones aside. /v1/score's results quote some of what they were sent, by design (the ids, a
    failed test's expected output unless the test is hidden, the option letters): there, the completions, prompts
    and golds must not come back."""
    body = case.body if isinstance(case.body, dict) else {}
    if case.path == "/v1/score" and status < 400:
        items = [item for item in body.get("items", []) if isinstance(item, dict)]
        data = [item.get(key) for item in items for key in ("completion", "prompt")]
        data += [spec.get("gold") for item in items for name in ("math", "choice", "answer")
                 if isinstance(spec := item.get(name), dict)]  # fmt: skip
        sent = [*strings(data)]
    else:
        sent = [*strings(body, frozenset({"id"})), *(str(value) for value in (case.query or {}).values())]
    return [s for s in sent if len(s) >= MIN_ECHO and s not in document and s in text]


SCORING = ["/v1/score", "/v1/compat/openrlhf", "/v1/compat/slime", "/v1/compat/nemo-gym/verify"]


@pytest.fixture(scope="module")
def schema(fuzzed: Server) -> schemathesis.BaseSchema:
    return schemathesis.openapi.from_url(f"{fuzzed.url}/openapi.json")


@pytest.mark.timeout(EXAMPLES * CALL_TIMEOUT_S + 60)
@pytest.mark.parametrize("path", SCORING)
def test_a_generated_scoring_request_gets_no_500_a_documented_answer_and_no_echo(
    fuzzed: Server, schema: schemathesis.BaseSchema, path: str
) -> None:
    statuses = fuzz(schema[path]["POST"], fuzzed, EXAMPLES)
    assert len(statuses) >= EXAMPLES // 2, f"schemathesis made only {len(statuses)} requests to {path}"
    if path == "/v1/score":  # some generated items get past validation and are scored
        assert 200 in statuses, statuses


@pytest.mark.timeout(600)
def test_every_other_operation_too(fuzzed: Server, schema: schemathesis.BaseSchema) -> None:
    others = [op for op in (result.ok() for result in schema.get_all_operations()) if op.path not in SCORING]
    assert len(others) >= 5  # the health checks, metrics, components, Gym's sessions
    for operation in others:
        assert fuzz(operation, fuzzed, 5), operation.path


def fuzz(operation: schemathesis.APIOperation, server: Server, examples: int) -> list[int]:
    """Send `examples` requests generated for `operation` and check each answer; returns
    the statuses of the answers.

    A failed check is collected and the pass goes on, all of them said at the end with the case that found each,
    rather than raised into hypothesis: it would then replay the case, and schemathesis's strategy does not draw
    the same data twice (FlakyStrategyDefinition, which hides what failed)."""
    document = httpx.get(f"{server.url}/openapi.json").text
    statuses: list[int] = []
    problems: list[str] = []

    @seed(23)
    @settings(max_examples=examples, derandomize=True, database=None, deadline=None,
              suppress_health_check=list(HealthCheck))  # fmt: skip
    @given(case=operation.as_strategy())
    def run(case: schemathesis.Case) -> None:
        started = time.monotonic()
        try:
            response = case.call(base_url=server.url, timeout=CALL_TIMEOUT_S)
        except Exception as exc:  # requests' errors: no answer in time, a reset
            problems.append(f"{_brief(case)}: {type(exc).__name__} after {time.monotonic() - started:.1f} s")
            return
        statuses.append(response.status_code)
        try:
            check(case, response, operation, document)
        except Exception as exc:  # an AssertionError, or schemathesis's failed checks
            problems.append(f"{_brief(case)}: {exc}")

    run()
    assert not problems, "\n".join(problems)
    return statuses


def check(case: schemathesis.Case, response: Any, operation: schemathesis.APIOperation, document: str) -> None:
    answer = response.text
    assert response.status_code != 500, f"{case.method} {case.path}: {answer}"
    if response.status_code >= 500:  # the trainer routes answer 503 for a sample nobody could judge
        assert response.status_code == 503 and "could not judge" in answer, answer
    case.validate_response(response, checks=[response_schema_conformance, status_code_conformance])
    if response.status_code >= 400 or operation.path not in ECHOING:
        found = echoed(case, response.status_code, _quotes_left_out(answer), document)
        assert not found, f"{case.method} {case.path} answered {response.status_code} with {found}"


def _brief(case: schemathesis.Case) -> str:
    """The case as a command that sends it, cut short."""
    command = case.as_curl_command()
    return command if len(command) <= 600 else f"{command[:600]}... ({len(command)} characters)"


def _quotes_left_out(text: str) -> str:
    """A JSON answer without what a result quotes by design: the answer a component graded (`extracted`), and a code
    test's `detail`, the program's own error (`NameError: name 'x' is not defined` names what the program holds)."""
    try:
        value = json.loads(text)
    except ValueError:
        return text

    def drop(node: Any, test: bool = False) -> Any:
        if isinstance(node, dict):
            quoted = {"extracted", "detail"} if test else {"extracted"}
            return {k: drop(v, k == "tests") for k, v in node.items() if k not in quoted}
        if isinstance(node, list):
            return [drop(v, test) for v in node]
        return node

    return json.dumps(drop(value), ensure_ascii=False)
