"""User hooks: commands and HTTP endpoints from `opencode.json`'s `hooks` section that run at fixed points of a
session (before and after tools, on a prompt, at the end of a turn), with Claude Code's event names and answers."""

from .config import EVENTS, HookHandler, HookMatcher, HookSettings, parse_hooks
from .service import NO_VERDICT, HookRun, ToolVerdict, UserHooks, stricter

__all__ = ["EVENTS", "NO_VERDICT", "HookHandler", "HookMatcher", "HookRun", "HookSettings", "ToolVerdict",
           "UserHooks", "parse_hooks", "stricter"]
