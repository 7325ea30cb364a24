"""A connection-level defence of the served socket: one log line, not a traceback per accept, when file descriptors
run out, and none for the accept retries asyncio left behind when the server stopped meanwhile (the deadline on
reading each request is compat.read_deadline_protocol: it subclasses uvicorn's)."""

from __future__ import annotations

import asyncio
import errno
import logging
import time
from typing import Any

from ..compat import late_accept_retry

log = logging.getLogger(__name__)

_RESOURCE_ERRNOS = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM})


class ResourceExhaustionLog:
    """An event loop exception handler that reports running out of file descriptors (or socket buffers) once per
    `interval` seconds as one line; asyncio would log a traceback for every failed accept, thousands a second."""

    def __init__(self, interval: float = 60.0) -> None:
        self.interval = interval
        self._last: float | None = None
        self._suppressed = 0

    def __call__(self, loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        exc = context.get("exception")
        if isinstance(exc, ValueError) and late_accept_retry(context):
            return  # a retry of an accept that ran out, on the server socket closed since: nothing left to accept
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
