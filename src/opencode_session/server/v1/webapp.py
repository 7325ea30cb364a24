"""The V1 routes OpenCode's web app reads on start and per session beyond what `opencode run` needs: the global
config, the projects, commands, MCP status, the branch, a session's todo list, and the (empty) LSP and resources."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import anyio
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from ...core.commands import discover_commands
from ...core.config import Config, ConfigError
from ...core.location import Location
from ...core.runtime import Runtime
from ...schema.errors import InvalidRequestError

Handler = Callable[[Request], Awaitable[Response]]


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


def webapp_routes(rt: Runtime, location: Callable[[Request], Location],
                  config_out: Callable[[Config], dict[str, Any]],
                  history: Callable[[str], Awaitable[list[dict[str, Any]]]]) -> list[tuple[str, str, Handler]]:
    async def _config(loc: Location) -> Config:
        try:
            return await rt.config.at(loc)
        except ConfigError as bad:
            raise InvalidRequestError(str(bad), kind="config") from None

    async def global_config(request: Request) -> Response:
        return JSONResponse(config_out(await _config(rt.location)))

    async def project_list(request: Request) -> Response:
        return JSONResponse([_project(rt.location)])

    async def command_list(request: Request) -> Response:
        loc = location(request)
        config = await _config(loc)
        commands = await anyio.to_thread.run_sync(discover_commands, loc, config, rt.options.env)
        return JSONResponse([{**c.wire(), "source": "command", "hints": []} for c in commands])

    async def mcp_status(request: Request) -> Response:
        loc = location(request)
        statuses = rt.mcp.statuses(loc.directory, await _config(loc))  # a GET starts no process
        return JSONResponse({name: {"status": s.status, **({"error": s.error} if s.error else {})}
                             for name, s in statuses.items()})

    async def vcs(request: Request) -> Response:
        branch = _branch(location(request))
        return JSONResponse({"branch": branch, "default_branch": None} if branch else {})

    async def todo(request: Request) -> Response:
        """The session's todo list: what its last finished `todowrite` call wrote (empty before any)."""
        todos: list[Any] = []
        for message in await history(request.path_params["sessionID"]):
            for part in message["parts"]:
                state = part.get("state") or {}
                if part.get("tool") == "todowrite" and state.get("status") == "completed":
                    todos = state.get("metadata", {}).get("todos", todos)
        return JSONResponse(todos)

    async def nothing_listed(request: Request) -> Response:
        location(request)  # a bad directory is still refused
        return JSONResponse([])

    async def nothing_known(request: Request) -> Response:
        location(request)
        return JSONResponse({})

    return [("GET", "/global/config", global_config),
            ("GET", "/project", project_list),
            ("GET", "/command", command_list),
            ("GET", "/mcp", mcp_status),
            ("GET", "/vcs", vcs),
            ("GET", "/session/{sessionID}/todo", todo),
            ("GET", "/lsp", nothing_listed),  # ocs runs no language servers
            ("GET", "/experimental/resource", nothing_known)]  # nor MCP resources listed to the app
