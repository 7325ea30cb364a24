"""Custom commands, as OpenCode defines them: markdown files under `command/` (or `commands/`) of the global config
directory and of `.opencode/` from the project root down to the Location, then opencode.json's `command` entries,
a later definition replacing an earlier one of the same name; and expanding one into a prompt with its arguments."""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..schema.command import CommandV2Info
from ..schema.common import ModelRef
from .config import Config, global_config_dir, project_config_disabled, project_dirs
from .frontmatter import split_frontmatter
from .location import Location

_FOLDERS = ("command", "commands")
_PLACEHOLDER = re.compile(r"\$(ARGUMENTS|[1-9][0-9]*)")


def expand(template: str, arguments: str) -> str:
    """A command's prompt: `$ARGUMENTS` is every argument as typed, `$1`, `$2`, ... each one (split as a shell would,
    quotes grouping words), the highest-numbered placeholder taking the rest. A template without placeholders gets
    the arguments appended on a line of their own."""
    try:
        words = shlex.split(arguments)
    except ValueError:  # an unclosed quote: take the words as typed
        words = arguments.split()
    last = max((int(m.group(1)) for m in _PLACEHOLDER.finditer(template) if m.group(1) != "ARGUMENTS"), default=0)

    def value(match: re.Match[str]) -> str:
        token = match.group(1)
        if token == "ARGUMENTS":
            return arguments.strip()
        index = int(token) - 1
        if int(token) == last:
            return " ".join(words[index:])
        return words[index] if index < len(words) else ""

    if not _PLACEHOLDER.search(template):
        return template.rstrip() + ("\n\n" + arguments.strip() if arguments.strip() else "")
    return _PLACEHOLDER.sub(value, template)


def _model(value: Any) -> ModelRef | None:
    if not isinstance(value, str):
        return None
    provider, sep, model = value.partition("/")
    return ModelRef(providerID=provider, id=model) if sep and provider and model else None


def _flag(value: Any) -> bool | None:
    if isinstance(value, bool):
        return value
    return {"true": True, "false": False}.get(str(value).lower()) if value is not None else None


def _from_file(root: Path, path: Path) -> CommandV2Info | None:
    try:
        meta, body = split_frontmatter(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError):
        return None
    name = path.relative_to(root).with_suffix("").as_posix()
    return CommandV2Info(name=name, template=body.strip(), description=meta.get("description") or None,
                         agent=meta.get("agent") or None, model=_model(meta.get("model")),
                         subtask=_flag(meta.get("subtask")))


def _from_config(name: str, entry: Any) -> CommandV2Info | None:
    if not isinstance(entry, Mapping) or not isinstance(entry.get("template"), str):
        return None
    description, agent = entry.get("description"), entry.get("agent")
    return CommandV2Info(name=name, template=entry["template"],
                         description=description if isinstance(description, str) else None,
                         agent=agent if isinstance(agent, str) else None, model=_model(entry.get("model")),
                         subtask=_flag(entry.get("subtask")))


def command_roots(location: Location, env: Mapping[str, str]) -> list[Path]:
    config_dir = global_config_dir(env)
    roots = [config_dir / folder for folder in _FOLDERS]
    if not project_config_disabled(env):
        for folder in project_dirs(location.directory, location.project_root):
            roots += [folder / ".opencode" / name for name in _FOLDERS]
    return roots


def discover_commands(location: Location, config: Config, env: Mapping[str, str]) -> list[CommandV2Info]:
    """Every command at `location`, by name."""
    found: dict[str, CommandV2Info] = {}
    for root in command_roots(location, env):
        if root.is_dir():
            for path in sorted(root.rglob("*.md")):
                command = _from_file(root, path)
                if command is not None:
                    found[command.name] = command
    configured = (config.model_extra or {}).get("command")
    for name, entry in (configured.items() if isinstance(configured, Mapping) else ()):
        command = _from_config(str(name), entry)
        if command is not None:
            found[command.name] = command
    return [found[name] for name in sorted(found)]

