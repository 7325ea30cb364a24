"""Helpers for tool tests: a ToolContext over a real directory, settling through the default registry, and a test
asker that records what a call asked and answers it."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from opencode_session.core.permission import DEFAULT_RULES, AccessRefused, PermissionAsk, Rule, Ruleset
from opencode_session.core.tools import ToolContext, ToolErrored, ToolOutput, ToolSucceeded, default_registry


@dataclass
class RecordingAsker:
    """Answers every ask: allows it, or refuses it when `refuse` is set. Records each ask."""

    refuse: bool = False
    asked: list[PermissionAsk] = field(default_factory=list)

    async def __call__(self, ask: PermissionAsk) -> None:
        self.asked.append(ask)
        if self.refuse:
            raise AccessRefused(f"The user rejected {ask.action}", "permission.rejected")


def make_ctx(directory: Path, *, rules: Ruleset = DEFAULT_RULES, extra: tuple[Rule, ...] = (),
             **kw: Any) -> ToolContext:
    return ToolContext(session_id="ses_1", message_id="msg_1", call_id="call_1", agent="build", directory=directory,
                       project_root=directory, rules=rules + extra, **kw)


async def settle_ok(name: str, input: dict[str, Any], ctx: ToolContext) -> ToolOutput:
    result = await default_registry().settle(name, input, ctx)
    assert isinstance(result, ToolSucceeded), result
    return result.output


async def settle_err(name: str, input: dict[str, Any], ctx: ToolContext) -> ToolErrored:
    result = await default_registry().settle(name, input, ctx)
    assert isinstance(result, ToolErrored), result
    return result


def process_alive(pid: int) -> bool:
    """Whether the process runs: a zombie nobody reaped yet (PID 1 in a container may not reap) counts as gone."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False
