"""Fixtures of the client tests that need the training stack."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.client.tiny_model import build_tiny_model


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A random Qwen2-style model with a locally trained tokenizer, built once per session."""
    return build_tiny_model(tmp_path_factory.mktemp("tiny-qwen2"))
