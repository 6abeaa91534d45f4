"""deploy/requirements.py: what the service image's builder installs, by extra (the Dockerfile's VERIFIER_EXTRAS)."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "deploy"))
from requirements import requirements  # noqa: E402

PYPROJECT = ROOT / "pyproject.toml"
PROJECT = tomllib.loads(PYPROJECT.read_text())["project"]


def names(lines: list[str]) -> set[str]:
    return {line.split(">")[0].split("=")[0].split("<")[0].split("[")[0].strip().lower() for line in lines}


def test_the_default_image_has_the_dependencies_and_procedural_but_no_torch() -> None:
    default = requirements(PYPROJECT, ["procedural"])
    assert default == PROJECT["dependencies"] + PROJECT["optional-dependencies"]["procedural"]
    assert "torch" not in names(default)


@pytest.mark.parametrize("extras", [["procedural", "models"], ["procedural,models"], ["procedural", " models,"]])
def test_models_brings_torch_and_transformers_once(extras: list[str]) -> None:
    lines = requirements(PYPROJECT, extras)
    assert {"torch", "transformers"} <= names(lines)
    assert len(lines) == len(set(lines))


def test_an_unknown_extra_stops_the_build_naming_it() -> None:
    result = subprocess.run([sys.executable, "deploy/requirements.py", "procedural", "modles"], cwd=ROOT,
                            capture_output=True, text=True)  # fmt: skip
    assert result.returncode == 1 and "unknown extra(s) modles" in result.stderr and result.stdout == ""


def test_the_dockerfile_and_compose_pass_verifier_extras_through() -> None:
    dockerfile = (ROOT / "Dockerfile").read_text()
    assert "ARG VERIFIER_EXTRAS" in dockerfile
    assert "python requirements.py procedural $VERIFIER_EXTRAS" in dockerfile
    assert "VERIFIER_EXTRAS: ${VERIFIER_EXTRAS:-}" in (ROOT / "compose.yaml").read_text()
