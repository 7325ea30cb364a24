"""The MCP guidance Instruction Source (`core/mcp-guidance`): the instructions the Location's connected servers gave
at initialize, for the servers whose tools the selected agent is not wholly denied. A server appearing, going away
or changing its instructions reaches the model as one chronological Instruction Update."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

from pydantic import ConfigDict, StrictStr, TypeAdapter, with_config

from ..boundary import Boundary
from ..instructions.algebra import EMPTY, Instructions, Source, diff_by_key, make
from ..permission import disabled
from .lowering import tool_name
from .servers import McpServers

MCP_GUIDANCE_KEY: Final = "core/mcp-guidance"


@with_config(ConfigDict(extra="forbid"))
@dataclass(frozen=True)
class Guided:
    """One server's instructions as the model is told them."""

    name: StrictStr
    instructions: StrictStr


_GUIDED = TypeAdapter(tuple[Guided, ...])


def _servers(servers: tuple[Guided, ...]) -> list[str]:
    lines = []
    for server in servers:
        lines.append(f'  <server name="{server.name}">')
        lines += [f"    {line}" if line.strip() else "" for line in server.instructions.strip().splitlines()]
        lines.append("  </server>")
    return lines


def _render(servers: tuple[Guided, ...]) -> str:
    return "\n".join(["<mcp_instructions>", *_servers(servers), "</mcp_instructions>"])


def _update(previous: tuple[Guided, ...], current: tuple[Guided, ...]) -> str:
    diff = diff_by_key(previous, current, lambda server: server.name)
    if diff.changed or not (diff.added or diff.removed):
        return "The available MCP server instructions have changed. This list supersedes the previous one.\n" + \
            _render(current)
    parts = []
    if diff.added:
        parts.append("New MCP server instructions are available in addition to those previously listed:\n"
                     + _render(diff.added))
    if diff.removed:
        parts.append("Instructions for the following MCP servers are no longer available: "
                     f"{', '.join(diff.removed)}.")
    return "\n".join(parts)


def mcp_guidance_source(servers: tuple[Guided, ...]) -> Instructions:
    """The source over the servers' instructions, by server name; EMPTY when no server gives any."""
    value = tuple(sorted(servers, key=lambda s: s.name))
    if not value:
        return EMPTY

    async def load() -> tuple[Guided, ...]:
        return value

    return make(Source(
        key=MCP_GUIDANCE_KEY,
        encode=lambda guided: _GUIDED.dump_python(guided, mode="json"),
        decode=_GUIDED.validate_python,
        load=load,
        baseline=_render,
        update=_update,
        removed=lambda _previous: "MCP server instructions are no longer available.",
    ))


class McpGuidance:
    """The instruction producer for the `mcp` position: starts the Location's servers (waiting only for a first
    connect) and renders what the connected ones instruct."""

    def __init__(self, servers: McpServers, env: Mapping[str, str]) -> None:
        self.servers = servers
        self.env = env

    async def __call__(self, boundary: Boundary) -> Instructions:
        servers = await self.servers.ready(boundary.location.directory, boundary.config)
        if not servers:
            return EMPTY
        rules = boundary.rules(self.env)
        guided = []
        for server in servers:
            if server.status != "connected" or not (server.instructions or "").strip():
                continue
            names = [tool_name(server.name, t.name) for t in server.tools]
            if names and all(disabled(rules, name) for name in names):
                continue
            guided.append(Guided(server.name, server.instructions or ""))
        return mcp_guidance_source(tuple(guided))


__all__ = ["MCP_GUIDANCE_KEY", "Guided", "McpGuidance", "mcp_guidance_source"]
