"""The API key in the URL, for trainers that can send no header (OpenRLHF's and slime's reward URLs):
`/v1/compat/key/<key>/openrlhf` is `/v1/compat/openrlhf` with that key. Only the trainer routes (/v1/compat/...)
take it; /v1/score reads the header alone.

The key leaves the URL before anything else sees the request: this middleware moves it into the ASGI scope and
rewrites the path in place, so routing, our own logs and uvicorn's access log (which formats the scope it handed
to the application, after the application has answered) see `/v1/compat/openrlhf`. A URL that only comes close
(`/v1/compat//key/<key>/...`, `/V1/compat/key/<key>/...`, `?key=<key>`, any of them percent-encoded) is not taken
(it gets a 404 or a 401) but is logged as it came: `HideUrlKeys`, on every log handler of `python -m
verifier_service`, masks whatever looks like a key in any logged line, uvicorn's access log and ours.
"""

from __future__ import annotations

import logging
import re
from typing import Any
from urllib.parse import quote, unquote

PREFIX = "/v1/compat/key/"
SCOPE_KEY = "verifier.url_key"  # where the compat routes' auth finds the key
_PREFIX_BYTES = PREFIX.encode()
MASK = "***"
# A path segment after a `key` segment, and the value of a query parameter whose name says key, token or secret.
# A placeholder (`/key/<key>/`, in our own start-up line) is not a key: URL-safe keys hold no `<`.
_PATH_KEY = re.compile(r"(/key/+)[^/?#&\s\"'<]+", re.IGNORECASE)
_QUERY_KEY = re.compile(r"([?&;][^=&#\s\"'/]*(?:key|token|secret|password)[^=&#\s\"'/]*=)[^&#\s\"'<]+", re.IGNORECASE)
_DECODINGS = 3  # `%252F` is `%2F` is `/`: a key hidden under up to this many layers of percent-encoding is found


class UrlKey:
    """ASGI middleware: `/v1/compat/key/<key>/<route>` becomes `/v1/compat/<route>`, with the key in scope[SCOPE_KEY].
    A key holds no `/` (URL-safe keys, such as `secrets.token_urlsafe`, never do)."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope["path"].startswith(PREFIX):
            take_key(scope)
        await self.app(scope, receive, send)


def take_key(scope: dict[str, Any]) -> None:
    """Move the key out of the scope's path (and raw path) into scope[SCOPE_KEY]."""
    key, _, rest = scope["path"][len(PREFIX) :].partition("/")
    scope[SCOPE_KEY] = key
    scope["path"] = f"/v1/compat/{rest}"
    raw: bytes | None = scope.get("raw_path")
    if raw is not None and raw.startswith(_PREFIX_BYTES):
        scope["raw_path"] = b"/v1/compat/" + raw[len(_PREFIX_BYTES) :].partition(b"/")[2]
    else:
        scope["raw_path"] = quote(scope["path"]).encode()


class HideUrlKeys(logging.Filter):
    """Masks anything that looks like a key in a URL of a log record: `/key/***/`, `?key=***`. For uvicorn's access
    log (client, method, path, ...) only the path is rewritten (its formatter reads the other arguments); any other
    record whose message holds a key gets the masked message. Put on a handler, it sees every logger's records."""

    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args
        if record.name == "uvicorn.access" and isinstance(args, tuple) and len(args) >= 3 and isinstance(args[2], str):
            record.args = (*args[:2], mask_keys(args[2]), *args[3:])
            return True
        message = record.getMessage()
        masked = mask_keys(message)
        if masked != message:
            record.msg, record.args = masked, None
        return True


def mask_keys(text: str) -> str:
    """`text` with every key-looking part of a URL masked, in any case and under percent-encoding (then the line is
    shown decoded, masked).

    >>> mask_keys("POST /V1/compat//KEY/s3cret/openrlhf?components=math&api_key=s3cret")
    'POST /V1/compat//KEY/***/openrlhf?components=math&api_key=***'
    >>> mask_keys("/v1/compat/%6Bey%2Fs3cret/slime")
    '/v1/compat/key/***/slime'
    """
    masked = _mask(text)
    decoded = masked
    for _ in range(_DECODINGS):
        if "%" not in decoded:
            break
        decoded = unquote(decoded)
        if _mask(decoded) != decoded:
            return _mask(decoded)
    return masked


def _mask(text: str) -> str:
    return _QUERY_KEY.sub(rf"\1{MASK}", _PATH_KEY.sub(rf"\1{MASK}", text))
