"""The Session runner: one drain promotes eligible input at Safe Step Boundaries and runs Steps until no immediate
continuation remains, moving its DrainState (`drain`) on with each Step's outcome: retries before any output, the
step allowance, rebuilds after a compaction. Its parts: boundary sampling (`sampling`), Model Context assembly
(`model_context`), compaction around Steps (`overflow`), orphan reconciliation (`orphans`; the runner runs a lost
host's idempotent calls again) and one Step's stream (`step`); `core.wiring` assembles it for a runtime."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any, Protocol

import anyio

from ...schema import events as ev
from ...schema import session_errors
from ...schema.common import ModelRef, SessionErrorInfo
from ...schema.ids import message_id
from ..agents import BUILD_PROMPT, AgentNotFoundError, resolve_agent
from ..boundary import Boundary
from ..cancellation import shielded
from ..compaction.compactor import CompactionSettings, Compactor
from ..config import ConfigSource
from ..instructions.algebra import InstructionsBlocked
from ..llm import model as llm
from ..llm.errors import ProviderError
from ..llm.retry import BASE_DELAY_MS, Clock, may_retry, retry_delay_ms
from ..permission import PermissionRequests, PermissionWait, with_session_rules
from ..plugins import PluginHookError, PluginHooks, ProviderRequest
from ..questions import QuestionRequests
from ..session import admission
from ..session.history import HistoryCache
from ..snapshot import Snapshots
from ..snapshot.steps import StepFiles
from ..store import Reader, Store, confirm_lease
from ..telemetry import hooks, telemetry
from ..tools.registry import ToolErrored, ToolRegistry, ToolSet, ToolSucceeded, default_registry
from ..tools.tool import ToolContext
from ..userhooks import HookRun, UserHooks
from .context_record import ContextRecorder, StepSources
from .coordinator import DrainFailure, DrainInterrupted
from .drain import DrainState, Next
from .gate import ToolGate
from .model_context import ModelCall, ModelContext, ModelContextBuilder, model_call, named_model
from .orphans import Orphan, close_assistant, find_orphans, settle_orphans
from .overflow import StepCompaction
from .sampling import BoundarySampler
from .step import INTERRUPTED_STEP, Step, StepContext, StepOutcome, local_settlement
from .title import SessionTitles

log = logging.getLogger(__name__)

# How many times Stop hooks may send the agent on within one drain (then it stops whatever they say).
MAX_STOP_CONTINUES = 3


class InstructionPreparer(Protocol):
    """The instruction seam: returns the Instruction Baseline text to send after the agent's system text,
    publishing any Instruction Update first; raises InstructionsBlocked before the first complete baseline.
    `read_files` (blocking) reads what `prepare` needs from disk; the runner calls it in the same worker-thread call
    that samples the boundary, and hands its result over as `Boundary.instruction_files`."""

    def read_files(self, boundary: Boundary) -> Any: ...

    async def prepare(self, boundary: Boundary) -> str: ...


class NoInstructions:
    def read_files(self, boundary: Boundary) -> None:
        return None

    async def prepare(self, boundary: Boundary) -> str:
        return ""


@dataclass
class RunnerDeps:
    store: Store
    env: Mapping[str, str]
    provider_for: Callable[[llm.ResolvedModel], llm.Provider]  # the runtime's `Providers.for_model`, say
    tools: ToolRegistry = field(default_factory=default_registry)
    clock: Clock = field(default_factory=Clock)
    instructions: InstructionPreparer = field(default_factory=NoInstructions)
    on_read: Callable[[Boundary, str], Callable[[Path], Any]] | None = None
    titles: SessionTitles | None = None
    retry_base_delay_ms: float = BASE_DELAY_MS
    permissions: PermissionRequests | None = None  # None: nobody can answer, an `ask` fails the call
    questions: QuestionRequests | None = None
    config: ConfigSource | None = None  # the runtime's configuration source; None: one of the runner's own over env
    snapshots: Snapshots | None = None  # None: Steps take no file snapshots
    hooks: PluginHooks | None = None  # the loaded plugins' hooks; None: no plugin hooks
    user_hooks: UserHooks | None = None  # runs the config's hooks (`hooks` in opencode.json); None: none run
    host: str = ""  # this process as its execution spans name it (a lease owner's name)


@dataclass(frozen=True)
class _Stepped:
    """What running one Step came to: its outcome, or None when history was compacted instead of sending it."""

    outcome: StepOutcome | None
    assistant_id: str


class Runner:
    def __init__(self, deps: RunnerDeps) -> None:
        self.deps = deps
        self.history = HistoryCache()
        configs = deps.config if deps.config is not None else ConfigSource(deps.env)
        self.sampler = BoundarySampler(deps.store, configs, deps.env, deps.instructions)
        self.contexts = ModelContextBuilder(deps.store, deps.env, deps.tools, self.history)
        self.recorder = ContextRecorder(deps.store.redactor)
        self.compaction = StepCompaction(deps.store, Compactor(deps.store, deps.clock, deps.retry_base_delay_ms),
                                         self.history, deps.env, deps.provider_for, deps.user_hooks)

    async def _promotable(self, session_id: str) -> bool:
        return await self.deps.store.read(lambda reader: reader.pending.any_promotable(session_id))

    # --- the drain --------------------------------------------------------------------------------------

    async def drain(self, session_id: str, force: bool) -> None:
        if telemetry.tracer is None:
            return await self._drain(session_id, force)
        # the execution joins the trace of the caller whose input waits longest (kept with the admitted input)
        parent = await self.deps.store.read(lambda reader: reader.pending.first_trace(session_id))
        with hooks.execution(session_id, self.deps.host, parent):
            await self._drain(session_id, force)

    async def _drain(self, session_id: str, force: bool) -> None:
        store = self.deps.store
        await self._run_barrier(session_id)
        if not force and not await self._promotable(session_id):
            return
        await self.deps.tools.start()
        await self._reconcile_orphans(session_id)
        state = DrainState()
        stop_continues = 0  # times a Stop hook sent the agent on in this drain
        try:
            while True:
                if state.next is Next.INPUT and not await self._promotable(session_id):
                    return  # the turn is over and nothing waits: no boundary to sample for a Step that won't run
                b = await self.sampler.sample(session_id)
                try:
                    baseline = await self.deps.instructions.prepare(b)
                except InstructionsBlocked as blocked:
                    raise DrainFailure(SessionErrorInfo(type=session_errors.INSTRUCTIONS_UNAVAILABLE,
                                                        message=str(blocked))) from None
                scope = state.promotes
                if scope is not None:
                    if await store.write(partial(admission.promote, session_id=session_id, scope=scope)):
                        state = state.promoted()
                    elif state.next is not Next.CONTINUE and \
                            not (state.next is Next.FIRST and force and await self._needs_response(session_id)):
                        return
                # a retry is the next Step: it needs allowance left after this one
                allowance_left = b.agent.steps is None or state.step + 1 <= b.agent.steps
                retry_policy = partial(may_retry, retries_so_far=state.retrying.retries, allowance_left=allowance_left)
                with hooks.step(session_id, b.agent.name, state.step, state.retrying.attempt) as traced:
                    stepped = await self._step(b, baseline, state, retry_policy)
                    if traced is not None:
                        traced.settled(stepped.assistant_id, stepped.outcome)
                outcome = stepped.outcome
                if outcome is None or outcome.overflow:
                    if state.retrying.assistant_id is not None:
                        await self.compaction.supersede(session_id, state.retrying.assistant_id)
                    state = state.compacted(overflowed=outcome is not None)
                    continue
                if outcome.retry and outcome.error is not None:
                    state = state.retry(stepped.assistant_id)
                    delay = retry_delay_ms(state.retrying.retries, outcome.error, self.deps.retry_base_delay_ms)
                    await store.append(ev.RetryScheduled(
                        sessionID=session_id, assistantMessageID=stepped.assistant_id, attempt=state.retrying.attempt,
                        at=self.deps.clock.now_ms() + int(delay), error=outcome.error.to_session_error()))
                    with hooks.retrying(delay, outcome.error.to_session_error().type, state.retrying.attempt):
                        await self.deps.clock.sleep_ms(delay)
                    continue
                # a last (tool-less) step never asks for another one, whatever the model did
                last = b.agent.steps is not None and state.step >= b.agent.steps
                state = state.settled(continues=outcome.needs_continuation and not last)
                if outcome.declined:
                    raise DrainInterrupted("user")
                if outcome.failure is not None:
                    raise DrainFailure(outcome.failure)
                if state.next is Next.INPUT:
                    if stop_continues < MAX_STOP_CONTINUES and await self._stop_hooks(b, stop_continues > 0):
                        stop_continues += 1
                    await self._run_barrier(session_id)
        except BaseException as exc:
            waiting = state.retrying.assistant_id
            if waiting is not None:  # the assistant waiting for its retry never got to run it
                await shielded(close_assistant(store, session_id, waiting, _failure_of(exc)))
            raise

    async def _stop_hooks(self, b: Boundary, active: bool) -> bool:
        """The agent is done with its turn: the Stop hooks (SubagentStop for a child session) may send it on with
        a reason, admitted as synthetic input the next Step reads. Whether they did."""
        user_hooks = self.deps.user_hooks
        if user_hooks is None or not b.config.hooks:
            return False
        session_id = b.session.id
        run = HookRun(session_id, b.location.directory, b.location.project_root, self.deps.env, b.config)
        reason = await user_hooks.stop(run, subagent=b.session.parentID is not None, active=active)
        if reason is None:
            return False
        event = "SubagentStop" if b.session.parentID is not None else "Stop"
        data = ev.SyntheticInputData(text=reason, description=f"{event} hook")
        await self.deps.store.write(partial(admission.admit, session_id=session_id, input_id=message_id(),
                                            input=ev.SyntheticInput(data=data)))
        return True

    async def _needs_response(self, session_id: str) -> bool:
        """A forced drain with nothing to promote continues only when history awaits an assistant reply."""

        def _q(reader: Reader) -> bool:
            for entry in reversed(self.history.load(reader, session_id)):
                m = entry.message
                if m["type"] in ("user", "synthetic"):
                    return True
                if m["type"] == "assistant":
                    # unanswered tool results, or a step an interruption cut short
                    error = m.get("error")
                    cut_short = error is not None and error["type"] in (session_errors.ABORTED,
                                                                        session_errors.HOST_LOST)
                    return m.get("finish") == "tool-calls" or cut_short
            return False

        return await self.deps.store.read(_q)

    # --- orphans a lost host left ----------------------------------------------------------------------------

    async def _reconcile_orphans(self, session_id: str) -> None:
        """Settle what a lost host left open before the first Step: an idempotent tool call it may have been running
        runs again and its result is recorded; every other open call fails (the model reads why) and the open
        assistant messages fail as `host.lost`. Nothing else is sent again: the next Step is a new one."""
        store = self.deps.store
        left = await store.read(lambda reader: find_orphans(reader, session_id))
        if left is None:
            return
        settled = {}
        if any(o.running and not o.hosted for o in left):
            # the tools of the session's boundary: those a source lists per boundary (`task`, MCP) included
            b = await self.sampler.sample(session_id)
            tools = self.deps.tools.snapshot(b)
            again = [o for o in left if o.running and not o.hosted and tools.idempotent(o.name)]
            results = await asyncio.gather(*(self._run_again(b, tools, o) for o in again))
            settled = {(o.assistant_id, o.call_id): result for o, result in zip(again, results, strict=True)}
        await store.write(partial(settle_orphans, session_id=session_id, settled=settled))

    async def _run_again(self, b: Boundary, tools: ToolSet, orphan: Orphan) -> ev.ToolSuccess | ev.ToolFailed:
        """Run an idempotent call again for the assistant message that made it, under the rules of the agent that
        made it (as configured at this boundary; the boundary's own agent if that one is gone), through the hooks a
        first run goes through, before and after it runs (`gate.py`)."""
        d, sid = self.deps, b.session.id
        outputs = d.tools.outputs
        waits: list[PermissionWait] = []  # recorded with its settlement, as a first run's are
        try:
            agent = resolve_agent(b.config, orphan.agent)
        except AgentNotFoundError:
            agent = b.agent
        ctx = ToolContext(
            session_id=sid, message_id=orphan.assistant_id, call_id=orphan.call_id, agent=agent.name,
            directory=b.location.directory, project_root=b.location.project_root,
            on_read=d.on_read(b, orphan.assistant_id) if d.on_read else None, env=d.env,
            rules=with_session_rules(agent.rules(b.config.permission, d.env), b.session.permissions),
            asker=None if d.permissions is None else d.permissions.asker(sid, b.location.project_id,
                                                                         orphan.assistant_id, orphan.call_id,
                                                                         waits.append),
            managed_roots=() if outputs is None else (outputs.root,), config=b.config,
            publish_live=lambda data: d.store.publish_live(data, sid))  # its progress, as in a Step
        # the same gate as a first run: the PreToolUse and plugin hooks may refuse it, rewrite its input or ask
        run = HookRun(sid, b.location.directory, b.location.project_root, d.env, b.config)
        gate = ToolGate(run, orphan.assistant_id, d.user_hooks, d.hooks)
        tool_input, ctx, refused = await gate.before(orphan.name, orphan.call_id, dict(orphan.input), ctx)
        if refused is not None:
            settlement: ToolSucceeded | ToolErrored = refused
        else:
            await confirm_lease()  # run again only while the lease cannot have lapsed
            settlement = await gate.after(orphan.name, orphan.call_id, tool_input,
                                          await tools.run(orphan.name, tool_input, ctx))
        limits = b.config.tool_output
        lines = _positive(limits.max_lines if limits else None)
        size = _positive(limits.max_bytes if limits else None)
        if not tools.within_bounds(settlement, lines, size):
            settlement = await anyio.to_thread.run_sync(tools.bound, settlement, lines, size)
        return local_settlement(sid, orphan.assistant_id, orphan.call_id, settlement, waits)

    # --- one Step --------------------------------------------------------------------------------------

    async def _step(self, b: Boundary, baseline: str, state: DrainState,
                    retry_policy: Callable[[ProviderError], bool]) -> _Stepped:
        """Build and stream one Step: its Model Context, unless history is compacted instead of sending it (the Step
        is to be rebuilt), then one Physical Attempt; a context overflow before any output is held back and
        compacted, and the rebuilt Step makes the next one."""
        session_id = b.session.id
        assistant_id = state.retrying.assistant_id or message_id()
        try:
            call = await model_call(b, self.deps.env, self.deps.provider_for)
        except ProviderError as error:
            failure = error.to_session_error()
            ref = named_model(b)
            if ref is not None:
                # the Step cannot call the model it names: its assistant message says why, before any provider call
                await self._fail_unsent(b, assistant_id, ref, failure)
            raise DrainFailure(failure) from None
        context = await self.contexts.build(b, baseline, state.step, call)
        sources = StepSources(b.agent.name, b.agent.prompt or BUILD_PROMPT, baseline, context.history,
                              context.additions, context.request)
        settings = CompactionSettings.of(b.config.compaction)
        if await self.compaction.before_sending(b, settings, assistant_id, call, context):
            return _Stepped(None, assistant_id)
        hooks = self.deps.hooks
        if hooks is not None and hooks.before_request_hooks:
            try:
                request = await hooks.before_request(ProviderRequest(
                    session_id, assistant_id, b.agent.name, call.resolved.provider_id, call.resolved.model_id,
                    context.request))
            except PluginHookError as hook_failed:  # the Step fails unsent, its assistant message says which hook
                failure = hook_failed.to_session_error()
                await self._fail_unsent(b, assistant_id, call.model_ref, failure)
                raise DrainFailure(failure) from None
            context = dataclasses.replace(context, request=request)
        hold_overflow = state.attempt.may_recover_overflow and settings.auto
        files = await StepFiles.begin(self.deps.snapshots, b.location, b.config,
                                      any(context.tools.changes_files(t.name) for t in context.request.tools))
        outcome = await Step(self._step_context(b, assistant_id, call, context, retry_policy, hold_overflow,
                                                files, sources)).run()
        if outcome.overflow:
            await self.compaction.after_overflow(b, settings, assistant_id, call, context, outcome)
        elif self.deps.titles is not None:
            self.deps.titles.after_step(b.session, b.config, call.resolved)
        return _Stepped(outcome, assistant_id)

    async def _fail_unsent(self, b: Boundary, assistant_id: str, ref: ModelRef, failure: SessionErrorInfo) -> None:
        """A Step that fails before its provider call: started and failed in one write."""
        session_id = b.session.id
        await self.deps.store.write(lambda tx: (
            tx.append(ev.StepStarted(sessionID=session_id, assistantMessageID=assistant_id, agent=b.agent.name,
                                     model=ref)),
            tx.append(ev.StepFailed(sessionID=session_id, assistantMessageID=assistant_id, error=failure))))

    def _step_context(self, b: Boundary, assistant_id: str, call: ModelCall, context: ModelContext,
                      retry_policy: Callable[[ProviderError], bool], hold_overflow: bool,
                      files: StepFiles, sources: StepSources) -> StepContext:
        session_id = b.session.id
        on_read = self.deps.on_read(b, assistant_id) if self.deps.on_read else None
        permissions, questions = self.deps.permissions, self.deps.questions
        limits = b.config.tool_output
        outputs = self.deps.tools.outputs
        return StepContext(
            store=self.deps.store, session_id=session_id, assistant_id=assistant_id, agent=b.agent.name,
            model_ref=call.model_ref, resolved=call.resolved, provider=call.provider, request=context.request,
            tools=context.tools, tools_enabled=not context.last_step, directory=b.location.directory,
            project_root=b.location.project_root, on_read=on_read, env=self.deps.env, rules=context.rules,
            secrets=call.secrets, may_retry=retry_policy, hold_overflow=hold_overflow,
            asker_for=None if permissions is None else partial(permissions.asker, session_id, b.location.project_id,
                                                                 assistant_id),
            questioner_for=None if questions is None else partial(questions.questioner, session_id, assistant_id),
            max_output_lines=_positive(limits.max_lines if limits else None),
            max_output_bytes=_positive(limits.max_bytes if limits else None),
            managed_roots=() if outputs is None else (outputs.root,),
            config=b.config, files=files, hooks=self.deps.hooks, user_hooks=self.deps.user_hooks,
            record=partial(self.recorder.record, self.deps.store, session_id, assistant_id, sources, context.request,
                           call.model_ref.wire()),
        )

    # --- manual compaction ---------------------------------------------------------------------------------

    async def _run_barrier(self, session_id: str) -> None:
        input_id = await self.deps.store.read(lambda reader: reader.pending.barrier(session_id))
        if input_id is not None:
            await self.compaction.barrier(await self.sampler.sample(session_id), input_id)


def _positive(value: int | None) -> int | None:
    """A configured bound, when it is a usable one (OpenCode takes positive integers only)."""
    return value if value is not None and value > 0 else None


def _failure_of(exc: BaseException) -> SessionErrorInfo:
    if isinstance(exc, DrainFailure):
        return exc.error
    if isinstance(exc, Exception):
        return SessionErrorInfo(type=session_errors.UNKNOWN, message=f"{type(exc).__name__}: {exc}")
    return SessionErrorInfo(type=session_errors.ABORTED, message=INTERRUPTED_STEP)
