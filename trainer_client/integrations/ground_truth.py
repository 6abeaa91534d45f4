"""A sample's ground truth, as trainers store it, turned into the verifier's component specs.

verl passes the `ground_truth` of its dataset's `reward_model` column, OpenRLHF a `label`, slime `sample.label`,
NeMo-RL `metadata["ground_truth"]`. What it holds depends on the dataset: a math answer (`"72"`, `"\\frac{1}{2}"`),
the item's specs themselves (`{"math": {"gold": "72"}, "format": {}}`), a code dataset's tests (a list of tests,
or APPS/TACO/PRIME's `{"inputs": [...], "outputs": [...], "fn_name": ...}`), often as a JSON string, or an
instruction-following ground truth: open-instruct's Python-literal string (`[{'instruction_id': [...], ...}]`) or an
IFEval / NeMo-Gym `{"instruction_id_list": [...], "kwargs": [...]}`, both read as an `instructions` spec.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from trainer_client.inputs import answer_gold, choice_gold, code_tests, gold_text
from verifier_service.domain_labels import is_open_instruct_label, nemo_gym_instructions, open_instruct_instructions
from verifier_service.schema import COMPONENTS, PRIMARIES, SPECS, ScoreItem

# What a ground-truth dict may hold to be taken as the item's own specs: every field of an item except the text.
ITEM_FIELDS = frozenset(ScoreItem.model_fields) - {"completion", "id", "prompt"}

# Data sources whose ground truth is code tests; everything else not listed is math. Compared in lower case, with and
# without the hub owner ("codeparrot/apps" -> "apps"); a name starting with one of CODE_PREFIXES counts too.
CODE_SOURCES = frozenset({"apps", "taco", "codecontests", "code_contests", "codeforces", "primeintellect"})
CODE_PREFIXES = ("code", "apps", "taco", "livecodebench", "humaneval", "openai_humaneval", "mbpp", "leetcode",
                 "kodcode", "deepcoder", "eurus-2-rl-data-code")  # fmt: skip
ANSWER_PREFIXES = ("searchr1_",)  # verl's search-R1 QA datasets: {"target": [aliases]}


def component_for(data_source: Any) -> str:
    """The component a data source's ground truth feeds: code for code datasets, answer for search-R1 QA, else math.

    >>> [component_for(source) for source in ("openai/gsm8k", "codeparrot/apps", "searchR1_nq", None)]
    ['math', 'code', 'answer', 'math']
    """
    name = str(data_source or "").strip().lower()
    base = name.rsplit("/", 1)[-1]
    if {name, base} & CODE_SOURCES or base.startswith(CODE_PREFIXES):
        return "code"
    if base.startswith(ANSWER_PREFIXES):
        return "answer"
    return "math"


def plain(value: Any) -> Any:
    """`value` as plain JSON-like Python: OmegaConf and other mappings as dicts, numpy arrays and scalars, tuples and
    list-likes as lists (verl's configs and data columns hold those).

    >>> plain({"a": (1, 2), "b": {"c": None}})
    {'a': [1, 2], 'b': {'c': None}}
    """
    if value is None or isinstance(value, str | bytes | int | float | bool):
        return value
    if isinstance(value, Mapping):
        return {str(key): plain(item) for key, item in value.items()}
    tolist = getattr(value, "tolist", None)  # numpy arrays and numpy scalars
    if callable(tolist):
        return plain(tolist())
    if isinstance(value, Iterable):
        return [plain(item) for item in value]
    return value


def json_object(value: Any) -> Any:
    """A string holding a JSON object, parsed; anything else as it is.

    >>> json_object('{"math": {"gold": "1"}}'), json_object("72"), json_object("{not json")
    ({'math': {'gold': '1'}}, '72', '{not json')
    """
    if isinstance(value, str) and value.lstrip().startswith("{"):
        try:
            parsed = json.loads(value)
        except (json.JSONDecodeError, RecursionError):  # RecursionError: nested past the interpreter's depth
            return value
        return parsed if isinstance(parsed, dict) else value
    return value


def row_specs(spec: Any, where: str = "the sample's verifier spec") -> dict[str, Any]:
    """An explicit spec (verl's `extra_info["verifier"]`, a task's `verifier` field): the item's component specs, as
    a dict or its JSON string."""
    value = json_object(plain(spec))
    if not isinstance(value, dict) or not is_item_specs(value):
        names = ", ".join(COMPONENTS)
        raise ValueError(f"{where} must be a dict of component specs ({names}, weights) or its JSON: {_kind(value)}")
    return value


def is_item_specs(value: Mapping[str, Any]) -> bool:
    return bool(value) and set(value) <= ITEM_FIELDS and bool(set(value) & set(COMPONENTS))


def specs_from_ground_truth(ground_truth: Any, component: str) -> dict[str, Any]:
    """The component specs for a sample whose ground truth is `ground_truth`, fed to `component` unless it says
    otherwise: a dict (or JSON object) of component specs is taken as it is; APPS-style tests become code.

    >>> specs_from_ground_truth("72", "math")
    {'math': {'gold': '72'}}
    >>> specs_from_ground_truth('{"inputs": ["1 2\\\\n"], "outputs": ["3\\\\n"]}', "math")["code"]["tests"][0]["type"]
    'stdio'
    """
    value = json_object(plain(ground_truth))
    if is_open_instruct_label(value):
        return {"instructions": open_instruct_instructions(value)}
    if isinstance(value, dict):
        return _specs_from_dict(value, component)
    if component == "code":
        return {"code": code_fields(value)}
    if component not in PRIMARIES:
        raise ValueError(f"a ground truth feeds one of {', '.join(PRIMARIES)}, not {component}")
    fields = SPECS[component].model_fields
    if "gold" not in fields:  # a component graded by more than an answer (sql, procedural, ...): its spec
        raise ValueError(f"a {component} ground truth is its spec, a dict of {', '.join(fields)} (or its JSON), not "
                         "a gold answer")  # fmt: skip
    if component == "math" and isinstance(value, list):
        raise ValueError(f"a math ground truth is one answer, got a list of {len(value)}; send the answer itself, or "
                         "specs such as {'answer': {'gold': [...aliases]}}")  # fmt: skip
    gold = {"choice": choice_gold, "answer": answer_gold}.get(component, gold_text)(value)
    if gold is None:
        raise ValueError("the sample's ground truth is empty: there is nothing to grade against")
    return {component: {"gold": gold}}


def _specs_from_dict(value: dict[str, Any], component: str) -> dict[str, Any]:
    if is_item_specs(value):
        return value
    if {"inputs", "outputs", "fn_name", "tests"} & set(value):
        return {"code": code_fields(value)}
    instructions = nemo_gym_instructions(value)
    if instructions is not None:
        return {"instructions": instructions}
    fields = SPECS[component].model_fields if component in SPECS else {}
    if "gold" not in fields and value and set(value) <= set(fields):  # the component's own spec fields
        return {component: value}
    if component == "answer" and "target" in value:
        gold = answer_gold(value["target"])
        if gold is None:
            raise ValueError("the sample's ground truth has an empty target: there is nothing to grade against")
        return {"answer": {"gold": gold}}
    keys = sorted(value)[:10]
    raise ValueError(f"a ground-truth dict needs component specs ({', '.join(COMPONENTS)}) or code tests (inputs and "
                     f"outputs, tests); this one has the keys {keys}")  # fmt: skip


def code_fields(value: Any) -> dict[str, Any]:
    """A code ground truth as `CodeSpec` fields: APPS/TACO/PRIME input-output pairs (stdio tests, or call tests with
    `fn_name`), a list of tests or assert strings, or a `CodeSpec`-shaped dict.

    >>> code_fields({"fn_name": "add", "inputs": [[1, 2]], "outputs": [[3]]})["tests"]
    [{'type': 'call', 'fn': 'add', 'args': [1, 2], 'expected': 3}]
    """
    if isinstance(value, dict) and ("inputs" in value or "fn_name" in value):
        return {"tests": apps_tests(value)}
    tests = code_tests(value, column="ground_truth")
    if tests is None:
        raise ValueError("the sample's code ground truth holds no tests")
    return dict(tests) if isinstance(tests, Mapping) else {"tests": tests}


def apps_tests(value: Mapping[str, Any]) -> list[dict[str, Any]]:
    """APPS/TACO/PRIME tests: `inputs[i]` -> `outputs[i]`, on stdin/stdout, or as arguments and return value of
    `fn_name`. PRIME stores call arguments as JSON lines and outputs as JSON text; APPS wraps a call's return value
    in a one-element list (its checker accepts either), which is unwrapped here."""
    inputs, outputs, fn = value.get("inputs"), value.get("outputs"), value.get("fn_name")
    if not isinstance(inputs, list) or not isinstance(outputs, list) or not inputs or len(inputs) != len(outputs):
        raise ValueError("APPS-style tests need non-empty lists 'inputs' and 'outputs' of the same length")
    if fn:
        return [{"type": "call", "fn": fn, "args": _call_args(i), "expected": _call_expected(o)}
                for i, o in zip(inputs, outputs, strict=True)]  # fmt: skip
    return [{"type": "stdio", "stdin": _text(i), "stdout": _text(o)} for i, o in zip(inputs, outputs, strict=True)]


def _call_args(value: Any) -> list[Any]:
    if isinstance(value, str):
        return [json.loads(line) for line in value.strip().split("\n") if line.strip()]
    return list(value) if isinstance(value, list) else [value]


def _call_expected(value: Any) -> Any:
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError:
            return value
    return value[0] if isinstance(value, list) and len(value) == 1 else value


def _text(value: Any) -> str:
    if isinstance(value, list):
        return "\n".join(str(line) for line in value)
    return str(value)


def _kind(value: Any) -> str:
    return f"a {type(value).__name__}" if not isinstance(value, dict) else f"a dict with the keys {sorted(value)[:10]}"
