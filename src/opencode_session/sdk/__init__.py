"""The Embedded host: the same client API served in process by the same router, plus embedded-only capabilities,
what writing a tool for it takes (`OpenCode(tools=[...])`, or a ToolSource of your own) and what a Python plugin is
(`Plugin`, the `PluginRegistry` its setup fills, what its hooks are shown)."""

from ..core.llm.model import LLMRequest
from ..core.llm.providers import AdapterSpec
from ..core.plugins import (
    ENTRY_POINT_GROUP,
    InstructionRequest,
    Plugin,
    PluginInstructionsUnavailable,
    PluginRegistry,
    ProviderRequest,
    TerminalRequest,
    ToolCallRequest,
    ToolResult,
)
from ..core.store import BackendNotInstalledError
from ..core.tools import StaticTools, Tool, ToolContext, ToolFailure, ToolOutput, ToolSource
from ..core.tools.arguments import Arguments, FunctionTool, schema_of
from ..core.userhooks import ToolVerdict
from ..schema.events import EventRecord
from ..schema.message import ToolContent, ToolFileContent, ToolTextContent
from .embedded import OpenCode

__all__ = ["ENTRY_POINT_GROUP", "AdapterSpec", "Arguments", "BackendNotInstalledError", "EventRecord", "FunctionTool",
           "InstructionRequest", "LLMRequest", "OpenCode", "Plugin", "PluginInstructionsUnavailable", "PluginRegistry",
           "ProviderRequest", "StaticTools", "TerminalRequest", "Tool", "ToolCallRequest", "ToolContent", "ToolContext",
           "ToolFailure", "ToolFileContent", "ToolOutput", "ToolResult", "ToolSource", "ToolTextContent", "ToolVerdict",
           "schema_of"]
