"""The tool layer the runner calls: tool contract, registry and settlement, output bounding, built-in tools."""

from .builtin import GlobTool, ReadTool
from .output import DEFAULT_MAX_BYTES, DEFAULT_MAX_LINES, bound_text
from .registry import (
    Settlement,
    ToolDefinition,
    ToolErrored,
    ToolRegistry,
    ToolSucceeded,
    default_registry,
)
from .tool import Tool, ToolContext, ToolFailure, ToolOutput

__all__ = [
    "DEFAULT_MAX_BYTES",
    "DEFAULT_MAX_LINES",
    "GlobTool",
    "ReadTool",
    "Settlement",
    "Tool",
    "ToolContext",
    "ToolDefinition",
    "ToolErrored",
    "ToolFailure",
    "ToolOutput",
    "ToolRegistry",
    "ToolSucceeded",
    "bound_text",
    "default_registry",
]
