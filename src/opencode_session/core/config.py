"""OpenCode's own configuration (`opencode.json` / `opencode.jsonc`): where the files are, how they are
parsed (JSONC, `{env:...}` / `{file:...}` substitution) and merged, the typed, lenient result, and what is
suspicious in them (unknown keys, unset variables), each located by file and line."""

from __future__ import annotations

import difflib
import json
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from json.decoder import scanstring  # type: ignore[attr-defined]  # exported by the stdlib, absent from typeshed
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from .location import dirs_from_root

# ---------------------------------------------------------------------------------------------
# Typed model. Every model keeps unknown keys: a user's config written for OpenCode must load even
# where this runtime does not (yet) use a setting.


class _Lenient(BaseModel):
    model_config = ConfigDict(extra="allow", populate_by_name=True)


class ModelLimit(_Lenient):
    context: int | None = None
    output: int | None = None
    input: int | None = None


class ModelCostConfig(_Lenient):
    """USD per million tokens."""

    input: float | None = None
    output: float | None = None
    cache_read: float | None = None
    cache_write: float | None = None


class ModelModalities(_Lenient):
    input: list[str] | None = None
    output: list[str] | None = None


class ModelConfig(_Lenient):
    """One model entry, in models.dev's shape (the bundled catalog uses the same one)."""

    id: str | None = None  # the server's name for the model when the map key is an alias
    name: str | None = None
    family: str | None = None
    release_date: str | None = None
    status: str | None = None
    limit: ModelLimit | None = None
    cost: ModelCostConfig | None = None
    attachment: bool | None = None
    reasoning: bool | None = None
    tool_call: bool | None = None
    temperature: bool | None = None  # whether the model accepts a sampling temperature
    modalities: ModelModalities | None = None
    options: dict[str, Any] | None = None
    # variant name -> option object (Model Request Options, Generation Controls or body fields); `disabled: true`
    # removes a variant the catalog defines
    variants: dict[str, dict[str, Any]] | None = None


class ProviderOptions(_Lenient):
    base_url: str | None = Field(default=None, alias="baseURL")
    api_key: str | None = Field(default=None, alias="apiKey")
    headers: dict[str, str] | None = None
    # OpenCode's unit: milliseconds; `false` disables the timeout.
    timeout: int | float | bool | None = None


class ProviderConfig(_Lenient):
    npm: str | None = None
    name: str | None = None
    api: str | None = None  # models.dev's spelling of the base URL
    env: list[str] = Field(default_factory=list)  # variables that may hold the key, first set one wins
    options: ProviderOptions = Field(default_factory=ProviderOptions)
    models: dict[str, ModelConfig] = Field(default_factory=dict)


class AgentConfig(_Lenient):
    prompt: str | None = None
    model: str | None = None
    steps: int | None = None
    description: str | None = None
    mode: Literal["primary", "subagent", "all"] | None = None
    disable: bool | None = None
    permission: Any = None
    temperature: float | None = None
    top_p: float | None = None
    tools: dict[str, bool] | None = None  # OpenCode's older switch: `false` denies the tool, `true` allows it
    hidden: bool | None = None
    color: str | None = None


class ToolOutputConfig(_Lenient):
    max_lines: int | None = None
    max_bytes: int | None = None


class WebSearchConfig(_Lenient):
    """The search backend `websearch` uses; without a `url` the tool is not offered. See WebSearchTool."""

    url: str | None = None
    headers: dict[str, str] = Field(default_factory=dict)


class Config(_Lenient):
    model: str | None = None
    small_model: str | None = None
    provider: dict[str, ProviderConfig] = Field(default_factory=dict)
    agent: dict[str, AgentConfig] = Field(default_factory=dict)
    instructions: list[str] = Field(default_factory=list)
    permission: Any = None
    compaction: Any = None
    tool_output: ToolOutputConfig | None = None
    websearch: WebSearchConfig | None = None
    default_agent: str | None = None


class ConfigError(Exception):
    """A config file that cannot be used; the message names the file and, for syntax, line and column."""

    def __init__(self, path: Path | str, message: str, *, line: int | None = None, column: int | None = None) -> None:
        self.path = Path(path)
        self.line = line
        self.column = column
        self.detail = message
        where = ":".join(str(part) for part in (self.path, line, column) if part is not None)
        super().__init__(f"Invalid config {where}: {message}")


# ---------------------------------------------------------------------------------------------
# JSONC.


def strip_jsonc(text: str) -> str:
    """JSON text for JSONC: comments blanked and trailing commas removed. Blanking (rather than
    deleting) keeps every remaining character on its original line and column, so JSON syntax
    errors still point at the right place in the user's file. Raises ValueError(msg, offset) for an
    unterminated comment or string."""
    out = list(text)
    i, n = 0, len(text)
    last_comma: int | None = None  # offset of a comma that may turn out to be trailing
    while i < n:
        ch = text[i]
        if ch == '"':
            last_comma = None
            i += 1
            while i < n and text[i] != '"':
                if text[i] == "\\":
                    i += 1
                elif text[i] == "\n":
                    break  # let json report the broken string at its real position
                i += 1
            i += 1
            continue
        if ch == "/" and i + 1 < n and text[i + 1] == "/":
            while i < n and text[i] != "\n":
                out[i] = " "
                i += 1
            continue
        if ch == "/" and i + 1 < n and text[i + 1] == "*":
            end = text.find("*/", i + 2)
            if end < 0:
                raise ValueError("unterminated /* comment", i)
            for j in range(i, end + 2):
                if out[j] != "\n":
                    out[j] = " "
            i = end + 2
            continue
        if ch == ",":
            last_comma = i
        elif ch in "}]":
            if last_comma is not None:
                out[last_comma] = " "
            last_comma = None
        elif not ch.isspace():
            last_comma = None
        i += 1
    return "".join(out)


def _line_col(text: str, offset: int) -> tuple[int, int]:
    line = text.count("\n", 0, offset) + 1
    column = offset - (text.rfind("\n", 0, offset) + 1) + 1
    return line, column


def parse_jsonc(text: str, path: Path | str = "<string>") -> dict[str, Any]:
    return _parse_jsonc(text, path)[0]


def _parse_jsonc(text: str, path: Path | str) -> tuple[dict[str, Any], str]:
    """The object and the JSON text it was read from (same lines and columns as `text`)."""
    if text.startswith("\ufeff"):
        text = " " + text[1:]
    if not text.strip():
        return {}, text
    try:
        cleaned = strip_jsonc(text)
    except ValueError as exc:
        message, offset = exc.args
        line, column = _line_col(text, offset)
        raise ConfigError(path, message, line=line, column=column) from None
    try:
        data = json.loads(cleaned)
    except json.JSONDecodeError as exc:
        raise ConfigError(path, exc.msg, line=exc.lineno, column=exc.colno) from None
    if not isinstance(data, dict):
        raise ConfigError(path, f"the top level must be an object, not {type(data).__name__}", line=1, column=1)
    return data, cleaned


_SPACE = re.compile(r"\s*")
_SCALAR = re.compile(r"[^\s,\]}]+")
Key = tuple[str | int, ...]


def key_offsets(cleaned: str) -> dict[Key, int]:
    """Where each object key (by its path) and array item starts in valid JSON text, for pointing at lines."""
    positions: dict[Key, int] = {}

    def value(i: int, where: Key) -> int:
        i = _SPACE.match(cleaned, i).end()  # type: ignore[union-attr]
        opener = cleaned[i]
        if opener == '"':
            return scanstring(cleaned, i + 1)[1]
        if opener not in "{[":
            return _SCALAR.match(cleaned, i).end()  # type: ignore[union-attr]
        closer, index = ("}" if opener == "{" else "]"), 0
        i += 1
        while True:
            i = _SPACE.match(cleaned, i).end()  # type: ignore[union-attr]
            if cleaned[i] == closer:
                return i + 1
            if opener == "{":
                key, end = scanstring(cleaned, i + 1)
                positions[(*where, key)] = i
                i = value(_SPACE.match(cleaned, end).end() + 1, (*where, key))  # type: ignore[union-attr]
            else:
                positions[(*where, index)] = i
                i = value(i, (*where, index))
                index += 1
            i = _SPACE.match(cleaned, i).end()  # type: ignore[union-attr]
            if cleaned[i] == ",":
                i += 1

    try:
        value(0, ())
    except (IndexError, ValueError, AttributeError):  # only ever given text json.loads accepted
        pass
    return positions


def _line_of(cleaned: str, positions: Mapping[Key, int], where: Key) -> int | None:
    """The line of the deepest located prefix of `where`."""
    for depth in range(len(where), 0, -1):
        offset = positions.get(where[:depth])
        if offset is not None:
            return _line_col(cleaned, offset)[0]
    return None


# ---------------------------------------------------------------------------------------------
# Substitution and merging.

_PLACEHOLDER = re.compile(r"\{(env|file):([^}]+)\}")


def _substitute(value: Any, env: Mapping[str, str], base_dir: Path, path: Path,
                unset: Callable[[str], None] = lambda _name: None) -> Any:
    """`{env:NAME}` becomes the variable's value ("" if unset, as in OpenCode, and `unset(NAME)` is told);
    `{file:path}` the file's text (relative to the config file, `~` expanded). Only string values are touched,
    never keys."""
    if isinstance(value, str):
        def replace(match: re.Match[str]) -> str:
            kind, arg = match.group(1), match.group(2).strip()
            if kind == "env":
                if arg not in env:
                    unset(arg)
                return env.get(arg, "")
            target = Path(os.path.expanduser(arg))
            if not target.is_absolute():
                target = base_dir / target
            try:
                return target.read_text(encoding="utf-8").strip()
            except OSError as exc:
                raise ConfigError(path, f"{match.group(0)}: cannot read {target}: {exc.strerror or exc}") from None

        return _PLACEHOLDER.sub(replace, value)
    if isinstance(value, list):
        return [_substitute(v, env, base_dir, path, unset) for v in value]
    if isinstance(value, dict):
        return {k: _substitute(v, env, base_dir, path, unset) for k, v in value.items()}
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


def config_files(directory: Path, project_root: Path, env: Mapping[str, str] = os.environ) -> list[Path]:
    """Existing config files in merge order (later files override earlier ones)."""
    files: list[Path] = []
    gdir = global_config_dir(env)
    files += [gdir / name for name in GLOBAL_FILES]
    extra = env.get("OPENCODE_CONFIG")
    if extra:
        files.append(Path(os.path.expanduser(extra)))
    if not project_config_disabled(env):
        for folder in project_dirs(directory, project_root):
            files += [folder / name for name in PROJECT_FILES]
    seen: set[Path] = set()
    ordered: list[Path] = []
    for f in files:
        key = f.resolve() if f.exists() else f
        if f.is_file() and key not in seen:
            seen.add(key)
            ordered.append(f)
    return ordered


# The top-level keys this runtime acts on (`tool_output` is its own).
ACTED_ON_KEYS = frozenset({
    "model", "small_model", "default_agent", "provider", "agent", "instructions", "permission", "compaction",
    "tool_output", "websearch", "command", "references",
})
# OpenCode's keys this runtime knows but does not act on yet, each with what it configures there. A file that sets
# one loads as before, and `ocs serve` and `ocs run` name it once at start; the work that implements a key takes it
# out of this table (and reads it).
NOT_ACTED_ON: dict[str, str] = {
    "mcp": "MCP servers and their tools",
    "plugin": "plugins",
    "snapshot": "working-tree snapshots per step",
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


def _read_file(path: Path, env: Mapping[str, str], report: ConfigReport) -> dict[str, Any]:
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

    data = _substitute(raw, env, path.parent, path, unset)
    try:
        Config.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0].get("loc", ()) if exc.errors() else ()
        raise ConfigError(path, _format_validation(exc), line=line_of(tuple(first))) from None
    return data


def load_file(path: Path, env: Mapping[str, str] = os.environ) -> dict[str, Any]:
    """One config file, parsed, substituted and checked against the typed model."""
    return _read_file(path, env, ConfigReport([path]))


def inspect_config(directory: Path, project_root: Path, env: Mapping[str, str] = os.environ) -> ConfigReport:
    """The configuration `load_config` would give, with its files and warnings; a bad file is reported in the
    result instead of raised."""
    report = ConfigReport(files=config_files(directory, project_root, env))
    merged: dict[str, Any] = {}
    try:
        for path in report.files:
            merged = merge_config(merged, _read_file(path, env, report))
        report.config = Config.model_validate(merged)
    except ConfigError as bad:
        report.error = bad
    except ValidationError as exc:  # pragma: no cover - each file already validated
        report.error = ConfigError("<merged config>", _format_validation(exc))
    return report


def load_config(directory: Path, project_root: Path, env: Mapping[str, str] = os.environ) -> Config:
    """Global files, then `OPENCODE_CONFIG`, then project files from the root down to `directory`;
    nearer files override farther ones."""
    report = inspect_config(directory, project_root, env)
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
    "AgentConfig",
    "Config",
    "ConfigError",
    "ConfigReport",
    "ConfigWarning",
    "KNOWN_TOP_LEVEL_KEYS",
    "NOT_ACTED_ON",
    "ModelConfig",
    "ModelCostConfig",
    "ModelLimit",
    "ModelModalities",
    "ProviderConfig",
    "ProviderOptions",
    "ToolOutputConfig",
    "config_files",
    "global_config_dir",
    "inspect_config",
    "key_offsets",
    "load_config",
    "load_file",
    "merge_config",
    "parse_jsonc",
    "parse_model_string",
    "project_config_disabled",
    "project_dirs",
    "strip_jsonc",
]
