"""MCP tools as a ToolSource: at each Step's boundary the tools of the servers configured at its Location, named
`SERVER_TOOL`, each built once per server tool list (so a Step's list costs a lookup), called under the same
permission rules as the built-ins (`"permission": {"github_*": "ask"}`), with the server's timeout."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from opencode_session.schema import session_errors

from ..boundary import Boundary
from ..tools.tool import Tool, ToolContext, ToolFailure, ToolOutput
from .connection import McpServer, McpUnavailable
from .lowering import error_text, lower_result, parameters, tool_name
from .servers import McpServers


class McpTool:
    """One tool of one server (at one Location), as the model is offered it."""

    def __init__(self, server: McpServer, definition: Any) -> None:
        self.server = server
        self.remote_name: str = definition.name
        self.name = tool_name(server.name, definition.name)
        self.description: str = definition.description or ""
        self.parameters: dict[str, Any] = parameters(definition.input_schema)

    async def execute(self, input: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        await ctx.permit(self.name, ["*"], metadata={"server": self.server.name, "tool": self.remote_name})
        try:
            result = await self.server.call(self.remote_name, input, self.server.launch.entry.call_timeout_s())
        except McpUnavailable as down:
            raise ToolFailure(f"{self.name}: {down}") from None
        except TimeoutError as late:
            raise ToolFailure(f"{self.name}: {late}") from None
        except Exception as failed:  # the server's JSON-RPC error, or a broken transport
            raise ToolFailure(f"{self.name}: the MCP server {self.server.name} failed the call: {failed}") from None
        if getattr(result, "is_error", False):
            raise ToolFailure(f"{self.name}: {error_text(result)}", session_errors.TOOL_EXECUTION)
        return lower_result(result, f"{self.server.name}/{self.remote_name}")


class McpToolSource:
    """The ToolSource of MCP servers: `prepare(boundary)` makes sure the Location's servers are started (waiting
    only for a first connect), `tools_at(boundary)` lists their tools without blocking. A server that has failed
    keeps offering the tools it last listed, so the model's call gets a clear error while it is restarted."""

    def __init__(self, servers: McpServers) -> None:
        self.servers = servers
        # id(server) -> (server, the generation of its list, the tools built from it)
        self._built: dict[int, tuple[McpServer, int, tuple[McpTool, ...]]] = {}

    @property
    def name(self) -> str:
        return "mcp"

    async def start(self) -> None:
        return None

    def list_tools(self) -> Sequence[Tool]:
        return ()  # MCP tools belong to a Location: see tools_at

    async def prepare(self, boundary: Boundary) -> None:
        await self.servers.ready(boundary.location.directory, boundary.config)

    def tools_at(self, boundary: Boundary) -> Sequence[Tool]:
        tools: list[Tool] = []
        for server in self.servers.at(boundary.location.directory, boundary.config):
            tools.extend(self._tools_of(server))
        return tools

    def _tools_of(self, server: McpServer) -> tuple[McpTool, ...]:
        built = self._built.get(id(server))
        if built is None or built[0] is not server or built[1] != server.generation:
            built = (server, server.generation, tuple(McpTool(server, d) for d in server.tools))
            if len(self._built) > 1024:
                self._built.clear()
            self._built[id(server)] = built
        return built[2]

    async def stop(self) -> None:
        await self.servers.close()


__all__ = ["McpTool", "McpToolSource"]
