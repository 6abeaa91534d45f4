"""The `json_schema` component: 1 when the answer is a JSON value valid under the item's schema, else 0.

Only the text after the reasoning is read. The answer is its one ```json block, else its one fenced block with no
language, else the whole text (stripped): a model that writes several ```json blocks has not given one answer
(`no_json`). Text that is not JSON (NaN and Infinity are not) is `no_json`; JSON that breaks the schema is `invalid`,
and the detail names the first error's path (`at $.items[2].price: ...`) without quoting the answer. A value nested
deeper than 64 levels is `invalid` (the schema's depth is capped alike, and jsonschema recurses once per level). A
validation that runs past its deadline (a pattern that backtracks without end on the answer) is `timeout` (null):
the verifier could not judge, which is not the model's fault. The schema's rules and its validator are in
verifier_service/json_schemas.py, its validator in scoring/json_validation.py.

>>> spec = JsonSchemaSpec(schema={"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]})
>>> [score(ScoreItem(completion=c, json_schema=spec), spec).verdict for c in (
...     '<think>hm</think>```json\\n{"n": 3}\\n```', '{"n": "3"}', "n is 3")]
['valid', 'invalid', 'no_json']
"""

from __future__ import annotations

import json
import time
from typing import Any

from jsonschema import ValidationError

from verifier_service import json_schemas
from verifier_service.schema import ComponentResult, JsonSchemaSpec, ScoreItem, Verdict
from verifier_service.scoring import json_validation
from verifier_service.scoring.code import fenced_blocks
from verifier_service.scoring.extract import final_answer_region
from verifier_service.scoring.text import result

# Per answer (scored off the event loop: texts.SLOW_ITEM_CHARS). The regex package counts a pattern's timeout in CPU
# seconds, so on a machine whose cores are shared an answer may take longer than this in wall time (1.9 s measured
# at a load of 12 on 2 cores; 1 s on an idle one).
TIMEOUT_S = 1.0


def score(item: ScoreItem, spec: JsonSchemaSpec) -> ComponentResult:
    """The `json_schema` component of an item."""
    region = final_answer_region(item.completion, spec.think_tag)
    if region is None:
        return result(0.0, Verdict.NO_JSON, "The reasoning was opened and never closed.")
    answer, why = answer_text(region)
    if answer is None:
        return result(0.0, Verdict.NO_JSON, why)
    extracted = answer[:200] or None
    try:
        value = json.loads(answer, parse_constant=_not_json)
    except (ValueError, RecursionError):  # RecursionError: nested deeper than the parser goes
        return result(0.0, Verdict.NO_JSON, f"The {why} is not JSON.", extracted)
    if _deeper_than(value, json_schemas.MAX_DEPTH):
        return result(0.0, Verdict.INVALID, f"The JSON nests deeper than {json_schemas.MAX_DEPTH} levels.", extracted)
    try:
        error = json_validation.first_error(spec.text(), value, time.monotonic() + TIMEOUT_S)
    except json_validation.Overrun:
        return result(None, Verdict.TIMEOUT, f"Validation ran past {TIMEOUT_S:g} s.", extracted)
    except RecursionError:  # a loop of references the schema's rules missed: the verifier's gap, not the answer's
        return result(None, Verdict.INTERNAL_ERROR, "The schema's references recurse without end.", extracted)
    if error is None:
        return result(1.0, Verdict.VALID, None, extracted)
    return result(0.0, Verdict.INVALID, describe(error), extracted)


def answer_text(region: str) -> tuple[str | None, str]:
    """The answer's JSON text (None when there is no one answer) and where it was found, or why there is none.

    >>> answer_text("Here:\\n```json\\n[1]\\n```"), answer_text(' {"a": 1} ')
    (('[1]\\n', '```json block'), ('{"a": 1}', 'answer'))
    """
    blocks = fenced_blocks(region)
    tagged = [code for language, code in blocks if language.lower() == "json"]
    if len(tagged) > 1:
        return None, f"The answer has {len(tagged)} ```json blocks, not one."
    if tagged:
        return tagged[0], "```json block"
    if len(blocks) == 1 and not blocks[0][0]:
        return blocks[0][1], "fenced block"
    stripped = region.strip()
    if not stripped:
        return None, "The answer is empty."
    return stripped, "answer"


def describe(error: ValidationError) -> str:
    """The first error in one short sentence: its path in the answer and the schema's rule it breaks. The answer's
    values are never quoted (its keys may be, in the path, cut short); the schema's are, cut short."""
    path = error.json_path if len(error.json_path) <= 120 else error.json_path[:117] + "..."
    keyword, rule = error.validator, error.validator_value
    if keyword == "type":
        what = f"is not of type {_short(rule)}"
    elif keyword == "required":
        missing = [name for name in rule if isinstance(error.instance, dict) and name not in error.instance]
        what = f"lacks the required property {_short(missing[0] if missing else rule)}"
    elif keyword in ("pattern", "additionalProperties", "uniqueItems"):
        what = error.message  # written by json_schemas, quoting nothing
    else:
        what = f"breaks {keyword} {_short(rule)}"
    return f"at {path}: {what}"


def _short(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= 60 else text[:57] + "..."


def _not_json(constant: str) -> Any:
    raise ValueError(f"{constant} is not JSON")


def _deeper_than(value: Any, limit: int) -> bool:
    """Whether the value nests more than `limit` levels deep (a scalar is 1), found without recursion."""
    stack = [(value, 1)]
    while stack:
        each, depth = stack.pop()
        if depth > limit:
            return True
        if isinstance(each, dict):
            stack.extend((child, depth + 1) for child in each.values())
        elif isinstance(each, list):
            stack.extend((child, depth + 1) for child in each)
    return False
