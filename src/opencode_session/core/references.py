"""Project references, as OpenCode configures them (opencode.json's `references`: a name for a local directory or
a git repository): read from each config file so a relative path is taken from that file's directory, a nearer file
replacing a farther one's entry of the same name. A git reference names where its checkout lives; this runtime does
not clone it, so guidance offers it only once that directory exists.

Every Step's boundary asks (for the references guidance), so the answer at a Location is kept while nothing it was
read from changed: the config files (present or not), the files their `{file:...}` placeholders read, and the
environment variables read on the way."""

from __future__ import annotations

import hashlib
import os
import re
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..schema.reference import ReferenceGitSource, ReferenceInfo, ReferenceLocalSource
from .config import candidate_files, config_files, load_file
from .config.source import Signature, signature
from .location import Location

_ALIAS = re.compile(r"^[^/\s`,]+$")


def repositories_dir(env: Mapping[str, str]) -> Path:
    cache = env.get("XDG_CACHE_HOME")
    base = Path(cache) if cache else Path(env.get("HOME") or Path.home()) / ".cache"
    return base / "opencode" / "repos"


def checkout_path(repository: str, branch: str | None, env: Mapping[str, str]) -> Path:
    """Where a git reference's checkout lives: one folder per repository and branch."""
    stem = re.sub(r"^[a-z+]+://|\.git$", "", repository.strip()).replace(":", "/")
    safe = "/".join(part for part in re.split(r"[\\/]+", stem) if part not in ("", ".", ".."))
    digest = hashlib.sha256(f"{repository}#{branch or ''}".encode()).hexdigest()[:8]
    return repositories_dir(env) / f"{safe or 'repository'}@{branch or 'default'}-{digest}"


def _local(entry: Any) -> bool:
    return (isinstance(entry, str) and entry.startswith((".", "/", "~"))) or (isinstance(entry, Mapping)
                                                                             and "path" in entry)


def _text(entry: Mapping[str, Any], key: str) -> str | None:
    value = entry.get(key)
    return value if isinstance(value, str) else None


def _hidden(entry: Mapping[str, Any]) -> bool | None:
    value = entry.get("hidden")
    return value if isinstance(value, bool) else None


def _reference(name: str, entry: Any, base: Path, env: Mapping[str, str]) -> ReferenceInfo | None:
    detail: Mapping[str, Any] = entry if isinstance(entry, Mapping) else {}
    description, hidden = _text(detail, "description"), _hidden(detail)
    if _local(entry):
        raw = entry if isinstance(entry, str) else _text(detail, "path")
        if not raw:
            return None
        home = env.get("HOME") or str(Path.home())
        path = Path(os.path.join(home, raw[2:])) if raw.startswith("~/") else base / raw
        resolved = str(Path(os.path.normpath(path)))
        return ReferenceInfo(name=name, path=resolved, description=description, hidden=hidden,
                             source=ReferenceLocalSource(type="local", path=resolved, description=description,
                                                         hidden=hidden))
    repository = entry if isinstance(entry, str) else _text(detail, "repository")
    if not repository:
        return None
    branch = _text(detail, "branch")
    return ReferenceInfo(name=name, path=str(checkout_path(repository, branch, env)), description=description,
                         hidden=hidden, source=ReferenceGitSource(type="git", repository=repository, branch=branch,
                                                                  description=description, hidden=hidden))


def _discover(location: Location, env: Mapping[str, str],
              included: Callable[[Path], None] = lambda _path: None) -> list[ReferenceInfo]:
    found: dict[str, ReferenceInfo] = {}
    for path in config_files(location.directory, location.project_root, env):
        entries = load_file(path, env, included=included).get("references")
        for name, entry in (entries.items() if isinstance(entries, Mapping) else ()):
            if isinstance(name, str) and _ALIAS.match(name):
                reference = _reference(name, entry, path.parent, env)
                if reference is not None:
                    found[name] = reference
    return [found[name] for name in sorted(found)]


class _Recorded(Mapping[str, str]):
    """An environment that remembers the variables read from it (None: unset); iterating it reads them all."""

    def __init__(self, env: Mapping[str, str]) -> None:
        self.env = env
        self.read: dict[str, str | None] = {}
        self.whole = False

    def __getitem__(self, key: str) -> str:
        value = self.env.get(key)
        self.read[key] = value
        if value is None:
            raise KeyError(key)
        return value

    def __iter__(self) -> Iterator[str]:
        self.whole = True
        return iter(self.env)

    def __len__(self) -> int:
        self.whole = True
        return len(self.env)


@dataclass(frozen=True)
class _Known:
    references: tuple[ReferenceInfo, ...]
    watched: tuple[tuple[Path, Signature], ...]  # every file it was (or could have been) read from, as before
    read: tuple[tuple[str, str | None], ...]  # the environment variables read, as they were

    def fresh(self, env: Mapping[str, str]) -> bool:
        return (all(env.get(name) == value for name, value in self.read)
                and all(signature(path) == seen for path, seen in self.watched))


# Locations remembered at once (a server may be asked about any number of directories)
_CAPACITY = 256
_known: OrderedDict[tuple[Path, Path], _Known] = OrderedDict()
_lock = threading.Lock()  # boundaries sample on worker threads and on the loop alike


def discover_references(location: Location, env: Mapping[str, str]) -> list[ReferenceInfo]:
    """The references configured at `location`, by name. Raises ConfigError for a broken config file (never
    remembered: it is read again until mended)."""
    key = (location.directory, location.project_root)
    with _lock:
        known = _known.get(key)
    if known is not None and known.fresh(env):
        return list(known.references)
    recorded = _Recorded(env)
    watched = [(path, signature(path)) for path in candidate_files(location.directory, location.project_root,
                                                                     recorded)]
    references = _discover(location, recorded, lambda path: watched.append((path, signature(path))))
    if not recorded.whole:
        with _lock:
            _known[key] = _Known(tuple(references), tuple(watched), tuple(recorded.read.items()))
            _known.move_to_end(key)
            while len(_known) > _CAPACITY:
                _known.popitem(last=False)
    return references
