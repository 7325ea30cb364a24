"""Finding and loading Python plugins: the entry points of the group `opencode_session.plugins`, the
`python:module[:attribute]` entries of opencode.json's `plugin` list (`["python:module", {...}]` gives it options) and
plugins given in code; each loaded, failed or skipped one is recorded (`Plugins`) with where it came from and what it
contributes, and logged."""

from __future__ import annotations

import importlib
import importlib.metadata
import inspect
import logging
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, Literal

from ..instructions.composition import InstructionSources
from ..llm.providers import AdapterSpec, adapter_spec, register_adapter, unregister_adapter
from ..tools.source import ToolSource
from .api import Plugin, PluginRegistry
from .hooks import PluginHooks

if TYPE_CHECKING:
    from ..config.trust import Trust

log = logging.getLogger(__name__)

ENTRY_POINT_GROUP: Final = "opencode_session.plugins"
PYTHON_PREFIX: Final = "python:"  # how opencode.json's `plugin` names a Python module (the others are OpenCode's JS)
Kind = Literal["entry-point", "config", "code"]
Status = Literal["loaded", "failed", "skipped"]


@dataclass
class LoadedPlugin:
    """One plugin as the runtime found it: where from, whether it loaded (else why not) and what it contributes."""

    name: str
    kind: Kind
    origin: str  # e.g. "ocs-example-plugin 0.1.0, entry point example" or "opencode.json: python:pkg.mod"
    status: Status
    error: str | None = None
    registry: PluginRegistry | None = None

    def describe(self) -> dict[str, Any]:
        """The JSON form `ocs plugins --format json` prints."""
        contributes = self.registry.contributes() if self.registry is not None and self.status == "loaded" else {}
        return {"name": self.name, "kind": self.kind, "origin": self.origin, "status": self.status,
                "error": self.error, "contributes": contributes}


@dataclass
class Plugins:
    """The plugins one runtime loaded (and those it could not), in load order."""

    records: list[LoadedPlugin] = field(default_factory=list)

    @property
    def loaded(self) -> list[PluginRegistry]:
        return [r.registry for r in self.records if r.status == "loaded" and r.registry is not None]

    @cached_property
    def hooks(self) -> PluginHooks:
        loaded = self.loaded
        return PluginHooks(before_request=[h for p in loaded for h in p.before_request_hooks],
                           before_tool=[h for p in loaded for h in p.before_tool_hooks],
                           after_tool_result=[h for p in loaded for h in p.after_tool_result_hooks],
                           on_event=[h for p in loaded for h in p.event_hooks],
                           pty_environment=[h for p in loaded for h in p.pty_environment_hooks])

    def tool_sources(self) -> list[ToolSource]:
        """Each loaded plugin's tools (one source per plugin) and tool sources, in load order."""
        return [source for p in self.loaded for source in ([p.tools] if p.tools.list_tools() else []) + p.tool_sources]

    def instruction_sources(self, sources: InstructionSources | None) -> InstructionSources | None:
        """`sources` and every plugin's instruction sources after them (a new set: `sources` is left as it is)."""
        added = [(position, producer) for p in self.loaded for position, _key, producer in p.instruction_producers]
        if not added:
            return sources
        return (sources if sources is not None else InstructionSources()).extended(added)

    def describe(self) -> list[dict[str, Any]]:
        return [record.describe() for record in self.records]


def load_plugins(*, given: Sequence[Plugin] = (), config_entries: Iterable[Any] = (), entry_points: bool = False,
                 config_file: str = "opencode.json") -> Plugins:
    """Load the plugins given in code, then (with `entry_points`) the installed ones, then opencode.json's Python
    entries. One that cannot be imported, whose setup raises or whose name is taken is recorded as failed and
    logged; JavaScript entries are recorded as skipped. Nothing here raises."""
    plugins = Plugins()
    for plugin in given:
        _load(plugins, plugin, "code", f"given in code ({_where(plugin.setup)})")
    if entry_points:
        for entry in sorted(importlib.metadata.entry_points(group=ENTRY_POINT_GROUP), key=lambda e: e.name):
            origin = _entry_point_origin(entry)
            try:
                found = entry.load()
            except BaseException as failure:  # an import error, or a module that exits: reported, never fatal
                if isinstance(failure, KeyboardInterrupt):
                    raise
                _failed(plugins, entry.name, "entry-point", origin, f"cannot import {entry.value}", failure)
                continue
            _load_object(plugins, found, entry.name, "entry-point", origin)
    for raw in config_entries:
        name = raw if isinstance(raw, str) else raw[0] if isinstance(raw, list) and raw else repr(raw)
        origin = f"{config_file} `plugin`: {name}"
        if not isinstance(name, str) or not name.startswith(PYTHON_PREFIX):
            plugins.records.append(LoadedPlugin(str(name), "config", origin, "skipped",
                                                "a JavaScript (OpenCode) plugin: not loaded by this runtime; name a "
                                                f"Python module as {PYTHON_PREFIX}module"))
            log.warning("plugin %s (%s) is not loaded: this runtime loads Python plugins (%smodule) only", name,
                        config_file, PYTHON_PREFIX)
            continue
        module, _, attribute = name[len(PYTHON_PREFIX):].partition(":")
        try:
            found = _import(module, attribute)
        except BaseException as failure:
            if isinstance(failure, KeyboardInterrupt):
                raise
            _failed(plugins, module or name, "config", origin, f"cannot import {module or '(no module)'}", failure)
            continue
        options = raw[1] if isinstance(raw, list) and len(raw) > 1 and isinstance(raw[1], dict) else {}
        _load_object(plugins, found, module, "config", origin, options)
    return plugins


def _import(module: str, attribute: str) -> Any:
    if not module:
        raise ImportError("no module named after python:")
    loaded = importlib.import_module(module)
    if attribute:
        return getattr(loaded, attribute)
    for name in ("plugin", "setup"):
        if hasattr(loaded, name):
            return getattr(loaded, name)
    raise AttributeError(f"module {module} has neither `plugin` nor `setup`")


def _load_object(plugins: Plugins, found: Any, default_name: str, kind: Kind, origin: str,
                 options: Mapping[str, Any] | None = None) -> None:
    if isinstance(found, Plugin):
        plugin = found
    elif callable(getattr(found, "setup", None)):
        plugin = Plugin(str(getattr(found, "name", default_name)), found.setup)
    elif callable(found):
        plugin = Plugin(default_name, found)
    else:
        _failed(plugins, default_name, kind, origin, "not a plugin",
                f"it names a {type(found).__name__}, not a Plugin or a setup function")
        return
    _load(plugins, plugin, kind, origin, options)


def _load(plugins: Plugins, plugin: Plugin, kind: Kind, origin: str, options: Mapping[str, Any] | None = None) -> None:
    taken = next((r for r in plugins.records if r.name == plugin.name and r.status == "loaded"), None)
    if taken is not None:
        _failed(plugins, plugin.name, kind, origin, "not loaded", f"a plugin named {plugin.name} is loaded already"
                                                                  f" ({taken.origin})")
        return
    registry = PluginRegistry(plugin.name, options=dict(options or {}))
    try:
        answer = plugin.setup(registry)
        if inspect.isawaitable(answer):
            close = getattr(answer, "close", None)
            if close is not None:
                close()
            raise TypeError("setup must be a plain function, not a coroutine function")
        _register_adapters(registry.adapters)
    except BaseException as failure:
        if isinstance(failure, KeyboardInterrupt):
            raise
        _failed(plugins, plugin.name, kind, origin, "its setup failed", failure)
        return
    plugins.records.append(LoadedPlugin(plugin.name, kind, origin, "loaded", registry=registry))
    parts = [f"{what} {', '.join(names)}" for what, names in registry.contributes().items() if names]
    log.info("plugin %s loaded from %s: %s", plugin.name, origin, "; ".join(parts) or "contributes nothing")


def _register_adapters(specs: Sequence[AdapterSpec]) -> None:
    """Register every adapter, or none of them (a protocol another plugin, or another runtime of this process,
    registered with the very same spec is shared)."""
    done: list[str] = []
    try:
        for spec in specs:
            try:
                if adapter_spec(spec.protocol) == spec:
                    continue
            except LookupError:
                pass
            register_adapter(spec)
            done.append(spec.protocol)
    except BaseException:
        for protocol in done:
            unregister_adapter(protocol)
        raise


def _failed(plugins: Plugins, name: str, kind: Kind, origin: str, what: str, failure: BaseException | str) -> None:
    why = failure if isinstance(failure, str) else f"{type(failure).__name__}: {failure}"
    plugins.records.append(LoadedPlugin(name, kind, origin, "failed", f"{what}: {why}"))
    log.error("plugin %s (%s) is not loaded: %s: %s", name, origin, what, why)
    if not isinstance(failure, str):
        log.debug("plugin %s: the failure", name, exc_info=failure)


def _entry_point_origin(entry: importlib.metadata.EntryPoint) -> str:
    dist = entry.dist
    where = f"{dist.name} {dist.version}, " if dist is not None else ""
    return f"{where}entry point {entry.name} = {entry.value}"


def _where(setup: Any) -> str:
    module = getattr(setup, "__module__", None) or "?"
    return f"{module}.{getattr(setup, '__qualname__', type(setup).__name__)}"


def config_plugin_entries(directory: Path, project_root: Path, env: Mapping[str, str],
                          trust: Trust | None = None) -> tuple[list[Any], str]:
    """opencode.json's `plugin` entries for a directory, and the files they come from (for listings); none when the
    configuration cannot be read (its error is reported where it is read for sessions). A project's entries count
    only where the user trusts its Location (`trust`, by default the user's own as `env` finds it)."""
    from ..config import inspect_config
    from ..config import trust as trusting
    from ..config.files import user_files
    from ..location import Location

    trust = trusting.Trust.of(env) if trust is None else trust
    location = Location(directory=Path(directory).resolve(), project_root=Path(project_root).resolve(),
                        is_git=False)
    state = trust.state(location)
    own = {os.path.realpath(path) for path in user_files(env)}

    def adjust(path: Path, data: dict[str, Any]) -> dict[str, Any]:
        if state.trusted or os.path.realpath(path) in own:
            return data
        if data.get("plugin"):
            trust.warn_once(state, ["plugin"])
        return {k: v for k, v in data.items() if k != "plugin"}

    report = inspect_config(directory, project_root, env, adjust=adjust)
    files = ", ".join(str(path) for path in report.files) or "opencode.json"
    if report.config is None:
        return [], files
    return list(report.config.plugin), files


__all__ = ["ENTRY_POINT_GROUP", "PYTHON_PREFIX", "LoadedPlugin", "Plugins", "config_plugin_entries", "load_plugins"]
