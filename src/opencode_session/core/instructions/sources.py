"""Built-in Instruction Sources: environment, date, configured instruction files, skill
guidance and per-Session `api/<key>` entries (ambient AGENTS.md discovery is in discovery.py)."""

from __future__ import annotations

import glob
import json
import os
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import date, datetime
from pathlib import Path
from typing import Any, Final
from xml.sax.saxutils import escape as _xml_escape

import anyio
from pydantic import ConfigDict, StrictBool, StrictStr, TypeAdapter, with_config

from .algebra import EMPTY, JSON, UNAVAILABLE, Instructions, Source, Unavailable, combine, make

__all__ = [
    "CONFIG_INSTRUCTIONS_KEY",
    "DATE_KEY",
    "ENTRY_KEY_PATTERN",
    "ENVIRONMENT_KEY",
    "SKILL_GUIDANCE_KEY",
    "Environment",
    "InstructionFile",
    "SkillInfo",
    "config_instructions",
    "config_instructions_source",
    "date_source",
    "entry_key",
    "entry_sources",
    "environment_source",
    "file_list_instructions",
    "read_instruction_files",
    "scan_config",
    "skill_guidance_source",
]

ENVIRONMENT_KEY: Final = "core/environment"
DATE_KEY: Final = "core/date"
CONFIG_INSTRUCTIONS_KEY: Final = "core/config-instructions"
SKILL_GUIDANCE_KEY: Final = "core/skill-guidance"

ENTRY_KEY_PATTERN: Final = re.compile(r"^[a-z0-9][a-z0-9._-]*$")
"""Client-side InstructionEntry key (slash-free); its source key is `api/<key>`."""


async def _constant(value: Any) -> Any:
    return value


def _loader(value: Any) -> Callable[[], Any]:
    return lambda: _constant(value)


# Stored values are the JSON form of these dataclasses, decoded by TypeAdapters: exactly their fields (extra="forbid"),
# strictly typed, so a value stored by another version is unusable rather than misread.
_STORED = ConfigDict(extra="forbid")


# --- core/environment ------------------------------------------------------------------------


@with_config(_STORED)
@dataclass(frozen=True)
class Environment:
    directory: StrictStr
    project_root: StrictStr
    is_git: StrictBool
    platform: StrictStr

    def render(self) -> str:
        return "\n".join([
            "<env>",
            f"  Working directory: {self.directory}",
            f"  Project root: {self.project_root}",
            f"  Git repository: {'yes' if self.is_git else 'no'}",
            f"  Platform: {self.platform}",
            "</env>",
        ])


_ENVIRONMENT = TypeAdapter(Environment)


def environment_source(directory: Path, project_root: Path, is_git: bool, platform: str) -> Instructions:
    """`core/environment`: where the agent runs, as an `<env>` block."""
    value = Environment(str(directory), str(project_root), bool(is_git), platform)
    return make(Source(
        key=ENVIRONMENT_KEY,
        encode=_ENVIRONMENT.dump_python,
        decode=_ENVIRONMENT.validate_python,
        load=_loader(value),
        baseline=lambda env: "Facts about the environment you are working in:\n" + env.render(),
        update=lambda _prev, env: "Your working environment has changed. It is now:\n" + env.render(),
    ))


# --- core/date -------------------------------------------------------------------------------

_WEEKDAYS: Final = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")


def _render_date(day: date) -> str:
    return f"{_WEEKDAYS[day.weekday()]}, {day.isoformat()}"


def _decode_date(data: JSON) -> date:
    if not isinstance(data, str):
        raise ValueError("not a date value")
    return date.fromisoformat(data)


def date_source(today: Callable[[], date] = date.today) -> Instructions:
    """`core/date`: the host-local calendar date, sampled when the source is observed."""

    async def load() -> date:
        value = today()
        return value.date() if isinstance(value, datetime) else value

    return make(Source(
        key=DATE_KEY,
        encode=lambda day: day.isoformat(),
        decode=_decode_date,
        load=load,
        baseline=lambda day: f"The current date is {_render_date(day)}.",
        # Only the newly effective date: the earlier one is deliberately never restated.
        update=lambda _prev, day: f"The date has changed. The current date is now {_render_date(day)}.",
    ))


# --- file-list sources (shared with discovery.py) --------------------------------------------


@with_config(_STORED)
@dataclass(frozen=True)
class InstructionFile:
    """One instruction file as read: its absolute path and full text."""

    path: StrictStr
    content: StrictStr


_FILES = TypeAdapter(tuple[InstructionFile, ...])


def _file_block(header: str, content: str) -> str:
    body = content.rstrip()
    return f"{header}\n{body}" if body else header


def read_instruction_files(paths: Sequence[Path]) -> tuple[InstructionFile, ...]:
    """Read files as UTF-8 (blocking: a worker thread, or the loop on local mounts). Raises OSError / ValueError."""
    return tuple(InstructionFile(str(p), p.read_text(encoding="utf-8")) for p in paths)


def file_list_instructions(
    key: str,
    files: tuple[InstructionFile, ...] | Unavailable,
    *,
    header: Callable[[str], str],
    update_intro: str,
    removal: str,
) -> Instructions:
    """A source over an ordered list of files (or UNAVAILABLE); EMPTY when the list is empty."""
    if files is not UNAVAILABLE and not files:
        return EMPTY

    def render(value: tuple[InstructionFile, ...]) -> str:
        return "\n\n".join(_file_block(header(f.path), f.content) for f in value)

    return make(Source(
        key=key,
        encode=lambda files: _FILES.dump_python(files, mode="json"),
        decode=_FILES.validate_python,
        load=_loader(files),
        baseline=render,
        update=lambda _prev, cur: update_intro + "\n\n" + render(cur),
        removed=lambda _prev: removal,
    ))


# --- core/config-instructions ----------------------------------------------------------------

_GLOB_CHARS: Final = re.compile(r"[*?\[]")


def _resolve_patterns(patterns: Sequence[str], base_dir: Path) -> list[Path]:
    seen: set[str] = set()
    found: list[Path] = []
    for pattern in patterns:
        if not isinstance(pattern, str) or not pattern.strip():
            continue
        if pattern.startswith(("http://", "https://")):
            continue  # remote instructions are not handled here
        expanded = os.path.expanduser(pattern)
        if not os.path.isabs(expanded):
            expanded = os.path.join(str(base_dir), expanded)
        if _GLOB_CHARS.search(expanded):
            candidates = [Path(p) for p in sorted(glob.glob(expanded, recursive=True))]
        else:
            candidates = [Path(expanded)]
        for candidate in candidates:
            if not candidate.is_file():
                continue
            resolved = candidate.resolve()
            if str(resolved) in seen:
                continue
            seen.add(str(resolved))
            found.append(resolved)
    return found


def scan_config(patterns: Sequence[str], base_dir: Path) -> tuple[InstructionFile, ...] | Unavailable:
    """The files the config `instructions` patterns name, read (blocking; run in a worker thread)."""
    try:
        return read_instruction_files(_resolve_patterns(patterns, base_dir))
    except (OSError, ValueError):
        return UNAVAILABLE


def config_instructions(files: tuple[InstructionFile, ...] | Unavailable) -> Instructions:
    """The `core/config-instructions` source of what `scan_config` read; an unreadable match makes it
    unavailable."""
    return file_list_instructions(
        CONFIG_INSTRUCTIONS_KEY,
        files,
        header=lambda path: f"Instructions configured in {path}:",
        update_intro=(
            "The instruction files named in the configuration have changed. "
            "The complete current set follows and replaces the one given earlier."
        ),
        removal="The instruction files named in the configuration earlier no longer apply; disregard them.",
    )


async def config_instructions_source(patterns: Sequence[str], base_dir: Path) -> Instructions:
    """`core/config-instructions`: files named by the config `instructions` list (paths or globs,
    relative to `base_dir`, absolute or `~`-prefixed allowed), in pattern order and deduplicated.
    Scans and reads in a worker thread; an unreadable match makes the source unavailable."""
    return config_instructions(await anyio.to_thread.run_sync(scan_config, list(patterns), Path(base_dir)))


# --- core/skill-guidance ---------------------------------------------------------------------


@dataclass(frozen=True)
class SkillInfo:
    name: str
    description: str | None = None


@with_config(_STORED)
@dataclass(frozen=True)
class _Guided:
    """A skill as the guidance lists it: always described."""

    name: StrictStr
    description: StrictStr


_GUIDED = TypeAdapter(tuple[_Guided, ...])


def _render_skills(skills: tuple[_Guided, ...]) -> str:
    lines = [
        "Skills bundle specialised instructions and workflows for particular kinds of task. "
        "When a task fits a skill's description, load that skill with the skill tool before starting.",
        "<available_skills>",
    ]
    for skill in skills:
        lines += [
            "  <skill>",
            f"    <name>{_xml_escape(skill.name)}</name>",
            f"    <description>{_xml_escape(skill.description)}</description>",
            "  </skill>",
        ]
    lines.append("</available_skills>")
    return "\n".join(lines)


def skill_guidance_source(skills: Iterable[SkillInfo]) -> Instructions:
    """`core/skill-guidance`: names and descriptions of the skills the selected agent may load.
    Skills without a description are left out; EMPTY when none remain."""
    by_name: dict[str, _Guided] = {}
    for skill in skills:
        if skill.description and skill.description.strip() and skill.name not in by_name:
            by_name[skill.name] = _Guided(skill.name, skill.description)
    value = tuple(by_name[name] for name in sorted(by_name))
    if not value:
        return EMPTY
    return make(Source(
        key=SKILL_GUIDANCE_KEY,
        encode=lambda skills: _GUIDED.dump_python(skills, mode="json"),
        decode=_GUIDED.validate_python,
        load=_loader(value),
        baseline=_render_skills,
        update=lambda _prev, cur: (
            "The set of available skills has changed. The list below supersedes any earlier list of skills.\n"
            + _render_skills(cur)
        ),
        removed=lambda _prev: "Skills are no longer available. Do not load any skill listed earlier.",
    ))


# --- api/<key> entries -----------------------------------------------------------------------


def entry_key(client_key: str) -> str:
    """The source key for a client entry key; ValueError if the client key is not slash-free."""
    if not isinstance(client_key, str) or ENTRY_KEY_PATTERN.fullmatch(client_key) is None:
        raise ValueError(f"invalid instruction entry key: {client_key!r}")
    return f"api/{client_key}"


def _render_entry_value(value: JSON) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(value, indent=2, ensure_ascii=False)


def _context_block(client_key: str, value: JSON) -> str:
    return f'<context key="{client_key}">\n{_render_entry_value(value)}\n</context>'


def _entry_source(client_key: str, value: JSON) -> Source[JSON]:
    key = entry_key(client_key)
    value = json.loads(json.dumps(value, ensure_ascii=False, allow_nan=False))  # plain JSON only
    return Source(
        key=key,
        encode=lambda v: v,
        decode=lambda v: v,
        load=_loader(value),
        baseline=lambda v: _context_block(client_key, v),
        update=lambda _prev, v: (
            f'The context under "{client_key}" has changed; this block supersedes its earlier value:\n'
            + _context_block(client_key, v)
        ),
        removed=lambda _prev: f'The context under "{client_key}" has been withdrawn and no longer applies.',
    )


def entry_sources(entries: Iterable[tuple[str, JSON]]) -> Instructions:
    """One `api/<key>` source per InstructionEntry, ordered by key. Rendered as neutral
    `<context>` blocks; duplicate keys raise DuplicateKeyError, bad keys ValueError."""
    items = sorted(entries, key=lambda kv: kv[0])
    return combine(*(_entry_source(k, v) for k, v in items))
