"""Fixtures of the client tests that need the training stack."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.client.tiny_model import build_tiny_model


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A random Qwen2-style model with a locally trained tokenizer, built once per session."""
    return build_tiny_model(tmp_path_factory.mktemp("tiny-qwen2"))


# Extra end-of-sequence ids for `tiny_model_stopping`: with 20 of its ~600 tokens ending generation, about half of
# 24-token completions stop early, the rest are cut off at the cap.
EXTRA_EOS = list(range(100, 120))


@pytest.fixture(scope="session")
def tiny_model_stopping(tiny_model: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny model, with more EOS ids in its generation config than its tokenizer's (as Llama 3's end-of-turn
    tokens): generation stops at any of them, and TRL counts a completion ending in one as finished."""
    import json
    import shutil

    path = tmp_path_factory.mktemp("tiny-qwen2-stopping") / "model"
    shutil.copytree(tiny_model, path)
    config = json.loads((path / "generation_config.json").read_text())
    config["eos_token_id"] = [config["eos_token_id"], *EXTRA_EOS]
    (path / "generation_config.json").write_text(json.dumps(config))
    return path
