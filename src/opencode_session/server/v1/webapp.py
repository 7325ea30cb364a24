"""The V1 routes OpenCode's web app reads on start and per session beyond what `opencode run` needs: the global
config, the projects, commands, MCP status, the branch, a session's todo list, and the (empty) LSP and resources."""

from __future__ import annotations

from typing import Any

import anyio
from starlette.requests import Request

from ...core.commands import discover_commands
from ...core.location import Location
from ..state import runtime_of
from . import shapes, wire
from .endpoint import V1Route, config_at, history, location


def _branch(location: Location) -> str | None:
    """The checked-out branch of the location's git repository (None when detached or not a repository)."""
    head = location.project_root / ".git" / "HEAD"
    try:
        ref = head.read_text().strip()
    except OSError:
        return None
    return ref.removeprefix("ref: refs/heads/") if ref.startswith("ref: refs/heads/") else None


def _project(location: Location) -> dict[str, Any]:
    info = location.info()
    out: dict[str, Any] = {"id": info.project.id, "worktree": info.project.directory, "time": {"created": 0},
                           "sandboxes": []}
    if location.is_git:
        out["vcs"] = "git"
    return out


async def global_config(request: Request) -> Any:
    rt = runtime_of(request)
    return shapes.config_view(await config_at(rt, rt.location))


async def project_list(request: Request) -> Any:
    return [_project(runtime_of(request).location)]


async def command_list(request: Request) -> Any:
    rt, loc = runtime_of(request), location(request)
    config = await config_at(rt, loc)
    commands = await anyio.to_thread.run_sync(discover_commands, loc, config, rt.options.env)
    return [{**c.wire(), "source": "command", "hints": []} for c in commands]


async def mcp_status(request: Request) -> Any:
    rt, loc = runtime_of(request), location(request)
    statuses = rt.mcp.statuses(loc.directory, await config_at(rt, loc))  # a GET starts no process
    return {name: {"status": s.status, **({"error": s.error} if s.error else {})} for name, s in statuses.items()}


async def vcs(request: Request) -> Any:
    branch = _branch(location(request))
    return {"branch": branch, "default_branch": None} if branch else {}


async def todo(request: Request) -> Any:
    """The session's todo list: what its last finished `todowrite` call wrote (empty before any)."""
    todos: list[Any] = []
    for message in await history(runtime_of(request), request.path_params["sessionID"]):
        for part in message["parts"]:
            state = part.get("state") or {}
            if part.get("tool") == "todowrite" and state.get("status") == "completed":
                todos = state.get("metadata", {}).get("todos", todos)
    return todos


async def nothing_listed(request: Request) -> Any:
    location(request)  # a bad directory is still refused
    return []


async def nothing_known(request: Request) -> Any:
    location(request)
    return {}


WEBAPP_ROUTES = [
    V1Route("GET", "/global/config", global_config, wire.Config),
    V1Route("GET", "/project", project_list, list[wire.Project]),
    V1Route("GET", "/command", command_list, list[wire.Command]),
    V1Route("GET", "/mcp", mcp_status, dict[str, wire.McpStatus]),
    V1Route("GET", "/vcs", vcs, wire.Branch),
    V1Route("GET", "/session/{sessionID}/todo", todo, list[dict[str, Any]]),
    V1Route("GET", "/lsp", nothing_listed, list[Any]),  # ocs runs no language servers
    V1Route("GET", "/experimental/resource", nothing_known, dict[str, Any]),  # nor MCP resources listed to the app
]
