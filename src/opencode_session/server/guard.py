"""The request guard: which callers may talk to the server (Host and browser Origin, against DNS rebinding and
cross-site pages) and what a request body may be (JSON, bounded while it streams in)."""

from __future__ import annotations

import functools
import ipaddress
import json
from collections.abc import Iterable
from dataclasses import dataclass
from urllib.parse import urlsplit

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ..schema.errors import ForbiddenError, InvalidRequestError, TaggedError

DEFAULT_MAX_BODY_BYTES = 10 * 1024 * 1024


@dataclass(frozen=True)
class GuardOptions:
    """What the operator allowed beyond loopback: extra Host names, browser origins, and the body size limit."""

    allowed_hosts: tuple[str, ...] = ()
    allowed_origins: tuple[str, ...] = ()
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES


def is_loopback(host: str) -> bool:
    """`localhost`, 127.0.0.0/8 or ::1 (also IPv4-mapped), the names only this machine can reach."""
    name = host.lower().rstrip(".")
    if name == "localhost":
        return True
    try:
        address = ipaddress.ip_address(name)
    except ValueError:
        return False
    mapped = getattr(address, "ipv4_mapped", None)
    return address.is_loopback or (mapped is not None and mapped.is_loopback)


_DEFAULT_PORTS = {"http": 80, "https": 443}
_PAGE_SCHEME = {"ws": "http", "wss": "https"}


def _authority(url: str) -> tuple[str, int | None] | None:
    """(name, port) of `//name[:port]`; None when it is anything else (a path, user info, a bad port)."""
    try:
        parts = urlsplit(url)
        port = parts.port  # raises ValueError for a non-numeric or out-of-range port
    except ValueError:
        return None
    if parts.username is not None or parts.path or parts.query or parts.fragment or not parts.hostname:
        return None
    return parts.hostname, port


def _host_name(value: str) -> str | None:
    """The name in a Host header (`name`, `name:port`, `[v6]:port`); None when it is not a valid authority."""
    authority = _authority("//" + value.strip())
    return None if authority is None else authority[0]


def _same_origin(origin: str, scheme: str, host: str) -> bool:
    """Whether `origin` is the one a request addressed to `scheme://host` comes from: a page this server served."""
    default, prefix, text = _DEFAULT_PORTS.get(scheme), scheme + "://", _normalise_origin(origin)
    if default is None or not text.startswith(prefix):
        return False
    own, theirs = _authority("//" + host.strip()), _authority("//" + text.removeprefix(prefix))
    return own is not None and theirs is not None and (own[0], own[1] or default) == (theirs[0], theirs[1] or default)


def _normalise_origin(origin: str) -> str:
    return origin.strip().lower().rstrip("/")


async def _reject(send: Send, err: TaggedError, status: int | None = None) -> None:
    await refuse({"type": "http"}, send, err, status)


async def refuse(scope: Scope, send: Send, err: TaggedError, status: int | None = None,
                 headers: Iterable[tuple[bytes, bytes]] = ()) -> None:
    """Answer with the tagged error as JSON. A WebSocket upgrade gets the same HTTP answer where the server supports
    ASGI's denial response (uvicorn does), else a policy-violation close, which the server answers with a 403."""
    body = json.dumps(err.body()).encode()
    prefix = ""
    if scope["type"] == "websocket":
        if "websocket.http.response" not in scope.get("extensions", {}):
            await send({"type": "websocket.close", "code": 1008})
            return
        prefix = "websocket."
    await send({"type": prefix + "http.response.start", "status": status or err.status, "headers": [
        (b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()), *headers]})
    await send({"type": prefix + "http.response.body", "body": body})


class OriginGuard:
    """403 unless the Host names a loopback address or an allowed host, any browser Origin is an allowed one or
    the server's own (the request's scheme and Host), and a browser that says the request crosses sites
    (`Sec-Fetch-Site: cross-site`, or `same-site`: another port of this host) names an allowed Origin.

    A page on another site can make a browser send requests here (no preflight for "simple" requests) and, by
    rebinding its own domain to 127.0.0.1, read the answers; the Origin and Host headers are what give it away. An
    `<img>` or `<script>` load is a GET with no Origin at all: its `Sec-Fetch-Site` gives it away.
    """

    def __init__(self, app: ASGIApp, allowed_hosts: Iterable[str] = (), allowed_origins: Iterable[str] = ()) -> None:
        self.app = app
        self.hosts = frozenset(h.lower().rstrip(".") for h in allowed_hosts)
        self.origins = frozenset(_normalise_origin(o) for o in allowed_origins)
        # Clients send the same Host on every request: judge each value once (bounded, whatever a client sends).
        self._host_refusal = functools.lru_cache(maxsize=256)(self._judge_host)

    def _judge_host(self, raw: bytes | None) -> str | None:
        name = _host_name(raw.decode("latin-1")) if raw is not None else None
        if name is None:
            return "A valid Host header is required"
        if not (is_loopback(name) or name in self.hosts):
            return f"Host {name!r} is not allowed (start the server with --allow-host to allow it)"
        return None

    def _refusal(self, scope: Scope) -> str | None:
        host = origin = fetch_site = None
        for key, value in scope.get("headers", ()):
            if key == b"host":
                host = value
            elif key == b"origin":
                origin = value.decode("latin-1")
            elif key == b"sec-fetch-site":
                fetch_site = value.decode("latin-1").strip().lower()
        refusal = self._host_refusal(host)
        # A page opens a WebSocket from its http(s) origin: ws and wss compare as http and https.
        scheme: str = scope.get("scheme") or "http"
        scheme = _PAGE_SCHEME.get(scheme, scheme)
        # Only once the Host is allowed may the Origin match it: a rebound page names its own domain in both.
        if refusal is None and origin is not None and _normalise_origin(origin) not in self.origins and not (
                host is not None and _same_origin(origin, scheme, host.decode("latin-1"))):
            refusal = f"Origin {origin!r} is not allowed (start the server with --allow-origin to allow it)"
        # The browser's own word that a page of another site (or another port here) sent this: only an allowed
        # Origin may (a same-origin page says `same-origin`; a client that is not a browser says nothing).
        if refusal is None and fetch_site in ("cross-site", "same-site") and (
                origin is None or _normalise_origin(origin) not in self.origins):
            refusal = (f"A {fetch_site} request is not allowed (Sec-Fetch-Site; start the server with --allow-origin"
                       " to allow a page's origin)")
        return refusal

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] in ("http", "websocket"):
            reason = self._refusal(scope)
            if reason is not None:
                await refuse(scope, send, ForbiddenError(reason))
                return
        await self.app(scope, receive, send)


def _is_json(content_type: str | None) -> bool:
    """`application/json`, optionally with `charset=utf-8` (JSON text is UTF-8)."""
    if content_type is None:
        return False
    media, *params = (part.strip().lower() for part in content_type.split(";"))
    if media != "application/json":
        return False
    for param in params:
        key, _, value = param.partition("=")
        if key.strip() != "charset" or value.strip().strip('"') not in ("utf-8", "utf8"):
            return False
    return True


class BodyGuard:
    """Requests that carry a body must send JSON (415) of at most `max_bytes` (413), counted while the body streams
    in, so an oversized body is refused after reading at most the limit, never buffered whole."""

    def __init__(self, app: ASGIApp, max_bytes: int = DEFAULT_MAX_BODY_BYTES) -> None:
        self.app = app
        self.max_bytes = max_bytes

    def _too_large(self) -> InvalidRequestError:
        return InvalidRequestError(f"Request body is larger than {self.max_bytes} bytes", kind="body")

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        length = chunked = content_type = None
        for key, value in scope.get("headers", ()):
            if key == b"content-length":
                length = value
            elif key == b"transfer-encoding":
                chunked = value
            elif key == b"content-type":
                content_type = value.decode("latin-1")
        declared = int(length) if length is not None and length.strip().isdigit() else None
        if scope["type"] != "http" or not (chunked is not None or (declared or 0) > 0):
            await self.app(scope, receive, send)
            return
        if not _is_json(content_type):
            await _reject(send, InvalidRequestError("Request body must be application/json", kind="body"), 415)
            return
        if declared is not None and declared > self.max_bytes:
            await _reject(send, self._too_large(), 413)
            return
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return  # the client left mid-body: nobody to answer
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_bytes:
                await _reject(send, self._too_large(), 413)
                return
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        await self.app(scope, _replay(b"".join(chunks), receive), send)


def _replay(body: bytes, receive: Receive) -> Receive:
    """The already-read body as one message, then the connection's own messages (the disconnect)."""
    sent = False

    async def replay() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replay
