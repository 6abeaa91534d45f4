"""Package-level promises: what `import trainer_client` pulls in, and that the docstring examples run."""

from __future__ import annotations

import doctest
import importlib
import json
import subprocess
import sys

import pytest

from tests.conftest import ROOT, Server

HEAVY = ["fastapi", "starlette", "uvicorn", "sympy", "math_verify", "docker", "torch", "trl", "transformers"]


def test_import_pulls_in_no_server_side_or_training_stack() -> None:
    code = f"import json, sys, trainer_client; print(json.dumps([m for m in {HEAVY!r} if m in sys.modules]))"
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert json.loads(out.stdout) == []


def test_the_subprocess_check_would_see_a_heavy_import() -> None:
    code = "import json, sys, trainer_client, sympy; print(json.dumps('sympy' in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert json.loads(out.stdout) is True


DOCUMENTED = [
    "trainer_client.client",
    "trainer_client.async_client",
    "trainer_client.config",
    "trainer_client.core",
    "trainer_client.inputs",
    "trainer_client.options",
    "trainer_client.tokens",
    "trainer_client.metrics",
    "trainer_client.rewards",
    "trainer_client.reward_group",
    "trainer_client.gsm8k",
    "trainer_client.data",
    "trainer_client.data_check",
    "trainer_client.domains",
    "trainer_client.train",
    "trainer_client.readiness",
    "trainer_client.integrations.common",
    "trainer_client.integrations.ground_truth",
    "trainer_client.integrations.coalesce",
    "trainer_client.integrations.verl",
    "trainer_client.integrations.openrlhf_reward_func",
]


@pytest.mark.parametrize("module_name", DOCUMENTED)
def test_docstring_examples_run_against_a_real_server(server: Server, module_name: str) -> None:
    module = importlib.import_module(module_name)
    result = doctest.testmod(module, extraglobs={"VERIFIER_URL": server.url}, optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0, f"{module_name} has no examples"
    assert result.failed == 0
