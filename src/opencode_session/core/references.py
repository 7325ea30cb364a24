"""Project references, as OpenCode configures them (opencode.json's `references`: a name for a local directory or
a git repository): taken from the configuration in effect at a Location (`ConfigSource`: an untrusted project's
file names none, and a project file changed while the runtime runs keeps the references it first had until a
restart), each file's entries apart so a relative path is taken from that file's directory, a nearer file replacing
a farther one's entry of the same name. A git reference names where its checkout lives; this runtime does not clone
it, so guidance offers it only once that directory exists.

Every Step's boundary asks (for the references guidance), so the answer at a Location is kept while its
configuration is the one it came from (`ConfigSource` reads the files anew once one of them, a `{file:...}` target
or an environment variable read on the way changes)."""

from __future__ import annotations

import hashlib
import os
import re
import threading
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..schema.reference import ReferenceGitSource, ReferenceInfo, ReferenceLocalSource
from .config import Config
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


def _discover(config: Config, env: Mapping[str, str]) -> list[ReferenceInfo]:
    found: dict[str, ReferenceInfo] = {}
    for path, entries in config.references_by_file():
        for name, entry in (entries.items() if isinstance(entries, Mapping) else ()):
            if isinstance(name, str) and _ALIAS.match(name):
                reference = _reference(name, entry, path.parent, env)
                if reference is not None:
                    found[name] = reference
    return [found[name] for name in sorted(found)]


@dataclass(frozen=True)
class _Known:
    named: tuple[tuple[Path, Any], ...]  # what the configuration said, as read (the same object while it stands)
    places: tuple[str | None, ...]  # HOME and XDG_CACHE_HOME, as they were
    references: tuple[ReferenceInfo, ...]


# Locations remembered at once (a server may be asked about any number of directories)
_CAPACITY = 256
_known: OrderedDict[tuple[Path, Path], _Known] = OrderedDict()
_lock = threading.Lock()  # boundaries sample on worker threads and on the loop alike


def discover_references(location: Location, config: Config, env: Mapping[str, str]) -> list[ReferenceInfo]:
    """The references `config` (the configuration in effect at `location`, from `ConfigSource`: only files with
    authority name any) configures, by name. The answer stands while the configuration is the one it came from."""
    key = (location.directory, location.project_root)
    named, places = config.references_by_file(), (env.get("HOME"), env.get("XDG_CACHE_HOME"))
    with _lock:
        known = _known.get(key)
    if known is not None and known.named is named and known.places == places:
        return list(known.references)
    references = _discover(config, env)
    with _lock:
        _known[key] = _Known(named, places, tuple(references))
        _known.move_to_end(key)
        while len(_known) > _CAPACITY:
            _known.popitem(last=False)
    return references
