"""Core domain: session behaviour that depends only on the schema leaf and third-party libraries.

`__all__` is what the layers above (server, sdk, cli) and an embedded host's tools use. The names load on first use,
so importing one submodule (`core.config`, say) loads nothing else."""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..compat import IncompatibleDependencyError
    from .agents import AgentNotFoundError, agent_info, resolve_agent
    from .config import Config, ConfigError, ConfigReport, ConfigSource, inspect_config, parse_model_string
    from .execution.continuation import InvalidResumeBudget, ResumeBudget
    from .instructions.composition import InstructionSources
    from .llm.errors import NoModelConfiguredError, ProviderError
    from .llm.model import Provider, ResolvedModel
    from .llm.providers import AdapterSpec, register_adapter
    from .llm.retry import Clock
    from .location import Location, resolve_location
    from .permission import PermissionAsk, PermissionRequests
    from .runtime import Runtime, RuntimeOptions
    from .store import BackendNotInstalledError, DatabaseInUseError, StoreError, now_ms
    from .store.feed import SubscriptionLost
    from .tools import (
        StaticTools,
        Tool,
        ToolContext,
        ToolErrored,
        ToolFailure,
        ToolOutput,
        ToolRegistry,
        ToolSource,
        ToolSucceeded,
        default_registry,
    )
    from .wiring import DeferredDrain, make_drain_factory

_WHERE = {
    ".agents": ("AgentNotFoundError", "agent_info", "resolve_agent"),
    "..compat": ("IncompatibleDependencyError",),
    ".config": ("Config", "ConfigError", "ConfigReport", "ConfigSource", "inspect_config", "parse_model_string"),
    ".execution.continuation": ("InvalidResumeBudget", "ResumeBudget"),
    ".instructions.composition": ("InstructionSources",),
    ".llm.errors": ("NoModelConfiguredError", "ProviderError"),
    ".llm.model": ("Provider", "ResolvedModel"),
    ".llm.providers": ("AdapterSpec", "register_adapter"),
    ".llm.retry": ("Clock",),
    ".location": ("Location", "resolve_location"),
    ".permission": ("PermissionAsk", "PermissionRequests"),
    ".runtime": ("Runtime", "RuntimeOptions"),
    ".store": ("BackendNotInstalledError", "DatabaseInUseError", "StoreError", "now_ms"),
    ".store.feed": ("SubscriptionLost",),
    ".tools": ("StaticTools", "Tool", "ToolContext", "ToolErrored", "ToolFailure", "ToolOutput", "ToolRegistry",
               "ToolSource", "ToolSucceeded", "default_registry"),
    ".wiring": ("DeferredDrain", "make_drain_factory"),
}
_MODULE_OF = {name: module for module, names in _WHERE.items() for name in names}

__all__ = ["AdapterSpec", "AgentNotFoundError", "BackendNotInstalledError", "Clock", "Config", "ConfigError",
           "ConfigReport", "ConfigSource", "DatabaseInUseError", "DeferredDrain", "IncompatibleDependencyError",
           "InstructionSources", "InvalidResumeBudget", "Location", "NoModelConfiguredError", "PermissionAsk",
           "PermissionRequests", "Provider", "ProviderError", "ResolvedModel", "ResumeBudget", "Runtime",
           "RuntimeOptions", "StaticTools", "StoreError", "SubscriptionLost", "Tool", "ToolContext", "ToolErrored",
           "ToolFailure", "ToolOutput", "ToolRegistry", "ToolSource", "ToolSucceeded", "agent_info", "default_registry",
           "inspect_config", "make_drain_factory", "now_ms", "parse_model_string", "register_adapter", "resolve_agent",
           "resolve_location"]


def __getattr__(name: str) -> Any:
    module = _MODULE_OF.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(import_module(module, __name__), name)
