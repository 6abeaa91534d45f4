"""The API key in the URL, for trainers that can send no header (OpenRLHF's and slime's reward URLs):
`/v1/compat/key/<key>/openrlhf` is `/v1/compat/openrlhf` with that key. Only the trainer routes (/v1/compat/...)
take it; /v1/score reads the header alone.

The key leaves the URL before anything else sees the request: this middleware moves it into the ASGI scope and
rewrites the path in place, so routing, our own logs and uvicorn's access log (which formats the scope it handed
to the application, after the application has answered) see `/v1/compat/openrlhf`. Should a server log the URL as
it came, `HideUrlKeys` masks the key in uvicorn's access log (`python -m verifier_service` installs it).
"""

from __future__ import annotations

import logging
import re
from typing import Any
from urllib.parse import quote

PREFIX = "/v1/compat/key/"
SCOPE_KEY = "verifier.url_key"  # where the compat routes' auth finds the key
_PREFIX_BYTES = PREFIX.encode()
_IN_A_PATH = re.compile(r"(/v1/compat/key/)[^/?#\s]*")


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
    """Masks a URL's key in uvicorn's access log records (client, method, path, ...): `/v1/compat/key/***/...`."""

    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args
        if isinstance(args, tuple) and len(args) >= 3 and isinstance(args[2], str) and PREFIX in args[2]:
            record.args = (*args[:2], _IN_A_PATH.sub(r"\1***", args[2]), *args[3:])
        return True
