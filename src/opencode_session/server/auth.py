"""HTTP basic auth for every route when OPENCODE_SERVER_PASSWORD is set, as OpenCode's server does."""

from __future__ import annotations

import base64
import hmac
import json

from starlette.types import ASGIApp, Receive, Scope, Send

from ..schema.errors import UnauthorizedError


class BasicAuthMiddleware:
    def __init__(self, app: ASGIApp, username: str, password: str) -> None:
        self.app = app
        self.expected = f"{username}:{password}".encode()

    def _authorized(self, scope: Scope) -> bool:
        for name, value in scope.get("headers", ()):
            if name == b"authorization":
                scheme, _, token = value.partition(b" ")
                if scheme.lower() != b"basic":
                    return False
                try:
                    supplied = base64.b64decode(token.strip(), validate=True)
                except Exception:
                    return False
                return hmac.compare_digest(supplied, self.expected)
        return False

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or self._authorized(scope):
            await self.app(scope, receive, send)
            return
        body = json.dumps(UnauthorizedError("Authentication required").body()).encode()
        await send({"type": "http.response.start", "status": 401, "headers": [
            (b"content-type", b"application/json"),
            (b"www-authenticate", b'Basic realm="opencode"'),
            (b"content-length", str(len(body)).encode()),
        ]})
        await send({"type": "http.response.body", "body": body})
