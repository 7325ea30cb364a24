"""`ocs hooks`: the user hooks a session in this directory runs (from the merged opencode.json), event by event with
their matchers, handlers and timeouts, and the entries that cannot be read; as a listing or as JSON."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path


def list_hooks(directory: Path, as_json: bool, env: Mapping[str, str] | None = None) -> int:
    """Print the hooks configured at `directory` (exit 0), or the configuration's error (exit 1)."""
    from ..core.config import ConfigError, ConfigSource
    from ..core.location import resolve_location
    from ..core.userhooks import parse_hooks

    source = ConfigSource(os.environ if env is None else env)
    location = resolve_location(directory)
    try:
        config = source.at_sync(location)
    except ConfigError as bad:
        print(f"ocs: {bad}")
        return 1
    untrusted = source.untrusted(location)
    if untrusted is not None and "hooks" in untrusted[1]:
        note = (f"{location.directory} is not trusted: its project's hooks are not run until `ocs trust "
                f"{location.directory}`")
        print(json.dumps({"problem": note}) if as_json else f"not run: {note}")
    settings = parse_hooks(config.hooks)
    rows = [{"event": event, "matcher": matcher.pattern or "*", "type": handler.type, "target": handler.target,
             "timeout": handler.timeout_s}
            for event, matchers in settings.events.items() for matcher in matchers for handler in matcher.handlers]
    if as_json:
        for row in rows:
            print(json.dumps(row))
        for problem in settings.problems:
            print(json.dumps({"problem": problem}))
        return 0
    if not rows and not settings.problems:
        print("no hooks (add a `hooks` section to opencode.json: see docs/plugins-and-hooks.md)")
    for row in rows:
        print(f"{row['event']}  {row['matcher']}  {row['type']} {row['target']}  (timeout {row['timeout']:g} s)")
    for problem in settings.problems:
        print(f"not run: {problem}")
    return 0
