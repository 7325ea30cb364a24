"""Server-sent events for the client: an incremental frame parser and the lazy EventStream iterator."""

from __future__ import annotations

import codecs
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Generic, Self, TypeVar

import anyio
import httpx2
from pydantic import TypeAdapter, ValidationError

from .errors import ClientError

T = TypeVar("T")

MAX_EVENT_CHARS = 1_048_576


@dataclass(frozen=True)
class SSEMessage:
    """One dispatched event: its joined `data`, and the `event` and `id` fields when the frame carried them."""

    data: str
    event: str | None = None
    id: str | None = None


class SSEParser:
    """Incremental text/event-stream parser: feed decoded text, get complete messages.

    Line ends may be CRLF, LF or CR, split anywhere across chunks. Comment lines (`: heartbeat`) and
    frames without `data:` dispatch nothing. An event larger than `max_event_chars` is MalformedResponse.
    """

    def __init__(self, max_event_chars: int = MAX_EVENT_CHARS) -> None:
        self.max_event_chars = max_event_chars
        self._partial = ""
        self._after_cr = False
        self._data: list[str] = []
        self._event: str | None = None
        self._id: str | None = None
        self._size = 0

    def feed(self, text: str) -> list[SSEMessage]:
        if self._after_cr and text.startswith("\n"):
            # The CR that ended the previous chunk and this LF are one CRLF line end.
            text = text[1:]
        if text:
            self._after_cr = text.endswith("\r")
        lines = (self._partial + text.replace("\r\n", "\n").replace("\r", "\n")).split("\n")
        self._partial = lines.pop()
        out: list[SSEMessage] = []
        for line in lines:
            message = self._line(line)
            if message is not None:
                out.append(message)
        self._check_size(len(self._partial))
        return out

    def _check_size(self, pending: int) -> None:
        if self._size + pending > self.max_event_chars:
            raise ClientError("MalformedResponse", f"an SSE event exceeds {self.max_event_chars} characters")

    def _line(self, line: str) -> SSEMessage | None:
        if not line:
            return self._dispatch()
        if line.startswith(":"):
            return None
        name, colon, value = line.partition(":")
        if colon and value.startswith(" "):
            value = value[1:]
        self._size += len(line) + 1
        self._check_size(0)
        if name == "data":
            self._data.append(value)
        elif name == "event":
            self._event = value
        elif name == "id" and "\0" not in value:
            self._id = value
        return None

    def _dispatch(self) -> SSEMessage | None:
        message = SSEMessage("\n".join(self._data), self._event, self._id) if self._data else None
        self._data, self._event, self._id, self._size = [], None, None, 0
        return message


Connect = Callable[[], Awaitable[httpx2.Response]]


class EventStream(Generic[T]):
    """A lazy, single-use async iterator over one SSE response, decoding each event's JSON into `T`.

    Nothing is sent until the first `__anext__`; the HTTP failure of the request (a declared TaggedError
    or a ClientError) surfaces there. Use `async with stream:` or call `aclose()` when stopping early:
    that closes the HTTP response, which the server sees as a disconnect. A broken connection raises
    ClientError("Transport"), and so does the end of an `endless` stream (one that never ends by itself, like the
    instance stream or a followed log); there is no automatic reconnect (resume a durable stream with `after=`).
    Cancelling the task that awaits `__anext__` closes the stream.
    """

    def __init__(self, connect: Connect, item: Any, *, max_event_chars: int = MAX_EVENT_CHARS,
                 endless: bool = False) -> None:
        self._connect = connect
        self._endless = endless
        self._adapter: TypeAdapter[T] = item if isinstance(item, TypeAdapter) else TypeAdapter(item)
        self._parser = SSEParser(max_event_chars)
        self._ready: deque[SSEMessage] = deque()
        self._response: httpx2.Response | None = None
        self._chunks: AsyncIterator[bytes] | None = None
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._done = False
        self.last_event_id: str | None = None
        """The most recent `id:` field seen on this stream (the durable sequence on session streams)."""
        self.last_event: str | None = None
        """The `event:` field of the most recently returned item, if the frame had one."""

    def __aiter__(self) -> Self:
        return self

    async def __anext__(self) -> T:
        if self._done:
            raise StopAsyncIteration
        try:
            message = await self._next_message()
            if message is None:
                await self._close()
                if self._endless:
                    raise ClientError("Transport", "the server ended a stream that does not end by itself")
                raise StopAsyncIteration
            if message.id is not None:
                self.last_event_id = message.id
            self.last_event = message.event
            return self._decode(message)
        except StopAsyncIteration:
            raise
        except (httpx2.RequestError, httpx2.StreamError) as exc:
            await self._close_shielded()
            raise ClientError("Transport", f"the event stream failed: {exc}", cause=exc) from exc
        except BaseException:
            await self._close_shielded()
            raise

    async def _next_message(self) -> SSEMessage | None:
        if self._response is None:
            self._response = await self._connect()
            self._chunks = self._response.aiter_bytes()
        assert self._chunks is not None
        while not self._ready:
            try:
                chunk = await self._chunks.__anext__()
            except StopAsyncIteration:
                # An event not terminated by a blank line before the end of the body is discarded.
                return None
            self._ready.extend(self._parser.feed(self._decoder.decode(chunk)))
        return self._ready.popleft()

    def _decode(self, message: SSEMessage) -> T:
        try:
            # straight from the text: pydantic's own JSON parser skips building the dicts json.loads would (~40 %
            # less per event, which a client following many streams pays for every event on each)
            return self._adapter.validate_json(message.data, extra="ignore")
        except (ValueError, ValidationError) as exc:
            raise ClientError("MalformedResponse", f"an SSE event is not a valid item: {exc}", cause=exc) from exc

    async def _close(self) -> None:
        self._done = True
        chunks, response = self._chunks, self._response
        self._chunks = self._response = None
        try:
            # typed as an iterator, it is httpx2's generator: closing it releases the connection
            aclose = getattr(chunks, "aclose", None)
            if aclose is not None:
                await aclose()
        finally:
            if response is not None:
                await response.aclose()

    async def _close_shielded(self) -> None:
        # Closing must finish even when we got here because the caller's task is being cancelled.
        with anyio.CancelScope(shield=True):
            try:
                await self._close()
            except Exception:
                pass  # the original failure is the one worth reporting

    async def aclose(self) -> None:
        """Close the HTTP response; iteration then ends. Safe to call more than once, or before iterating."""
        await self._close()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()
