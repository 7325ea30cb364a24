"""WebSocket operations (a terminal's connection): the lazy session a generated method returns and the network
connector that opens it with the `websockets` library. Another connector (the embedded host's, in memory) may stand
in for the network one; both report a refused handshake as `WebSocketRefused` with the HTTP answer. `websockets` is
loaded with the first connection the network connector opens, not with the client."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from types import TracebackType
from typing import TYPE_CHECKING, Protocol, Self

from .errors import ClientError

if TYPE_CHECKING:
    from websockets.asyncio.client import ClientConnection


class WebSocketChannel(Protocol):
    """One open WebSocket. `recv` returns None once the connection has closed (`close_code` then says how)."""

    close_code: int | None

    async def send(self, data: str | bytes) -> None: ...

    async def recv(self) -> str | bytes | None: ...

    async def close(self, code: int = 1000) -> None: ...


class WebSocketRefused(Exception):
    """The server answered the upgrade with an HTTP response instead of accepting it."""

    def __init__(self, status: int, body: bytes) -> None:
        super().__init__(f"the WebSocket upgrade was answered with HTTP {status}")
        self.status = status
        self.body = body


# (ws:// or wss:// URL, request headers, open timeout in seconds) -> the open channel
WebSocketConnector = Callable[[str, Sequence[tuple[str, str]], float | None], Awaitable[WebSocketChannel]]


class WebSocketSession:
    """A WebSocket operation's connection, opened on `async with` (or the first `send`/`receive`), never reopened.

    `receive()` returns the next frame (text as `str`, binary as `bytes`) or None once the server has closed the
    connection (`close_code` says how); iterating yields frames until then. A refused upgrade raises the operation's
    declared error (e.g. `PtyNotFoundError`) or `ClientError`, like any call.
    """

    def __init__(self, opener: Callable[[], Awaitable[WebSocketChannel]]) -> None:
        self._opener = opener
        self._channel: WebSocketChannel | None = None
        self._closed = False

    async def open(self) -> Self:
        if self._closed:
            raise ClientError("Transport", "the WebSocket session is closed")
        if self._channel is None:
            self._channel = await self._opener()
        return self

    @property
    def close_code(self) -> int | None:
        return None if self._channel is None else self._channel.close_code

    async def send(self, data: str | bytes) -> None:
        await self.open()
        assert self._channel is not None
        await self._channel.send(data)

    async def receive(self) -> str | bytes | None:
        await self.open()
        assert self._channel is not None
        return await self._channel.recv()

    async def close(self, code: int = 1000) -> None:
        self._closed = True
        channel, self._channel = self._channel, None
        if channel is not None:
            await channel.close(code)

    def __aiter__(self) -> AsyncIterator[str | bytes]:
        return self._frames()

    async def _frames(self) -> AsyncIterator[str | bytes]:
        while (frame := await self.receive()) is not None:
            yield frame

    async def __aenter__(self) -> Self:
        return await self.open()

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        await self.close()


class _NetworkChannel:
    def __init__(self, connection: ClientConnection) -> None:
        self._connection = connection
        self.close_code: int | None = None

    async def send(self, data: str | bytes) -> None:
        from websockets.exceptions import ConnectionClosed

        try:
            await self._connection.send(data)
        except ConnectionClosed as closed:
            raise ClientError("Transport", f"the WebSocket is closed ({closed})", cause=closed) from closed

    async def recv(self) -> str | bytes | None:
        from websockets.exceptions import ConnectionClosed

        try:
            return await self._connection.recv()
        except ConnectionClosed as closed:
            self.close_code = closed.rcvd.code if closed.rcvd is not None else 1006
            return None

    async def close(self, code: int = 1000) -> None:
        await self._connection.close(code)


async def network_websocket(url: str, headers: Sequence[tuple[str, str]], timeout: float | None) -> WebSocketChannel:
    """Open `url` over the network with the `websockets` client (proxies from the environment, as for HTTP)."""
    from websockets.asyncio.client import connect
    from websockets.exceptions import InvalidHandshake, InvalidStatus

    try:
        connection = await connect(url, additional_headers=list(headers), open_timeout=timeout, max_size=None)
    except InvalidStatus as refused:
        raise WebSocketRefused(refused.response.status_code, bytes(refused.response.body or b"")) from None
    except (OSError, TimeoutError, InvalidHandshake) as exc:
        raise ClientError("Transport", f"{type(exc).__name__}: {exc}", cause=exc) from exc
    return _NetworkChannel(connection)
