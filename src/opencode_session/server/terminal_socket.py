"""The terminal WebSocket (`v2.pty.connect` as an upgrade): checks what the HTTP route would (path, query, Location,
the terminal) plus any connection ticket, then replays the retained output, sends the cursor frame, and relays live
output out and input and resizes in until the process exits, the client leaves or the server shuts down."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
from pydantic import ValidationError
from starlette.websockets import WebSocket, WebSocketDisconnect

from ..core.runtime import Runtime
from ..protocol import decode_query, endpoint
from ..protocol.pty_wire import CONTROL, REPLAY_CHUNK, decode_control, meta_frame
from ..schema.errors import ForbiddenError, TaggedError
from .guard import refuse
from .handlers import connect_location
from .host import Host

if TYPE_CHECKING:
    from ..core.pty import Terminal

ENDPOINT = endpoint("v2.pty.connect")
NORMAL, GOING_AWAY = 1000, 1001


async def serve_terminal(websocket: WebSocket, runtime: Runtime, host: Host, shutdown: anyio.Event,
                         invalid: Any) -> None:
    """`invalid(exc, where)` turns a ValidationError into the InvalidRequestError the HTTP routes answer."""
    try:
        terminal, cursor = _admit(websocket, runtime, host, invalid)
    except TaggedError as err:
        await refuse(websocket.scope, websocket.send, err)
        return
    replay, reached, reader = terminal.attach(cursor)
    await websocket.accept()
    code = NORMAL
    try:
        for start in range(0, len(replay), REPLAY_CHUNK):
            await websocket.send_text(replay[start:start + REPLAY_CHUNK])
        await websocket.send_bytes(meta_frame(reached))
        if reader is not None:  # None: the process had exited, the replay was all there is
            async with anyio.create_task_group() as tg:
                async def output() -> None:
                    while (chunk := await reader.next()) is not None:
                        await websocket.send_text(chunk)
                    tg.cancel_scope.cancel()

                async def stop_on_shutdown() -> None:
                    nonlocal code
                    await shutdown.wait()
                    code = GOING_AWAY
                    tg.cancel_scope.cancel()

                async def input() -> None:
                    await _relay_input(websocket, terminal)
                    tg.cancel_scope.cancel()

                tg.start_soon(output)
                tg.start_soon(stop_on_shutdown)
                tg.start_soon(input)
        await websocket.close(code)
    except (WebSocketDisconnect, RuntimeError):  # RuntimeError: the client left while a frame was on its way
        pass
    finally:
        if reader is not None:
            terminal.detach(reader)


def _admit(websocket: WebSocket, runtime: Runtime, host: Host, invalid: Any) -> tuple[Terminal, int | None]:
    assert ENDPOINT.path_params is not None and ENDPOINT.query is not None
    try:
        path: Any = ENDPOINT.path_params.model_validate(websocket.path_params)
    except ValidationError as exc:
        raise invalid(exc, "path") from None
    try:
        query: Any = decode_query(ENDPOINT.query, websocket.query_params.multi_items())
    except ValidationError as exc:
        raise invalid(exc, "query") from None
    # A ticket stands in for auth (a browser cannot send the header): judged first, so that a caller without a good
    # one learns nothing about the Location or the terminal
    if query.ticket is not None and not host.tickets.known(query.ticket, path.ptyID):
        host.tickets.consume(query.ticket, path.ptyID, Path())  # presented: gone, whatever the answer
        raise ForbiddenError("The connection ticket is not valid for this terminal (unknown, used, or expired)")
    location = connect_location(runtime, query)
    terminal = runtime.terminals.get(location.directory, path.ptyID)
    if query.ticket is not None and not host.tickets.consume(query.ticket, path.ptyID, location.directory):
        raise ForbiddenError("The connection ticket is not valid for this terminal (unknown, used, or expired)")
    return terminal, query.cursor


async def _relay_input(websocket: WebSocket, terminal: Terminal) -> None:
    """Type what the client sends until it leaves: text (or UTF-8 binary) is input, a control frame resizes."""
    while True:
        message = await websocket.receive()
        if message["type"] == "websocket.disconnect":
            return
        text, data = message.get("text"), message.get("bytes")
        if text is not None:
            terminal.write(text)
        elif data is not None and data[:1] == CONTROL:
            size = decode_control(data)
            if size is not None:
                terminal.resize(*size)
        elif data is not None:
            try:
                terminal.write(data.decode("utf-8"))
            except UnicodeDecodeError:
                continue  # not text: dropped, as OpenCode drops it
