"""`ocs plugins`: the Python plugins a runtime in this directory loads, where each comes from and what it
contributes (or why it is not loaded), as a listing or as JSON; and the lines `ocs serve`/`ocs run` say about them."""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..core.plugins import Plugins

_KINDS = {"tools": "tools", "tool_sources": "tool sources", "instructions": "instructions",
          "adapters": "adapters", "hooks": "hooks"}


def said_here() -> None:
    """The command line says what loading the plugins came to itself (`plugin_lines`, `plugin_problems`): the
    loader's own log lines would only repeat it."""
    logging.getLogger("opencode_session.core.plugins.loading").setLevel(logging.CRITICAL)


def discover(directory: Path, env: Mapping[str, str]) -> Plugins:
    """Load the plugins as a runtime at `directory` would: installed entry points and opencode.json's entries."""
    from ..core.location import resolve_location
    from ..core.plugins import config_plugin_entries, load_plugins

    location = resolve_location(directory)
    entries, files = config_plugin_entries(location.directory, location.project_root, env)
    return load_plugins(config_entries=entries, entry_points=True, config_file=files)


def _contributes(described: dict[str, Any]) -> str:
    parts = [f"{_KINDS[kind]}: {', '.join(names)}" for kind, names in described["contributes"].items() if names]
    return "; ".join(parts) or "nothing"


def plugin_lines(plugins: Plugins) -> list[str]:
    """One line per plugin: its name, status and origin, then what it contributes or why it is not loaded."""
    lines = []
    for described in plugins.describe():
        head = f"{described['name']}  {described['status']}  {described['origin']}"
        detail = _contributes(described) if described["status"] == "loaded" else described["error"]
        lines.append(f"{head}\n    {detail}")
    return lines


def plugin_problems(plugins: Plugins) -> list[str]:
    """What `ocs run` says at start: a warning for each plugin that is not loaded."""
    return [f"warning: plugin {d['name']} ({d['origin']}) is not loaded: {d['error']}"
            for d in plugins.describe() if d["status"] != "loaded"]


def list_plugins(directory: Path, as_json: bool, env: Mapping[str, str] | None = None) -> int:
    """Print the plugins (exit 0, also when some failed: the listing says so)."""
    said_here()
    plugins = discover(directory, os.environ if env is None else env)
    if as_json:
        for described in plugins.describe():
            print(json.dumps(described))
        return 0
    if not plugins.records:
        print("no plugins (install a package with an `opencode_session.plugins` entry point, or name a module as"
              " python:module in opencode.json's `plugin`)")
        return 0
    for line in plugin_lines(plugins):
        print(line)
    return 0
