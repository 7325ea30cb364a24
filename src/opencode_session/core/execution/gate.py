"""The gate every local tool call passes, whether a Step's model just made it or a lost host left it running and it
runs again: before it runs, the user's PreToolUse hooks, then the plugins' before-tool hooks; once it ran, the plugins'
after-tool-result hooks, then the user's PostToolUse hooks. One path for both, so a re-run is vetoed, rewritten, asked
about and annotated exactly as a first run is."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from ...schema import session_errors
from ...schema.common import SessionErrorInfo
from ...schema.message import ToolTextContent
from ..permission import AccessRefused, PermissionAsk
from ..plugins import PluginHookError, PluginHooks, ToolCallRequest, ToolResult
from ..tools.registry import ToolErrored, ToolSucceeded
from ..tools.tool import ToolContext
from ..userhooks import NO_VERDICT, HookRun, ToolVerdict, UserHooks, stricter


@dataclass(frozen=True)
class ToolGate:
    """Who has a say on a call before it runs: the config's hooks (run as `run` says: session, Location, config)
    and the plugins' hooks, for the calls of assistant message `assistant_id`."""

    run: HookRun
    assistant_id: str
    user_hooks: UserHooks | None = None
    hooks: PluginHooks | None = None

    async def before(self, name: str, call_id: str, tool_input: dict[str, Any], tool_ctx: ToolContext,
                     ) -> tuple[dict[str, Any], ToolContext, ToolErrored | None]:
        """The input to run (as a hook rewrote it, where one did), the context to run it in (a hook's `allow`
        answers its permission asks), or the refusal the call settles with. A `deny` rule of the config still
        refuses what a hook allowed: the tool checks its rules as ever."""
        verdict = NO_VERDICT
        if self.user_hooks is not None and self.run.config.hooks:
            verdict = await self.user_hooks.pre_tool_use(self.run, name, call_id, tool_input)
        if self.hooks is not None and self.hooks.before_tool_hooks and verdict.decision != "deny":
            try:
                verdict = stricter(verdict, await self.hooks.before_tool(ToolCallRequest(
                    self.run.session_id, self.assistant_id, call_id, name, verdict.input or tool_input)))
            except PluginHookError as failed:
                return tool_input, tool_ctx, ToolErrored(failed.to_session_error())
        if verdict.input is not None:
            tool_input = verdict.input
        if verdict.decision == "deny":
            return tool_input, tool_ctx, ToolErrored(SessionErrorInfo(
                type=session_errors.HOOK_BLOCKED, message=verdict.reason or "A hook refused this call."))
        if verdict.decision == "ask":
            return tool_input, tool_ctx, await _hook_ask(name, tool_input, tool_ctx, verdict)
        if verdict.decision == "allow" and tool_ctx.asker is not None:
            tool_ctx = replace(tool_ctx, asker=_granted)
        return tool_input, tool_ctx, None

    async def after(self, name: str, call_id: str, tool_input: dict[str, Any],
                    settlement: ToolSucceeded | ToolErrored) -> ToolSucceeded | ToolErrored:
        """What the model is told of a call that ran: the plugins' say on a successful output (a hook that raises
        fails this call only, `plugin.hook`), then what the user's PostToolUse hooks add to it."""
        if self.hooks is not None and self.hooks.after_tool_result_hooks and isinstance(settlement, ToolSucceeded):
            try:
                output = await self.hooks.after_tool_result(ToolResult(
                    self.run.session_id, self.assistant_id, call_id, name, tool_input, settlement.output))
            except PluginHookError as failed:
                settlement = ToolErrored(failed.to_session_error())
            else:
                settlement = settlement if output is settlement.output else ToolSucceeded(output)
        if self.user_hooks is None or not self.run.config.hooks:
            return settlement
        note = await self.user_hooks.post_tool_use(self.run, name, call_id, tool_input, _text_of(settlement))
        if note is None:
            return settlement
        added = ToolTextContent(text=f"[PostToolUse hook] {note}")
        if isinstance(settlement, ToolErrored):
            return ToolErrored(SessionErrorInfo(type=settlement.error.type,
                                                message=f"{settlement.error.message}\n{added.text}"))
        return replace(settlement, output=replace(settlement.output, content=[*settlement.output.content, added]))


def _text_of(settlement: ToolSucceeded | ToolErrored) -> str:
    if isinstance(settlement, ToolErrored):
        return settlement.error.message
    return "\n".join(part.text for part in settlement.output.content if isinstance(part, ToolTextContent))


async def _hook_ask(name: str, tool_input: dict[str, Any], tool_ctx: ToolContext,
                    verdict: ToolVerdict) -> ToolErrored | None:
    """A hook wants the user to decide on this call whatever the rules say: ask them (nobody to ask: refused)."""
    if tool_ctx.asker is None:
        return ToolErrored(SessionErrorInfo(type=session_errors.PERMISSION_REQUIRED,
                                            message=verdict.reason or "A hook asks the user about this call."))
    try:
        await tool_ctx.asker(PermissionAsk(action=name, resources=(_summary(tool_input),), save=(),
                                           metadata={"hook": verdict.reason or "", "input": tool_input}))
    except AccessRefused as refused:
        return ToolErrored(SessionErrorInfo(type=refused.type, message=refused.message))
    return None


async def _granted(_need: PermissionAsk) -> None:
    """A hook allowed the call: what its permission rules would ask is granted (a `deny` never reaches here)."""


def _summary(tool_input: Mapping[str, Any]) -> str:
    keys = ("command", "filePath", "path", "url", "pattern")
    shown = next((v for k in keys if isinstance(v := tool_input.get(k), str)), None)
    return shown if shown is not None else str(dict(tool_input))[:200]
