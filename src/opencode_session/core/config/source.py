"""The configuration in effect at a Location, for the whole runtime: read once per Location and served from a cache
until a file it was (or could have been) read from changes on disk; a project file changed while the runtime runs
(perhaps by the model) changes content at once, but its authority only with a restart."""

from __future__ import annotations

import copy
import logging
import os
import threading
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import anyio

from ..location import Location
from .files import candidate_files, load_config, user_files
from .model import Config

log = logging.getLogger(__name__)

# (mtime_ns, size, inode) of what a path names; None while nothing is there
Signature = tuple[int, int, int] | None
# Locations remembered at once: a server may be asked about any number of directories
CAPACITY = 256

# What in a config file grants authority: who may do what (permissions, agents and which one is the default), which
# processes run (MCP servers, plugins, hooks), what is read beyond the Location (instructions, references,
# `{file:...}` in an agent's prompt) and where keys are sent (providers, web search). In a project file
# changed while the runtime runs these stay as the runtime first read them: the model may have written that file.
AUTHORITY_KEYS = frozenset({"permission", "agent", "default_agent", "mcp", "plugin", "hooks", "instructions",
                            "references", "provider", "websearch"})
# Project files whose first reading is remembered, at most (beyond it, a changed file's authority is dropped).
PIN_CAPACITY = 65_536

_ABSENT: dict[str, object] = {}  # the authority of a file that was not there: none


def signature(path: Path) -> Signature:
    try:
        info = os.stat(path)
    except (OSError, ValueError):  # ValueError: a NUL byte in a configured path
        return None
    return info.st_mtime_ns, info.st_size, info.st_ino


@dataclass(frozen=True)
class _Entry:
    config: Config
    # every candidate file (present or not) and every `{file:...}` target, as it was before it was read
    watched: tuple[tuple[Path, Signature], ...]

    def fresh(self) -> bool:
        return all(signature(path) == seen for path, seen in self.watched)


class ConfigSource:
    """`at(location)` is the merged `opencode.json` configuration there (global, `OPENCODE_CONFIG`, project files
    from the root down), under the runtime's environment. A cached answer stands while no file it depends on has
    changed: each read stats those (a handful of stats), and a new, edited or removed file, or `{file:...}` target,
    makes the next read parse again. A broken file raises `ConfigError` on every read until it is mended (failures
    are not cached)."""

    def __init__(self, env: Mapping[str, str]) -> None:
        self.env = env
        self._cache: OrderedDict[tuple[Path, Path], _Entry] = OrderedDict()
        self._lock = threading.Lock()  # at_sync runs on worker threads and on the loop alike
        # the authority keys of each project file as first read (absent: none), and the changes already reported
        self._pinned: dict[Path, dict[str, object]] = {}
        self._reported: set[tuple[Path, str]] = set()
        # the `{env:...}` / `{file:...}` placeholders of each project file as first read: a changed file may use only
        # these (a new one could read the server's environment, a provider key say, or a file beyond the Location)
        self._placeholders: dict[Path, frozenset[str]] = {}

    async def at(self, location: Location) -> Config:
        """The configuration at `location`, its files checked (and read) off the event loop."""
        return await anyio.to_thread.run_sync(self.at_sync, location)

    def at_sync(self, location: Location) -> Config:
        """The configuration at `location`, blocking: for code already on a worker thread (or sure of local disks)."""
        key = (location.directory, location.project_root)
        with self._lock:
            entry = self._cache.get(key)
        if entry is not None and entry.fresh():
            with self._lock:
                if key in self._cache:
                    self._cache.move_to_end(key)
            return entry.config
        entry = self._load(location)
        with self._lock:
            self._cache[key] = entry
            self._cache.move_to_end(key)
            while len(self._cache) > CAPACITY:
                self._cache.popitem(last=False)
        return entry.config

    def _load(self, location: Location) -> _Entry:
        # signatures are taken before the reads, so a file changed while it is read is read again next time
        candidates = candidate_files(location.directory, location.project_root, self.env)
        watched = [(path, signature(path)) for path in candidates]
        own = {_key(path) for path in user_files(self.env)}
        with self._lock:
            for path, seen in watched:
                key = _key(path)
                if seen is None and key not in own and key not in self._pinned and len(self._pinned) < PIN_CAPACITY:
                    self._pinned[key] = _ABSENT  # a project file created later brings no authority with it
        config = load_config(location.directory, location.project_root, self.env,
                             included=lambda path: watched.append((path, signature(path))),
                             adjust=lambda path, data: data if _key(path) in own else self._pin(path, data),
                             placeholders=lambda path, found: found if _key(path) in own else self._gate(path, found))
        return _Entry(config, tuple(watched))

    def _gate(self, path: Path, found: frozenset[str]) -> frozenset[str]:
        """The placeholders of a project file that are substituted: all of them at its first reading (remembered),
        afterwards only those that reading had (a new one reads as "" until a restart, and is logged once)."""
        key = _key(path)
        with self._lock:
            first = self._placeholders.get(key)
            if first is None:
                if self._pinned.get(key) is _ABSENT or len(self._placeholders) >= PIN_CAPACITY:
                    first = frozenset()  # a file created while the runtime runs reads none
                else:
                    self._placeholders[key] = found
                    return found
            fresh = sorted(p for p in found - first if (key, p) not in self._reported)
            self._reported.update((key, p) for p in fresh)
        if fresh:
            log.warning("%s now uses %s while the server runs: read as empty until it restarts (a file written by a "
                        "session cannot read the server's environment or other files)", path, ", ".join(fresh))
        return found & first

    def _pin(self, path: Path, data: dict[str, object]) -> dict[str, object]:
        """A project file's `data` with its authority keys as first read: remembered now if this is the first
        reading, else put back where the file changed them (what changed is logged once: a restart applies it)."""
        key = _key(path)
        authority = {k: v for k, v in data.items() if k in AUTHORITY_KEYS}
        with self._lock:
            pinned = self._pinned.get(key)
            if pinned is None:
                if len(self._pinned) >= PIN_CAPACITY:
                    pinned = _ABSENT
                else:
                    self._pinned[key] = copy.deepcopy(authority)
                    return data
        if authority == pinned:
            return data
        changed = sorted(k for k in AUTHORITY_KEYS if authority.get(k) != pinned.get(k))
        with self._lock:
            fresh = [name for name in changed if (key, name) not in self._reported]
            self._reported.update((key, name) for name in changed)
        if fresh:
            log.warning("%s changed %s while the server runs: not applied until it restarts (a file written by a "
                        "session cannot grant authority)", path, ", ".join(fresh))
        kept = {k: v for k, v in data.items() if k not in AUTHORITY_KEYS}
        restored = copy.deepcopy(pinned)
        if "mcp" in restored:
            restored["mcp"] = _fewer_servers(restored["mcp"], authority.get("mcp"))
        return {**kept, **restored}


def _fewer_servers(pinned: object, now: object) -> object:
    """The MCP servers first read, less those the file no longer names or now switches off: narrowing applies at
    once (a server added or changed waits for the restart)."""
    if not isinstance(pinned, dict):
        return pinned
    named = now if isinstance(now, dict) else {}
    kept: dict[str, object] = {}
    for name, entry in pinned.items():
        if name not in named:
            continue
        off = isinstance(named[name], dict) and named[name].get("enabled") is False
        kept[name] = {**entry, "enabled": False} if off and isinstance(entry, dict) else entry
    return kept


def _key(path: Path) -> Path:
    try:
        return Path(os.path.realpath(path))
    except (OSError, ValueError):
        return path


__all__ = ["AUTHORITY_KEYS", "ConfigSource", "Signature", "signature"]
