"""`/v1/score/` is `/v1/score`: a trailing slash is dropped before routing.

Starlette would answer such a path with a 307 redirect and an empty body, which a client that does not follow
redirects (httpx, by default) reads as a broken answer. Dropping the slash serves the route itself instead, for every
route; the app turns Starlette's redirects off, so a path that matches nothing is a JSON 404.
"""

from __future__ import annotations

from typing import Any


class TrailingSlash:
    """ASGI middleware: a path ending in `/` (other than `/` itself) reaches the app without it. The scope is copied,
    so uvicorn's access log still shows the path the client sent."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        path: str = scope.get("path", "")
        if scope["type"] == "http" and len(path) > 1 and path.endswith("/"):
            scope = {**scope, "path": path.rstrip("/") or "/"}
            raw: bytes | None = scope.get("raw_path")
            if raw is not None:
                scope["raw_path"] = raw.rstrip(b"/") or b"/"
        await self.app(scope, receive, send)
