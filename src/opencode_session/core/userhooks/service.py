"""The user's hooks at each point of a session: which handlers an event runs, the JSON each is given, and what their
answers come to (a tool call allowed, refused, asked or rewritten; a prompt rejected; a turn continued). A handler
that fails is logged and recorded as `session.hook.failed`; it never decides anything."""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, Literal

import anyio

from ...schema import events as ev
from ..child_env import inherited
from ..config import Config
from ..store import Store
from .config import BLOCK_EXIT, HookHandler, HookSettings, parse_hooks

if TYPE_CHECKING:
    from .handlers import HandlerAnswer

log = logging.getLogger(__name__)

Decision = Literal["allow", "deny", "ask"]
_DECISIONS: Final[dict[str, Decision]] = {"allow": "allow", "deny": "deny", "ask": "ask"}
_LEGACY: Final[dict[str, Decision]] = {"block": "deny", "approve": "allow"}  # Claude Code's older `decision` field
_RANK: Final[dict[str | None, int]] = {None: 0, "allow": 1, "ask": 2, "deny": 3}  # the strictest answer wins


@dataclass(frozen=True)
class HookRun:
    """Whose hooks run and where: the session, its Location, the runtime's environment and the config in effect."""

    session_id: str
    directory: Path
    project_root: Path
    env: Mapping[str, str]
    config: Config


@dataclass(frozen=True)
class ToolVerdict:
    """What the PreToolUse hooks said of one call: a decision (None: the permission rules decide as usual), the
    reason the model reads when refused, and a rewritten input to run instead."""

    decision: Decision | None = None
    reason: str | None = None
    input: dict[str, Any] | None = None


NO_VERDICT: Final = ToolVerdict()


@dataclass
class UserHooks:
    """Runs the hooks of the config in effect at each point; `store` records handler failures in the session."""

    store: Store | None = None
    _reported: set[str] = field(default_factory=set)

    def settings(self, config: Config) -> HookSettings:
        settings = parse_hooks(config.hooks)
        for problem in settings.problems:
            if problem not in self._reported:
                self._reported.add(problem)
                log.warning("opencode.json %s (that entry is not run)", problem)
        return settings

    def configured(self, config: Config, event: str, tool: str | None = None) -> bool:
        return bool(config.hooks) and bool(self.settings(config).handlers(event, tool))

    async def fire(self, run: HookRun, event: str, details: Mapping[str, Any],
                   tool: str | None = None) -> list[HandlerAnswer]:
        """Run every handler of `event` (matching `tool`) at once; the answers that ran to an answer, in config
        order (the failures are recorded)."""
        if not run.config.hooks:
            return []
        handlers = self.settings(run.config).handlers(event, tool)
        if not handlers:
            return []
        payload = {"session_id": run.session_id, "cwd": str(run.directory), "project_root": str(run.project_root),
                   "hook_event_name": event, **details}
        env = {**inherited(run.env, run.config), "OPENCODE_SESSION_ID": run.session_id,
               "OPENCODE_PROJECT_DIR": str(run.project_root)}
        from .handlers import run_handler  # a runtime whose config has no hooks never loads it

        answers: list[HandlerAnswer | None] = [None] * len(handlers)

        async def one(index: int, handler: HookHandler) -> None:
            answers[index] = await run_handler(handler, payload, run.directory, env)

        async with anyio.create_task_group() as group:
            for index, handler in enumerate(handlers):
                group.start_soon(one, index, handler)
        kept: list[HandlerAnswer] = []
        for handler, answer in zip(handlers, answers, strict=True):
            assert answer is not None
            problem = _problem(answer)
            if problem is None:
                kept.append(answer)
            else:
                await self._failed(run, event, handler, problem)
        return kept

    async def _failed(self, run: HookRun, event: str, handler: HookHandler, problem: str) -> None:
        log.warning("%s hook %s (session %s): %s", event, handler.describe(), run.session_id, problem)
        if self.store is not None:
            await self.store.append(ev.HookFailed(sessionID=run.session_id, hook=event, handler=handler.describe(),
                                                  message=problem))

    # --- the points ---------------------------------------------------------------------------------

    async def pre_tool_use(self, run: HookRun, tool: str, call_id: str, tool_input: Mapping[str, Any]) -> ToolVerdict:
        """Exit 2 refuses the call (stderr is the reason); JSON `hookSpecificOutput.permissionDecision` allows,
        denies or asks, `updatedInput` rewrites the input."""
        answers = await self.fire(run, "PreToolUse", {"tool_name": tool, "tool_use_id": call_id,
                                                     "tool_input": dict(tool_input)}, tool)
        verdict = NO_VERDICT
        for answer in answers:
            verdict = stricter(verdict, _tool_verdict(answer))
        return verdict

    async def post_tool_use(self, run: HookRun, tool: str, call_id: str, tool_input: Mapping[str, Any],
                            response: str) -> str | None:
        """What the hooks tell the model about a call that ran (exit 2's stderr, a `block` reason or
        `additionalContext`), or None."""
        answers = await self.fire(run, "PostToolUse", {"tool_name": tool, "tool_use_id": call_id,
                                                      "tool_input": dict(tool_input), "tool_response": response},
                                  tool)
        notes = [note for note in map(_feedback, answers) if note]
        return "\n".join(notes) or None

    async def user_prompt_submit(self, run: HookRun, prompt: str) -> str | None:
        """The reason a hook rejects this prompt (exit 2, or JSON `decision: block`), or None to admit it."""
        return _blocking(await self.fire(run, "UserPromptSubmit", {"prompt": prompt}), stops=True)

    async def stop(self, run: HookRun, *, subagent: bool, active: bool) -> str | None:
        """The reason a hook gives for the agent to go on instead of stopping (exit 2 or `decision: block`), or
        None. `active`: this turn already went on once for a Stop hook."""
        event = "SubagentStop" if subagent else "Stop"
        return _blocking(await self.fire(run, event, {"stop_hook_active": active}))

    async def notify(self, run: HookRun, event: str, details: Mapping[str, Any]) -> None:
        """An event whose hooks are told but decide nothing (SessionStart, PreCompact, Notification)."""
        await self.fire(run, event, details)


def _problem(answer: HandlerAnswer) -> str | None:
    if answer.failure is not None:
        return answer.failure + (f": {answer.stderr}" if answer.stderr else "")
    if answer.exit_code not in (0, BLOCK_EXIT):
        return f"exited {answer.exit_code}" + (f": {answer.stderr}" if answer.stderr else "")
    return None


def _json(answer: HandlerAnswer) -> dict[str, Any]:
    if answer.exit_code != 0 or not answer.stdout.startswith("{"):
        return {}
    try:
        value = json.loads(answer.stdout)
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def _tool_verdict(answer: HandlerAnswer) -> ToolVerdict:
    if answer.exit_code == BLOCK_EXIT:
        return ToolVerdict("deny", answer.stderr or "A PreToolUse hook refused this call.")
    data = _json(answer)
    specific = data.get("hookSpecificOutput")
    specific = specific if isinstance(specific, dict) else {}
    asked = specific.get("permissionDecision")
    reason = specific.get("permissionDecisionReason") or data.get("reason")
    decision: Decision | None = _DECISIONS.get(asked) if isinstance(asked, str) else None
    if decision is None:
        decision = _LEGACY.get(data.get("decision") or "")
    if data.get("continue") is False:
        decision, reason = "deny", data.get("stopReason") or reason
    updated = specific.get("updatedInput")
    return ToolVerdict(decision, reason if isinstance(reason, str) else None,
                       updated if isinstance(updated, dict) else None)


def stricter(a: ToolVerdict, b: ToolVerdict) -> ToolVerdict:
    """Two verdicts as one: the stricter decision (deny, then ask, then allow) with its reason; the later input."""
    decision = b.decision if _RANK[b.decision] > _RANK[a.decision] else a.decision
    reason = b.reason if decision == b.decision and b.reason else a.reason
    return ToolVerdict(decision, reason, b.input if b.input is not None else a.input)


def _feedback(answer: HandlerAnswer) -> str | None:
    if answer.exit_code == BLOCK_EXIT:
        return answer.stderr or None
    data = _json(answer)
    specific = data.get("hookSpecificOutput")
    context = specific.get("additionalContext") if isinstance(specific, dict) else None
    reason = data.get("reason") if data.get("decision") == "block" else None
    return "\n".join(s for s in (reason, context) if isinstance(s, str) and s) or None


def _blocking(answers: list[HandlerAnswer], *, stops: bool = False) -> str | None:
    """The first blocking answer's reason; with `stops`, `continue: false` blocks too (for a Stop hook it only
    confirms the stop)."""
    for answer in answers:
        if answer.exit_code == BLOCK_EXIT:
            return answer.stderr or "A hook blocked this."
        data = _json(answer)
        if data.get("decision") == "block":
            reason = data.get("reason")
            return reason if isinstance(reason, str) and reason else "A hook blocked this."
        if stops and data.get("continue") is False:
            reason = data.get("stopReason")
            return reason if isinstance(reason, str) and reason else "A hook blocked this."
    return None
