"""What the app keeps for its routes (`app.state.ocs`): the Runtime it serves, how its streams beat and end, the
host's terminal services and the open V1 streams. Routes are module-level functions that read it from the request."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import TYPE_CHECKING

import anyio
from starlette.applications import Starlette
from starlette.requests import HTTPConnection

from ..core.runtime import Runtime
from .host import Host
from .sse import SSEResponse

if TYPE_CHECKING:
    from .v1.events import Streams


class AppState:
    """`shutdown`, once set, ends every stream; an event stream whose reader accepts nothing for `stall_timeout`
    seconds is cut off."""

    def __init__(self, runtime: Runtime, heartbeat: float, stall_timeout: float, host: Host,
                 v1_streams: Streams) -> None:
        self.runtime = runtime
        self.heartbeat = heartbeat
        self.stall_timeout = stall_timeout
        self.shutdown = anyio.Event()
        self.host = host
        self.v1_streams = v1_streams

    def stream(self, source: AsyncIterator[bytes], heartbeat: float | None = None) -> SSEResponse:
        """The app's SSE response over encoded frames: its heartbeat (or `heartbeat`), shutdown and stall cut-off."""
        return SSEResponse(source, heartbeat=self.heartbeat if heartbeat is None else heartbeat,
                           shutdown=self.shutdown, stall_timeout=self.stall_timeout)


def app_state_of(app: Starlette) -> AppState:
    state: AppState = app.state.ocs
    return state


def app_state(request: HTTPConnection) -> AppState:
    return app_state_of(request.app)


def runtime_of(request: HTTPConnection) -> Runtime:
    return app_state(request).runtime
