"""HTTP basic auth for every route (WebSocket upgrades too) when OPENCODE_SERVER_PASSWORD is set, as OpenCode's
server does; a WebSocket upgrade may instead carry a connection ticket, which its route checks."""

from __future__ import annotations

import base64
import hmac
from urllib.parse import parse_qsl

from starlette.types import ASGIApp, Receive, Scope, Send

from ..schema.errors import UnauthorizedError
from .guard import refuse


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
        if scope["type"] not in ("http", "websocket") or self._authorized(scope):
            await self.app(scope, receive, send)
            return
        if scope["type"] == "websocket" and _has_ticket(scope):
            # A browser cannot send the header on a WebSocket: the route checks the ticket (any ticket it is given)
            await self.app(scope, receive, send)
            return
        await refuse(scope, send, UnauthorizedError("Authentication required"),
                     headers=((b"www-authenticate", b'Basic realm="opencode"'),))


def _has_ticket(scope: Scope) -> bool:
    return any(key == "ticket" for key, _ in parse_qsl(scope.get("query_string", b"").decode("latin-1")))
