"""The V1 routes only OpenCode's terminal clients (`opencode attach`, the TUI and `--mini`) call: a session's children
and diff, and the answers to the probes of features ocs has not (workspaces, formatters, provider log-ins)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from ...core.runtime import Runtime
from . import shapes

Handler = Callable[[Request], Awaitable[Response]]


def _json(value: Any) -> Response:
    return JSONResponse(value)


def _constant(value: Any) -> Handler:
    """A probe answered with what OpenCode answers when the feature has nothing to show."""
    async def answer(request: Request) -> Response:
        return _json(value)

    return answer


def tui_routes(rt: Runtime) -> list[tuple[str, str, Handler]]:
    """(method, path, handler) for the routes only the terminal clients call (the web app's and the bus are
    `webapp.py`'s and `bus.py`'s)."""

    async def session_diff(request: Request) -> Response:
        await rt.sessions.require(request.path_params["sessionID"])
        return _json([])

    async def session_children(request: Request) -> Response:
        sid = request.path_params["sessionID"]
        await rt.sessions.require(sid)
        children, _links = await rt.sessions.list(parent=sid, limit=100)
        return _json([shapes.session_info(c) for c in children])

    return [
        ("GET", "/session/{sessionID}/children", session_children),
        ("GET", "/session/{sessionID}/diff", session_diff),
        ("GET", "/experimental/capabilities", _constant({"backgroundSubagents": False})),
        ("GET", "/experimental/console", _constant({"consoleManagedProviders": [], "switchableOrgCount": 0})),
        ("GET", "/experimental/workspace", _constant([])),
        ("GET", "/experimental/workspace/status", _constant([])),
        ("GET", "/project/global/directories", _constant([])),
        ("GET", "/formatter", _constant([])),
        ("GET", "/provider/auth", _constant({})),
    ]
