"""Session fixtures for the image tests; other test packages import tests.images.build instead (see its docstring)."""

from __future__ import annotations

import pytest

from tests.images.build import base_image, ensure_offline_base, ensure_sandbox_image, require_docker


@pytest.fixture(scope="session")
def docker_engine() -> None:
    require_docker()


@pytest.fixture(scope="session")
def offline_base(docker_engine: None) -> str:
    return ensure_offline_base()


@pytest.fixture(scope="session")
def sandbox_image(docker_engine: None) -> str:
    return ensure_sandbox_image(base_image(), allow_placeholder=True)
