"""The tool layer the runner calls: tool contract, tool sources, the registry composed of them and one Step's tool
set, settlement, output bounding, built-in tools.

The names load on first use: importing one submodule (`tools.tool`, `tools.managed`) does not load every built-in
tool and the JSON Schema validator with them (a server needs those only when a Step runs)."""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .builtin import GlobTool, ReadTool
    from .output import DEFAULT_MAX_BYTES, DEFAULT_MAX_LINES, bound_text
    from .registry import (
        Settlement,
        ToolDefinition,
        ToolErrored,
        ToolRegistry,
        ToolSet,
        ToolSucceeded,
        builtin_tools,
        default_registry,
    )
    from .source import StaticTools, ToolSource
    from .tool import Tool, ToolContext, ToolFailure, ToolOutput

__all__ = [
    "DEFAULT_MAX_BYTES",
    "DEFAULT_MAX_LINES",
    "GlobTool",
    "ReadTool",
    "Settlement",
    "StaticTools",
    "Tool",
    "ToolContext",
    "ToolDefinition",
    "ToolErrored",
    "ToolFailure",
    "ToolOutput",
    "ToolRegistry",
    "ToolSet",
    "ToolSource",
    "ToolSucceeded",
    "bound_text",
    "builtin_tools",
    "default_registry",
]


def __getattr__(name: str) -> Any:
    if name in __all__:
        for where in (".tool", ".source", ".output", ".registry", ".builtin"):
            module = import_module(where, __name__)
            if hasattr(module, name):
                return getattr(module, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
