"""In-process httpx2 transport: runs an ASGI app as an asyncio task and streams each body chunk as it is sent.
It owns those app tasks, ending each when its response is closed and cancelling stragglers in `aclose()`."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, MutableMapping
from typing import Any

import anyio
import httpx2

__all__ = ["ASGIStreamingTransport"]

Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[MutableMapping[str, Any], Receive, Send], Awaitable[None]]

logger = logging.getLogger(__name__)

_DEFAULT_PORTS = {"http": 80, "https": 443}


class _Exchange:
    """The shared state of one request/response cycle between the client and the app task."""

    def __init__(self, app: ASGIApp, scope: dict[str, Any], request: httpx2.Request, buffer_size: int) -> None:
        self._app = app
        self._scope = scope
        if not isinstance(request.stream, httpx2.AsyncByteStream):
            raise TypeError("ASGIStreamingTransport needs an async request body (use httpx2.AsyncClient)")
        self._request_chunks = request.stream.__aiter__()
        self._request_finished = False
        self._drop_body = request.method == "HEAD"
        self.status: int | None = None
        self.headers: list[tuple[bytes, bytes]] = []
        self.body_complete = False
        self.error: Exception | None = None
        self.error_reported = False
        self.cancelled = False
        self.disconnected = asyncio.Event()
        # One event for both outcomes so the caller can stop waiting for headers even when none will come.
        self.settled = asyncio.Event()
        self.sender, self.receiver = anyio.create_memory_object_stream[bytes](buffer_size)
        self.task: asyncio.Task[None] | None = None

    async def receive(self) -> Message:
        if self.disconnected.is_set():
            return {"type": "http.disconnect"}
        if not self._request_finished:
            try:
                chunk = await self._request_chunks.__anext__()
            except StopAsyncIteration:
                self._request_finished = True
                return {"type": "http.request", "body": b"", "more_body": False}
            return {"type": "http.request", "body": bytes(chunk), "more_body": True}
        # Holding the app here until the caller lets go is what tells a long-lived stream that its reader left.
        await self.disconnected.wait()
        return {"type": "http.disconnect"}

    async def send(self, message: Message) -> None:
        kind = message["type"]
        if kind == "http.response.start":
            if self.status is not None:
                raise RuntimeError("ASGI app sent 'http.response.start' twice")
            self.status = int(message["status"])
            self.headers = [(bytes(k), bytes(v)) for k, v in message.get("headers", [])]
            self.settled.set()
        elif kind == "http.response.body":
            if self.status is None:
                raise RuntimeError("ASGI app sent 'http.response.body' before 'http.response.start'")
            if self.body_complete:
                raise RuntimeError("ASGI app sent 'http.response.body' after the body was complete")
            body = bytes(message.get("body", b""))
            more_body = bool(message.get("more_body", False))
            if body and not self._drop_body and not self.disconnected.is_set():
                try:
                    await self.sender.send(body)
                except (anyio.BrokenResourceError, anyio.ClosedResourceError):
                    # The reader has gone; like a socket server we discard output for a departed client
                    # rather than fail the app, which learns of the departure from receive().
                    pass
            if not more_body:
                self.body_complete = True
                self.sender.close()
        else:
            raise RuntimeError(f"ASGI app sent an unsupported message type {kind!r}")

    async def run(self) -> None:
        try:
            await self._app(self._scope, self.receive, self.send)
        except asyncio.CancelledError:
            self.cancelled = True
            raise
        except Exception as exc:
            self.error = exc
            if self.body_complete or self.disconnected.is_set():
                # Nobody is left to raise this to, and an escaping exception is a server bug worth seeing.
                self.report_unseen_error("after its response was over")
        finally:
            # The error must be recorded before these wake the waiters that inspect it.
            self.sender.close()
            self.settled.set()

    def report_unseen_error(self, when: str) -> None:
        if self.error is not None and not self.error_reported:
            self.error_reported = True
            logger.error("ASGI app raised %s", when, exc_info=self.error)

    def incomplete_body_error(self) -> httpx2.TransportError:
        if self.error is not None:
            self.error_reported = True
            failure = httpx2.ReadError(f"ASGI app raised while streaming its response: {self.error!r}")
            failure.__cause__ = self.error
            return failure
        if self.cancelled:
            return httpx2.ReadError("ASGI app was cancelled while streaming its response")
        return httpx2.RemoteProtocolError("ASGI app returned without completing its response body")

    async def close(self, timeout: float) -> None:
        self.disconnected.set()
        self.receiver.close()
        await self.wait_for_app(timeout)
        self.report_unseen_error("while its response was being closed")

    async def wait_for_app(self, timeout: float) -> None:
        task = self.task
        if task is None or task.done():
            return
        try:
            # Shielded because this is cleanup: an expired anyio deadline around the caller must not skip it.
            with anyio.CancelScope(shield=True):
                done, _ = await asyncio.wait({task}, timeout=timeout)
                if not done:
                    task.cancel()
                    done, _ = await asyncio.wait({task}, timeout=timeout)
            if not done:
                logger.warning("ASGI app task %s ignored cancellation; leaving it to the transport", task.get_name())
        except asyncio.CancelledError:
            # Our caller gave up waiting, so nobody will collect the app later: stop it now.
            task.cancel()
            raise

    def abort(self) -> None:
        self.disconnected.set()
        self.receiver.close()
        if self.task is not None:
            self.task.cancel()


class _ResponseStream(httpx2.AsyncByteStream):
    def __init__(self, exchange: _Exchange, close_timeout: float) -> None:
        self._exchange = exchange
        self._close_timeout = close_timeout

    async def __aiter__(self) -> AsyncIterator[bytes]:
        exchange = self._exchange
        while True:
            try:
                chunk = await exchange.receiver.receive()
            except anyio.EndOfStream:
                break
            except anyio.ClosedResourceError:
                raise httpx2.ReadError("the response was closed while it was being read") from None
            yield chunk
        if not exchange.body_complete:
            raise exchange.incomplete_body_error()

    async def aclose(self) -> None:
        await self._exchange.close(self._close_timeout)


class ASGIStreamingTransport(httpx2.AsyncBaseTransport):
    """Sends each request to an ASGI app running as an asyncio task and streams the reply back chunk by chunk.

    `root_path` and `client` fill the matching ASGI scope keys. `close_timeout` bounds how long closing a
    response waits for the app to finish after it has been told the client disconnected, before cancelling it.
    `buffer_size` is how many unread body chunks may queue up before the app's `send()` waits for the reader.
    """

    def __init__(
        self,
        app: ASGIApp,
        root_path: str = "",
        client: tuple[str, int] = ("127.0.0.1", 123),
        *,
        close_timeout: float = 5.0,
        buffer_size: int = 16,
    ) -> None:
        self.app = app
        self.root_path = root_path
        self.client = client
        self.close_timeout = close_timeout
        self.buffer_size = buffer_size
        self._exchanges: set[_Exchange] = set()

    @property
    def running_tasks(self) -> tuple[asyncio.Task[None], ...]:
        """The app tasks that have not finished yet."""
        return tuple(ex.task for ex in self._exchanges if ex.task is not None and not ex.task.done())

    def _scope(self, request: httpx2.Request) -> dict[str, Any]:
        url = request.url
        port = url.port if url.port is not None else _DEFAULT_PORTS.get(url.scheme)
        return {
            "type": "http",
            # No spec_version 2.4: under it Starlette's StreamingResponse stops watching receive() for the
            # disconnect, and an idle SSE stream would then never learn that its reader went away.
            "asgi": {"version": "3.0"},
            "http_version": "1.1",
            "method": request.method,
            "scheme": url.scheme,
            "path": url.path,
            "raw_path": url.raw_path.split(b"?", 1)[0],
            "query_string": url.query,
            "root_path": self.root_path,
            "headers": [(key.lower(), value) for key, value in request.headers.raw],
            "server": (url.host, port),
            "client": self.client,
        }

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        exchange = _Exchange(self.app, self._scope(request), request, self.buffer_size)
        task = asyncio.create_task(exchange.run(), name=f"asgi {request.method} {request.url.path}")
        exchange.task = task
        self._exchanges.add(exchange)
        task.add_done_callback(lambda _: self._exchanges.discard(exchange))

        try:
            await exchange.settled.wait()
        except BaseException:
            exchange.abort()
            await exchange.wait_for_app(self.close_timeout)
            raise

        if exchange.status is None:
            # The app stopped without answering; let its task finish so nothing outlives this call.
            exchange.receiver.close()
            await exchange.wait_for_app(self.close_timeout)
            if exchange.error is not None:
                exchange.error_reported = True
                raise exchange.error
            if exchange.cancelled:
                raise httpx2.ReadError("ASGI app was cancelled before it responded", request=request)
            raise httpx2.RemoteProtocolError("ASGI app returned without sending a response", request=request)

        return httpx2.Response(
            exchange.status,
            headers=exchange.headers,
            stream=_ResponseStream(exchange, self.close_timeout),
        )

    async def aclose(self) -> None:
        exchanges = list(self._exchanges)
        for exchange in exchanges:
            exchange.abort()
        tasks = {ex.task for ex in exchanges if ex.task is not None}
        if tasks:
            with anyio.CancelScope(shield=True):
                _, stuck = await asyncio.wait(tasks, timeout=self.close_timeout)
            for task in stuck:
                logger.warning("ASGI app task %s did not stop after cancellation", task.get_name())
