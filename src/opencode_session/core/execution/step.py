"""One Step's provider stream: lazy step start, durable content and tool events, live deltas, concurrent local
tools with serialized settlement, and exactly one terminal step event (or, before any output, a retry left to the
runner)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypedDict

import anyio
from anyio.abc import TaskGroup

from ...schema import events as ev
from ...schema import session_errors
from ...schema.base import Struct
from ...schema.common import ModelRef, SessionErrorInfo, TokenCache, Tokens
from ...schema.message import ToolContent, ToolTextContent
from ..cancellation import owned_tasks, shielded
from ..config import Config
from ..llm import model as llm
from ..llm.catalog import step_cost
from ..llm.errors import ContextOverflowError, ProviderError
from ..permission import (
    DEFAULT_RULES,
    AccessRefused,
    Asker,
    Correction,
    PermissionAsk,
    PermissionWait,
    Ruleset,
    Waited,
    waits_state,
)
from ..plugins import PluginHooks
from ..questions import Questioner
from ..snapshot.steps import StepFiles
from ..store import SessionFencedError, Store, confirm_lease
from ..telemetry import hooks
from ..tools.registry import ToolErrored, ToolSet, ToolSucceeded
from ..tools.tool import ToolContext
from ..userhooks import HookRun, UserHooks
from .gate import ToolGate

log = logging.getLogger(__name__)

TOOLS_DISABLED = "Tools are disabled on this step: the agent reached its maximum number of steps."
INTERRUPTED_TOOL = "Tool execution interrupted"
INTERRUPTED_STEP = "Step interrupted"
CONTENT_FILTERED = "The provider blocked the response"
# How much of a running call's latest output one progress event carries (each replaces the previous one).
PROGRESS_TAIL_CHARS = 16 * 1024


@dataclass
class StepOutcome:
    started: bool = False          # the assistant message exists (session.step.started was published)
    evidence: bool = False         # durable assistant output exists: content, tool input or a call (no retry after it)
    finish: str | None = None
    local_calls: int = 0
    error: ProviderError | None = None
    failure: SessionErrorInfo | None = None   # why the step failed
    retry: bool = False            # failed before any output and left open: the runner schedules the retry
    declined: bool = False         # the user declined a call: the Step failed and the drain stops (interrupted)
    overflow: bool = False         # context overflow before any output, held back: the runner compacts and rebuilds

    @property
    def needs_continuation(self) -> bool:
        return self.local_calls > 0 and self.failure is None


@dataclass
class StepContext:
    store: Store
    session_id: str
    assistant_id: str
    agent: str
    model_ref: ModelRef
    resolved: llm.ResolvedModel
    provider: llm.Provider
    request: llm.LLMRequest
    tools: ToolSet  # the tools the registry's sources listed at this Step's boundary
    tools_enabled: bool
    directory: Path
    project_root: Path
    on_read: Callable[[Path], Awaitable[None]] | None = None
    env: Mapping[str, str] | None = None
    rules: Ruleset = DEFAULT_RULES  # sampled with the agent at the boundary: later switches do not change them
    secrets: tuple[str, ...] = ()  # configured credentials, cut from provider error messages before they are stored
    # asked once, only when the provider failed before any output: may this failure be retried?
    may_retry: Callable[[ProviderError], bool] = lambda _error: False
    max_output_lines: int | None = None  # the Model Tool Output bounds (config `tool_output`); None: the registry's
    max_output_bytes: int | None = None
    managed_roots: tuple[Path, ...] = ()  # where Managed Tool Output Files are: readable without asking
    # by call ID: who asks the user for a permission (telling `waited` of each answered wait), or a tool's
    # questions; None: nobody can answer
    asker_for: Callable[[str, Waited], Asker] | None = None
    questioner_for: Callable[[str], Questioner] | None = None
    hold_overflow: bool = False  # a context overflow before any output publishes nothing (the runner recovers)
    config: Config = field(default_factory=Config)  # sampled at the boundary: what the Step's tools are configured by
    files: StepFiles = field(default_factory=StepFiles)  # the Location's snapshots around this Step
    hooks: PluginHooks | None = None  # the plugins' before-tool and after-tool-result hooks, around local calls
    user_hooks: UserHooks | None = None  # the config's PreToolUse and PostToolUse hooks, around local calls
    # queues the durable record of what the Step sends (given the body as encoded, None: the adapter encodes none)
    record: Callable[[bytes | None], asyncio.Future[Any]] | None = None

    def hook_run(self) -> HookRun:
        return HookRun(self.session_id, self.directory, self.project_root, self.env or {}, self.config)


class _StepIds(TypedDict):
    """The fields every event of this Step starts with."""

    sessionID: str
    assistantMessageID: str


@dataclass
class _Call:
    call_id: str
    name: str
    settled: bool = False
    running: bool = False  # a local call's task is running in the Step's group
    waits: list[PermissionWait] = field(default_factory=list)  # the user's answers it waited for, recorded with it


@dataclass
class HostedResult:
    """A provider-executed call's settlement: the result exactly as the provider sent it."""

    result: llm.ToolResult
    content: list[ToolContent]


@dataclass
class _Block:
    ordinal: int
    parts: list[str] = field(default_factory=list)


def local_settlement(session_id: str, assistant_id: str, call_id: str, settlement: ToolSucceeded | ToolErrored,
                     waits: list[PermissionWait] | None = None) -> ev.ToolSuccess | ev.ToolFailed:
    """The durable event that settles a local call with its (bounded) settlement, and the `waits` for the user's
    permission it went through (`permission.ask.waits_state`)."""
    state = waits_state(waits or [])
    if isinstance(settlement, ToolSucceeded):
        out = settlement.output
        return ev.ToolSuccess(sessionID=session_id, assistantMessageID=assistant_id, callID=call_id,
                              structured=out.structured, content=list(out.content),
                              outputPaths=[settlement.output_path] if settlement.output_path else None,
                              resultState=state)
    return ev.ToolFailed(sessionID=session_id, assistantMessageID=assistant_id, callID=call_id, error=settlement.error,
                         resultState=state)


class Step:
    _tools: TaskGroup  # the tasks of the Step's local calls, while `run` streams and joins them

    def __init__(self, ctx: StepContext) -> None:
        self.ctx = ctx
        self.outcome = StepOutcome()
        self.ordinal = 0
        self.text: dict[str, _Block] = {}
        self.reasoning: dict[str, _Block] = {}
        self.inputs: dict[str, list[str]] = {}
        self.calls: dict[str, _Call] = {}
        self.terminal = False
        self.usage = llm.Usage()
        self.queued: list[asyncio.Future[Any]] = []  # durable writes submitted and not yet known committed
        self.stream: Any = None  # the provider's stream while it is open
        # Once the user refused a call (with feedback, or declining), what the Step's calls that have not started
        # yet fail with instead of asking or running.
        self.refusal: AccessRefused | None = None
        self.attempt: hooks.Attempt | None = None  # the provider attempt as telemetry sees it; None while it is off

    # --- durable writes ---------------------------------------------------------------------------

    def _defer(self, data: Struct, *, lazy: bool = True) -> None:
        """Queue a durable event without waiting for it: it commits in order with the Step's other writes and is
        known durable at the Step's next durability point. A `lazy` one commits with the next write that is not, or
        before the next live event (which must not overtake it): the stream's last events and the terminal that
        follows them share one commit."""
        self.queued.append(self.ctx.store.submit(lambda tx: tx.append(data), lazy=lazy))

    async def _append(self, data: Struct) -> None:
        """A durability point: `data`, and every event the Step queued before it, are durable on return."""
        self._defer(data)
        await self._flush()

    async def _flush(self) -> None:
        """Wait for the Step's queued writes; the first that failed raises (after all have settled)."""
        queued, self.queued = self.queued, []
        if queued:
            self.ctx.store.kick()
        failure: BaseException | None = None
        for write in queued:
            try:
                await write
            except Exception as error:
                failure = failure or error
        if failure is not None:
            raise failure

    def _live(self, data: Struct) -> None:
        self.ctx.store.publish_live(data, self.ctx.session_id)

    def _ids(self) -> _StepIds:
        return {"sessionID": self.ctx.session_id, "assistantMessageID": self.ctx.assistant_id}

    def _ensure_started(self) -> None:
        if not self.outcome.started:
            self.outcome.started = True
            self._defer(ev.StepStarted(**self._ids(), agent=self.ctx.agent, model=self.ctx.model_ref,
                                       snapshot=self.ctx.files.start))

    def _output(self) -> None:
        """Durable assistant output begins: from here on a failure is the Step's, never retried."""
        if self.attempt is not None:
            self.attempt.first_output()
        self.outcome.evidence = True
        self._ensure_started()

    # --- the stream ---------------------------------------------------------------------------------

    async def run(self) -> StepOutcome:
        await confirm_lease()  # no provider request for a session whose lease may have lapsed (renewed first if old)
        r = self.ctx.resolved
        try:
            self.stream = self._open()
            self.attempt = hooks.attempt(r.provider_id, r.model_id, r.wire_model, self.ctx.request)
            # the Step owns its local calls' tasks: the block ends once every one settled; an interrupt or a defect
            # here cancels those still running, and the block ends once they stopped
            async with owned_tasks() as self._tools:
                try:
                    async for event in self.stream:
                        await self._on_event(event)
                except ProviderError as error:
                    self.outcome.error = error.redacted(self.ctx.secrets)
                if self.attempt is not None:
                    self._attempt_ended()
                await self._close_open_blocks()
                if any(c.running for c in self.calls.values()):
                    await self._close()  # tools may run for minutes: give the connection back meanwhile
            # no wait since the stream's last events: the terminal joins their transaction (one commit, not two)
            await self._settle()
            await self._flush()  # a Step left for retry ends on a queued step start
        except (asyncio.CancelledError, SessionFencedError):  # interrupted, or the session is no longer ours
            await shielded(self._abort())
            raise
        except Exception as defect:
            # a defect (e.g. an adapter bug) must not leave local tools running or the step without a terminal
            await shielded(self._abort(SessionErrorInfo(type=session_errors.UNKNOWN,
                                                        message=f"{type(defect).__name__}: {defect}")))
            raise
        finally:
            if self.attempt is not None:
                self.attempt.abandon()  # (ended already, unless an interrupt or a defect ended the Step)
            await self._close()  # release the provider connection whatever ended the Step
        return self.outcome

    def _attempt_ended(self) -> None:
        assert self.attempt is not None
        self.attempt.end(self.outcome.finish, self.usage, step_cost(self.usage, self.ctx.resolved.cost),
                         self.outcome.error)

    def _open(self) -> Any:
        """The provider's stream of this Step's request; its record queued with the Step's writes (the body as the
        adapter encoded it, once: what is recorded is what is sent)."""
        provider, request, record = self.ctx.provider, self.ctx.request, self.ctx.record
        if isinstance(provider, llm.EncodingProvider):
            body = provider.encode_request(request)
            if record is not None:
                self.queued.append(record(body))
            return provider.stream(request, body)
        if record is not None:
            self.queued.append(record(None))
        return provider.stream(request)

    async def _close(self) -> None:
        stream, self.stream = self.stream, None
        aclose = getattr(stream, "aclose", None)
        if aclose is not None:
            await shielded(aclose())

    async def _on_event(self, event: llm.StreamEvent) -> None:
        ids = self._ids()
        block: _Block | None
        if isinstance(event, llm.TextStart):
            self._output()
            block = self.text[event.id] = _Block(self._next_ordinal())
            self._defer(ev.TextStarted(**ids, ordinal=block.ordinal))
        elif isinstance(event, llm.TextDelta):
            block = self.text.get(event.id)
            if block is None:
                await self._on_event(llm.TextStart(event.id))
                block = self.text[event.id]
            block.parts.append(event.delta)
            self._live(ev.TextDelta(**ids, ordinal=block.ordinal, delta=event.delta))
        elif isinstance(event, llm.TextEnd):
            block = self.text.pop(event.id, None)
            if block is not None:
                text = "".join(block.parts)
                if self.attempt is not None:
                    self.attempt.output(text)
                self._defer(ev.TextEnded(**ids, ordinal=block.ordinal, text=text))
        elif isinstance(event, llm.ReasoningStart):
            self._output()
            block = self.reasoning[event.id] = _Block(self._next_ordinal())
            self._defer(ev.ReasoningStarted(**ids, ordinal=block.ordinal))
        elif isinstance(event, llm.ReasoningDelta):
            block = self.reasoning.get(event.id)
            if block is None:
                await self._on_event(llm.ReasoningStart(event.id))
                block = self.reasoning[event.id]
            block.parts.append(event.delta)
            self._live(ev.ReasoningDelta(**ids, ordinal=block.ordinal, delta=event.delta))
        elif isinstance(event, llm.ReasoningEnd):
            block = self.reasoning.pop(event.id, None)
            if block is not None:
                self._defer(ev.ReasoningEnded(**ids, ordinal=block.ordinal, text="".join(block.parts),
                                              state=event.metadata))
        elif isinstance(event, llm.ToolInputStart):
            self._output()
            self.inputs[event.call_id] = []
            self.calls[event.call_id] = _Call(event.call_id, event.name)
            self._defer(ev.ToolInputStarted(**ids, callID=event.call_id, name=event.name))
        elif isinstance(event, llm.ToolInputDelta):
            if event.call_id in self.inputs:
                self.inputs[event.call_id].append(event.delta)
                self._live(ev.ToolInputDelta(**ids, callID=event.call_id, delta=event.delta))
        elif isinstance(event, llm.ToolInputEnd):
            parts = self.inputs.pop(event.call_id, None)
            if parts is not None:
                self._defer(ev.ToolInputEnded(**ids, callID=event.call_id, text="".join(parts)))
        elif isinstance(event, llm.ToolCall):
            await self._on_tool_call(event)
        elif isinstance(event, llm.ToolResult):
            await self._on_tool_result(event)
        elif isinstance(event, llm.Finish):
            self._ensure_started()  # a bare finish makes the assistant exist but is no output evidence
            self.outcome.finish = event.reason
            self.usage = event.usage

    def _next_ordinal(self) -> int:
        self.ordinal += 1
        return self.ordinal - 1

    async def _close_open_blocks(self) -> None:
        for key in list(self.text):
            await self._on_event(llm.TextEnd(key))
        for key in list(self.reasoning):
            await self._on_event(llm.ReasoningEnd(key))
        for key in list(self.inputs):
            await self._on_event(llm.ToolInputEnd(key))

    # --- tools ----------------------------------------------------------------------------------------

    async def _on_tool_call(self, call: llm.ToolCall) -> None:
        self._output()
        ids = self._ids()
        if call.call_id in self.inputs:
            await self._on_event(llm.ToolInputEnd(call.call_id))
        record = self.calls.setdefault(call.call_id, _Call(call.call_id, call.name))
        # the call is durable before any side effect begins
        await self._append(ev.ToolCalled(**ids, callID=call.call_id, name=call.name, input=call.input,
                                         executed=call.provider_executed, state=call.metadata))
        if call.provider_executed:
            return  # hosted: the provider reports the result; unsettled ones fail at the end
        self.outcome.local_calls += 1
        if call.input_error is not None:
            self._publish_settlement(record, ToolErrored(SessionErrorInfo(
                type=session_errors.TOOL_INVALID_INPUT, message=call.input_error)))
        elif not self.ctx.tools_enabled:
            self._publish_settlement(record, ToolErrored(SessionErrorInfo(
                type=session_errors.TOOL_EXECUTION, message=TOOLS_DISABLED)))
        elif self.refusal is not None:
            self._publish_settlement(record, ToolErrored(SessionErrorInfo(
                type=self.refusal.type, message=self.refusal.message)))
        else:
            await confirm_lease()  # no tool starts for a session whose lease may have lapsed
            record.running = True
            self._tools.start_soon(self._run_tool, record, call.input, name=f"tool:{call.name}:{call.call_id}")

    async def _on_tool_result(self, result: llm.ToolResult) -> None:
        """A hosted call's result, as the provider reported it; one for a call never made has nothing to settle."""
        record = self.calls.get(result.call_id)
        if record is None:
            return
        content: list[ToolContent] = [ToolTextContent(text=result.text)] if result.text else []
        self._publish_settlement(record, HostedResult(result, content))

    async def _run_tool(self, record: _Call, tool_input: dict[str, Any]) -> None:
        """Run one call to its one settlement: a failure around the tool's own run (bounding or recording its output
        on a full disk, say) settles the call as `tool.execution` with the cause, and is logged (once, here). Should
        even that settlement fail, the failure leaves the task and fails the Step that owns it."""
        ran: list[bool] = []
        try:
            await self._execute(record, tool_input, ran)
        except Exception as failed:
            self._settle_failed(record, failed, ran=bool(ran))
        finally:
            record.running = False

    def _settle_failed(self, record: _Call, failed: Exception, *, ran: bool) -> None:
        what = "its output could not be recorded" if ran else "it could not be run"
        log.error("tool %s (call %s, session %s): %s", record.name, record.call_id, self.ctx.session_id, what,
                  exc_info=failed)
        self._publish_settlement(record, ToolErrored(SessionErrorInfo(
            type=session_errors.TOOL_EXECUTION,
            message=f"The tool {record.name} {'ran, but ' if ran else ''}{what}: {type(failed).__name__}: {failed}")))

    async def _execute(self, record: _Call, tool_input: dict[str, Any], ran: list[bool]) -> None:
        c = self.ctx
        if c.tools.changes_files(record.name):
            c.files.touched()
        tool_ctx = ToolContext(session_id=c.session_id, message_id=c.assistant_id, call_id=record.call_id,
                               agent=c.agent, directory=c.directory, project_root=c.project_root, on_read=c.on_read,
                               env=c.env, rules=c.rules, managed_roots=c.managed_roots,
                               asker=self._asker(c.asker_for(record.call_id, record.waits.append))
                               if c.asker_for else None,
                               questioner=c.questioner_for(record.call_id) if c.questioner_for else None,
                               on_output=self._progress(record.call_id), publish_live=self._live,
                               model_accepts_images=c.resolved.capabilities.images, config=c.config)
        with hooks.tool_call(record.name, record.call_id, self.attempt and self.attempt.parent,
                             known=record.name in c.tools) as traced:
            gate = ToolGate(c.hook_run(), c.assistant_id, c.user_hooks, c.hooks)
            tool_input, tool_ctx, refused = await gate.before(record.name, record.call_id, tool_input, tool_ctx)
            if refused is not None:
                settlement: ToolSucceeded | ToolErrored = refused
            else:
                settlement = await c.tools.run(record.name, tool_input, tool_ctx)
                ran.append(True)
                settlement = await gate.after(record.name, record.call_id, tool_input, settlement)
            if traced is not None:
                traced.settled(settlement.error.type if isinstance(settlement, ToolErrored) else None)
        if isinstance(settlement, ToolErrored) and settlement.error.type in session_errors.DECLINES:
            # E2 (digest 5.4): a decline without feedback fails the assistant and ends the drain as a user interrupt
            self.outcome.declined = True
            self.outcome.failure = self.outcome.failure or settlement.error
            self.refusal = AccessRefused(INTERRUPTED_TOOL, session_errors.ABORTED)  # the turn stops: no call after it
        # the tool is done: bounding (which may write a Managed Tool Output File) and publishing the one settlement
        # must not be torn by an interrupt
        await shielded(self._bound_and_publish(record, settlement))

    def _asker(self, ask: Asker) -> Asker:
        """A call's asker that stops asking once the user refused one of the Step's calls: a refusal with feedback
        fails the calls that would ask after it with that feedback (those waiting already are answered with it)."""

        async def asking(need: PermissionAsk) -> None:
            if self.refusal is not None:
                raise AccessRefused(self.refusal.message, self.refusal.type)
            try:
                if self.ctx.user_hooks is not None and self.ctx.config.hooks:
                    async with anyio.create_task_group() as told:  # the Notification hooks hear of it meanwhile
                        told.start_soon(self._notify, need)
                        await ask(need)
                else:
                    await ask(need)
            except Correction as corrected:
                self.refusal = self.refusal or corrected.elsewhere()
                raise

        return asking

    async def _notify(self, need: PermissionAsk) -> None:
        assert self.ctx.user_hooks is not None
        await self.ctx.user_hooks.notify(self.ctx.hook_run(), "Notification", {
            "notification_type": "permission_prompt",
            "message": f"Permission needed: {need.action} {', '.join(need.resources)}"})

    def _progress(self, call_id: str) -> Callable[[str], None]:
        """Publishes a running call's output live as it arrives (called on the event loop): the tail of everything
        so far, each time."""
        tail = ""

        def on_output(text: str) -> None:
            nonlocal tail
            tail = (tail + text)[-PROGRESS_TAIL_CHARS:]
            self._live(ev.ToolProgress(**self._ids(), callID=call_id, structured={},
                                       content=[ToolTextContent(text=tail)]))

        return on_output

    async def _bound_and_publish(self, record: _Call, settlement: ToolSucceeded | ToolErrored) -> None:
        c = self.ctx
        if not c.tools.within_bounds(settlement, c.max_output_lines, c.max_output_bytes):  # a file may be written
            settlement = await anyio.to_thread.run_sync(c.tools.bound, settlement, c.max_output_lines,
                                                        c.max_output_bytes)
        self._publish_settlement(record, settlement)

    def _publish_settlement(self, record: _Call, settlement: ToolSucceeded | ToolErrored | HostedResult) -> None:
        """Queue a call's one settlement (a second one for the same call is dropped); queued writes commit in order,
        so settlements are published one at a time and all before the terminal."""
        if record.settled:
            return
        ids = self._ids()
        data: ev.ToolSuccess | ev.ToolFailed
        if isinstance(settlement, HostedResult):
            hosted = settlement.result
            if hosted.is_error:
                data = ev.ToolFailed(**ids, callID=record.call_id, result=hosted.result, error=SessionErrorInfo(
                    type=session_errors.TOOL_EXECUTION, message=hosted.text or "The provider's tool failed"))
            else:
                data = ev.ToolSuccess(**ids, callID=record.call_id, content=settlement.content,
                                      result=hosted.result, executed=True, resultState=hosted.metadata)
        else:
            data = local_settlement(self.ctx.session_id, self.ctx.assistant_id, record.call_id, settlement,
                                    record.waits)
        # committed now (clients see a finished call while others still run), waited for by the terminal
        self._defer(data, lazy=False)
        record.settled = True

    def _fail_unsettled(self, error: SessionErrorInfo) -> None:
        for record in self.calls.values():
            if not record.settled:
                self._publish_settlement(record, ToolErrored(error))

    # --- settlement -----------------------------------------------------------------------------------

    async def _settle(self) -> None:
        error = self.outcome.error
        if isinstance(error, ContextOverflowError) and self.ctx.hold_overflow and not self.outcome.started:
            self.outcome.overflow = True
            return
        missing = "The provider did not return a result for this tool call" if error is None else str(error)
        unsettled = session_errors.TOOL_RESULT_MISSING if error is None else session_errors.ABORTED
        self._fail_unsettled(SessionErrorInfo(type=unsettled, message=missing))
        ids = self._ids()
        if error is None and self.outcome.finish == "content-filter":
            self.outcome.failure = SessionErrorInfo(type=session_errors.PROVIDER_CONTENT_FILTER,
                                                    message=CONTENT_FILTERED)
        elif error is not None:
            self.outcome.failure = error.to_session_error()
        if error is not None and not self.outcome.evidence and self.ctx.may_retry(error):
            # the retry is scheduled on an assistant that exists; its next attempt restarts the same message
            self._ensure_started()
            self.outcome.retry = True
            return
        self._ensure_started()  # a Step that reached its provider call always ends on an assistant message
        u = self.usage
        tokens = Tokens(input=u.input, output=u.output, reasoning=u.reasoning,
                        cache=TokenCache(read=u.cache_read, write=u.cache_write))
        cost = step_cost(u, self.ctx.resolved.cost)
        snapshot, files = await self.ctx.files.end()
        if self.outcome.failure is not None:
            await self._terminal(ev.StepFailed(**ids, error=self.outcome.failure, cost=cost, tokens=tokens,
                                               snapshot=snapshot, files=files))
        else:
            await self._terminal(ev.StepEnded(**ids, finish=self.outcome.finish or "other", cost=cost,
                                              tokens=tokens, snapshot=snapshot, files=files))

    async def _terminal(self, data) -> None:
        """The Step's one terminal event; set before the write so an interrupt arriving during it adds no other."""
        self.terminal = True
        await self._append(data)

    async def _abort(self, step_error: SessionErrorInfo | None = None) -> None:
        """End an interrupted (or broken) Step: its local calls' tasks have stopped already (their group ended)."""
        await self._close_open_blocks()
        self._fail_unsettled(SessionErrorInfo(type=session_errors.ABORTED, message=INTERRUPTED_TOOL))
        if step_error is not None:
            self._ensure_started()  # a defect fails the Step on its assistant, even before any output
        if self.outcome.started and not self.terminal:
            self.outcome.failure = step_error or SessionErrorInfo(type=session_errors.ABORTED, message=INTERRUPTED_STEP)
            snapshot, files = await self.ctx.files.end()
            await self._terminal(ev.StepFailed(**self._ids(), error=self.outcome.failure, snapshot=snapshot,
                                               files=files))
        await self._flush()
