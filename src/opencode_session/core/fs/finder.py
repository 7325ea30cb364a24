"""Fuzzy finding across a Location's tree, as a file finder does: the entries whose path holds the query's
characters in order (case-insensitively), ranked by how well their name matches, then their path, shorter paths
first. The tree is indexed once per Location with the tools' ignore rules and re-walked only when a directory it
saw, or an ignore file in one, has changed since."""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from rapidfuzz import process
from rapidfuzz.distance import LCSseq

from ...schema.fs import FileSystemEntry
from ..tools.ignores import walk

DEFAULT_LIMIT = 50
INDEXED_LOCATIONS = 8  # trees kept indexed at once, the least recently searched dropped first
_IGNORE_FILES = (".gitignore", ".ignore", ".rgignore")
Kind = Literal["file", "directory"]


def _signature(path: str) -> tuple[int, int] | None:
    try:
        info = os.stat(path)
    except OSError:
        return None
    return info.st_mtime_ns, info.st_ino


@dataclass
class _Index:
    paths: list[str]  # relative, `/`-separated
    lowered: list[str]
    names: list[str]  # each path's last segment, lowered
    kinds: list[Kind]
    watched: list[tuple[str, tuple[int, int] | None]]  # each directory walked and ignore file met, as it was

    def fresh(self) -> bool:
        return all(_signature(path) == seen for path, seen in self.watched)


def _build(root: Path, env: Mapping[str, str]) -> _Index:
    paths: list[str] = []
    kinds: list[Kind] = []
    watched: list[tuple[str, tuple[int, int] | None]] = []
    base = str(root)
    for directory, dirs, files in walk(root, env):
        watched.append((directory, _signature(directory)))
        for name in _IGNORE_FILES:
            candidate = os.path.join(directory, name)
            watched.append((candidate, _signature(candidate)))
        relative = os.path.relpath(directory, base)
        prefix = "" if relative == "." else relative.replace(os.sep, "/") + "/"
        paths += [prefix + d for d in dirs]
        kinds += ["directory"] * len(dirs)
        paths += [prefix + f for f in files]
        kinds += ["file"] * len(files)
    lowered = [p.lower() for p in paths]
    return _Index(paths, lowered, [p.rsplit("/", 1)[-1] for p in lowered], kinds, watched)


class Finder:
    """Indexes of the Locations searched lately; safe to call from worker threads."""

    def __init__(self, capacity: int = INDEXED_LOCATIONS) -> None:
        self._capacity = capacity
        self._indexes: OrderedDict[Path, _Index] = OrderedDict()
        self._lock = threading.Lock()

    def _index(self, root: Path, env: Mapping[str, str]) -> _Index:
        with self._lock:
            index = self._indexes.get(root)
        if index is None or not index.fresh():
            index = _build(root, env)
        with self._lock:
            self._indexes[root] = index
            self._indexes.move_to_end(root)
            while len(self._indexes) > self._capacity:
                self._indexes.popitem(last=False)
        return index

    def find(self, root: Path, query: str, env: Mapping[str, str], kind: Kind | None = None,
             limit: int = DEFAULT_LIMIT) -> list[FileSystemEntry]:
        index = self._index(root, env)
        needle = query.lower()
        if not needle.strip():
            picked = [i for i in range(len(index.paths)) if kind is None or index.kinds[i] == kind]
            picked.sort(key=lambda i: (index.paths[i].count("/"), index.paths[i]))
            return [FileSystemEntry(path=index.paths[i], type=index.kinds[i]) for i in picked[:limit]]
        # The query's characters in order anywhere in the path: its longest common subsequence is all of it.
        hits = process.extract(needle, index.lowered, scorer=LCSseq.similarity, score_cutoff=len(needle),
                               limit=None)
        candidates = [i for _, _, i in hits if kind is None or index.kinds[i] == kind]
        if not candidates:
            return []
        names = process.extract(needle, [index.names[i] for i in candidates], scorer=LCSseq.normalized_similarity,
                                limit=None)
        ranked = sorted(((_score(needle, index.names[candidates[n]], index.lowered[candidates[n]], similarity),
                          candidates[n]) for _, similarity, n in names), key=lambda pair: (-pair[0], pair[1]))
        return [FileSystemEntry(path=index.paths[i], type=index.kinds[i]) for _, i in ranked[:limit]]


def _score(needle: str, name: str, path: str, name_similarity: float) -> float:
    """Higher is better: the name's share of the query's characters, more for the query whole in the name (most at
    its start), some for it whole in the path; a longer path loses a little."""
    score = 100.0 * name_similarity
    if needle in name:
        score += 40.0 + (20.0 if name.startswith(needle) else 0.0)
    elif needle in path:
        score += 20.0
    return score - 0.2 * len(path)
