"""The V1 routes OpenCode's terminal clients (`opencode attach`, the TUI and `--mini`) call beyond `run --attach`'s:
commands, the global event stream, and the answers to the probes of features ocs has not (LSP, MCP, workspaces)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import anyio
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from ...core.commands import discover_commands
from ...core.config import ConfigError
from ...core.location import Location
from ...core.runtime import Runtime
from ...schema.errors import InvalidRequestError, TaggedError
from ..sse import SSEResponse, frame
from . import shapes
from .events import Streams, v1_events

Handler = Callable[[Request], Awaitable[Response]]


def _json(value: Any) -> Response:
    return JSONResponse(value)


def _constant(value: Any) -> Handler:
    """A probe answered with what OpenCode answers when the feature has nothing to show."""
    async def answer(request: Request) -> Response:
        return _json(value)

    return answer


async def global_events(rt: Runtime, streams: Streams) -> AsyncIterator[bytes]:
    """The V1 bus as `GET /global/event` sends it: each event inside `{directory, project, payload}`, the
    directory and project being those of the event's session (events of no session carry neither)."""
    where: dict[str, tuple[str, str]] = {}

    async def scope(session_id: str) -> tuple[str, str] | None:
        if session_id not in where:
            try:
                info = await rt.sessions.get(session_id)
            except TaggedError:  # removed meanwhile
                return None
            where[session_id] = (info.location.directory, info.projectID)
        return where[session_id]

    async for chunk in v1_events(rt, streams):
        out: list[bytes] = []
        for block in chunk.decode().split("\n\n"):
            data = next((line[6:] for line in block.split("\n") if line.startswith("data: ")), None)
            if data is None:
                continue
            payload = json.loads(data)
            sid = (payload.get("properties") or {}).get("sessionID")
            envelope: dict[str, Any] = {"payload": payload}
            found = await scope(sid) if isinstance(sid, str) else None
            if found is not None:
                envelope.update(directory=found[0], project=found[1])
            out.append(frame(envelope))
        if out:
            yield b"".join(out)


def tui_routes(rt: Runtime, streams: Streams, location: Callable[[Request], Location], *, heartbeat: float,
               shutdown: anyio.Event, stall_timeout: float) -> list[tuple[str, str, Handler]]:
    """(method, path, handler) for the terminal clients' routes; `location` reads a request's directory scope."""

    async def command_list(request: Request) -> Response:
        loc = location(request)
        try:
            config = await rt.config.at(loc)
        except ConfigError as bad:
            raise InvalidRequestError(str(bad), kind="config") from None
        commands = await anyio.to_thread.run_sync(discover_commands, loc, config, rt.options.env)
        out = []
        for c in commands:
            item: dict[str, Any] = {"name": c.name, "template": c.template, "source": "command", "hints": []}
            if c.description:
                item["description"] = c.description
            if c.agent:
                item["agent"] = c.agent
            if c.model is not None:
                item["model"] = f"{c.model.providerID}/{c.model.id}"
            if c.subtask is not None:
                item["subtask"] = c.subtask
            out.append(item)
        return _json(out)

    async def global_event(request: Request) -> Response:
        return SSEResponse(global_events(rt, streams), heartbeat=heartbeat,  # type: ignore[return-value]
                           shutdown=shutdown, stall_timeout=stall_timeout)

    async def session_todo(request: Request) -> Response:
        await rt.sessions.require(request.path_params["sessionID"])
        return _json([])  # ocs keeps no to-do list

    async def session_diff(request: Request) -> Response:
        await rt.sessions.require(request.path_params["sessionID"])
        return _json([])

    async def session_children(request: Request) -> Response:
        sid = request.path_params["sessionID"]
        await rt.sessions.require(sid)
        children, _links = await rt.sessions.list(parent=sid, limit=100)
        return _json([shapes.session_info(c) for c in children])

    async def question_list(request: Request) -> Response:
        # minimal: the pending questions in V2's shape, which V1's `QuestionRequest` shares
        return _json([q.wire() for q in rt.questions.pending()])

    return [
        ("GET", "/command", command_list),
        ("GET", "/question", question_list),
        ("GET", "/session/{sessionID}/children", session_children),
        ("GET", "/global/event", global_event),
        ("GET", "/session/{sessionID}/todo", session_todo),
        ("GET", "/session/{sessionID}/diff", session_diff),
        ("GET", "/experimental/capabilities", _constant({"backgroundSubagents": False})),
        ("GET", "/experimental/console", _constant({"consoleManagedProviders": [], "switchableOrgCount": 0})),
        ("GET", "/experimental/resource", _constant({})),
        ("GET", "/experimental/workspace", _constant([])),
        ("GET", "/experimental/workspace/status", _constant([])),
        ("GET", "/project/global/directories", _constant([])),
        ("GET", "/lsp", _constant([])),
        ("GET", "/formatter", _constant([])),
        ("GET", "/mcp", _constant({})),
        ("GET", "/provider/auth", _constant({})),
        ("GET", "/vcs", _constant({"branch": None, "default_branch": None})),
    ]
