"""`ocs trust [DIR]`: give a Location's project configuration its authority (hooks, MCP servers, plugins,
permissions), for the content it has now; `--show` says whether it is trusted and what it would grant, `--revoke`
takes the trust back. What is trusted is kept in the user's data directory (`core/config/trust.py`)."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

# What a project's configuration can hold that only trust gives effect to
_AUTHORITY = ("hooks", "mcp", "plugin", "provider", "websearch", "references", "instructions", "permission",
              "agent")


def trust_location(directory: Path, *, show: bool, revoke: bool, as_json: bool,
                   env: Mapping[str, str] | None = None) -> int:
    """Trust (or show, or revoke) the Location at `directory`; exit 0, or 1 when it cannot be done."""
    from ..core.config.trust import Trust
    from ..core.location import resolve_location

    environment = os.environ if env is None else env
    if not directory.is_dir():
        print(f"ocs trust: {directory} is not a directory")
        return 1
    location = resolve_location(directory)
    trust = Trust.of(environment)
    try:
        state = trust.revoke(location) if revoke else trust.state(location) if show else trust.grant(location)
    except OSError as exc:
        print(f"ocs trust: cannot keep the trust in {trust.path}: {exc}")
        return 1
    answer: dict[str, Any] = {**state.public(), "authority": _authority(state.files)}
    if as_json:
        print(json.dumps(answer))
        return 0
    if state.trust_all:
        print(f"every Location is trusted here (OCS_TRUST_ALL is set): {location.directory}")
    elif state.digest is None:
        print(f"{location.directory} has no project configuration: nothing to trust")
    else:
        verb = "trusted" if state.trusted else "not trusted"
        if not state.trusted and state.granted is not None:
            verb += " (its configuration changed since it was trusted)"
        print(f"{location.directory}: {verb}")
        for path in state.files:
            print(f"  {path}")
        granted = ", ".join(answer["authority"]) or "nothing beyond content"
        print(f"  it configures: {granted}")
        if not state.trusted:
            print(f"  run `ocs trust {location.directory}` to give it effect")
    return 0


def _authority(files: tuple[Path, ...]) -> list[str]:
    """The keys that carry authority among what the files say (read as JSONC, placeholders left as they are)."""
    from ..core.config import ConfigError, parse_jsonc

    found: list[str] = []
    for path in files:
        try:
            data = parse_jsonc(path.read_text(encoding="utf-8"))
        except (OSError, ValueError, ConfigError):
            continue
        if isinstance(data, dict):
            found += [key for key in _AUTHORITY if data.get(key) and key not in found]
    return found
