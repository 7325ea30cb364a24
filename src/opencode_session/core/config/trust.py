"""Trust per Location: a project's configuration (its `opencode.json[c]` files from the project root down) grants
authority (hooks, MCP servers, plugins, permissions that widen, providers, references, instruction files) only
once the user has trusted that Location with that very content. A cloned repository is read (its `AGENTS.md`,
agents' prompts, commands), but nothing it names runs or is read until then; when its configuration changes, it
must be trusted again. The user's own files (global, `OPENCODE_CONFIG`) are always trusted.

What the user trusted is kept in `trust.json` in the user's data directory (0600 in a 0700 folder, beside the
default database), never in the repository: the Location's directory and the digest of its configuration's
content (every project config file's path and bytes, and every file a `{file:...}` placeholder of theirs names).
`OCS_TRUST_ALL=1` (or `RuntimeOptions.trust_all`, `OpenCode(trust_all=True)`) trusts every Location: for
embedders and CI, whose repositories are their own."""

from __future__ import annotations

import hashlib
import json
import logging
import os
import stat
import sys
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..location import Location
from ..private import UnsafeDirectory, private_directory
from .files import _PLACEHOLDER, PROJECT_FILES, candidate_files, global_config_dir, project_dirs, user_files

log = logging.getLogger(__name__)

TRUST_ALL_ENV = "OCS_TRUST_ALL"
TRUST_FILE = "trust.json"
APP_NAME = "opencode-session"
# Entries kept at most (the oldest grants are dropped beyond it)
CAPACITY = 4096


def trust_all_from_env(env: Mapping[str, str]) -> bool:
    """Whether `OCS_TRUST_ALL` asks to trust every Location ("1" or "true", in any case)."""
    return env.get(TRUST_ALL_ENV, "").strip().lower() in ("1", "true", "yes")


def user_data_dir(env: Mapping[str, str]) -> Path:
    """The user's data directory of this runtime, read from `env` (XDG_DATA_HOME, else ~/.local/share, on Linux and
    the BSDs; the platform's own elsewhere): where the default database lives too."""
    if sys.platform.startswith(("win", "darwin")):
        import platformdirs

        return Path(platformdirs.user_data_dir(APP_NAME, appauthor=False))
    xdg = env.get("XDG_DATA_HOME")
    if xdg:
        return Path(xdg) / APP_NAME
    home = env.get("HOME")
    return (Path(home) if home else Path.home()) / ".local" / "share" / APP_NAME


def trust_file(env: Mapping[str, str]) -> Path:
    return user_data_dir(env) / TRUST_FILE


def _real(path: Path) -> Path:
    try:
        return Path(os.path.realpath(path))
    except (OSError, ValueError):
        return path


def project_files(location: Location, env: Mapping[str, str]) -> list[Path]:
    """The project's configuration files at `location` that exist, in merge order (the user's own left out)."""
    own = {_real(path) for path in user_files(env)}
    seen: set[Path] = set()
    found: list[Path] = []
    for path in candidate_files(location.directory, location.project_root, env):
        key = _real(path)
        if key in own or key in seen:
            continue
        try:
            if not path.is_file():
                continue
        except (OSError, ValueError):
            continue
        seen.add(key)
        found.append(path)
    return found


def content_digest(files: list[Path]) -> str | None:
    """The digest of a configuration's content: each file's resolved path and bytes, and those of every file its
    `{file:...}` placeholders name; None when there is no file (nothing to trust)."""
    if not files:
        return None
    digest = hashlib.sha256()

    def add(path: Path) -> bytes:
        digest.update(str(_real(path)).encode("utf-8", "surrogateescape") + b"\0")
        try:
            data = path.read_bytes()
        except (OSError, ValueError):
            data = b"\0<unreadable>"
        digest.update(len(data).to_bytes(8, "big") + data)
        return data

    for path in files:
        text = add(path).decode("utf-8", "replace")
        for match in _PLACEHOLDER.finditer(text):
            if match.group(1) != "file":
                continue
            target = Path(os.path.expanduser(match.group(2).strip()))
            add(target if target.is_absolute() else path.parent / target)
    return "sha256:" + digest.hexdigest()


# Names that make a file a project's configuration wherever it is in the project (a session started in that folder
# reads it): its config files, and anything in a `.opencode` folder (commands, agents, skills, its own config)
_CONFIG_NAMES = frozenset({"opencode.json", "opencode.jsonc"})
_CONFIG_FOLDER = ".opencode"


@dataclass(frozen=True)
class ConfigurationPaths:
    """Every file and folder the configuration loader reads for a Location, resolved: the user's own files (the
    global folder, whole: `config.json`, `opencode.json[c]`, its command, agent and skill folders; `OPENCODE_CONFIG`),
    the project's files and `.opencode/` folders from the project root down, and where trust is kept. `covers(path)`
    says whether a resolved path is one of them or inside one, or is named as a project's configuration anywhere in
    the project."""

    files: frozenset[Path]
    folders: tuple[Path, ...]
    project_root: Path

    @classmethod
    def at(cls, directory: Path, project_root: Path, env: Mapping[str, str]) -> ConfigurationPaths:
        files = {_real(path) for path in user_files(env)}
        files.add(_real(trust_file(env)))
        folders = [_real(global_config_dir(env))]
        for folder in project_dirs(directory, project_root):
            files.update(_real(folder / name) for name in PROJECT_FILES if "/" not in name)
            folders.append(_real(folder / _CONFIG_FOLDER))
        return cls(frozenset(files), tuple(folders), _real(project_root))

    def covers(self, path: Path) -> bool:
        if path in self.files or any(path == folder or folder in path.parents for folder in self.folders):
            return True
        try:
            inside = path.relative_to(self.project_root).parts
        except ValueError:
            return False
        return bool(inside) and (inside[-1] in _CONFIG_NAMES or _CONFIG_FOLDER in inside)


@dataclass(frozen=True)
class TrustState:
    """Whether a Location's configuration has authority: `trusted` (always, without project files, or with
    trust for everything), the digest of its content now, its project files, and `granted`, the digest the user
    last trusted there (None: never; different from `digest`: the content changed since)."""

    directory: Path
    trusted: bool
    digest: str | None
    files: tuple[Path, ...] = ()
    granted: str | None = None
    trust_all: bool = False

    def public(self) -> dict[str, Any]:
        return {"directory": str(self.directory), "trusted": self.trusted, "digest": self.digest,
                "files": [str(path) for path in self.files], "granted": self.granted,
                "changed": self.granted is not None and self.granted != self.digest, "trustAll": self.trust_all}


class ContentChanged(Exception):
    """The configuration's content is not the one the user was shown (its digest differs): nothing is trusted."""


@dataclass
class Trust:
    """The user's trust in Locations, kept in `path` (None: in memory only, for this process). With `trust_all`,
    every Location is trusted and nothing is stored."""

    env: Mapping[str, str]
    path: Path | None = None
    trust_all: bool = False
    _memory: dict[str, dict[str, Any]] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _warned: set[str] = field(default_factory=set)

    @classmethod
    def of(cls, env: Mapping[str, str], trust_all: bool | None = None) -> Trust:
        """The trust of the user whose environment is `env`: kept in their data directory; every Location trusted
        when `trust_all` says so (None: when `OCS_TRUST_ALL` does)."""
        everything = trust_all_from_env(env) if trust_all is None else trust_all
        return cls(env=env, path=trust_file(env), trust_all=everything)

    # --- reading ----------------------------------------------------------------------------------------

    def state(self, location: Location) -> TrustState:
        files = project_files(location, self.env)
        digest = content_digest(files)
        if self.trust_all:
            return TrustState(location.directory, True, digest, tuple(files), trust_all=True)
        entries = self._entries()
        granted: str | None = None
        trusted = digest is None
        for folder in _upward(location):
            entry = entries.get(str(folder))
            if isinstance(entry, dict) and isinstance(entry.get("digest"), str):
                if granted is None or folder == location.directory:
                    granted = entry["digest"]
                if entry["digest"] == digest:
                    granted, trusted = digest, True
                    break
        return TrustState(location.directory, trusted, digest, tuple(files), granted)

    def trusted(self, location: Location) -> bool:
        return self.state(location).trusted

    def entries(self) -> dict[str, dict[str, Any]]:
        """Every Location trusted, by directory: its digest and when it was trusted (ms)."""
        return dict(self._entries())

    # --- changing ---------------------------------------------------------------------------------------

    def grant(self, location: Location, digest: str | None = None) -> TrustState:
        """Trust `location` with the content it has now; with `digest`, only if that is still its content
        (ContentChanged otherwise: the user was shown something else)."""
        files = project_files(location, self.env)
        now = content_digest(files)
        if digest is not None and digest != now:
            raise ContentChanged(f"the configuration at {location.directory} changed since it was shown "
                                 f"(it was {digest}, it is {now})")
        if now is not None:
            with self._lock:
                entries = self._entries()
                entries.pop(str(location.directory), None)
                entries[str(location.directory)] = {"digest": now, "files": [str(f) for f in files],
                                                    "trusted": int(time.time() * 1000)}
                while len(entries) > CAPACITY:
                    entries.pop(next(iter(entries)))
                self._store(entries)
            log.info("trusted %s (%s)", location.directory, now)
        return self.state(location)

    def revoke(self, location: Location) -> TrustState:
        """Trust `location` no more (nor its content anywhere below it that relied on this entry)."""
        with self._lock:
            entries = self._entries()
            if entries.pop(str(location.directory), None) is not None:
                self._store(entries)
        return self.state(location)

    def warn_once(self, state: TrustState, ignored: list[str]) -> None:
        """Log, once per Location and content, that its configuration's authority is left out until trusted."""
        key = f"{state.directory}\0{state.digest}"
        with self._lock:
            if key in self._warned:
                return
            self._warned.add(key)
        changed = " (its configuration changed since it was trusted)" if state.granted else ""
        log.warning("%s is not trusted%s: its configuration's %s are ignored until you trust it (`ocs trust %s`, "
                    "or POST /api/experimental/trust)", state.directory, changed, ", ".join(ignored),
                    state.directory)

    def signature_path(self) -> Path | None:
        """The file whose change changes what is trusted (watched by the configuration's cache)."""
        return None if self.trust_all else self.path

    # --- the file ---------------------------------------------------------------------------------------

    def _entries(self) -> dict[str, dict[str, Any]]:
        if self.path is None:
            return dict(self._memory)
        try:
            fd = os.open(self.path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0))
        except FileNotFoundError:
            return {}
        except OSError as exc:
            log.warning("%s cannot be read (%s): no Location is trusted", self.path, exc.strerror or exc)
            return {}
        try:
            info = os.fstat(fd)
            if info.st_uid != os.geteuid() or info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
                log.warning("%s belongs to another user or others may write it: no Location is trusted", self.path)
                return {}
            with os.fdopen(fd, "rb") as file:
                fd = -1
                data = json.loads(file.read(16 * 1024 * 1024) or b"{}")
        except (OSError, ValueError) as exc:
            log.warning("%s is not usable (%s): no Location is trusted", self.path, exc)
            return {}
        finally:
            if fd >= 0:
                os.close(fd)
        locations = data.get("locations") if isinstance(data, dict) else None
        return {str(k): v for k, v in locations.items() if isinstance(v, dict)} if isinstance(locations, dict) else {}

    def _store(self, entries: dict[str, dict[str, Any]]) -> None:
        if self.path is None:
            self._memory = dict(entries)
            return
        try:
            private_directory(self.path.parent)
        except UnsafeDirectory as exc:
            raise PermissionError(str(exc)) from None
        temporary = self.path.with_name(f".{self.path.name}.{os.getpid()}.{threading.get_ident()}")
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_NOFOLLOW", 0), 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as file:
            json.dump({"version": 1, "locations": entries}, file, indent=1)
        os.replace(temporary, self.path)


def _upward(location: Location) -> list[Path]:
    """The Location's directory, then each folder above it up to its project root: a trusted project root covers
    the folders below it whose configuration is the same content."""
    folders = [location.directory]
    here = location.directory
    while here != location.project_root and here.parent != here:
        here = here.parent
        folders.append(here)
        if here == location.project_root:
            break
    return folders


__all__ = ["TRUST_ALL_ENV", "ConfigurationPaths", "ContentChanged", "Trust", "TrustState", "content_digest",
           "project_files", "trust_all_from_env", "trust_file", "user_data_dir"]
