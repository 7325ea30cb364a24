"""HTTP basic auth for every route (WebSocket upgrades too) when OPENCODE_SERVER_PASSWORD is set, as OpenCode's
server does, or the inspector's login cookie; a WebSocket upgrade may instead carry a connection ticket, which its
route checks. A browser asking for a page without either is sent to the login form, which this middleware answers,
as it answers logging out; a client that keeps sending wrong passwords waits longer and longer for each answer."""

from __future__ import annotations

import base64
import hmac
import time
from collections import OrderedDict
from collections.abc import Callable
from urllib.parse import parse_qsl

import anyio
from starlette.types import ASGIApp, Receive, Scope, Send

from ..schema.errors import UnauthorizedError
from .guard import refuse
from .ui import login

FREE_FAILURES = 10  # wrong passwords a client may send, answered at once, before the next ones are slowed down
LOCK_FIRST_S = 5.0  # how long the answer to the first wrong password past those is held
LOCK_MAX_S = 300.0  # the longest the answer to a wrong password is held
FORGET_S = 900.0  # a client that sent no wrong password for this long starts counting afresh
CLIENTS_KEPT = 4096  # clients whose failures are remembered (the oldest are forgotten first)
LOGINS_KEPT = 4096  # logins (cookies) remembered at once; past that the oldest one ends


class Attempts:
    """Wrong passwords by client (the connection's peer address): past FREE_FAILURES, the answer to each further
    wrong one is held twice as long as the one before (5 s, 10 s, 20 s, ... up to LOCK_MAX_S), so guessing costs
    time; a right password is never held nor refused, so a guesser on the same address (every local process is
    127.0.0.1) locks nobody out. The count ends after FORGET_S without a wrong password. One process's memory: each
    host of a cluster counts its own."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self.failures: OrderedDict[str, tuple[int, float]] = OrderedDict()  # address -> (failures, last one)

    def judge(self, client: str, right: bool) -> float:
        """Seconds to hold the answer to `client`'s password: 0 for a right one and the free wrong ones."""
        if right:
            return 0.0
        now = self.clock()
        failures, last = self.failures.get(client, (0, now))
        failures = 1 if now - last > FORGET_S else failures + 1
        self.failures[client] = (failures, now)
        self.failures.move_to_end(client)
        while len(self.failures) > CLIENTS_KEPT:
            self.failures.popitem(last=False)
        past = failures - FREE_FAILURES
        return 0.0 if past <= 0 else min(LOCK_MAX_S, LOCK_FIRST_S * 2.0 ** (past - 1))


class BasicAuthMiddleware:
    def __init__(self, app: ASGIApp, username: str, password: str) -> None:
        self.app = app
        self.expected = f"{username}:{password}".encode()
        self.attempts = Attempts()
        # each login's cookie value -> the Host it was issued to and when it expires (epoch seconds): the value is a
        # random token, so a captured one tells nothing of the password and opens nothing elsewhere; one process's
        # memory, so a login ends with the server (and holds on the host of a cluster that issued it)
        self.logins: OrderedDict[str, tuple[bytes, float]] = OrderedDict()

    def _cookie(self, scope: Scope) -> str | None:
        """The request's login cookie, if it holds a login of this server for this Host, not ended."""
        host = _header(scope, b"host")
        cookie = _header(scope, b"cookie")
        value = login.cookie_value(cookie) if cookie is not None else None
        if value is None or host is None or value not in self.logins:
            return None
        issued_to, expires = self.logins[value]
        if expires < time.time():
            del self.logins[value]
            return None
        return value if hmac.compare_digest(issued_to, host.lower()) else None

    def _issue(self, host: bytes) -> str:
        """A new login for `host`: its cookie value."""
        now = time.time()
        for old, (_, expires) in list(self.logins.items()):
            if expires < now:
                del self.logins[old]
        value = login.issue()
        self.logins[value] = (host.lower(), now + login.LIFETIME_S)
        while len(self.logins) > LOGINS_KEPT:
            self.logins.popitem(last=False)
        return value

    def _basic(self, scope: Scope) -> bool | None:
        """Whether the request's basic credentials are right; None when it sends none."""
        for name, value in scope.get("headers", ()):
            if name == b"authorization":
                scheme, _, token = value.partition(b" ")
                if scheme.lower() != b"basic":
                    return None
                try:
                    supplied = base64.b64decode(token.strip(), validate=True)
                except Exception:
                    return False
                return hmac.compare_digest(supplied, self.expected)
        return None

    async def _judge(self, scope: Scope, receive: Receive, right: bool) -> bool:
        """Count the password and, for a wrong one past the free ones, hold the answer as long as the count says;
        False when the client went away meanwhile (nothing to answer)."""
        client = scope.get("client")  # the peer: forwarded headers rewrite it only from a --trust-proxy address
        hold = self.attempts.judge(client[0] if client else "", right)
        if not hold:
            return True
        if scope["type"] != "http":
            await anyio.sleep(hold)
            return True
        gone = False
        async with anyio.create_task_group() as tg:
            async def watch() -> None:  # a wrong password's request is answered here: its body is not needed
                nonlocal gone
                while (await receive())["type"] != "http.disconnect":
                    pass
                gone = True
                tg.cancel_scope.cancel()

            tg.start_soon(watch)
            await anyio.sleep(hold)
            tg.cancel_scope.cancel()
        return not gone

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["path"] == login.LOGIN_PATH:
            await self._login(scope, receive, send)
            return
        if scope["type"] == "http" and scope["path"] == login.LOGOUT_PATH:
            await self._logout(scope, send)
            return
        if scope["type"] not in ("http", "websocket") or self._cookie(scope) is not None:
            await self.app(scope, receive, send)
            return
        basic = self._basic(scope)
        if basic is not None:
            if not await self._judge(scope, receive, basic):
                return
            if basic:
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
            if self._cookie(scope) is not None:
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
        right = hmac.compare_digest(supplied, self.expected)
        if not await self._judge(scope, receive, right):
            return
        if not right:
            await _page(send, 401, login.page(target, "Wrong user or password."))
            return
        cookie = login.set_cookie(self._issue(_header(scope, b"host") or b""), secure=scope.get("scheme") == "https")
        await _answer(send, 303, b"", ((b"location", target.encode()), (b"set-cookie", cookie.encode())))


    async def _logout(self, scope: Scope, send: Send) -> None:
        """POST: this browser's login ends (its cookie, and any copy of it, opens nothing from now on) and the
        cookie is cleared; on to the login form."""
        if scope["method"] != "POST":
            await _answer(send, 405, b"", ((b"allow", b"POST"),))
            return
        value = self._cookie(scope)
        if value is not None:
            del self.logins[value]
        await _answer(send, 303, b"", ((b"location", login.LOGIN_PATH.encode()),
                                       (b"set-cookie", login.clear_cookie(scope.get("scheme") == "https").encode())))


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


async def _page(send: Send, status: int, body: bytes, headers: tuple[tuple[bytes, bytes], ...] = ()) -> None:
    # no WWW-Authenticate on the form's own answers: the browser shows the form, not its prompt
    await _answer(send, status, body, ((b"content-type", b"text/html; charset=utf-8"),
                                       (b"content-security-policy", login.CSP.encode()),
                                       (b"x-content-type-options", b"nosniff"), *headers))


def _has_ticket(scope: Scope) -> bool:
    return any(key == "ticket" for key, _ in parse_qsl(scope.get("query_string", b"").decode("latin-1")))
