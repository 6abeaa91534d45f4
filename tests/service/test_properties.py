"""A bounded property-based pass over every route and every component (issue 23, evidence): requests that carry huge
numbers, deep nesting, lone surrogates, long runs of one character and odd Unicode, in the completions and in every
component's fields, sent to a real server. Whatever the request, the answer is never a 5xx (but the trainer routes'
documented 503 for a sample the verifier cannot judge), an error never says a value back, a batch gets one result per
item in order, and /healthz keeps answering while it all runs.

Derandomised and bounded (hypothesis' examples are fixed by the test's source): about 120 requests in all.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.conftest import Server
from verifier_service.schema import COMPONENTS

HEALTH_BOUND_S = 5.0  # a stall is the whole request (78 s for point 12's); a busy host answers within a second
ECHO_CHARS = 16  # a generated value that long, said back in an error, is an echo (no error text repeats itself so)


@dataclass(frozen=True)
class Raw:
    """JSON text sent as it is: what json.dumps would not write (a number past a float, NaN, nesting 10,000 deep)."""

    text: str


def dump(value: Any) -> str:
    """JSON with Raw parts written as they are; strings escaped to ASCII (a lone surrogate becomes \\ud800)."""
    if isinstance(value, Raw):
        return value.text
    if isinstance(value, dict):
        return "{" + ",".join(f"{json.dumps(key)}:{dump(part)}" for key, part in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ",".join(dump(part) for part in value) + "]"
    return json.dumps(value)


pytestmark = pytest.mark.usefixtures("no_project_constants")  # the same cases alone and in the suite

# What is generated.

RUN_UNITS = [
    *(" ", "\n", "\t", "a", "9", "{", "}", "\\", "$", "<", "/", "*", "#", ".", ",", "(", "\x00", "\u200b", "\ufdfa"),
    *("ß", "İ", "🙂", "\ud800", "<answer>", "</answer>", "<think>", "</think>", "\\boxed{", "\\boxed{1}", "Answer: "),
    *("#### ", " 999", "```python\n", " or ", "\\quad\\text{and}\\quad", "**1**"),
]
OPENINGS = ["{", "(", "[", "\\boxed{", "\\frac{", "<answer>", "<think>", "$"]
WRAPPERS = [("", ""), ("<think>a</think>", ""), ("<answer>", "</answer>"), ("\\boxed{", "}"), ("#### ", " 1/2")]
HUGE_FORMS = ["{}", "#### {} 1/2", "\\boxed{{{} 1/2}}", "{}/7", "\\frac{{{}}}{{7}}", "1,{}", "{}.5", "-{}", "1e{}"]

huge_numbers = st.builds(
    lambda form, digits: form.format("9" * digits), st.sampled_from(HUGE_FORMS), st.integers(4_301, 6_000)
)
runs = st.builds(lambda unit, chars: unit * (chars // len(unit)), st.sampled_from(RUN_UNITS), st.integers(1, 60_000))
nesting = st.builds(
    lambda opening, depth, closed: opening * depth + ("}" * depth if closed else ""),
    st.sampled_from(OPENINGS),
    st.integers(100, 20_000),
    st.booleans(),
)
odd_unicode = st.text(st.characters(codec=None, exclude_categories=()), max_size=300)  # surrogates and all
weird_text = st.one_of(huge_numbers, runs, nesting, odd_unicode)
completions = st.builds(lambda wrap, text: wrap[0] + text + wrap[1], st.sampled_from(WRAPPERS), weird_text)

raw_numbers = st.sampled_from(
    [
        Raw("9" * 5_000),
        Raw("-" + "9" * 4_400),
        Raw("1e999"),
        Raw("-1e999"),
        Raw("NaN"),
        Raw("Infinity"),
        Raw("0.1e-999"),
        Raw("1" + "0" * 400 + ".5"),
        Raw("true"),
        Raw('"12"'),
        12,
        0,
        -1,
        2**63,
        1.5,
    ]
)
deep_json = st.one_of(
    st.builds(lambda depth: Raw("[" * depth + "1" + "]" * depth), st.integers(100, 100_000)),
    st.builds(lambda depth: Raw('{"a":' * depth + "1" + "}" * depth), st.integers(100, 100_000)),
)
plain = st.sampled_from(["4", "A", "Paris", "1/2", "\\frac{1}{2}", ""])
fitting = st.one_of(plain, weird_text.map(lambda text: text[:9_000]))  # within every length limit
texts = st.one_of(plain, weird_text)
values = st.one_of(texts, raw_numbers, deep_json)  # anything a field may hold


def pick(loose: bool, valid: st.SearchStrategy[Any], anything: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """A valid value in a strict request; in a loose one (which the schema may well refuse), also anything."""
    return st.one_of(valid, anything) if loose else valid


def specs(loose: bool) -> dict[str, st.SearchStrategy[Any]]:
    """Each component's spec: its texts are generated either way, its other options only in a loose request."""

    def spec(required: dict[str, Any], **optional: st.SearchStrategy[Any]) -> st.SearchStrategy[dict[str, Any]]:
        chosen = {name: pick(loose, valid, values) for name, valid in optional.items()}
        return st.fixed_dictionaries(required, optional=chosen)

    call = st.fixed_dictionaries(
        {"type": st.just("call"), "fn": st.just("f"), "args": st.lists(pick(loose, fitting, values), max_size=2)},
        optional={"expected": pick(loose, st.one_of(fitting, st.integers()), values)},
    )
    stdio = st.fixed_dictionaries({"type": st.just("stdio"), "stdin": fitting, "stdout": fitting})
    golds = st.one_of(fitting, st.lists(fitting, min_size=1, max_size=3))
    return {
        "math": spec(
            {"gold": pick(loose, fitting, st.one_of(texts, raw_numbers))},
            options=st.fixed_dictionaries({"language": st.sampled_from(["en", "zh", "ja", "fr"])}),
        ),
        "choice": spec(
            {"gold": pick(loose, st.sampled_from(["A", "B", ["A", "C"]]), values)},
            options=st.lists(fitting, min_size=3, max_size=5),
        ),
        "answer": spec({"gold": pick(loose, golds, values)}, match=st.sampled_from(["exact", "f1"])),
        "format": spec({}, prefilled=st.booleans(), tag=st.sampled_from(["think", "reasoning"])),
        "overlong": spec({"max_tokens": pick(loose, st.integers(1, 10**6), raw_numbers)}, unit=st.just("chars")),
        "repetition": spec({}, n=st.integers(1, 8), scope=st.sampled_from(["all", "answer", "reasoning"])),
        "steps": spec({}, aggregate=st.sampled_from(["min", "mean"]), scope=st.sampled_from(["all", "reasoning"])),
        "code": st.fixed_dictionaries({"tests": st.lists(st.one_of(stdio, call), min_size=1, max_size=2)}),
    }


@st.composite
def items(draw: st.DrawFn, loose: bool) -> dict[str, Any]:
    """An item with one to three components, and gated `length` on the first when it is a primary."""
    table = specs(loose)
    names = draw(st.lists(st.sampled_from(list(table)), min_size=1, max_size=3, unique=True))
    item: dict[str, Any] = {"completion": draw(completions)} | {name: draw(table[name]) for name in names}
    if names[0] in ("math", "choice", "answer", "code") and draw(st.booleans()):
        item["length"] = {"max_tokens": draw(pick(loose, st.integers(1, 10**6), raw_numbers)), "unit": "chars"}
    if draw(st.booleans()):
        item["id"] = draw(pick(loose, fitting.map(lambda text: text[:200]), texts))
    if draw(st.booleans()):
        item["completion_tokens"] = draw(pick(loose, st.integers(0, 10**6), raw_numbers))
    if draw(st.booleans()):
        item["weights"] = {names[0]: draw(pick(loose, st.sampled_from([0.5, 2.0]), raw_numbers))}
    return item


batches = st.booleans().flatmap(lambda loose: st.lists(items(loose), min_size=1, max_size=4))
component_specs = st.booleans().flatmap(items).map(lambda item: {k: v for k, v in item.items() if k in COMPONENTS})
golds = st.one_of(fitting, raw_numbers)  # a gold label: a string, or a number JSON may or may not carry
labels = st.one_of(
    golds,
    component_specs,  # the item's specs
    component_specs.map(dump),  # the same as a JSON string
    st.builds(lambda depth: '{"a":' * depth + "1" + "}" * depth, st.integers(100, 100_000)),  # nested deep
    deep_json,
)


# The server, watched.


@pytest.fixture(scope="module")
def watched(server: Server) -> Iterator[Server]:
    """The shared server, with a thread asking /healthz every 50 ms while the module's tests run."""
    stop, waits = threading.Event(), list[float]()

    def ask() -> None:
        with httpx.Client(timeout=120) as client:
            while not stop.is_set():
                start = time.monotonic()
                assert client.get(f"{server.url}/healthz").status_code == 200
                waits.append(time.monotonic() - start)
                time.sleep(0.05)

    thread = threading.Thread(target=ask, daemon=True)
    thread.start()
    yield server
    stop.set()
    thread.join(timeout=130)
    assert waits, "the health checks never ran"
    assert max(waits) < HEALTH_BOUND_S, f"/healthz waited {max(waits):.1f}s"


def send(server: Server, path: str, body: Any) -> httpx.Response:
    return httpx.post(
        f"{server.url}{path}", content=dump(body).encode(), headers={"content-type": "application/json"}, timeout=120
    )


def generated(value: Any) -> Iterator[str]:
    """The texts a request carries (its Raw parts as written), to look for in an error."""
    if isinstance(value, Raw):
        yield value.text
    elif isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for part in value.values():
            yield from generated(part)
    elif isinstance(value, list):
        for part in value:
            yield from generated(part)


def said(value: Any) -> Iterator[str]:
    """Every string in a JSON answer."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for key, part in value.items():
            yield key
            yield from said(part)
    elif isinstance(value, list):
        for part in value:
            yield from said(part)


def shape(value: Any) -> Any:
    """The request, short enough to read in a failure: each text cut to 40 characters, with its length."""
    if isinstance(value, Raw | str):
        text = value.text if isinstance(value, Raw) else value
        return f"{'raw ' if isinstance(value, Raw) else ''}{text[:40]!r}... ({len(text)})" if len(text) > 40 else value
    if isinstance(value, dict):
        return {key: shape(part) for key, part in value.items()}
    if isinstance(value, list):
        return [shape(part) for part in value]
    return value


def check(answer: httpx.Response, body: Any, unjudged_allowed: bool = False) -> Any:
    """Not a 5xx (the 503 of a sample the verifier cannot judge aside, where allowed); an error says back no value
    the request carried; returns the answer's JSON."""
    found = answer.json()
    if answer.status_code == 503 and unjudged_allowed:
        assert found["detail"].startswith("the verifier could not judge"), answer.text[:300]
    else:
        assert answer.status_code < 500, f"{answer.text[:300]} for {shape(body)}"
    if answer.status_code >= 400:
        sent = {text[:ECHO_CHARS] for text in generated(body) if len(text) >= ECHO_CHARS}
        echoed = [text for text in said(found) if any(value in text for value in sent)]
        assert not echoed, f"{answer.status_code}: says back what it was sent: {echoed[0][:100]!r}"
    return found


PROPERTIES = settings(
    max_examples=40,
    derandomize=True,
    database=None,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.large_base_example],
)


@pytest.mark.timeout(300)
@PROPERTIES
@given(batch=batches)
def test_score(watched: Server, batch: list[dict[str, Any]]) -> None:
    body = {"items": batch}
    found = check(send(watched, "/v1/score", body), body)
    if "results" in found:
        assert [result["id"] for result in found["results"]] == [item.get("id") for item in batch]


ROUTE_EXAMPLES = 30


@pytest.mark.timeout(300)
@settings(PROPERTIES, max_examples=ROUTE_EXAMPLES)
@given(
    queries=st.lists(st.tuples(completions, labels), min_size=1, max_size=3),
    fallback=st.booleans(),
    components=st.sampled_from(["", "?components=math+format", "?components=choice+answer+repetition"]),
)
def test_openrlhf(watched: Server, queries: list[tuple[str, Any]], fallback: bool, components: str) -> None:
    query = (components + ("&" if components else "?") + "on_unjudged=0") if fallback else components
    body = {"query": [completion for completion, _ in queries], "labels": [label for _, label in queries]}
    found = check(send(watched, "/v1/compat/openrlhf" + query, body), body, unjudged_allowed=not fallback)
    if "rewards" in found:
        assert len(found["rewards"]) == len(found["scores"]) == len(queries)


@pytest.mark.timeout(300)
@settings(PROPERTIES, max_examples=ROUTE_EXAMPLES)
@given(
    completion=completions,
    label=labels,
    prompt=st.one_of(fitting, st.just([{"role": "user", "content": "2+2?"}]), values),
    fallback=st.booleans(),
)
def test_slime(watched: Server, completion: str, label: Any, prompt: Any, fallback: bool) -> None:
    body = {"prompt": prompt, "response": completion, "label": label}
    found = check(send(watched, "/v1/compat/slime" + ("?on_unjudged=0" if fallback else ""), body), body, not fallback)
    if "reward" in found:
        assert found["verifier_judged"] in (0.0, 1.0)


@pytest.mark.timeout(300)
@settings(PROPERTIES, max_examples=ROUTE_EXAMPLES)
@given(completion=completions, gold=st.one_of(golds, deep_json), spec=st.one_of(st.none(), labels), row=values)
def test_nemo_gym_verify(watched: Server, completion: str, gold: Any, spec: Any, row: Any) -> None:
    """The dataset row's own fields (`row_value` here) are echoed back, whatever they hold."""
    message = {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": completion}]}
    body: dict[str, Any] = {"responses_create_params": {"input": []}, "response": {"output": [message]}}
    body |= {"expected_answer": gold, "row_value": row} | ({"verifier": spec} if spec is not None else {})
    found = check(send(watched, "/v1/compat/nemo-gym/verify", body), body)
    if "reward" in found:
        assert found["mask_sample"] in (True, False)
