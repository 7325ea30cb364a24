"""Where OpenCode's config files are (global, `OPENCODE_CONFIG`, project files found upward), how one is read
(`{env:...}` / `{file:...}` substitution, checked against the typed model) and how they merge, which top-level keys
this runtime acts on, and what is suspicious in them (unknown keys, unset variables), each located by file and line.
Everything here reads the files anew; `ConfigSource` caches the result per Location."""

from __future__ import annotations

import difflib
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from ..location import dirs_from_root
from .jsonc import Key, _line_col, _line_of, _parse_jsonc, key_offsets
from .model import Config, ConfigError

# ---------------------------------------------------------------------------------------------
# Substitution and merging.

_PLACEHOLDER = re.compile(r"\{(env|file):([^}]+)\}")


def _substitute(value: Any, env: Mapping[str, str], base_dir: Path, path: Path,
                unset: Callable[[str], None] = lambda _name: None,
                included: Callable[[Path], None] = lambda _path: None,
                allowed: Callable[[str], bool] = lambda _placeholder: True) -> Any:
    """`{env:NAME}` becomes the variable's value ("" if unset, as in OpenCode, and `unset(NAME)` is told);
    `{file:path}` the file's text (relative to the config file, `~` expanded; `included(path)` is told); a
    placeholder `allowed` refuses becomes "". Only string values are touched, never keys."""
    if isinstance(value, str):
        def replace(match: re.Match[str]) -> str:
            if not allowed(match.group(0)):
                return ""
            kind, arg = match.group(1), match.group(2).strip()
            if kind == "env":
                if arg not in env:
                    unset(arg)
                return env.get(arg, "")
            target = Path(os.path.expanduser(arg))
            if not target.is_absolute():
                target = base_dir / target
            included(target)
            try:
                return target.read_text(encoding="utf-8").strip()
            except OSError as exc:
                raise ConfigError(path, f"{match.group(0)}: cannot read {target}: {exc.strerror or exc}") from None

        return _PLACEHOLDER.sub(replace, value)
    if isinstance(value, list):
        return [_substitute(v, env, base_dir, path, unset, included, allowed) for v in value]
    if isinstance(value, dict):
        return {k: _substitute(v, env, base_dir, path, unset, included, allowed) for k, v in value.items()}
    return value


# Lists that accumulate across files instead of the nearer file replacing the farther one.
_CONCATENATED_LISTS = frozenset({"instructions", "plugin"})


def merge_config(base: dict[str, Any], override: Mapping[str, Any], *, _top: bool = True) -> dict[str, Any]:
    """Deep merge of objects; scalars and lists from `override` win, except the top-level
    `instructions`/`plugin` lists, which are concatenated without duplicates."""
    result = dict(base)
    for key, value in override.items():
        current = result.get(key)
        if isinstance(current, dict) and isinstance(value, Mapping):
            result[key] = merge_config(current, value, _top=False)
        elif _top and key in _CONCATENATED_LISTS and isinstance(current, list) and isinstance(value, list):
            result[key] = current + [v for v in value if v not in current]
        else:
            result[key] = value
    return result


# ---------------------------------------------------------------------------------------------
# Locations.

GLOBAL_FILES = ("config.json", "opencode.json", "opencode.jsonc")
PROJECT_FILES = ("opencode.json", "opencode.jsonc", ".opencode/opencode.json", ".opencode/opencode.jsonc")


def _home(env: Mapping[str, str]) -> Path:
    home = env.get("HOME")
    return Path(home) if home else Path.home()


def global_config_dir(env: Mapping[str, str] = os.environ) -> Path:
    xdg = env.get("XDG_CONFIG_HOME")
    base = Path(xdg) if xdg else _home(env) / ".config"
    return base / "opencode"


DISABLE_PROJECT_CONFIG_ENV = "OPENCODE_DISABLE_PROJECT_CONFIG"


def project_config_disabled(env: Mapping[str, str] = os.environ) -> bool:
    """Whether project configuration (files, AGENTS.md, skills) is off: `OPENCODE_DISABLE_PROJECT_CONFIG` is "true"
    or "1" in any case, as OpenCode reads its flags; any other value leaves it on."""
    return env.get(DISABLE_PROJECT_CONFIG_ENV, "").lower() in ("true", "1")


def project_dirs(directory: Path, project_root: Path) -> list[Path]:
    """Directories from the project root down to `directory` (farthest first); only `directory` outside the project."""
    here = Path(directory).resolve()
    return dirs_from_root(Path(project_root).resolve(), here) or [here]


def user_files(env: Mapping[str, str] = os.environ) -> list[Path]:
    """The user's own config files (global, `OPENCODE_CONFIG`): outside any project, written by the person."""
    gdir = global_config_dir(env)
    files = [gdir / name for name in GLOBAL_FILES]
    extra = env.get("OPENCODE_CONFIG")
    if extra:
        files.append(Path(os.path.expanduser(extra)))
    return files


def candidate_files(directory: Path, project_root: Path, env: Mapping[str, str] = os.environ) -> list[Path]:
    """Every place a config file of this directory may be, whether one is there or not, in merge order."""
    files = user_files(env)
    if not project_config_disabled(env):
        for folder in project_dirs(directory, project_root):
            files += [folder / name for name in PROJECT_FILES]
    return files


def config_files(directory: Path, project_root: Path, env: Mapping[str, str] = os.environ) -> list[Path]:
    """Existing config files in merge order (later files override earlier ones)."""
    seen: set[Path] = set()
    ordered: list[Path] = []
    for f in candidate_files(directory, project_root, env):
        key = f.resolve() if f.exists() else f
        if f.is_file() and key not in seen:
            seen.add(key)
            ordered.append(f)
    return ordered


# The top-level keys this runtime acts on (`tool_output` is its own).
ACTED_ON_KEYS = frozenset({
    "model", "small_model", "default_agent", "provider", "agent", "instructions", "permission", "compaction",
    "tool_output", "websearch", "snapshot", "command", "references", "mcp",
    "plugin", "hooks",
})
# OpenCode's keys this runtime knows but does not act on yet, each with what it configures there. A file that sets
# one loads as before, and `ocs serve` and `ocs run` name it once at start; the work that implements a key takes it
# out of this table (and reads it).
NOT_ACTED_ON: dict[str, str] = {
    "skills": "more skill folders",
    "formatter": "formatters run on edited files",
    "lsp": "language servers",
    "watcher": "the file watcher",
    "tools": "tools switched on and off for every agent",
    "mode": "agents, under their old name",
    "disabled_providers": "providers left out",
    "enabled_providers": "the only providers offered",
    "server": "the server's address and CORS origins",
    "share": "session sharing",
    "autoshare": "session sharing",
    "enterprise": "an enterprise share server",
    "experimental": "experimental features",
    "autoupdate": "updates",
    "logLevel": "log verbosity",
    "username": "the name the TUI shows",
    "theme": "the TUI",
    "keybinds": "the TUI",
    "tui": "the TUI",
    "layout": "the TUI",
}
# Every key OpenCode's (strict) config schema has, and this runtime's own. Anything else is kept (it may be newer than
# these lists) but flagged: most often it is a typo.
KNOWN_TOP_LEVEL_KEYS = ACTED_ON_KEYS | NOT_ACTED_ON.keys() | {"$schema"}
# Deprecated keys are never suggested for a typo: "modle" means "model", not the old "mode".
_SUGGESTED_KEYS = sorted(KNOWN_TOP_LEVEL_KEYS - {"mode", "autoshare", "layout", "tools"})


@dataclass(frozen=True)
class ConfigWarning:
    """Something in a config file that loads but is probably not what its author meant."""

    path: Path
    line: int | None
    message: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.message}" if self.line else f"{self.path}: {self.message}"


@dataclass
class ConfigReport:
    """What the configuration of one directory is made of: its files in merge order, the merged config (None
    when a file is unusable, then `error` says why), warnings about keys and variables, and the keys set that this
    runtime does not act on (each where it is first set)."""

    files: list[Path]
    config: Config | None = None
    error: ConfigError | None = None
    warnings: list[ConfigWarning] = field(default_factory=list)
    ignored: dict[str, ConfigWarning] = field(default_factory=dict)


def _format_validation(exc: ValidationError) -> str:
    problems = []
    for err in exc.errors()[:5]:
        where = ".".join(str(p) for p in err.get("loc", ())) or "(top level)"
        problems.append(f"{where}: {err.get('msg')}")
    return "; ".join(problems)


def _read_file(path: Path, env: Mapping[str, str], report: ConfigReport,
               included: Callable[[Path], None] = lambda _path: None,
               placeholders: Placeholders | None = None) -> dict[str, Any]:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(path, f"cannot read: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(path, f"not UTF-8 text: {exc}") from None
    raw, cleaned = _parse_jsonc(text, path)

    def line_of(where: Key) -> int | None:  # the scan runs only for a file that has something to point at
        return _line_of(cleaned, key_offsets(cleaned), where)

    for key in raw:
        if key in NOT_ACTED_ON and key not in report.ignored:
            report.ignored[key] = ConfigWarning(path, line_of((key,)), f"key {key!r} ({NOT_ACTED_ON[key]}) is not"
                                                                       " acted on by this runtime yet: ignored")
        elif key not in KNOWN_TOP_LEVEL_KEYS:
            close = difflib.get_close_matches(key, _SUGGESTED_KEYS, n=1, cutoff=0.6)
            hint = f" (did you mean {close[0]!r}?)" if close else " (ignored)"
            report.warnings.append(ConfigWarning(path, line_of((key,)), f"unknown key {key!r}{hint}"))

    def unset(name: str) -> None:
        placeholder = text.find("{env:" + name)
        line = _line_col(text, placeholder)[0] if placeholder >= 0 else None
        report.warnings.append(ConfigWarning(path, line, f"{{env:{name}}} names an unset environment variable"
                                                         " (it reads as an empty string)"))

    found = frozenset(m.group(0) for m in _PLACEHOLDER.finditer(text))
    permitted = found if placeholders is None else placeholders(path, found)
    data = _substitute(raw, env, path.parent, path, unset, included, permitted.__contains__)
    try:
        Config.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0].get("loc", ()) if exc.errors() else ()
        raise ConfigError(path, _format_validation(exc), line=line_of(tuple(first))) from None
    return data


def load_file(path: Path, env: Mapping[str, str] = os.environ, *,
              included: Callable[[Path], None] = lambda _path: None) -> dict[str, Any]:
    """One config file, parsed, substituted and checked against the typed model; `included(path)` is told of each
    file a `{file:...}` placeholder reads, before it is read."""
    return _read_file(path, env, ConfigReport([path]), included)


Adjust = Callable[[Path, dict[str, Any]], dict[str, Any]]
# Given a file and the `{env:...}`/`{file:...}` placeholders its text holds, those that may be substituted.
Placeholders = Callable[[Path, frozenset[str]], frozenset[str]]


def inspect_config(directory: Path, project_root: Path, env: Mapping[str, str] = os.environ, *,
                   included: Callable[[Path], None] = lambda _path: None,
                   adjust: Adjust = lambda _path, data: data,
                   placeholders: Placeholders | None = None) -> ConfigReport:
    """The configuration `load_config` would give, with its files and warnings; a bad file is reported in the
    result instead of raised. `included(path)` is told of each file a `{file:...}` placeholder reads, before it is
    read; `adjust(path, data)` may change what one file says before it is merged (`ConfigSource` keeps a changed
    project file's authority as it first read it, and drops an untrusted one's), and what it leaves of each file's
    `references` is kept with that file (`Config.references_by_file`); `placeholders` says which of a file's
    placeholders are substituted (the others read as "": a changed project file reads no variable or file its first
    reading did not)."""
    report = ConfigReport(files=config_files(directory, project_root, env))
    merged: dict[str, Any] = {}
    named: list[tuple[Path, Any]] = []  # each file's `references` as adjusted: a relative path is from that file
    try:
        for path in report.files:
            data = adjust(path, _read_file(path, env, report, included, placeholders))
            if data.get("references") is not None:
                named.append((path, data["references"]))
            merged = merge_config(merged, data)
        report.config = Config.model_validate(merged).with_references(tuple(named))
    except ConfigError as bad:
        report.error = bad
    except ValidationError as exc:  # pragma: no cover - each file already validated
        report.error = ConfigError("<merged config>", _format_validation(exc))
    return report


def load_config(directory: Path, project_root: Path, env: Mapping[str, str] = os.environ, *,
                included: Callable[[Path], None] = lambda _path: None,
                adjust: Adjust = lambda _path, data: data,
                placeholders: Placeholders | None = None) -> Config:
    """Global files, then `OPENCODE_CONFIG`, then project files from the root down to `directory`;
    nearer files override farther ones (read anew: `ConfigSource.at` caches it)."""
    report = inspect_config(directory, project_root, env, included=included, adjust=adjust, placeholders=placeholders)
    if report.error is not None:
        raise report.error
    assert report.config is not None
    return report.config


def parse_model_string(value: str) -> tuple[str, str] | None:
    """`"provider/model"` -> (provider, model). Model IDs may contain further slashes."""
    provider, sep, model = value.strip().partition("/")
    if not sep or not provider or not model:
        return None
    return provider, model


__all__ = [
    "ACTED_ON_KEYS",
    "ConfigReport",
    "ConfigWarning",
    "KNOWN_TOP_LEVEL_KEYS",
    "NOT_ACTED_ON",
    "candidate_files",
    "config_files",
    "global_config_dir",
    "inspect_config",
    "load_config",
    "load_file",
    "merge_config",
    "parse_model_string",
    "project_config_disabled",
    "project_dirs",
    "user_files",
]
