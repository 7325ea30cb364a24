"""The V1 routes only OpenCode's terminal clients (`opencode attach`, the TUI and `--mini`) call: a session's children
and diff, and the answers to the probes of features ocs has not (workspaces, formatters, provider log-ins)."""

from __future__ import annotations

from typing import Any

from starlette.requests import Request

from ..state import runtime_of
from . import shapes, wire
from .endpoint import Handler, V1Route


def _constant(value: Any) -> Handler:
    """A probe answered with what OpenCode answers when the feature has nothing to show."""
    async def answer(request: Request) -> Any:
        return value

    return answer


async def session_diff(request: Request) -> Any:
    await runtime_of(request).sessions.require(request.path_params["sessionID"])
    return []


async def session_children(request: Request) -> Any:
    rt, sid = runtime_of(request), request.path_params["sessionID"]
    await rt.sessions.require(sid)
    children, _links = await rt.sessions.list(parent=sid, limit=100)
    return [shapes.session_info(c) for c in children]


TUI_ROUTES = [
    V1Route("GET", "/session/{sessionID}/children", session_children, list[wire.Session]),
    V1Route("GET", "/session/{sessionID}/diff", session_diff, list[Any]),
    V1Route("GET", "/experimental/capabilities", _constant({"backgroundSubagents": False}), wire.Capabilities),
    V1Route("GET", "/experimental/console", _constant({"consoleManagedProviders": [], "switchableOrgCount": 0}),
            wire.Console),
    V1Route("GET", "/experimental/workspace", _constant([]), list[Any]),
    V1Route("GET", "/experimental/workspace/status", _constant([]), list[Any]),
    V1Route("GET", "/project/global/directories", _constant([]), list[str]),
    V1Route("GET", "/formatter", _constant([]), list[Any]),
    V1Route("GET", "/provider/auth", _constant({}), dict[str, Any]),
]
