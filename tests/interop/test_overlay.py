"""The overlay holds the pinned trainers, and the verifier it tests against is the project's."""

from __future__ import annotations

import importlib.metadata

import httpx

from tests.conftest import Server

PINNED = {"verl": "0.9.1", "openrlhf": "0.11.2", "verifiers": "0.4.0", "ray": "2.60.0"}


def test_the_pinned_trainers_are_installed() -> None:
    assert {name: importlib.metadata.version(name) for name in PINNED} == PINNED


def test_the_verifier_answers(verifier: Server) -> None:
    item = {"completion": "<think>6*7</think>The answer is 42.", "math": {"gold": "42"}}
    [result] = httpx.post(f"{verifier.url}/v1/score", json={"items": [item]}, timeout=60).json()["results"]
    assert result["reward"] == 1.0
