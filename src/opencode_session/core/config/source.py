"""The configuration in effect at a Location, for the whole runtime: read once per Location and served from a cache
until a file it was (or could have been) read from changes on disk."""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import anyio

from ..location import Location
from .files import candidate_files, load_config
from .model import Config

# (mtime_ns, size, inode) of what a path names; None while nothing is there
Signature = tuple[int, int, int] | None
# Locations remembered at once: a server may be asked about any number of directories
CAPACITY = 256


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
        watched = [(path, signature(path)) for path in candidate_files(location.directory, location.project_root,
                                                                       self.env)]
        config = load_config(location.directory, location.project_root, self.env,
                             included=lambda path: watched.append((path, signature(path))))
        return _Entry(config, tuple(watched))


__all__ = ["ConfigSource", "Signature", "signature"]
