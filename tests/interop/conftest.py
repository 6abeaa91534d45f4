"""The trainer adapters against the trainers' real packages, run with the overlay virtualenv's Python
(`make interop`; `make test` runs this folder there). The verifier itself runs from the project's .venv, as a user
runs it beside their trainer."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import ROOT, Server, running_server

SERVICE_PYTHON = str(ROOT / ".venv" / "bin" / "python")


@pytest.fixture(scope="session")
def verifier(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """One live verifier for the session (math, format and code on the local sandbox)."""
    log_dir: Path = tmp_path_factory.mktemp("verifier")
    with running_server(log_dir, python=SERVICE_PYTHON, math_workers=1, sandbox_backend="local") as server:
        yield server
