"""In-memory WebSocket sessions with an ASGI app: the embedded host's connector for WebSocket operations (a
terminal's connection), which the in-memory HTTP transport cannot carry. The app sees an ordinary `websocket` scope
that supports the denial response, so routing, middleware (Host/Origin, auth) and handlers are the networked ones."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, MutableMapping, Sequence
from typing import Any
from urllib.parse import unquote, urlsplit

from ..client.errors import ClientError
from ..client.websocket import WebSocketChannel, WebSocketRefused

Message = MutableMapping[str, Any]
ASGIApp = Callable[[MutableMapping[str, Any], Callable[[], Awaitable[Message]], Callable[[Message], Awaitable[None]]],
                   Awaitable[None]]

_ENDED = {"type": "websocket.close", "code": 1006}  # the app returned without closing


class _Session:
    """The client end of one in-memory WebSocket: frames the app sends arrive in `_from_app`."""

    def __init__(self) -> None:
        self._to_app: asyncio.Queue[Message] = asyncio.Queue()
        self._from_app: asyncio.Queue[Message] = asyncio.Queue()
        self.close_code: int | None = None
        self.task: asyncio.Task[None] | None = None

    async def receive_from_client(self) -> Message:
        return await self._to_app.get()

    async def send_to_client(self, message: Message) -> None:
        await self._from_app.put(message)

    async def first(self, timeout: float | None) -> Message:
        return await asyncio.wait_for(self._from_app.get(), timeout)

    async def send(self, data: str | bytes) -> None:
        if self.close_code is not None:
            raise ClientError("Transport", f"the WebSocket is closed ({self.close_code})")
        await self._to_app.put({"type": "websocket.receive", **({"text": data} if isinstance(data, str)
                                                                 else {"bytes": data})})

    async def recv(self) -> str | bytes | None:
        if self.close_code is not None:
            return None
        message = await self._from_app.get()
        if message["type"] == "websocket.send":
            text = message.get("text")
            return text if text is not None else bytes(message.get("bytes") or b"")
        self.close_code = int(message.get("code", 1000))
        return None

    async def close(self, code: int = 1000) -> None:
        if self.close_code is None:
            self.close_code = code
        await self._to_app.put({"type": "websocket.disconnect", "code": code})
        if self.task is not None:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await asyncio.wait_for(self.task, 5)


class InMemoryWebSockets:
    """Opens WebSocket sessions with `app()` (the app the host currently serves), tracking them so `aclose` ends
    the ones still open."""

    def __init__(self, app: Callable[[], ASGIApp | None]) -> None:
        self._app = app
        self._sessions: set[_Session] = set()

    async def connect(self, url: str, headers: Sequence[tuple[str, str]], timeout: float | None) -> WebSocketChannel:
        app = self._app()
        if app is None:
            raise ClientError("Transport", "the embedded host is not open: use `async with OpenCode(...)`")
        parts = urlsplit(url)
        scope: dict[str, Any] = {
            "type": "websocket", "asgi": {"version": "3.0", "spec_version": "2.4"}, "http_version": "1.1",
            "scheme": "wss" if parts.scheme == "wss" else "ws", "server": (parts.hostname, parts.port or 80),
            "client": ("127.0.0.1", 0), "root_path": "", "path": unquote(parts.path), "raw_path": parts.path.encode(),
            "query_string": parts.query.encode(), "subprotocols": [], "state": {},
            "headers": [(b"host", parts.netloc.encode()), *((k.lower().encode(), v.encode()) for k, v in headers)],
            "extensions": {"websocket.http.response": {}},
        }
        session = _Session()
        await session._to_app.put({"type": "websocket.connect"})

        async def run() -> None:
            try:
                await app(scope, session.receive_from_client, session.send_to_client)
            finally:
                await session.send_to_client(dict(_ENDED))

        session.task = asyncio.create_task(run(), name="embedded-websocket")
        self._sessions.add(session)
        session.task.add_done_callback(lambda _task: self._sessions.discard(session))
        first = await session.first(timeout)
        if first["type"] == "websocket.accept":
            return session
        if first["type"] == "websocket.http.response.start":
            body = b""
            while True:
                part = await session.first(timeout)
                body += bytes(part.get("body", b""))
                if part["type"] != "websocket.http.response.body" or not part.get("more_body", False):
                    break
            raise WebSocketRefused(int(first["status"]), body)
        raise WebSocketRefused(403, b"")  # closed before accepting: what a server answers the handshake with

    async def aclose(self) -> None:
        for session in list(self._sessions):
            await session.close(1001)
