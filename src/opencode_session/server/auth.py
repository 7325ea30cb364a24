"""HTTP basic auth for every route (WebSocket upgrades too) when OPENCODE_SERVER_PASSWORD is set, as OpenCode's
server does, or the inspector's login cookie; a WebSocket upgrade may instead carry a connection ticket, which its
route checks. A browser asking for a page without either is sent to the login form, which this middleware answers."""

from __future__ import annotations

import base64
import hmac
from urllib.parse import parse_qsl

from starlette.types import ASGIApp, Receive, Scope, Send

from ..schema.errors import UnauthorizedError
from .guard import refuse
from .ui import login


class BasicAuthMiddleware:
    def __init__(self, app: ASGIApp, username: str, password: str) -> None:
        self.app = app
        self.expected = f"{username}:{password}".encode()

    def _authorized(self, scope: Scope) -> bool:
        return self._basic(scope) or self._cookie(scope)

    def _cookie(self, scope: Scope) -> bool:
        host = _header(scope, b"host")
        cookie = _header(scope, b"cookie")
        value = login.cookie_value(cookie) if cookie is not None else None
        return value is not None and host is not None and login.valid(self.expected, value, host.decode("latin-1"))

    def _basic(self, scope: Scope) -> bool:
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
        if scope["type"] == "http" and scope["path"] == login.LOGIN_PATH:
            await self._login(scope, receive, send)
            return
        if scope["type"] not in ("http", "websocket") or self._authorized(scope):
            await self.app(scope, receive, send)
            return
        if scope["type"] == "websocket" and _has_ticket(scope):
            # A browser cannot send the header on a WebSocket: the route checks the ticket (any ticket it is given)
            await self.app(scope, receive, send)
            return
        if scope["type"] == "http" and scope["method"] == "GET" and _is_page(scope):
            # a person at a browser: the login form, not only the browser's own basic-auth prompt
            query = scope.get("query_string", b"").decode("latin-1")
            target = scope["path"] + ("?" + query if query else "")
            await _answer(send, 303, b"", ((b"location", login.login_url(target).encode()),))
            return
        await refuse(scope, send, UnauthorizedError("Authentication required"),
                     headers=((b"www-authenticate", b'Basic realm="opencode"'),))

    async def _login(self, scope: Scope, receive: Receive, send: Send) -> None:
        """GET: the form (or on to `next` when already logged in). POST: check the form's user and password; right,
        the cookie and on to `next`; wrong, the form again with no cookie."""
        params = dict(parse_qsl(scope.get("query_string", b"").decode("latin-1")))
        if scope["method"] == "GET":
            if self._authorized(scope):
                await _answer(send, 303, b"", ((b"location", login.local_path(params.get("next")).encode()),))
            else:
                await _page(send, 200, login.page(params.get("next") or "/"))
            return
        if scope["method"] != "POST":
            await _answer(send, 405, b"", ((b"allow", b"GET, POST"),))
            return
        content_type = (_header(scope, b"content-type") or b"").split(b";")[0].strip().lower()
        body = await _read_bounded(receive, login.FORM_MAX_BYTES)
        if content_type != b"application/x-www-form-urlencoded" or body is None:
            await _page(send, 400, login.page("/", "The form could not be read."))
            return
        fields = login.form_fields(body)
        supplied = f"{fields.get('username', '')}:{fields.get('password', '')}".encode()
        target = login.local_path(fields.get("next"))
        if not hmac.compare_digest(supplied, self.expected):
            await _page(send, 401, login.page(target, "Wrong user or password."))
            return
        host = (_header(scope, b"host") or b"").decode("latin-1")
        cookie = login.set_cookie(login.issue(self.expected, host), secure=scope.get("scheme") == "https")
        await _answer(send, 303, b"", ((b"location", target.encode()), (b"set-cookie", cookie.encode())))


def _header(scope: Scope, name: bytes) -> bytes | None:
    for key, value in scope.get("headers", ()):
        if key == name:
            return bytes(value)
    return None


def _is_page(scope: Scope) -> bool:
    """A browser navigating to one of the inspector's pages (it asks for HTML); API clients get the 401."""
    path: str = scope["path"]
    return (path == "/" or path.startswith("/ui/session")) and b"text/html" in (_header(scope, b"accept") or b"")


async def _read_bounded(receive: Receive, limit: int) -> bytes | None:
    """The request body, or None once it passes `limit` bytes (the rest is not read)."""
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return None
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            return None
        chunks.append(chunk)
        if not message.get("more_body", False):
            return b"".join(chunks)


async def _answer(send: Send, status: int, body: bytes, headers: tuple[tuple[bytes, bytes], ...] = ()) -> None:
    await send({"type": "http.response.start", "status": status, "headers": [
        (b"content-length", str(len(body)).encode()), (b"cache-control", b"no-store"), *headers]})
    await send({"type": "http.response.body", "body": body})


async def _page(send: Send, status: int, body: bytes) -> None:
    # no WWW-Authenticate on the form's own answers: the browser shows the form, not its prompt
    await _answer(send, status, body, ((b"content-type", b"text/html; charset=utf-8"),
                                       (b"content-security-policy", login.CSP.encode()),
                                       (b"x-content-type-options", b"nosniff")))


def _has_ticket(scope: Scope) -> bool:
    return any(key == "ticket" for key, _ in parse_qsl(scope.get("query_string", b"").decode("latin-1")))
