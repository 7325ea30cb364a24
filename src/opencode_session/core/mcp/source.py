"""MCP tools as a ToolSource: at each Step's boundary the tools of the servers configured at its Location, named
`SERVER_TOOL`, each built once per server tool list (so a Step's list costs a lookup), called under the same
permission rules as the built-ins (`"permission": {"github_*": "ask"}`), with the server's timeout; and, when a
server offers resources, `list_mcp_resources` and `read_mcp_resource` (OpenCode's names) to reach them."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from opencode_session.schema import session_errors
from opencode_session.schema.message import ToolTextContent

from ..boundary import Boundary
from ..tools.arguments import schema_of
from ..tools.tool import Tool, ToolContext, ToolFailure, ToolOutput
from .connection import McpServer, McpUnavailable
from .lowering import error_text, lower_resource, lower_result, parameters, tool_name
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


LIST_RESOURCES = "list_mcp_resources"
READ_RESOURCE = "read_mcp_resource"


class ListResourcesArguments(BaseModel):
    server: str | None = Field(None, description="The MCP server's configured name; every server when omitted.")


class ReadResourceArguments(BaseModel):
    server: str = Field(description="The MCP server's configured name.")
    uri: str = Field(description="The resource's exact URI.")


class _ResourceTool:
    """What both resource tools share: the Location whose servers they reach (through its configuration at the
    call's boundary), and that they only read."""

    changes_files = False
    idempotent = True

    def __init__(self, servers: McpServers, directory: Path) -> None:
        self.servers = servers
        self.directory = directory

    def _offering(self, ctx: ToolContext) -> list[McpServer]:
        return [s for s in self.servers.at(self.directory, ctx.config) if s.status == "connected" and s.resources]


class ListMcpResources(_ResourceTool):
    """`list_mcp_resources` (OpenCode's name): the resources and resource templates the servers offer."""

    name = LIST_RESOURCES
    description = ("List the documents, records and other data the MCP servers offer as resources (things that are "
                   "not local files, often named by URIs with their own scheme), each with the server to read it "
                   "from with read_mcp_resource. A template names resources by a parameter: fill in its "
                   "placeholders to read one.")
    arguments = ListResourcesArguments
    parameters = schema_of(ListResourcesArguments)

    async def execute(self, args: ListResourcesArguments, ctx: ToolContext) -> ToolOutput:
        offering = self._offering(ctx)
        wanted = args.server
        if wanted is not None:
            offering = [s for s in offering if s.name == wanted]
            if not offering:
                raise ToolFailure(f"MCP server {wanted!r} is not connected or offers no resources")
        await ctx.permit(LIST_RESOURCES, [s.name for s in offering])
        resources: list[dict[str, Any]] = []
        templates: list[dict[str, Any]] = []
        lines: list[str] = []
        for server in offering:
            try:
                listed, patterns = await server.list_resources(server.launch.entry.request_timeout_s())
            except (McpUnavailable, TimeoutError) as failed:
                lines.append(f"{server.name}: {failed}")
                continue
            except Exception as failed:
                lines.append(f"{server.name}: the server failed the listing: {failed}")
                continue
            for r in listed:
                resources.append({"server": server.name, "uri": str(r.uri), "name": r.name,
                                  "description": r.description, "mimeType": r.mime_type})
                lines.append(f"{server.name} {r.uri} ({r.name}{', ' + r.mime_type if r.mime_type else ''})"
                             + (f": {r.description}" if r.description else ""))
            for t in patterns:
                templates.append({"server": server.name, "uriTemplate": t.uri_template, "name": t.name,
                                  "description": t.description, "mimeType": t.mime_type})
                lines.append(f"{server.name} {t.uri_template} (template {t.name})"
                             + (f": {t.description}" if t.description else ""))
        text = "\n".join(lines) or "No MCP server offers resources here."
        return ToolOutput(content=[ToolTextContent(text=text)], structured={"resources": resources,
                                                                             "templates": templates},
                          title="MCP resources")


class ReadMcpResource(_ResourceTool):
    """`read_mcp_resource` (OpenCode's name): one resource by server and URI, e.g. a resource link a tool returned."""

    name = READ_RESOURCE
    description = ("Read one MCP resource by its server and URI: a resource link a tool returned, one "
                   "list_mcp_resources found (or a filled-in template), or one the user named. Not for local files. "
                   "Images come back as images when the model accepts them.")
    arguments = ReadResourceArguments
    parameters = schema_of(ReadResourceArguments)

    async def execute(self, args: ReadResourceArguments, ctx: ToolContext) -> ToolOutput:
        name, uri = args.server, args.uri
        await ctx.permit(READ_RESOURCE, [f"{name}:{uri}"], save=[f"{name}:*"],
                         metadata={"server": name, "uri": uri})
        server = next((s for s in self._offering(ctx) if s.name == name), None)
        if server is None:
            raise ToolFailure(f"MCP server {name!r} is not connected or offers no resources")
        try:
            result = await server.read_resource(uri, server.launch.entry.call_timeout_s())
        except (McpUnavailable, TimeoutError) as failed:
            raise ToolFailure(f"{READ_RESOURCE}: {failed}") from None
        except Exception as failed:  # the server's JSON-RPC error (an unknown URI, say)
            raise ToolFailure(f"{READ_RESOURCE}: the MCP server {name} could not read {uri}: {failed}") from None
        content = [part for contents in result.contents for part in lower_resource(contents)]
        return ToolOutput(content=content or [ToolTextContent(text=f"Resource {uri} is empty.")],
                          title=f"{name}/{uri}")


class McpToolSource:
    """The ToolSource of MCP servers: `prepare(boundary)` makes sure the Location's servers are started (waiting
    only for a first connect), `tools_at(boundary)` lists their tools without blocking. A server that has failed
    keeps offering the tools it last listed, so the model's call gets a clear error while it is restarted."""

    def __init__(self, servers: McpServers) -> None:
        self.servers = servers
        # id(server) -> (server, the generation of its list, the tools built from it)
        self._built: dict[int, tuple[McpServer, int, tuple[McpTool, ...]]] = {}
        self._resource_tools: dict[Path, tuple[ListMcpResources, ReadMcpResource]] = {}  # one pair per Location

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
        """The servers' tools, then, when a connected one offers resources, the two tools that reach them."""
        tools: list[Tool] = []
        directory = boundary.location.directory
        servers = self.servers.at(directory, boundary.config)
        for server in servers:
            tools.extend(self._tools_of(server))
        if any(s.resources and s.status == "connected" for s in servers):
            resource_tools = self._resource_tools.get(directory)
            if resource_tools is None:
                if len(self._resource_tools) > 1024:
                    self._resource_tools.clear()
                resource_tools = self._resource_tools[directory] = (ListMcpResources(self.servers, directory),
                                                                    ReadMcpResource(self.servers, directory))
            tools.extend(resource_tools)
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


__all__ = ["LIST_RESOURCES", "READ_RESOURCE", "ListMcpResources", "McpTool", "McpToolSource", "ReadMcpResource"]
