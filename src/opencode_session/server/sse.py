"""Server-Sent Events: frame encoding and a streaming response that heartbeats, ends on disconnect or shutdown, and
cuts off a reader that stopped reading."""

from __future__ import annotations

import logging
import re
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

import anyio
from starlette.types import Receive, Scope, Send

from ..core.store.feed import SubscriptionLost
from ..core.telemetry import hooks, telemetry
from ..schema import jsontext

log = logging.getLogger(__name__)

HEADERS = [
    (b"content-type", b"text/event-stream"),
    (b"cache-control", b"no-cache, no-store, no-transform"),
    (b"x-accel-buffering", b"no"),
    (b"x-content-type-options", b"nosniff"),
]
HEARTBEAT = b": heartbeat\n\n"
MAX_BATCH_BYTES = 64 * 1024


# What ends a line in an event stream: a browser's EventSource ends one at CR, LF or CRLF alike, so text holding a
# lone CR that a frame did not split there would end its field early, or its event, and begin one of its own.
_LINE_BREAK = re.compile(r"\r\n|\r|\n")


def _one_line(field: str, value: str) -> str:
    if _LINE_BREAK.search(value):
        raise ValueError(f"an SSE {field} holds a line break: {value!r}")
    return value


def frame(data: Any, *, id: int | str | None = None, event: str | None = None) -> bytes:
    """One SSE frame; `data` is JSON-encoded on a single line."""
    out = []
    if id is not None:
        out.append(f"id: {_one_line('id', str(id))}")
    if event is not None:
        out.append(f"event: {_one_line('event', event)}")
    out.extend("data: " + line for line in _LINE_BREAK.split(jsontext.dumps(data)))
    return ("\n".join(out) + "\n\n").encode()


def text_frame(event: str, text: str) -> bytes:
    """One SSE frame of `text` as it is (a page's HTML): a `data:` line for each of its lines, whichever break ends
    them (the reader joins them with LF), so nothing in the text ends the event or starts a field."""
    lines = "".join(f"data: {line}\n" for line in _LINE_BREAK.split(text))
    return f"event: {_one_line('event', event)}\n{lines}\n".encode()


@dataclass
class Frames:
    """A stream's encoded frames, and what makes the frame to send last when the server shuts down."""

    source: AsyncIterator[bytes]
    farewell: Callable[[], bytes] | None = None


class StreamCut(logging.Filter):
    """Quiets uvicorn's error about a response left incomplete: SSEResponse does that on purpose, so a reader that
    stopped reading (or a failed source) sees a broken stream rather than a clean end, and logs why itself."""

    def filter(self, record: logging.LogRecord) -> bool:
        return record.getMessage() != "ASGI callable returned without completing response."


STREAM_CUT = StreamCut()


_OPEN = [0]  # the event streams open in this process, reported as the `ocs_sse_subscribers` gauge
telemetry.watch("ocs_sse_subscribers", lambda: _OPEN[0])


class SSEResponse:
    """Streams pre-encoded frames from `source`, with a comment heartbeat whenever it is quiet for `heartbeat`
    seconds. It ends cleanly when the source ends, or (after sending `farewell`) when `shutdown` is set; it stops
    when the client disconnects. A source that fails, or a reader that accepts nothing for `stall_timeout` seconds,
    is cut: the response is left incomplete, which the client sees as a failed stream."""

    def __init__(self, source: AsyncIterator[bytes] | Frames, *, heartbeat: float, shutdown: anyio.Event,
                 stall_timeout: float = 15.0) -> None:
        frames = source if isinstance(source, Frames) else Frames(source)
        self.source = frames.source
        self.farewell = frames.farewell
        self.heartbeat = heartbeat
        self.shutdown = shutdown
        self.stall_timeout = stall_timeout

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        _OPEN[0] += 1
        try:
            await self._serve(receive, send)
        finally:
            _OPEN[0] -= 1

    async def _serve(self, receive: Receive, send: Send) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": HEADERS})
        disconnected = failed = stalled = False
        send_frames, recv_frames = anyio.create_memory_object_stream[bytes | None](256)

        async def write(body: bytes) -> bool:
            """False when the reader accepted nothing for `stall_timeout` seconds."""
            with anyio.move_on_after(self.stall_timeout) as waited:
                await send({"type": "http.response.body", "body": body, "more_body": True})
            return not waited.cancelled_caught

        async def produce() -> None:
            nonlocal failed
            try:
                async for chunk in self.source:
                    await send_frames.send(chunk)
            except SubscriptionLost as lost:
                failed = True
                hooks.reader_dropped()  # it fell behind the live ring (or the bus closed)
                log.warning("cut off an event stream: %s", lost)
            except Exception:
                failed = True
                log.exception("SSE source failed")
            finally:
                await send_frames.send(None)

        async def watch_disconnect() -> None:
            nonlocal disconnected
            while True:
                message = await receive()
                if message["type"] == "http.disconnect":
                    disconnected = True
                    tg.cancel_scope.cancel()
                    return

        async def watch_shutdown() -> None:
            await self.shutdown.wait()
            tg.cancel_scope.cancel()

        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(produce)
                tg.start_soon(watch_disconnect)
                tg.start_soon(watch_shutdown)
                async with recv_frames:
                    ended = False
                    while not ended:
                        chunk: bytes | None = HEARTBEAT
                        with anyio.move_on_after(self.heartbeat):
                            chunk = await recv_frames.receive()
                        if chunk is None:
                            break
                        # coalesce frames that are already waiting into one write (replays arrive in bursts)
                        batch = [chunk]
                        size = len(chunk)
                        while size < MAX_BATCH_BYTES:
                            try:
                                more = recv_frames.receive_nowait()
                            except anyio.WouldBlock:
                                break
                            if more is None:
                                ended = True
                                break
                            batch.append(more)
                            size += len(more)
                        if not await write(b"".join(batch)):
                            stalled = True
                            break
                tg.cancel_scope.cancel()
            if self.shutdown.is_set() and self.farewell is not None and not (disconnected or stalled):
                stalled = not await write(self.farewell())
        except OSError:
            disconnected = True  # the peer went away while we were writing
        finally:
            aclose = getattr(self.source, "aclose", None)
            if aclose is not None:
                with anyio.CancelScope(shield=True):
                    await aclose()
        if stalled:
            hooks.reader_dropped()
            log.warning("cut off an event stream whose reader accepted nothing for %s s", self.stall_timeout)
        if failed or stalled:
            return  # incomplete on purpose (see StreamCut): the reader must not take this for the end
        if not disconnected:
            try:
                await send({"type": "http.response.body", "body": b"", "more_body": False})
            except OSError:
                pass
