"""The tool layer the runner calls: tool contract, registry and settlement, output bounding, built-in tools.

The names below load on first use, so importing one submodule (`tools.tool`, `tools.managed`) does not load every
built-in tool and the JSON Schema validator with it (serving needs them only when a Step runs)."""

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
        ToolSucceeded,
        default_registry,
    )
    from .tool import Tool, ToolContext, ToolFailure, ToolOutput

_WHERE = {
    "GlobTool": ".builtin", "ReadTool": ".builtin",
    "DEFAULT_MAX_BYTES": ".output", "DEFAULT_MAX_LINES": ".output", "bound_text": ".output",
    "Settlement": ".registry", "ToolDefinition": ".registry", "ToolErrored": ".registry", "ToolRegistry": ".registry",
    "ToolSucceeded": ".registry", "default_registry": ".registry",
    "Tool": ".tool", "ToolContext": ".tool", "ToolFailure": ".tool", "ToolOutput": ".tool",
}

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


def __getattr__(name: str) -> Any:
    where = _WHERE.get(name)
    if where is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(import_module(where, __name__), name)
