"""Connection-level defences of the served socket: a deadline on reading each request (idle, slow-header and
slow-body clients are cut off) and one log line, not a traceback per accept, when file descriptors run out."""

from __future__ import annotations

import asyncio
import errno
import logging
import time
from typing import Any

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

log = logging.getLogger(__name__)

_RESOURCE_ERRNOS = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM})


class ReadDeadlineH11Protocol(H11Protocol):
    """uvicorn's h11 protocol with a deadline on every request read: from the connection (or the first byte of the
    next request) until the request, body included, has fully arrived. A client that misses it is disconnected.

    uvicorn only times out idle keep-alive connections between requests; a client that opens a socket and sends
    nothing, or trickles its headers or body (slowloris), would otherwise hold the connection forever.
    """

    read_timeout: float = 30.0
    _deadline: asyncio.TimerHandle | None = None

    # uvicorn's own signature, narrower than asyncio's BaseTransport
    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm()

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        self._track()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        self._track()  # a pipelined request may already be half-read

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def _reading_a_request(self) -> bool:
        state = self.conn.their_state
        return state is h11.SEND_BODY or (state is h11.IDLE and bool(self.conn.trailing_data[0]))

    def _track(self) -> None:
        if self._reading_a_request():
            if self._deadline is None:
                self._arm()
        else:
            self._disarm()

    def _arm(self) -> None:
        self._deadline = self.loop.call_later(self.read_timeout, self._expired)

    def _disarm(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None

    def _expired(self) -> None:
        self._deadline = None
        state = self.conn.their_state
        if state in (h11.IDLE, h11.SEND_BODY) and not self.transport.is_closing():
            # A request handler waiting for the rest of the body sees the disconnect and stops.
            self.transport.close()


def read_deadline_protocol(read_timeout: float) -> type[ReadDeadlineH11Protocol]:
    return type("ReadDeadlineH11Protocol", (ReadDeadlineH11Protocol,), {"read_timeout": read_timeout})


class ResourceExhaustionLog:
    """An event loop exception handler that reports running out of file descriptors (or socket buffers) once per
    `interval` seconds as one line; asyncio would log a traceback for every failed accept, thousands a second."""

    def __init__(self, interval: float = 60.0) -> None:
        self.interval = interval
        self._last: float | None = None
        self._suppressed = 0

    def __call__(self, loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        exc = context.get("exception")
        if not (isinstance(exc, OSError) and exc.errno in _RESOURCE_ERRNOS):
            loop.default_exception_handler(context)
            return
        now = time.monotonic()
        if self._last is not None and now - self._last < self.interval:
            self._suppressed += 1
            return
        more = f" ({self._suppressed} more since the last report)" if self._suppressed else ""
        log.error("%s: %s; new connections wait until some close%s", context.get("message", "out of resources"),
                  exc.strerror or exc, more)
        self._last, self._suppressed = now, 0
