"""Python plugins: what one is and may contribute (`api`), how their hooks compose and fail (`hooks`), how they are
found and loaded (`loading`)."""

from .api import (
    PLUGIN_POSITION,
    InstructionRequest,
    Plugin,
    PluginInstructionsUnavailable,
    PluginRegistry,
    ProviderRequest,
    TerminalRequest,
    ToolCallRequest,
    ToolResult,
)
from .hooks import PluginHookError, PluginHooks
from .loading import ENTRY_POINT_GROUP, PYTHON_PREFIX, LoadedPlugin, Plugins, config_plugin_entries, load_plugins

__all__ = ["ENTRY_POINT_GROUP", "PLUGIN_POSITION", "PYTHON_PREFIX", "InstructionRequest", "LoadedPlugin", "Plugin",
           "PluginHookError", "PluginHooks", "PluginInstructionsUnavailable", "PluginRegistry", "Plugins",
           "ProviderRequest", "TerminalRequest", "ToolCallRequest", "ToolResult", "config_plugin_entries",
           "load_plugins"]
