"""The trainer adapters against the trainers' real packages, run with the overlay virtualenv's Python
(`make interop`; `make test` runs this folder there). The verifier itself runs from the project's .venv, as a user
runs it beside their trainer."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import ROOT, Server, running_server
from tests.interop.verl_batch import build_verl_tokenizer

SERVICE_PYTHON = str(ROOT / ".venv" / "bin" / "python")


@pytest.fixture(scope="session")
def verifier(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """One live verifier for the session (math, format and code on the local sandbox)."""
    log_dir: Path = tmp_path_factory.mktemp("verifier")
    with running_server(log_dir, python=SERVICE_PYTHON, math_workers=1, sandbox_backend="local") as server:
        yield server


@pytest.fixture(scope="session")
def tokenizer_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny byte-level BPE tokenizer with a chat template, built here (no hub)."""
    return build_verl_tokenizer(tmp_path_factory.mktemp("tokenizer"))


@pytest.fixture(scope="session")
def tokenizer(tokenizer_dir: Path) -> Any:
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(tokenizer_dir)


@pytest.fixture(scope="session")
def ray_cluster() -> Iterator[None]:
    """A local Ray on two cores, started once (about 15 s); its workers inherit this process's environment."""
    import ray

    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield
    ray.shutdown()
