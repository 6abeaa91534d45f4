"""verl fixtures built here, no hub: a tiny byte-level tokenizer, a DataProto of prompts and responses as verl's
rollout leaves them, and the smallest reward configuration `RewardLoopManager` accepts."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.client.tiny_model import build_tokenizer

PROMPT = "<|im_start|>user\nWhat is 6 * 7?<|im_end|>\n<|im_start|>assistant\n"
TRAINING_TEXT = [PROMPT, "<think>6 * 7 = 42</think>The answer is \\boxed{42}.", "#### 42", "def add(a, b):"] * 20


def build_verl_tokenizer(path: Path) -> Path:
    build_tokenizer(path, TRAINING_TEXT)
    return path


def data_proto(tokenizer: Any, rows: list[tuple[str, str, Any, dict[str, Any]]]) -> Any:
    """A DataProto of `(data_source, response, ground_truth, extra_info)` rows: prompts left-padded, responses
    right-padded and ended by EOS, as verl's rollout hands them to the reward loop."""
    import numpy as np
    import torch
    from verl import DataProto

    pad = tokenizer.pad_token_id
    prompt = tokenizer.encode(PROMPT, add_special_tokens=False)
    eos = tokenizer.eos_token_id
    responses = [[*tokenizer.encode(response, add_special_tokens=False), eos] for _, response, *_ in rows]
    width = max(len(r) for r in responses)
    response_ids = torch.tensor([r + [pad] * (width - len(r)) for r in responses])
    prompt_ids = torch.tensor([prompt] * len(rows))
    response_mask = torch.tensor([[1] * len(r) + [0] * (width - len(r)) for r in responses])
    attention_mask = torch.cat([torch.ones_like(prompt_ids), response_mask], dim=1)
    return DataProto.from_dict(
        tensors={
            "prompts": prompt_ids,
            "responses": response_ids,
            "input_ids": torch.cat([prompt_ids, response_ids], dim=1),
            "attention_mask": attention_mask,
        },
        non_tensors={
            "data_source": np.array([source for source, *_ in rows], dtype=object),
            "reward_model": np.array([{"ground_truth": truth} for _, _, truth, _ in rows], dtype=object),
            "extra_info": np.array([dict(info) for *_, info in rows], dtype=object),
        },
    )


def reward_config(tokenizer_dir: Path, reward_kwargs: dict[str, Any], name: str = "compute_score") -> Any:
    """The reward section verl's trainer builds, with the adapter as the custom reward function, one worker."""
    from omegaconf import OmegaConf

    return OmegaConf.create(
        {
            "actor_rollout_ref": {"model": {"path": str(tokenizer_dir), "tokenizer_path": str(tokenizer_dir)}},
            "reward": {
                "num_workers": 1,
                "custom_reward_function": {
                    "path": "pkg://trainer_client.integrations.verl",
                    "name": name,
                    "reward_kwargs": reward_kwargs,
                },
                "reward_manager": {"source": "register", "name": "naive", "module": {"path": None, "name": "x"}},
                "reward_model": {"enable": False, "enable_resource_pool": False},
                "sandbox_fusion": {"url": None},
            },
        }
    )
