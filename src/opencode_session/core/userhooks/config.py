"""The `hooks` section of `opencode.json`, as Claude Code users write it: per event, matchers on tool names, each
with its handlers (`command` or `http`); an entry that cannot be read is kept as a problem, never run."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final, Literal

# The points a hook may run at (Claude Code's names).
EVENTS: Final = ("SessionStart", "UserPromptSubmit", "PreToolUse", "PostToolUse", "Stop", "SubagentStop",
                 "PreCompact", "Notification")
# Only these take a `matcher` (on the tool's name); elsewhere a matcher is ignored.
TOOL_EVENTS: Final = frozenset({"PreToolUse", "PostToolUse"})
DEFAULT_TIMEOUT_S: Final = 60.0
MAX_TIMEOUT_S: Final = 600.0
BLOCK_EXIT: Final = 2  # Claude Code's "blocking error": stderr is the reason the model (or the user) reads


@dataclass(frozen=True)
class HookHandler:
    """One thing to run: a shell command (the event as JSON on stdin) or an HTTP endpoint (the event as a POST)."""

    type: Literal["command", "http"]
    target: str  # the command line, or the URL
    timeout_s: float = DEFAULT_TIMEOUT_S
    headers: Mapping[str, str] = field(default_factory=dict)

    def describe(self) -> str:
        return f"{self.type} {self.target}"


@dataclass(frozen=True)
class HookMatcher:
    """The handlers one event runs for tools whose name the `matcher` pattern matches (all tools when empty or `*`)."""

    pattern: str
    handlers: tuple[HookHandler, ...]
    _regex: re.Pattern[str] | None = field(default=None, compare=False)

    def matches(self, tool: str | None) -> bool:
        if self._regex is None or tool is None:
            return True
        return self._regex.fullmatch(tool) is not None


@dataclass(frozen=True)
class HookSettings:
    """Every event's matchers in config order, and what could not be read (shown by `ocs hooks`, logged once)."""

    events: Mapping[str, tuple[HookMatcher, ...]] = field(default_factory=dict)
    problems: tuple[str, ...] = ()

    def handlers(self, event: str, tool: str | None = None) -> list[HookHandler]:
        return [h for m in self.events.get(event, ()) if m.matches(tool) for h in m.handlers]

    def __bool__(self) -> bool:
        return any(self.events.values())


NO_HOOKS: Final = HookSettings()


def parse_hooks(section: Any) -> HookSettings:
    """Read a `hooks` section: `{"PreToolUse": [{"matcher": "bash|edit", "hooks": [{"type": "command", "command":
    "…", "timeout": 30}]}], …}`; timeouts are seconds. Unknown events and broken entries become problems."""
    if not section:
        return NO_HOOKS
    if not isinstance(section, Mapping):
        return HookSettings(problems=("hooks: expected an object of events",))
    events: dict[str, tuple[HookMatcher, ...]] = {}
    problems: list[str] = []
    for event, matchers in section.items():
        if event not in EVENTS:
            problems.append(f"hooks.{event}: not an event (one of {', '.join(EVENTS)})")
            continue
        if not isinstance(matchers, list):
            problems.append(f"hooks.{event}: expected a list of matchers")
            continue
        read = [_matcher(event, i, m, problems) for i, m in enumerate(matchers)]
        events[event] = tuple(m for m in read if m is not None)
    return HookSettings(events, tuple(problems))


def _matcher(event: str, index: int, entry: Any, problems: list[str]) -> HookMatcher | None:
    where = f"hooks.{event}[{index}]"
    if not isinstance(entry, Mapping):
        problems.append(f"{where}: expected an object with `hooks`")
        return None
    pattern = entry.get("matcher") or ""
    if not isinstance(pattern, str):
        problems.append(f"{where}.matcher: expected a string")
        return None
    regex = None
    if event in TOOL_EVENTS and pattern not in ("", "*"):
        try:
            regex = re.compile(pattern)
        except re.error as exc:
            problems.append(f"{where}.matcher: not a regular expression ({exc})")
            return None
    raw = entry.get("hooks")
    if not isinstance(raw, list) or not raw:
        problems.append(f"{where}.hooks: expected a non-empty list of handlers")
        return None
    handlers = [_handler(f"{where}.hooks[{i}]", h, problems) for i, h in enumerate(raw)]
    kept = tuple(h for h in handlers if h is not None)
    return HookMatcher(pattern, kept, regex) if kept else None


def _handler(where: str, entry: Any, problems: list[str]) -> HookHandler | None:
    if not isinstance(entry, Mapping):
        problems.append(f"{where}: expected an object")
        return None
    kind = entry.get("type", "command")
    timeout = entry.get("timeout", DEFAULT_TIMEOUT_S)
    if isinstance(timeout, bool) or not isinstance(timeout, int | float) or not 0 < timeout <= MAX_TIMEOUT_S:
        problems.append(f"{where}.timeout: expected seconds in (0, {MAX_TIMEOUT_S:g}]")
        return None
    if kind == "command":
        command = entry.get("command")
        if not isinstance(command, str) or not command.strip():
            problems.append(f"{where}.command: expected a command line")
            return None
        return HookHandler("command", command, float(timeout))
    if kind == "http":
        url = entry.get("url")
        headers = entry.get("headers") or {}
        if not isinstance(url, str) or not url.startswith(("http://", "https://")):
            problems.append(f"{where}.url: expected an http(s) URL")
            return None
        if not isinstance(headers, Mapping) or not all(isinstance(v, str) for v in headers.values()):
            problems.append(f"{where}.headers: expected an object of strings")
            return None
        return HookHandler("http", url, float(timeout), dict(headers))
    problems.append(f"{where}.type: expected `command` or `http`")
    return None
