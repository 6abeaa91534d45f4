"""reasoning-gym entries as `procedural` specs, for the data loader and the reward functions.

A reasoning-gym dataset is rows `{question, answer, metadata}` (what `dataset[i]` gives; saved to JSONL, say), and
`metadata.source_dataset` names the dataset that made the row (a composite dataset's rows name their part). The
loader (`trainer_client.data.to_row`) turns each row into its label, the spec as a JSON string in the `solution`
column (`procedural_label`); the reward functions read it back (`procedural_spec`). A JSON string, not a struct:
Arrow gives every row of a column the union of the metadata keys of all rows, filled with nulls, and a scorer that
reads a key's presence would then be misled.

The same label, `{"procedural": {...}}`, is what the compat routes take as a label-spec.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from pydantic import ValidationError

from verifier_service.schema import ProceduralSpec


def procedural_entry(row: Mapping[str, Any]) -> dict[str, Any]:
    """The entry of a row: its question, answer and metadata (a dict, or its JSON string).

    >>> procedural_entry({"question": "1+1?", "answer": "2", "metadata": '{"source_dataset": "chain_sum"}'})
    {'question': '1+1?', 'answer': '2', 'metadata': {'source_dataset': 'chain_sum'}}
    """
    missing = [key for key in ("question", "answer", "metadata") if key not in row]
    if missing:
        raise ValueError(f"a reasoning-gym row has question, answer and metadata; this one lacks {', '.join(missing)}")
    metadata = row["metadata"]
    if isinstance(metadata, str):
        metadata = json.loads(metadata)
    if not isinstance(metadata, Mapping):
        raise ValueError("a reasoning-gym row's metadata is an object (or its JSON string)")
    return {"question": row["question"], "answer": row["answer"], "metadata": dict(metadata)}


def procedural_label(row: Mapping[str, Any]) -> str:
    """A row's `procedural` spec, `{"dataset", "entry"}`, as a JSON string: the dataset from metadata.source_dataset.

    >>> procedural_label({"question": "1+1?", "answer": "2", "metadata": {"source_dataset": "gcd"}})
    '{"dataset": "gcd", "entry": {"question": "1+1?", "answer": "2", "metadata": {"source_dataset": "gcd"}}}'
    """
    entry = procedural_entry(row)
    dataset = entry["metadata"].get("source_dataset")
    if not isinstance(dataset, str):
        raise ValueError("a reasoning-gym row names its dataset in metadata.source_dataset; this one does not")
    return json.dumps({"dataset": dataset, "entry": entry}, ensure_ascii=False)


def procedural_spec(value: Any, options: Mapping[str, Any] | None = None, column: str = "solution") -> Any:
    """A row's label (the spec as a dict or its JSON string) with the reward's `options` (partial_credit, ...) as a
    `ProceduralSpec`; None when the row has none. A malformed one raises ValueError, naming the field, not the value.

    >>> label = procedural_label({"question": "q", "answer": "4", "metadata": {"source_dataset": "gcd"}})
    >>> spec = procedural_spec(label, options={"partial_credit": True})
    >>> spec.dataset, spec.partial_credit()
    ('gcd', True)
    """
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    try:
        fields = json.loads(value) if isinstance(value, str) else value
    except ValueError:
        raise ValueError(f"dataset column {column!r}: a procedural label is a JSON object") from None
    if not isinstance(fields, Mapping):
        raise ValueError(f"dataset column {column!r}: a procedural label is a JSON object")
    try:
        return ProceduralSpec.model_validate({**(options or {}), **fields})
    except ValidationError as exc:  # described by field and rule, never with the row's values
        problems = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'label'}: {e['msg']}" for e in exc.errors())
        raise ValueError(f"malformed procedural label in dataset column {column!r}: {problems}") from None
