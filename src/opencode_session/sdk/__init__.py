"""The Embedded host: the same client API served in process by the same router, plus embedded-only capabilities,
and what writing a tool for it takes (`OpenCode(tools=[...])`, or a ToolSource of your own)."""

from ..core.tools import StaticTools, Tool, ToolContext, ToolFailure, ToolOutput, ToolSource
from ..schema.message import ToolContent, ToolFileContent, ToolTextContent
from .embedded import OpenCode

__all__ = ["OpenCode", "StaticTools", "Tool", "ToolContent", "ToolContext", "ToolFailure", "ToolFileContent",
           "ToolOutput", "ToolSource", "ToolTextContent"]
