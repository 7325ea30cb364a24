"""The Session runner: one drain promotes eligible input at Safe Step Boundaries and runs Steps until no
immediate continuation remains; it owns retries, the step allowance and orphan reconciliation."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import anyio

from ...schema import events as ev
from ...schema import session_errors
from ...schema.common import ModelRef, SessionErrorInfo
from ...schema.ids import message_id
from ..agents import BUILD_PROMPT, AgentNotFoundError, resolve_agent
from ..attachments import load_attachments
from ..authority import Authority
from ..compaction.compactor import CompactionSettings, Compactor
from ..config import ConfigError, global_config_dir, load_config
from ..credentials import CredentialStore
from ..instructions.algebra import InstructionsBlocked
from ..instructions.checkpoint import CheckpointPreparer
from ..instructions.nearby import NearbyInstructions
from ..llm import model as llm
from ..llm.catalog import configured_secrets, model_ref_from_string, resolve_model
from ..llm.errors import ProviderError
from ..llm.providers import load_adapter
from ..localfs import all_local
from ..location import resolve_location
from ..permission import disabled
from ..permission_requests import PermissionRequests
from ..questions import QuestionRequests
from ..session import admission
from ..session.history import HistoryCache
from ..session.service import require_session
from ..store import Reader, Store, Tx
from ..tools.registry import ToolRegistry, default_registry
from .boundary import Boundary
from .clock import Clock
from .coordinator import Drain, DrainFailure, DrainInterrupted
from .lowering import LoweredHistory
from .retry import BASE_DELAY_MS, base_delay_ms, may_retry, retry_delay_ms
from .step import INTERRUPTED_STEP, Step, StepContext, shielded
from .title import SessionTitles

if TYPE_CHECKING:
    from ..runtime import Runtime

log = logging.getLogger(__name__)

LOCAL_RECHECK_S = 10.0  # how long a Location's "all on local mounts" verdict stands before a thread sample rechecks

MAX_STEPS_NOTICE = (
    "You have reached the maximum number of steps this agent may take, so tools are no longer available. "
    "Reply with text only: say that the step limit was reached, summarise what has been done, list what "
    "remains, and recommend how to continue."
)


SUPERSEDED = SessionErrorInfo(type=session_errors.ABORTED,
                              message="Superseded: history was compacted and the Step rebuilt on the checkpoint")


@dataclass(frozen=True)
class PhysicalAttempt:
    """One provider request on the wire, numbered from 1 while failures before any output are retried. Each retry is
    its own Step, whose attempt reuses the assistant message of the one that failed (no durable output exists)."""

    number: int = 1
    assistant_id: str | None = None  # None: the first attempt's Step makes a new assistant message

    @property
    def retries(self) -> int:
        """Retries made before this attempt."""
        return self.number - 1

    def retry(self, assistant_id: str) -> PhysicalAttempt:
        """The next attempt, on the assistant message this one used."""
        return PhysicalAttempt(self.number + 1, assistant_id)


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
    credentials: CredentialStore | None = None  # keys connected through the API, read at each Step's boundary


class Runner:
    def __init__(self, deps: RunnerDeps) -> None:
        self.deps = deps
        self.history = HistoryCache()
        self.lowered = LoweredHistory()
        self.compactor = Compactor(deps.store, deps.clock, deps.retry_base_delay_ms)
        self._local: dict[str, tuple[bool, float]] = {}  # Location directory -> (all on local mounts, when checked)

    # --- helpers ------------------------------------------------------------------------------------

    async def _read(self, fn):
        return await self.deps.store.read(fn)

    async def _boundary(self, session_id: str) -> Boundary:
        session = await self._read(lambda reader: require_session(reader, session_id))
        directory = session.location.directory
        env = self.deps.env

        def _sample(inline: bool) -> Boundary:
            location = resolve_location(directory, session.location.workspaceID)
            try:
                config = load_config(location.directory, location.project_root, env)
            except ConfigError as bad:
                raise DrainFailure(SessionErrorInfo(type=session_errors.CONFIG_INVALID, message=str(bad))) from None
            if self.deps.credentials is not None:
                config = self.deps.credentials.apply(config)
            try:
                agent = resolve_agent(config, session.agent)
            except AgentNotFoundError as missing:
                raise DrainFailure(SessionErrorInfo(type=session_errors.AGENT_NOT_FOUND,
                                                    message=str(missing))) from None
            b = Boundary(session, agent, config, location)
            if not (inline and config.instructions):  # configured patterns may glob anywhere: not on the loop
                b.instruction_files = self.deps.instructions.read_files(b)
            if not inline:
                extra = env.get("OPENCODE_CONFIG")
                paths = [location.directory, global_config_dir(env).resolve()]
                paths += [Path(extra).expanduser().resolve()] if extra else []
                self._local[directory] = (all_local(paths), time.monotonic())
            return b

        # Sampling is ~60 stats and a few small reads. On a local filesystem they run here: in a worker thread each
        # would wait for the interpreter lock again while the loop is busy (~20 ms a boundary under load). Where
        # any of it is on a mount that can hang, or not yet known, it runs in a thread, which also rechecks.
        local, checked = self._local.get(directory, (False, 0.0))
        if local and time.monotonic() - checked < LOCAL_RECHECK_S:
            return _sample(True)
        return await anyio.to_thread.run_sync(_sample, False)

    def _model_ref(self, b: Boundary) -> ModelRef | None:
        """The model this Step names: the session's, else its agent's, else the configured default."""
        return b.session.model or b.agent.model or (model_ref_from_string(b.config.model) if b.config.model else None)

    # --- the drain --------------------------------------------------------------------------------------

    async def drain(self, session_id: str, force: bool) -> None:
        store = self.deps.store
        await self._run_barrier(session_id)
        if not force and not await self._read(lambda reader: reader.pending.any_promotable(session_id)):
            return
        await self.reconcile_orphans(session_id)
        step = 1
        continuation = False
        first = True
        attempt = PhysicalAttempt()
        rebuild = False  # the same logical Step again, after a compaction: nothing is promoted for it
        recover_overflow = True  # one overflow-triggered compaction per logical Step
        try:
            while True:
                if not (first or continuation or rebuild or attempt.retries) and \
                        not await self._read(lambda reader: reader.pending.any_promotable(session_id)):
                    return  # the turn is over and nothing waits: no boundary to sample for a Step that won't run
                b = await self._boundary(session_id)
                try:
                    baseline = await self.deps.instructions.prepare(b)
                except InstructionsBlocked as blocked:
                    raise DrainFailure(SessionErrorInfo(type=session_errors.INSTRUCTIONS_UNAVAILABLE,
                                                        message=str(blocked))) from None
                if attempt.retries == 0 and not rebuild:  # a retry repeats its Step's request: nothing new joins it
                    scope: admission.PromotionScope = "steer" if continuation else "input"
                    promoted = await store.write(partial(admission.promote, session_id=session_id, scope=scope))
                    if promoted:
                        step = 1  # new user input resets the allowance, once per boundary
                    elif not continuation and not (first and force and await self._needs_response(session_id)):
                        return
                first = False
                retries = attempt.retries
                # a retry is the next Step: it needs allowance left after this one
                allowance_left = b.agent.steps is None or step + 1 <= b.agent.steps
                outcome, assistant_id = await self._step(
                    b, baseline, step, attempt.assistant_id,
                    partial(may_retry, retries_so_far=retries, allowance_left=allowance_left), recover_overflow)
                rebuild = outcome is None or outcome.overflow
                if rebuild:
                    recover_overflow = recover_overflow and outcome is None
                    if attempt.assistant_id is not None:
                        # the retry's assistant now lies before the checkpoint: the rebuilt Step starts a new one
                        await self._close_assistant(session_id, attempt.assistant_id, SUPERSEDED)
                        attempt = PhysicalAttempt(attempt.number)
                    continue
                recover_overflow = True
                step += 1
                if outcome.retry and outcome.error is not None:
                    attempt = attempt.retry(assistant_id)
                    delay = retry_delay_ms(attempt.retries, outcome.error, self.deps.retry_base_delay_ms)
                    scheduled = ev.RetryScheduled(sessionID=session_id, assistantMessageID=assistant_id,
                                                  attempt=attempt.number, at=self.deps.clock.now_ms() + int(delay),
                                                  error=outcome.error.to_session_error())
                    await store.append(scheduled)
                    await self.deps.clock.sleep_ms(delay)
                    continue
                attempt = PhysicalAttempt()
                if outcome.declined:
                    raise DrainInterrupted("user")
                if outcome.failure is not None:
                    raise DrainFailure(outcome.failure)
                # a last (tool-less) step never asks for another one, whatever the model did
                continuation = outcome.needs_continuation and not (b.agent.steps is not None
                                                                   and step > b.agent.steps)
                if not continuation:
                    await self._run_barrier(session_id)
        except BaseException as exc:
            if attempt.assistant_id is not None:  # the assistant waiting for its retry never got to run it
                await shielded(self._close_assistant(session_id, attempt.assistant_id, _failure_of(exc)))
            raise

    async def _close_assistant(self, session_id: str, assistant_id: str, error: SessionErrorInfo) -> None:
        """Fail an assistant message that is still open, so no Step is left without its terminal event."""

        def _close(tx: Tx) -> None:
            message = tx.messages.load(assistant_id)
            if message is not None and "completed" not in message["time"]:
                tx.append(ev.StepFailed(sessionID=session_id, assistantMessageID=assistant_id, error=error))

        await self.deps.store.write(_close)

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
                    aborted = error is not None and error["type"] == session_errors.ABORTED
                    return m.get("finish") == "tool-calls" or aborted
            return False

        return await self._read(_q)

    async def _step(self, b: Boundary, baseline: str, step: int, assistant_id: str | None,
                    retry_policy: Callable[[ProviderError], bool], recover_overflow: bool = False):
        """Build and stream one Step. Returns its outcome and the assistant message ID it used; the outcome is
        None when history was compacted instead of sending an over-budget request (the Step is to be rebuilt)."""
        session_id = b.session.id
        assistant_id = assistant_id or message_id()
        ref = self._model_ref(b)
        try:
            resolved = resolve_model(b.config, ref, self.deps.env)
        except ProviderError as error:
            failure = error.to_session_error()
            if ref is not None:
                # the Step cannot call the model it names: its assistant message says why, before any provider call
                await self.deps.store.write(lambda tx: (
                    tx.append(ev.StepStarted(sessionID=session_id, assistantMessageID=assistant_id,
                                             agent=b.agent.name, model=ref)),
                    tx.append(ev.StepFailed(sessionID=session_id, assistantMessageID=assistant_id, error=failure))))
            raise DrainFailure(failure) from None
        model_ref = ModelRef(id=resolved.model_id, providerID=resolved.provider_id,
                             variant=ref.variant if ref else None)
        history = await self._read(lambda reader: self.history.load(reader, session_id))
        last_step = b.agent.steps is not None and step >= b.agent.steps
        rules = b.rules(self.deps.env)
        messages, unread = self.lowered.lower(session_id, history, model_ref)
        if unread:
            # re-checked under this Step's rules: the file, or the rules, may have changed since admission
            authority = Authority(b.location.directory, rules)
            loaded = await anyio.to_thread.run_sync(load_attachments, messages, authority, abandon_on_cancel=True)
            messages = self.lowered.keep_loaded(session_id, loaded)
        extra: list[llm.LLMMessage] = [llm.UserMessage([llm.TextPart(MAX_STEPS_NOTICE)])] if last_step else []
        messages.extend(extra)
        offered = [] if last_step else [n for n in self.deps.tools.offered(b.config) if not disabled(rules, n)]
        tools = self.deps.tools.definitions(offered)
        request = llm.LLMRequest(
            model=resolved, system=[s for s in (b.agent.prompt or BUILD_PROMPT, baseline) if s], messages=messages,
            tools=tools, tool_choice="none" if last_step else "auto", prompt_cache_key=session_id,
            controls=_controls(b, resolved), options=resolved.options,
        )
        settings = CompactionSettings.of(b.config.compaction)
        await load_adapter(resolved.protocol)
        provider = self.deps.provider_for(resolved)
        secrets = tuple(configured_secrets(b.config, self.deps.env, resolved))
        cut = self.compactor.over_budget(session_id, assistant_id, settings, resolved, history, request, extra)
        if cut is not None:
            failed = await self.compactor.compact(session_id, "auto", settings, resolved, provider, history, cut,
                                                  secrets=secrets)
            if failed is not None:
                raise DrainFailure(failed)
            return None, assistant_id
        on_read = self.deps.on_read(b, assistant_id) if self.deps.on_read else None
        permissions, questions = self.deps.permissions, self.deps.questions
        limits = b.config.tool_output
        ctx = StepContext(
            store=self.deps.store, session_id=session_id, assistant_id=assistant_id, agent=b.agent.name,
            model_ref=model_ref, resolved=resolved, provider=provider, request=request,
            tools=self.deps.tools, tools_enabled=not last_step, directory=b.location.directory,
            project_root=b.location.project_root, on_read=on_read, env=self.deps.env, rules=rules,
            secrets=secrets, may_retry=retry_policy, hold_overflow=recover_overflow and settings.auto,
            asker_for=None if permissions is None else partial(permissions.asker, session_id, b.location.project_id,
                                                                 assistant_id),
            questioner_for=None if questions is None else partial(questions.questioner, session_id, assistant_id),
            max_output_lines=_positive(limits.max_lines if limits else None),
            max_output_bytes=_positive(limits.max_bytes if limits else None),
            managed_roots=() if self.deps.tools.outputs is None else (self.deps.tools.outputs.root,),
        )
        outcome = await Step(ctx).run()
        if outcome.overflow:
            # held back before any output: one compaction, then the same logical Step is rebuilt
            failed = await self.compactor.compact(session_id, "auto", settings, resolved, provider, history,
                                                  secrets=secrets)
            if failed is not None:
                overflow = outcome.error.to_session_error() if outcome.error else failed
                await self.deps.store.write(lambda tx: (
                    tx.append(ev.StepStarted(sessionID=session_id, assistantMessageID=assistant_id,
                                             agent=b.agent.name, model=model_ref)),
                    tx.append(ev.StepFailed(sessionID=session_id, assistantMessageID=assistant_id,
                                            error=overflow))))
                raise DrainFailure(overflow)
            return outcome, assistant_id
        if self.deps.titles is not None:
            self.deps.titles.after_step(b.session, b.config, resolved)
        return outcome, assistant_id

    # --- orphan reconciliation ---------------------------------------------------------------------------

    async def reconcile_orphans(self, session_id: str) -> int:
        """Fail tool calls an earlier process left streaming or running, and close its open assistant; never
        re-run them. Returns how many tool calls were failed."""

        def _reconcile(tx: Tx) -> int:
            failed = 0
            for message in tx.messages.open_assistants(session_id):
                for part in message["content"]:
                    if part["type"] == "tool" and part["state"]["status"] in ("streaming", "running"):
                        tx.append(ev.ToolFailed(
                            sessionID=session_id, assistantMessageID=message["id"], callID=part["id"],
                            error=SessionErrorInfo(type=session_errors.TOOL_STALE,
                                                   message=f"Tool execution interrupted: {part['name']}")))
                        failed += 1
                tx.append(ev.StepFailed(sessionID=session_id, assistantMessageID=message["id"],
                                        error=SessionErrorInfo(type=session_errors.ABORTED, message=INTERRUPTED_STEP)))
            return failed

        if not await self._read(lambda reader: reader.messages.open_assistants(session_id)):
            return 0  # the common case: nothing left open, so no write transaction at all
        return await self.deps.store.write(_reconcile)

    # --- manual compaction ---------------------------------------------------------------------------------

    async def _run_barrier(self, session_id: str) -> None:
        """Run a pending manual compaction barrier; whatever its result, the barrier is consumed and promotion
        resumes."""
        input_id = await self._read(lambda reader: reader.pending.barrier(session_id))
        if input_id is None:
            return
        b = await self._boundary(session_id)
        settings = CompactionSettings.of(b.config.compaction)
        try:
            resolved = resolve_model(b.config, self._model_ref(b), self.deps.env)
        except ProviderError as error:
            await self.deps.store.append(ev.CompactionFailed(sessionID=session_id, reason="manual",
                                                             error=error.to_session_error(), inputID=input_id))
            return
        history = await self._read(lambda reader: self.history.load(reader, session_id))
        await load_adapter(resolved.protocol)
        await self.compactor.compact(session_id, "manual", settings, resolved, self.deps.provider_for(resolved),
                                     history, input_id=input_id,
                                     secrets=tuple(configured_secrets(b.config, self.deps.env, resolved)))


def make_drain_factory(
    *,
    tools: ToolRegistry | None = None,
    provider: Callable[[llm.ResolvedModel], llm.Provider] | None = None,
    clock: Clock | None = None,
    titles: bool = True,
) -> Callable[[Runtime], Drain]:
    """A `RuntimeOptions.drain_factory` running this runner over the runtime's store; defaults are the real
    providers, the built-in tools, the wall clock and background session titles."""

    def factory(runtime: Runtime) -> Drain:
        options = runtime.options
        retry_base = options.retry_base_delay_ms
        deps = RunnerDeps(store=runtime.store, env=options.env, provider_for=provider or runtime.providers.for_model,
                          instructions=CheckpointPreparer(runtime.store, options.env),
                          on_read=NearbyInstructions(runtime.store).hook,
                          retry_base_delay_ms=base_delay_ms(options.env) if retry_base is None else retry_base,
                          permissions=runtime.permissions, questions=runtime.questions,
                          credentials=runtime.credentials)
        if tools is not None:
            deps.tools = tools
        if deps.tools.outputs is None:
            deps.tools.outputs = runtime.outputs
        if clock is not None:
            deps.clock = clock
        if titles:
            deps.titles = SessionTitles(runtime.store, options.env, deps.provider_for, runtime.spawn)
        return Runner(deps).drain

    return factory


runner_drain_factory = make_drain_factory()


def _controls(b: Boundary, model: llm.ResolvedModel) -> llm.GenerationControls:
    """The agent's sampling controls over the model's own, and its output limit; a model that refuses a temperature
    is sent none from the agent."""
    agent = llm.GenerationControls(
        temperature=b.agent.temperature if model.capabilities.temperature else None,
        top_p=b.agent.top_p,
    )
    return agent.over(model.controls).over(llm.GenerationControls(max_output_tokens=model.output_limit))


def _positive(value: int | None) -> int | None:
    """A configured bound, when it is a usable one (OpenCode takes positive integers only)."""
    return value if value is not None and value > 0 else None


def _failure_of(exc: BaseException) -> SessionErrorInfo:
    if isinstance(exc, DrainFailure):
        return exc.error
    if isinstance(exc, Exception):
        return SessionErrorInfo(type=session_errors.UNKNOWN, message=f"{type(exc).__name__}: {exc}")
    return SessionErrorInfo(type=session_errors.ABORTED, message=INTERRUPTED_STEP)
