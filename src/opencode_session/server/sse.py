"""Server-Sent Events: frame encoding and a streaming response that heartbeats and ends on disconnect or shutdown."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from typing import Any

import anyio
from starlette.types import Receive, Scope, Send

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


def frame(data: Any, *, id: int | str | None = None, event: str | None = None) -> bytes:
    """One SSE frame; `data` is JSON-encoded on a single line."""
    out = []
    if id is not None:
        out.append(f"id: {id}")
    if event is not None:
        out.append(f"event: {event}")
    out.append("data: " + jsontext.dumps(data))
    return ("\n".join(out) + "\n\n").encode()


class SSEResponse:
    """Streams pre-encoded frames from `source`, with a comment heartbeat whenever it is quiet for `heartbeat`
    seconds. It stops when the client disconnects, when `shutdown` is set, or when the source ends."""

    def __init__(self, source: AsyncIterator[bytes], *, heartbeat: float, shutdown: anyio.Event) -> None:
        self.source = source
        self.heartbeat = heartbeat
        self.shutdown = shutdown

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": HEADERS})
        disconnected = False
        send_frames, recv_frames = anyio.create_memory_object_stream[bytes | None](256)

        async def produce() -> None:
            try:
                async for chunk in self.source:
                    await send_frames.send(chunk)
            except Exception:
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
                        await send({"type": "http.response.body", "body": b"".join(batch), "more_body": True})
                tg.cancel_scope.cancel()
        except OSError:
            disconnected = True  # the peer went away while we were writing
        finally:
            aclose = getattr(self.source, "aclose", None)
            if aclose is not None:
                with anyio.CancelScope(shield=True):
                    await aclose()
        if not disconnected:
            try:
                await send({"type": "http.response.body", "body": b"", "more_body": False})
            except OSError:
                pass
