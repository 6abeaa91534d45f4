"""A model an engine serves, as VERIFIER_MODELS names it: the combinations that make sense are accepted, every other
is refused at start with an error naming the field (and never the URL, which may hold credentials); the URL is shown
without them."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from reward_models.spec import ModelSpec, shown_url
from verifier_service.cli import settings_or_exit
from verifier_service.settings import VerifierSettings

URL = "http://user:hunter2@gpu-3:8000"
REMOTE = {"path": "/tokenizer", "backend": "vllm", "url": URL, "max_tokens": 4096}


def test_a_model_an_engine_serves_is_accepted_with_its_defaults() -> None:
    spec = ModelSpec.model_validate(REMOTE | {"served_model": "rm-7b"})
    assert spec.remote and (spec.timeout_s, spec.max_concurrency, spec.served_model) == (30.0, 4, "rm-7b")
    assert ModelSpec.model_validate(REMOTE | {"backend": "sglang"}).remote
    assert ModelSpec.model_validate(REMOTE | {"kind": "prm"}).kind == "prm"
    assert not ModelSpec(path="/m").remote


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"backend": "local"}, "backend"),  # a url, but run locally?
        ({"url": None}, "url"),
        ({"url": "ftp://gpu-3:8000"}, "url"),
        ({"url": "http://gpu-3:8000/?key=1"}, "url"),
        ({"url": "http://gpu-3:port"}, "url"),
        ({"device": "cuda"}, "device"),  # the engine places the model
        ({"dtype": "bfloat16"}, "dtype"),
        ({"max_tokens": None}, "max_tokens"),  # no checkpoint config to read it from
        ({"kind": "prm_lm"}, "kind"),  # read at two tokens of the LM head: local only
        ({"kind": "prm", "backend": "sglang"}, "kind"),  # SGLang has no token-classification pooling
        ({"api_key_env": "ENGINE_KEY"}, "api_key_env"),  # and credentials in the url: one Authorization header
    ],
)
def test_a_remote_spec_that_does_not_fit_is_refused_naming_the_field(change: dict[str, Any], field: str) -> None:
    spec = {key: value for key, value in (REMOTE | change).items() if value is not None}
    with pytest.raises(ValidationError) as raised:
        ModelSpec.model_validate(spec)
    [error] = raised.value.errors(include_input=False)
    assert error["msg"].removeprefix("Value error, ").startswith(f"{field}:")
    assert "hunter2" not in error["msg"]


@pytest.mark.parametrize("field", ["url", "api_key_env", "served_model", "timeout_s", "max_concurrency"])
def test_an_engines_settings_on_a_local_model_are_refused(field: str) -> None:
    value: Any = {"url": URL, "api_key_env": "K", "served_model": "x", "timeout_s": 5, "max_concurrency": 2}[field]
    with pytest.raises(ValidationError, match=f"{field}: " if field != "url" else "backend: "):
        ModelSpec.model_validate({"path": "/m", field: value})


def test_a_key_from_the_environment_is_accepted_with_a_url_without_credentials() -> None:
    spec = ModelSpec.model_validate(REMOTE | {"url": "https://engine.example/v1", "api_key_env": "ENGINE_KEY"})
    assert spec.api_key_env == "ENGINE_KEY"
    with pytest.raises(ValidationError) as raised:
        ModelSpec.model_validate(REMOTE | {"url": "http://gpu-3:8000", "api_key_env": "not a name"})
    assert [error["loc"] for error in raised.value.errors()] == [("api_key_env",)]


def test_an_engines_timeout_is_shorter_than_the_batch_deadline() -> None:
    with pytest.raises(ValidationError, match="timeout_s must be shorter than VERIFIER_BATCH_TIMEOUT_S"):
        VerifierSettings(batch_timeout_s=20, models={"rm": REMOTE | {"timeout_s": 20}})
    assert VerifierSettings(batch_timeout_s=20, models={"rm": REMOTE | {"timeout_s": 19}}).models["rm"].remote


def test_the_start_refuses_a_bad_remote_model_without_echoing_its_url() -> None:
    with pytest.raises(SystemExit) as raised:
        settings_or_exit({"models": {"rm": REMOTE | {"kind": "prm_lm"}}})
    said = str(raised.value.code)
    assert "models.rm" in said and "kind:" in said and "hunter2" not in said


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        (URL, "http://gpu-3:8000"),
        ("https://token@engine.example/v1", "https://engine.example/v1"),
        ("http://[::1]:8000", "http://[::1]:8000"),
        ("http://gpu-3", "http://gpu-3"),
    ],
)
def test_the_url_is_shown_without_credentials(url: str, shown: str) -> None:
    assert shown_url(url) == shown
