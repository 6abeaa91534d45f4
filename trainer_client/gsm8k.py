"""GSM8K as GRPO prompts: a chat prompt that asks for `<think>` reasoning and a final answer, and the gold answer
taken from the solution's `#### N` line. Works on the hub dataset or a local JSON/JSONL file with the same columns
(`question`, `answer`).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from datasets import DatasetDict

HUB_ID = "openai/gsm8k"
SYSTEM_PROMPT = (
    "You are a careful math tutor. First think through the problem step by step inside <think> </think> tags. "
    "After the closing </think> tag, write the final answer as a single number, for example: The answer is 42."
)


def gold_answer(solution: str) -> str:
    """The number on a GSM8K solution's `#### N` line, without thousands separators.

    >>> gold_answer("She sold 48/2 = <<48/2=24>>24 clips.\\n#### 1,072")
    '1072'
    """
    if "####" not in solution:
        raise ValueError(f"not a GSM8K solution (no '#### N' line): {solution[-80:]!r}")
    return solution.rsplit("####", 1)[1].strip().replace(",", "")


def to_prompt(example: dict[str, Any], system_prompt: str = SYSTEM_PROMPT) -> dict[str, Any]:
    """One GSM8K row as GRPO input: a conversational `prompt` and the gold `solution`.

    >>> row = to_prompt({"question": "What is 6*7?", "answer": "6*7=42\\n#### 42"})
    >>> row["prompt"][-1], row["solution"]
    ({'role': 'user', 'content': 'What is 6*7?'}, '42')
    """
    return {
        "prompt": [{"role": "system", "content": system_prompt}, {"role": "user", "content": example["question"]}],
        "solution": gold_answer(example["answer"]),
    }


def is_local_file(name: str) -> bool:
    return Path(name).suffix in (".json", ".jsonl") and Path(name).is_file()


def load_gsm8k(name: str, config: str | None = None, system_prompt: str = SYSTEM_PROMPT) -> DatasetDict:
    """Load GSM8K from the hub (`openai/gsm8k`, config `main`) or a local .json/.jsonl file (its one split is
    `train`), and turn every row into a prompt. Only `prompt` and `solution` are kept."""
    from datasets import DatasetDict, load_dataset

    if is_local_file(name):
        raw = load_dataset("json", data_files={"train": name})
    else:
        raw = load_dataset(name, config or ("main" if name == HUB_ID else None))
    if not isinstance(raw, DatasetDict):
        raise ValueError(f"expected a dataset with splits from {name!r}, got {type(raw).__name__}")
    return raw.map(to_prompt, fn_kwargs={"system_prompt": system_prompt}, remove_columns=raw["train"].column_names)
