"""Keys in logged URLs are masked, whatever logs them: the filter `python -m verifier_service` puts on its handlers."""

from __future__ import annotations

import io
import logging

import pytest

from verifier_service.url_key import HideUrlKeys, mask_keys

KEY = "s3cret-Key_42"


@pytest.mark.parametrize(
    ("logged", "shown"),
    [
        (f"/v1/compat/key/{KEY}/openrlhf", "/v1/compat/key/***/openrlhf"),
        (f"/v1/compat//key/{KEY}/slime", "/v1/compat//key/***/slime"),
        (f"/V1/COMPAT/Key/{KEY}", "/V1/COMPAT/Key/***"),
        (f"/v1/compat/openrlhf?components=math&key={KEY}", "/v1/compat/openrlhf?components=math&key=***"),
        (f"/v1/score?API_KEY={KEY}&access_token={KEY}", "/v1/score?API_KEY=***&access_token=***"),
        (f"/v1/compat/%6Bey/{KEY}/openrlhf", "/v1/compat/key/***/openrlhf"),
        (f"/v1/compat/key%2F{KEY}/openrlhf", "/v1/compat/key/***/openrlhf"),
        (f"/v1/compat/key%252F{KEY}/openrlhf", "/v1/compat/key/***/openrlhf"),
        (f"/v1/compat/openrlhf?k%65y={KEY}", "/v1/compat/openrlhf?key=***"),
        (
            "/v1/compat/openrlhf?components=math,format&weights=1,0.5",
            "/v1/compat/openrlhf?components=math,format&weights=1,0.5",
        ),
        ("/v1/score 100% done", "/v1/score 100% done"),
        ("in the URL (/v1/compat/key/<key>/...)", "in the URL (/v1/compat/key/<key>/...)"),
    ],
)
def test_key_looking_parts_of_a_url_are_masked(logged: str, shown: str) -> None:
    assert mask_keys(logged) == shown


def test_a_handler_with_the_filter_masks_every_loggers_lines() -> None:
    out = io.StringIO()
    handler = logging.StreamHandler(out)
    handler.addFilter(HideUrlKeys())
    logger = logging.getLogger("verifier_service.test_log_masking")
    logger.addHandler(handler)
    logger.propagate = False
    try:
        logger.warning("POST %s: the client went away", f"/v1/compat//key/{KEY}/openrlhf")
        logger.warning("nothing to hide in %s", "/v1/score")
    finally:
        logger.removeHandler(handler)
    assert out.getvalue() == "POST /v1/compat//key/***/openrlhf: the client went away\nnothing to hide in /v1/score\n"
