"""Request-size limit as plain ASGI middleware: refuse early on Content-Length, and count streamed bodies."""

from __future__ import annotations

import json
from typing import Any

Scope = dict[str, Any]


class BodyTooLarge(Exception):
    pass


class BodySizeLimit:
    def __init__(self, app: Any, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        length = dict(scope.get("headers") or []).get(b"content-length")
        if length is not None and length.isdigit() and int(length) > self.max_bytes:
            await self._refuse(send)
            return
        seen = 0

        async def counted_receive() -> Any:
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self.max_bytes:
                    raise BodyTooLarge
            return message

        try:
            await self.app(scope, counted_receive, send)
        except BodyTooLarge:
            await self._refuse(send)

    async def _refuse(self, send: Any) -> None:
        body = json.dumps(
            {"detail": f"request body larger than {self.max_bytes} bytes (VERIFIER_MAX_REQUEST_BYTES)"}
        ).encode()
        await send(
            {
                "type": "http.response.start",
                "status": 413,
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(body)).encode()),
                ],
            }
        )
        await send({"type": "http.response.body", "body": body})
