"""Fuzzy finding across a Location's tree, as a file finder does: the entries whose path holds the query's
characters in order (case-insensitively), ranked by how well their name matches, then their path, shorter paths
first. The tree is indexed once per Location with the tools' ignore rules; each search first checks it is fresh (a stat
per directory and ignore file) and lists again only what changed: a directory whose entries changed, the subtree of
a new directory, the subtree under an ignore file that was added, edited or removed."""

from __future__ import annotations

import logging
import os
import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from ...schema.fs import FileSystemEntry
from ..tools.ignores import walk

log = logging.getLogger(__name__)

DEFAULT_LIMIT = 50
INDEXED_LOCATIONS = 8  # trees kept indexed at once, the least recently searched dropped first
# Entries one tree's index holds at most (a caller may name `/` as the location): past it the walk stops, so an
# index's memory is bounded (about 200 bytes an entry, times INDEXED_LOCATIONS).
MAX_INDEXED = 200_000
MAX_INDEXED_ENV = "OCS_FIND_MAX_INDEXED"  # a positive whole number overrides MAX_INDEXED (tests use a small one)
# Beyond this many matches, only the best this many by name are ranked fully (a one-letter query matches everything).
RANKED = 2000
_IGNORE_FILES = (".gitignore", ".ignore", ".rgignore")
Kind = Literal["file", "directory"]
Signature = tuple[int, int] | None


def _signature(path: str) -> Signature:
    try:
        info = os.stat(path)
    except OSError:
        return None
    return info.st_mtime_ns, info.st_ino


@dataclass
class _Listing:
    signature: Signature  # of the directory, taken before it was listed
    dirs: list[str]
    files: list[str]
    ignore_files: tuple[str, ...]  # the ignore files it had


def _inside(path: str, top: str) -> bool:
    return path == top or path.startswith(top + os.sep)


class _Index:
    """One tree's listings by directory, flattened into parallel lists for searching."""

    def __init__(self, root: Path, env: Mapping[str, str], cap: int = MAX_INDEXED) -> None:
        self.root = str(root)
        self.env = env
        self.cap = cap
        self.listings: dict[str, _Listing] = {}
        self.ignores: dict[str, Signature] = {}  # every ignore file met, as it was
        self.lock = threading.Lock()  # one refresh or search of this tree at a time
        self.truncated = False  # the tree has more than `cap` entries: the rest is not indexed
        self._walk(self.root)
        self._flatten()

    def _walk(self, top: str) -> None:
        """(Re)list the subtree at `top`, up to `cap` entries in the whole index."""
        self._drop(top)
        held = sum(len(listing.dirs) + len(listing.files) for listing in self.listings.values())
        for directory, dirs, files in walk(Path(top), self.env):
            held += len(dirs) + len(files)
            if held > self.cap:
                if not self.truncated:
                    log.warning("fs.find: %s holds more than %d entries; only the first %d are searched",
                                self.root, self.cap, self.cap)
                self.truncated = True
                return
            self._record(directory, dirs, files, _signature(directory))

    def _record(self, directory: str, dirs: list[str], files: list[str], signature: Signature) -> None:
        present = []
        for name in _IGNORE_FILES:
            candidate = os.path.join(directory, name)
            seen = _signature(candidate)
            if seen is not None:
                self.ignores[candidate] = seen
                present.append(name)
        self.listings[directory] = _Listing(signature, dirs, files, tuple(present))

    def _drop(self, top: str) -> None:
        for directory in [d for d in self.listings if _inside(d, top)]:
            del self.listings[directory]
        for path in [p for p in self.ignores if _inside(os.path.dirname(p), top)]:
            del self.ignores[path]

    def refresh(self) -> None:
        rules_changed = {os.path.dirname(p) for p, seen in self.ignores.items() if _signature(p) != seen}
        changed = [d for d, listing in self.listings.items() if _signature(d) != listing.signature]
        if not rules_changed and not changed:
            return
        for top in sorted(rules_changed, key=len):  # an outer rewalk covers the inner ones
            if top in self.listings:
                self._walk(top)
        for directory in sorted(changed, key=len):
            old = self.listings.get(directory)
            if old is None or old.signature == _signature(directory):
                continue  # already listed again as part of a rewalked subtree
            self._relist(directory, old)
        self._flatten()

    def _relist(self, directory: str, old: _Listing) -> None:
        signature = _signature(directory)
        if signature is None or not os.path.isdir(directory):
            self._drop(directory)
            return
        try:
            _, dirs, files = next(walk(Path(directory), self.env))
        except StopIteration:
            self._drop(directory)
            return
        if tuple(n for n in _IGNORE_FILES if n in files) != old.ignore_files:
            self._walk(directory)  # its rules changed: everything below may be seen differently
            return
        for gone in set(old.dirs) - set(dirs):
            self._drop(os.path.join(directory, gone))
        self._record(directory, dirs, files, signature)
        for new in [d for d in dirs if d not in old.dirs]:
            self._walk(os.path.join(directory, new))

    def _flatten(self) -> None:
        paths: list[str] = []
        kinds: list[Kind] = []
        skip = len(self.root) + 1
        for directory, listing in self.listings.items():
            prefix = directory[skip:].replace(os.sep, "/") + "/" if directory != self.root else ""
            paths += [prefix + d for d in listing.dirs]
            kinds += ["directory"] * len(listing.dirs)
            paths += [prefix + f for f in listing.files]
            kinds += ["file"] * len(listing.files)
        self.paths = paths
        self.kinds = kinds
        self.lowered = [p.lower() for p in paths]
        self.names = [p.rsplit("/", 1)[-1] for p in self.lowered]


def max_indexed(env: Mapping[str, str]) -> int:
    """The entries one index may hold: `$OCS_FIND_MAX_INDEXED` when it is a positive whole number, else MAX_INDEXED."""
    raw = env.get(MAX_INDEXED_ENV, "").strip()
    return int(raw) if raw.isdigit() and int(raw) > 0 else MAX_INDEXED


class Finder:
    """Indexes of the Locations searched lately; safe to call from worker threads."""

    def __init__(self, capacity: int = INDEXED_LOCATIONS, max_indexed: int = MAX_INDEXED) -> None:
        self._capacity = capacity
        self.max_indexed = max_indexed
        self._indexes: OrderedDict[Path, _Index] = OrderedDict()
        self._lock = threading.Lock()

    def _index(self, root: Path, env: Mapping[str, str]) -> _Index:
        with self._lock:
            index = self._indexes.get(root)
            if index is not None:
                self._indexes.move_to_end(root)
        if index is None:
            index = _Index(root, env, self.max_indexed)
            with self._lock:
                self._indexes[root] = index
                while len(self._indexes) > self._capacity:
                    self._indexes.popitem(last=False)
        return index

    def find(self, root: Path, query: str, env: Mapping[str, str], kind: Kind | None = None,
             limit: int = DEFAULT_LIMIT, hidden: Callable[[str], bool] | None = None) -> list[FileSystemEntry]:
        """The best `limit` entries for `query`, leaving out the files `hidden(relative path)` says to."""
        index = self._index(root, env)
        with index.lock:
            index.refresh()
            picked = _rank(index, query.lower(), kind, limit, hidden)
            return [FileSystemEntry(path=index.paths[i], type=index.kinds[i]) for i in picked]


def _rank(index: _Index, needle: str, kind: Kind | None, limit: int,
          hidden: Callable[[str], bool] | None = None) -> list[int]:
    def wanted(i: int) -> bool:
        return (kind is None or index.kinds[i] == kind) and not (
            hidden is not None and index.kinds[i] == "file" and hidden(index.paths[i]))

    if not needle.strip():
        everything = [i for i in range(len(index.paths)) if wanted(i)]
        everything.sort(key=lambda i: (index.paths[i].count("/"), index.paths[i]))
        return everything[:limit]
    from rapidfuzz import process  # loaded with the first fuzzy search, not at start-up
    from rapidfuzz.distance import LCSseq

    # The query's characters in order anywhere in the path: its longest common subsequence is all of it.
    hits = process.extract(needle, index.lowered, scorer=LCSseq.similarity, score_cutoff=len(needle), limit=None)
    candidates = [i for _, _, i in hits if wanted(i)]
    if not candidates:
        return []
    by_name = process.extract(needle, [index.names[i] for i in candidates], scorer=LCSseq.normalized_similarity,
                              limit=max(limit, RANKED))
    scored = [(_score(needle, index.names[candidates[n]], index.lowered[candidates[n]], similarity), candidates[n])
              for _, similarity, n in by_name]
    scored.sort(key=lambda pair: (-pair[0], index.paths[pair[1]]))
    return [i for _, i in scored[:limit]]


def _score(needle: str, name: str, path: str, name_similarity: float) -> float:
    """Higher is better: the name's share of the query's characters, more for the query whole in the name (most at
    its start), some for it whole in the path; a longer path loses a little."""
    score = 100.0 * name_similarity
    if needle in name:
        score += 40.0 + (20.0 if name.startswith(needle) else 0.0)
    elif needle in path:
        score += 20.0
    return score - 0.2 * len(path)
