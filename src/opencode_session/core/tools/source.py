"""Tool sources: where the tools a Step may call come from. The built-in tools are one source, Python tools registered
on an embedded host another, and a source that learns its tools elsewhere (an MCP server) fits the same protocol."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Protocol, runtime_checkable

from .tool import Tool


@runtime_checkable
class ToolSource(Protocol):
    """A set of tools with a lifetime. The registry starts it once before the first Step that needs tools, asks it
    for its tools at every Step's boundary and stops it when the runtime closes. `list_tools` must not block: a
    source that learns its tools over the network keeps the latest list it learned and returns that. Its list may
    change between two calls; a Step keeps the list it got at its boundary, so a change reaches the next Step, never
    the one running."""

    @property
    def name(self) -> str:
        """Names the source in messages ("built-in", "host", "mcp:github")."""
        ...

    async def start(self) -> None: ...

    def list_tools(self) -> Sequence[Tool]: ...

    async def stop(self) -> None: ...


class StaticTools:
    """A source over tools given in code: the built-ins, or the Python tools an embedded host registers (it may add
    more while sessions run)."""

    def __init__(self, name: str, tools: Iterable[Tool] = ()) -> None:
        self._name = name
        self._tools: list[Tool] = list(tools)

    @property
    def name(self) -> str:
        return self._name

    def add(self, tool: Tool) -> None:
        self._tools.append(tool)

    async def start(self) -> None:
        return None

    def list_tools(self) -> Sequence[Tool]:
        return tuple(self._tools)

    async def stop(self) -> None:
        return None


__all__ = ["StaticTools", "ToolSource"]
