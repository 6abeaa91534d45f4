"""GSM8K as GRPO prompts: a chat prompt that asks for `<think>` reasoning and a final answer, and the gold answer
taken from the solution's `#### N` line. Works on the hub dataset or a local JSON/JSONL file with the same columns
(`question`, `answer`). Other shapes (MATH, MBPP, HumanEval): `trainer_client.data`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

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


def load_gsm8k(name: str = HUB_ID, config: str | None = None, system_prompt: str = SYSTEM_PROMPT) -> DatasetDict:
    """Load GSM8K from the hub (`openai/gsm8k`, config `main`) or a local .json/.jsonl file with its columns (its
    one split is `train`) as GRPO input: `prompt` and `solution` (`trainer_client.data.load_prompts` for other
    shapes)."""
    from trainer_client.data import Columns, load_prompts  # data.py builds on this module

    return load_prompts(
        name, config, columns=Columns("question", "answer"), components=("math",), system_prompt=system_prompt
    )
