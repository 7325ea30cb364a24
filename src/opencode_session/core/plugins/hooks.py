"""The hooks of the loaded plugins, composed: before a Step's provider request, after a local tool call's result, on
every durable session event, and a new terminal's PTY Environment; each failure names the plugin and the hook."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Final, TypeVar

from ...schema import session_errors
from ...schema.common import SessionErrorInfo
from ...schema.events import EventRecord
from ..llm.model import LLMRequest
from ..location import Location
from ..store.feed import LiveBus, SubscriptionLost
from ..tools.tool import ToolOutput
from ..userhooks.service import NO_VERDICT, ToolVerdict, stricter
from .api import Hooked, ProviderRequest, TerminalRequest, ToolCallRequest, ToolResult, call_hook

log = logging.getLogger(__name__)
T = TypeVar("T")

BEFORE_REQUEST: Final = "before-request"
BEFORE_TOOL: Final = "before-tool"
AFTER_TOOL_RESULT: Final = "after-tool-result"
ON_EVENT: Final = "on-event"
PTY_ENVIRONMENT: Final = "pty-environment"


class PluginHookError(Exception):
    """A plugin's hook raised (or answered something it may not): what it touched fails with `plugin.hook`."""

    def __init__(self, plugin: str, hook: str, cause: BaseException | str) -> None:
        self.plugin = plugin
        self.hook = hook
        why = cause if isinstance(cause, str) else f"{type(cause).__name__}: {cause}"
        super().__init__(f"plugin {plugin}: its {hook} hook failed: {why}")

    def to_session_error(self) -> SessionErrorInfo:
        return SessionErrorInfo(type=session_errors.PLUGIN_HOOK, message=str(self))


class PluginHooks:
    """The hooks of every loaded plugin, in load order (each one sees what the earlier ones returned)."""

    def __init__(self, before_request: Sequence[Hooked] = (), after_tool_result: Sequence[Hooked] = (),
                 on_event: Sequence[Hooked] = (), pty_environment: Sequence[Hooked] = (),
                 before_tool: Sequence[Hooked] = ()) -> None:
        self.before_request_hooks = tuple(before_request)
        self.before_tool_hooks = tuple(before_tool)
        self.after_tool_result_hooks = tuple(after_tool_result)
        self.event_hooks = tuple(on_event)
        self.pty_environment_hooks = tuple(pty_environment)

    async def before_request(self, hooked: ProviderRequest) -> LLMRequest:
        """The request to send once every before-request hook saw it; PluginHookError when one raised."""
        request: LLMRequest = await _through(self.before_request_hooks, BEFORE_REQUEST, hooked, "request", LLMRequest)
        return request

    async def before_tool(self, call: ToolCallRequest) -> ToolVerdict:
        """Every before-tool hook's verdict on a call, the strictest decision winning (each hook sees the input as
        the earlier ones rewrote it); PluginHookError when one raised or answered something else."""
        verdict = NO_VERDICT
        for entry in self.before_tool_hooks:
            shown = call if verdict.input is None else dataclasses.replace(call, input=verdict.input)
            answer = await _ask(entry, BEFORE_TOOL, shown, ToolVerdict)
            if answer is not None:
                verdict = stricter(verdict, answer)
        return verdict

    async def after_tool_result(self, result: ToolResult) -> ToolOutput:
        """The output the call settles with once every after-tool-result hook saw it; PluginHookError when one
        raised."""
        output: ToolOutput = await _through(self.after_tool_result_hooks, AFTER_TOOL_RESULT, result, "output",
                                            ToolOutput)
        return output

    async def on_event(self, record: EventRecord) -> None:
        """Show one durable event to every event hook; one that raises is logged and the others still run."""
        for entry in self.event_hooks:
            try:
                await call_hook(entry.hook, record)
            except Exception:
                log.exception("plugin %s: its %s hook failed on %s (ignored)", entry.plugin, ON_EVENT, record.type)

    def pty_environment(self, location: Location, cwd: Path) -> dict[str, str]:
        """What the PTY Environment hooks add to a new terminal's environment, later plugins over earlier ones; a
        hook that raises, or answers anything but a mapping of strings, adds nothing (logged)."""
        added: dict[str, str] = {}
        asked = TerminalRequest(location.directory, location.project_root, cwd)
        for entry in self.pty_environment_hooks:
            try:
                answer = entry.hook(asked)
                if answer is not None and not (isinstance(answer, Mapping) and all(
                        isinstance(k, str) and isinstance(v, str) for k, v in answer.items())):
                    raise TypeError(f"it returned {type(answer).__name__}, not a mapping of strings or None")
            except Exception:
                log.exception("plugin %s: its %s hook failed; the terminal starts without its additions",
                              entry.plugin, PTY_ENVIRONMENT)
                continue
            added.update(answer or {})
        return added

    def watch(self, live: LiveBus) -> EventFeed | None:
        """Feed every durable event the store commits to the event hooks, in commit order, until the bus closes;
        None when no plugin has an event hook."""
        return EventFeed(self, live) if self.event_hooks else None


async def _through(hooks: Sequence[Hooked], kind: str, shown: Any, field: str, accepted: type[Any]) -> Any:
    """`shown`'s `field` once each hook saw it (with what the earlier ones answered) and may have replaced it."""
    value = getattr(shown, field)
    for entry in hooks:
        answer = await _ask(entry, kind, dataclasses.replace(shown, **{field: value}), accepted)
        if answer is not None:
            value = answer
    return value


async def _ask(entry: Hooked, kind: str, shown: Any, accepted: type[T]) -> T | None:
    """One hook's answer to `shown`: None or an `accepted`; PluginHookError (logged) when it raised, or answered
    something else."""
    try:
        answer = await call_hook(entry.hook, shown)
    except Exception as failure:
        log.exception("plugin %s: its %s hook failed", entry.plugin, kind)
        raise PluginHookError(entry.plugin, kind, failure) from failure
    if answer is not None and not isinstance(answer, accepted):
        raise PluginHookError(entry.plugin, kind,
                              f"it returned {type(answer).__name__}, not {accepted.__name__} or None")
    return answer


class EventFeed:
    """The task that shows durable events to the event hooks; `flush` lets them see what committed before a close,
    `cancel` stops it."""

    def __init__(self, hooks: PluginHooks, live: LiveBus) -> None:
        self._hooks = hooks
        self._live = live
        self._subscription = live.subscribe()
        self._busy = False
        self._progress = asyncio.Condition()
        self.task = asyncio.create_task(self._follow(), name="plugin-event-hooks")

    async def _follow(self) -> None:
        while True:
            try:
                batch: list[Any] = await self._subscription.next()
            except SubscriptionLost:
                if self._live.closed:
                    return
                log.warning("plugin event hooks fell behind the session events; some were not shown to them")
                self._subscription = self._live.subscribe()
                continue
            self._busy = True
            for record in batch:
                if isinstance(record, EventRecord) and record.seq is not None:
                    with contextlib.suppress(Exception):  # on_event logs its hooks' failures itself
                        await self._hooks.on_event(record)
            self._busy = False
            async with self._progress:
                self._progress.notify_all()

    def _caught_up(self) -> bool:
        return not self._busy and self._subscription.position >= self._live.position

    async def flush(self, timeout: float) -> None:
        """Wait (up to `timeout` seconds) until the hooks saw every durable event committed so far."""
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout), self._progress:
                await self._progress.wait_for(lambda: self._caught_up() or self.task.done())

    async def cancel(self) -> None:
        self.task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self.task


__all__ = ["AFTER_TOOL_RESULT", "BEFORE_REQUEST", "ON_EVENT", "PTY_ENVIRONMENT", "EventFeed", "PluginHookError",
           "PluginHooks"]
