"""The configuration in effect at a Location, for the whole runtime: read once per Location and served from a cache
until a file it was (or could have been) read from changes on disk; a config file changed while the runtime runs
(perhaps by the model) changes content at once, but its authority only with a restart; so does one of the user's
own files (global, `OPENCODE_CONFIG`) once a Location holds it (a session at $HOME). A project's configuration
has authority only where the user trusts its Location with its content (`trust.py`): elsewhere it is read as content
alone (no hooks, MCP servers, plugins, providers, web search, references, configured instruction files,
placeholders, and only its `deny` rules)."""

from __future__ import annotations

import contextlib
import copy
import logging
import os
import threading
import time
from collections import OrderedDict
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

import anyio

from ..localfs import RECHECK_S, all_local
from ..location import Location
from .files import candidate_files, load_config, user_files
from .model import Config, ConfigError
from .trust import Trust, TrustState

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

# What an untrusted project's configuration says that is left out: what runs (hooks, MCP servers, plugins) and
# where requests and keys go (providers, web search), what the model is pointed to beyond the Location
# (references) and what files' text is sent to the provider (`instructions`: any path the server can read, `~`,
# `../` or a symlink out of the repository). Its permissions keep only their `deny` rules (and an agent's
# `tools` only its `false` switches); its `{env:...}`/`{file:...}` placeholders read as "".
UNTRUSTED_DROPPED = ("hooks", "mcp", "plugin", "provider", "websearch", "references", "instructions")
# Each part of an untrusted configuration that is left out (`untrusted`, `standing`), as a person reads it
_PLAIN = {"hooks": "hooks", "mcp": "MCP servers", "plugin": "plugins", "provider": "providers",
          "websearch": "web search", "references": "references", "instructions": "instruction files",
          "permission rules other than deny": "permissions that widen"}


def left_out_words(ignored: tuple[str, ...] | list[str]) -> str:
    """What an untrusted configuration has switched off, in words: "hooks, MCP servers and plugins"."""
    words = [_PLAIN.get(key, key) for key in ignored]
    if len(words) < 2:
        return "".join(words)
    return ", ".join(words[:-1]) + " and " + words[-1]
# Whose pins stand whatever the trust: the user's own files, and every file when every Location is trusted
_ALWAYS = "*"


def signature(path: Path) -> Signature:
    try:
        info = os.stat(path)
    except (OSError, ValueError):  # ValueError: a NUL byte in a configured path
        return None
    return info.st_mtime_ns, info.st_size, info.st_ino


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

    def seen(self) -> tuple[tuple[str, str | None], ...] | None:
        """The variables read, as they were; None when the whole environment was."""
        return None if self.whole else tuple(self.read.items())


@dataclass(frozen=True)
class _Entry:
    config: Config
    # every candidate file (present or not) and every `{file:...}` target, as it was before it was read
    watched: tuple[tuple[Path, Signature], ...]
    # the environment variables read (where the files are, `{env:...}`), as they were; None: all of them
    read: tuple[tuple[str, str | None], ...] | None = ()

    def fresh(self, env: Mapping[str, str]) -> bool:
        return (self.read is not None and all(env.get(name) == value for name, value in self.read)
                and all(signature(path) == seen for path, seen in self.watched))


class ConfigSource:
    """`at(location)` is the merged `opencode.json` configuration there (global, `OPENCODE_CONFIG`, project files
    from the root down), under the runtime's environment. A cached answer stands while no file it depends on has
    changed: each read stats those (a handful of stats), and a new, edited or removed file, or `{file:...}` target,
    or a changed environment variable read on the way, makes the next read parse again. A broken file raises
    `ConfigError` on every read until it is mended (failures are not cached)."""

    def __init__(self, env: Mapping[str, str], trust: Trust | None = None) -> None:
        self.env = env
        # whose projects have authority: the user's trust, kept in their data directory (OCS_TRUST_ALL: everyone's)
        self.trust = Trust.of(env) if trust is None else trust
        self._cache: OrderedDict[tuple[Path, Path], _Entry] = OrderedDict()
        self._lock = threading.Lock()  # at_sync runs on worker threads and on the loop alike
        # the authority keys of each project file as first read (absent: none), and the changes already reported
        self._pinned: dict[Path, dict[str, object]] = {}
        self._reported: set[tuple[Path, str]] = set()
        # the `{env:...}` / `{file:...}` placeholders of each project file as first read: a changed file may use only
        # these (a new one could read the server's environment, a provider key say, or a file beyond the Location)
        self._placeholders: dict[Path, frozenset[str]] = {}
        # the trust each project file's pin was made under: the content digest the user trusted (`_ALWAYS` when
        # every Location is trusted), None while untrusted. The user's trusting other content pins anew.
        self._under: dict[Path, str | None] = {}
        # what was left out of each untrusted Location's configuration, as last read (for the API and listings)
        self._ignored: dict[Path, tuple[TrustState, tuple[str, ...]]] = {}
        # when a worker thread last found every file a Location's configuration watches on a local mount
        self._local: dict[tuple[Path, Path], float] = {}

    def untrusted(self, location: Location) -> tuple[TrustState, tuple[str, ...]] | None:
        """When the Location's project configuration was last read without authority: its trust and what it said
        that was left out; None when it has authority (or was not read yet)."""
        with self._lock:
            return self._ignored.get(location.directory)

    def standing_sync(self, location: Location) -> tuple[TrustState, tuple[str, ...]]:
        """Whether the Location's project configuration has authority, and what it says that is left out while it
        has not (hooks, mcp, ...; read first, blocking). A file that cannot be read is reported where the
        configuration is used, not here."""
        state = self.trust.state(location)
        if state.trusted:
            return state, ()
        with contextlib.suppress(ConfigError):
            self.at_sync(location)
        left_out = self.untrusted(location)
        return state, left_out[1] if left_out is not None else ()

    async def standing(self, location: Location) -> tuple[TrustState, tuple[str, ...]]:
        """`standing_sync`, off the event loop."""
        return await anyio.to_thread.run_sync(self.standing_sync, location)

    async def at(self, location: Location) -> Config:
        """The configuration at `location`, its files checked (and read) off the event loop, except where a thread
        found lately that they all live on local mounts (`localfs`): there the few stats of a cached answer cannot
        hang, and run here (a hop to a thread and back costs more than they do)."""
        key = (location.directory, location.project_root)
        with self._lock:
            checked = self._local.get(key)
        if checked is not None and time.monotonic() - checked < RECHECK_S:
            return self.at_sync(location)
        return await anyio.to_thread.run_sync(self._at_checking_mounts, location)

    def _at_checking_mounts(self, location: Location) -> Config:
        config = self.at_sync(location)
        key = (location.directory, location.project_root)
        with self._lock:
            entry = self._cache.get(key)
        if entry is not None:
            local = all_local(path.resolve() for path, _seen in entry.watched)
            with self._lock:
                if local:
                    self._local[key] = time.monotonic()
                    while len(self._local) > CAPACITY:
                        del self._local[next(iter(self._local))]
                else:
                    self._local.pop(key, None)
        return config

    def at_sync(self, location: Location) -> Config:
        """The configuration at `location`, blocking: for code already on a worker thread (or sure of local disks)."""
        key = (location.directory, location.project_root)
        with self._lock:
            entry = self._cache.get(key)
        if entry is not None and entry.fresh(self.env):
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
        env = _Recorded(self.env)  # a variable read on the way that changes reads the files anew too
        candidates = candidate_files(location.directory, location.project_root, env)
        watched = [(path, signature(path)) for path in candidates]
        trust_file = self.trust.signature_path()
        if trust_file is not None:  # trusting (or no longer trusting) a Location reads it anew
            watched.append((trust_file, signature(trust_file)))
        state = self.trust.state(location)
        under = _ALWAYS if state.trust_all else (state.digest or "-") if state.trusted else None
        own = {_key(path) for path in user_files(env)}
        held = (location.directory, location.project_root)
        with self._lock:
            for path, seen in zip(candidates, (seen for _path, seen in watched), strict=False):
                key = _key(path)
                if key in own:
                    if seen is None and key not in self._pinned and _inside(key, held) and \
                            len(self._pinned) < PIN_CAPACITY:
                        self._pinned[key] = _ABSENT  # a file of the user's the model can write: none either
                        self._under[key] = _ALWAYS
                    continue
                if under is None:  # an untrusted project's authority is not read: nothing to pin
                    continue
                if self._under.get(key, under) != under:
                    self._forget(key)  # the user trusted this content: its authority is what it says now
                if seen is None and key not in self._pinned and len(self._pinned) < PIN_CAPACITY:
                    self._pinned[key] = _ABSENT  # a project file created later brings no authority with it
                    self._under[key] = under
        denies: list[tuple[str | None, str, str]] = []  # an untrusted project's deny rules: (agent, action, pattern)
        ignored: list[str] = []

        def reachable(key: Path) -> bool:
            """Whether one of the user's own files is pinned: once a Location holds it (a session at $HOME), the
            model may have written it, as it may a project's."""
            with self._lock:
                if key in self._pinned:
                    return True
            return _inside(key, held)

        def adjust(path: Path, data: dict[str, object]) -> dict[str, object]:
            if _key(path) in own:
                return self._pin(path, data, _ALWAYS) if reachable(_key(path)) else data
            if under is None:
                return _content_only(data, denies, ignored)
            return self._pin(path, data, under)

        def placeholders(path: Path, found: frozenset[str]) -> frozenset[str]:
            if _key(path) in own:
                return self._gate(path, found, _ALWAYS) if reachable(_key(path)) else found
            return frozenset() if under is None else self._gate(path, found, under)

        config = load_config(location.directory, location.project_root, env,
                             included=lambda path: watched.append((path, signature(path))),
                             adjust=adjust, placeholders=placeholders)
        # a project the user has not trusted (nor every Location) reads no file of its own linked out of it: a
        # repository without configuration counts too, as it is where such a link would be shipped
        config = config.with_confined(not (state.trust_all or (state.trusted and state.digest is not None)))
        if under is None:
            config = _with_denies(config, denies)
            with self._lock:
                self._ignored.pop(location.directory, None)
                self._ignored[location.directory] = (state, tuple(dict.fromkeys(ignored)))
                while len(self._ignored) > CAPACITY:  # as many Locations as the cache remembers
                    self._ignored.pop(next(iter(self._ignored)))
            if ignored:
                self.trust.warn_once(state, list(dict.fromkeys(ignored)))
        else:
            with self._lock:
                self._ignored.pop(location.directory, None)
        return _Entry(config, tuple(watched), env.seen())

    def _forget(self, key: Path) -> None:
        """Forget a file's first reading (under the lock)."""
        self._pinned.pop(key, None)
        self._placeholders.pop(key, None)
        self._under.pop(key, None)
        self._reported = {(path, name) for path, name in self._reported if path != key}

    def _gate(self, path: Path, found: frozenset[str], under: str) -> frozenset[str]:
        """The placeholders of a config file that are substituted: all of them at its first reading (remembered),
        afterwards only those that reading had (a new one reads as "" until a restart, and is logged once)."""
        key = _key(path)
        with self._lock:
            first = self._placeholders.get(key)
            if first is None:
                if self._pinned.get(key) is _ABSENT or len(self._placeholders) >= PIN_CAPACITY:
                    first = frozenset()  # a file created while the runtime runs reads none
                else:
                    self._placeholders[key] = found
                    self._under.setdefault(key, under)
                    return found
            fresh = sorted(p for p in found - first if (key, p) not in self._reported)
            self._reported.update((key, p) for p in fresh)
        if fresh:
            log.warning("%s now uses %s while the server runs: read as empty until it restarts (a file written by a "
                        "session cannot read the server's environment or other files)", path, ", ".join(fresh))
        return found & first

    def _pin(self, path: Path, data: dict[str, object], under: str) -> dict[str, object]:
        """A config file's `data` with its authority keys as first read: remembered now if this is the first
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
                    self._under[key] = under
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


def _content_only(data: dict[str, object], denies: list[tuple[str | None, str, str]],
                  ignored: list[str]) -> dict[str, object]:
    """An untrusted project file's `data` as content alone: without what runs or where keys go, its permissions
    and agents' permissions taken out (their `deny` rules, and agents' `false` tool switches, are added to
    `denies`, applied once merged), what it said that is left out named in `ignored`."""
    kept = {k: v for k, v in data.items() if k not in UNTRUSTED_DROPPED and k != "permission"}
    ignored += [k for k in UNTRUSTED_DROPPED if data.get(k)]
    widening = _deny_rules(data.get("permission"), None, denies)
    agents = data.get("agent")
    if isinstance(agents, dict):
        content: dict[str, object] = {}
        for name, entry in agents.items():
            if not isinstance(entry, dict):
                content[name] = entry
                continue
            widening |= _deny_rules(entry.get("permission"), str(name), denies)
            tools = entry.get("tools")
            if isinstance(tools, dict):
                for tool, on in tools.items():
                    if on is False:
                        denies.append((str(name), str(tool), "*"))
                    else:
                        widening = True
            content[name] = {k: v for k, v in entry.items() if k not in ("permission", "tools")}
        kept["agent"] = content
    if widening:
        ignored.append("permission rules other than deny")
    return kept


def _deny_rules(value: object, agent: str | None, denies: list[tuple[str | None, str, str]]) -> bool:
    """Add the `deny` rules of a permission value to `denies`; whether it has any other rule (which is dropped)."""
    if value is None:
        return False
    if isinstance(value, str):
        if value == "deny":
            denies.append((agent, "*", "*"))
            return False
        return True
    if not isinstance(value, dict):
        return False
    other = False
    for action, entry in value.items():
        if isinstance(entry, dict):
            for pattern, effect in entry.items():
                if effect == "deny":
                    denies.append((agent, str(action), str(pattern)))
                else:
                    other = True
        elif entry == "deny":
            denies.append((agent, str(action), "*"))
        else:
            other = True
    return other


def _with_denies(config: Config, denies: list[tuple[str | None, str, str]]) -> Config:
    """`config` with an untrusted project's deny rules added after the trusted rules of the same action (turning an
    equal pattern's effect to `deny`, or appending it): a rule only ever becomes `deny`, so nothing widens."""
    if not denies:
        return config
    update: dict[str, object] = {}
    everywhere = [(action, pattern) for agent, action, pattern in denies if agent is None]
    if everywhere:
        update["permission"] = _denied(config.permission, everywhere)
    by_agent: dict[str, list[tuple[str, str]]] = {}
    for agent, action, pattern in denies:
        if agent is not None:
            by_agent.setdefault(agent, []).append((action, pattern))
    config = config.model_copy(update=update) if update else config
    if by_agent:  # after the agent's own rules (the built-in agents' too): `core/agents.py`
        config = config.with_agent_denies({name: tuple(rules) for name, rules in by_agent.items()})
    return config


def _denied(value: object, rules: list[tuple[str, str]]) -> object:
    mapping: dict[str, object] = {"*": value} if isinstance(value, str) else dict(value) if isinstance(value, dict) \
        else {}
    for action, pattern in rules:
        current = mapping.get(action)
        if isinstance(current, dict):
            mapping[action] = {**current, pattern: "deny"}
        elif isinstance(current, str):
            mapping[action] = {"*": current, pattern: "deny"}
        else:
            mapping[action] = {pattern: "deny"}
    return mapping


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


def _inside(path: Path, folders: tuple[Path, ...]) -> bool:
    return any(path == folder or folder in path.parents for folder in folders)


def _key(path: Path) -> Path:
    try:
        return Path(os.path.realpath(path))
    except (OSError, ValueError):
        return path


__all__ = ["AUTHORITY_KEYS", "ConfigSource", "Signature", "signature"]
