"""Handlers: each protocol operation adapted to core, keyed by operation ID. A handler takes the endpoint's typed
path, query and body models (`Call[Path, Query, Body]`) and returns its declared success value, which the app
encodes through that declaration; what a handler decides beyond adapting lives in core."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Generic, TypeVar, cast

import anyio

from ..core.agents import agent_info
from ..core.commands import discover_commands
from ..core.config import Config, ConfigError
from ..core.config.trust import TrustState
from ..core.fs import list_directory, read_file
from ..core.llm import listing
from ..core.location import Location, require_usable_directory, select_location
from ..core.permission import Authority, PermissionAsk
from ..core.runtime import Runtime
from ..core.session.lifecycle import inbox_item
from ..core.session.requests import file_permission, in_location
from ..core.store import now_ms
from ..core.workspace import available_skills, workspace_authority
from ..protocol import Endpoint
from ..protocol.api import (
    AgentList,
    AttemptCompleteBody,
    AttemptPath,
    CommandList,
    ContextEntryPath,
    CredentialPath,
    CredentialUpdateBody,
    FsEntries,
    FsFindQuery,
    FsListQuery,
    FsReadPath,
    HealthStatus,
    InboxPath,
    InboxUpdateBody,
    IntegrationAnswer,
    IntegrationAttemptAnswer,
    IntegrationAttemptStatusAnswer,
    IntegrationKeyBody,
    IntegrationList,
    IntegrationOAuthBody,
    IntegrationPath,
    LocationQuery,
    McpStatusList,
    PermissionCreated,
    PermissionReplyBody,
    PermissionRequestList,
    PermissionRequestPath,
    ProviderPath,
    PtyAnswer,
    PtyConnectQuery,
    PtyCreateBody,
    PtyList,
    PtyPath,
    PtyTokenAnswer,
    PtyUpdateBody,
    QuestionRequestList,
    QuestionRequestPath,
    ReferenceList,
    SavedPermissionPath,
    SavedPermissionQuery,
    SessionCreateBody,
    SessionDiffQuery,
    SessionEnvironmentBody,
    SessionEventsQuery,
    SessionExportQuery,
    SessionForkBody,
    SessionGenerateBody,
    SessionGenerated,
    SessionImportBody,
    SessionInterrupted,
    SessionInterruptQuery,
    SessionListQuery,
    SessionLogQuery,
    SessionMessagePath,
    SessionMessagesQuery,
    SessionMoveBody,
    SessionPath,
    SessionPermissionCreateBody,
    SessionPromptBody,
    SessionRevertStageBody,
    SessionShellBody,
    SessionStatsQuery,
    SessionSwitchAgentBody,
    SessionSwitchModelBody,
    SessionSyntheticBody,
    SessionUpdateBody,
    SessionViewBody,
    SessionWaitQuery,
    SkillList,
    StepMessagePath,
    TrustGrantBody,
    TrustInfo,
)
from ..schema.catalog import ModelList, ProviderAnswer, ProviderList
from ..schema.errors import (
    ConflictError,
    InvalidRequestError,
    ProviderNotFoundError,
    ServiceUnavailableError,
    SessionExecutionFailedError,
)
from ..schema.events import EventRecord, GlobalDisposed, LogSynced, ServerConnected, SyntheticInputData
from ..schema.ids import SessionID, event_id
from ..schema.input import SessionInputAdmitted
from ..schema.instruction_entry import InstructionEntry, InstructionEntryPut
from ..schema.lifecycle import InboxItem, InboxSyntheticItem, SessionTranscript
from ..schema.location import LocationInfo
from ..schema.mcp import McpServerStatus
from ..schema.message import SessionMessage
from ..schema.model_context import StepModelContext
from ..schema.page import CursorLinks
from ..schema.permission import PermissionSavedInfo, PermissionV2Request
from ..schema.question import QuestionV2Reply, QuestionV2Request
from ..schema.session import FileDiff, RevertState, SessionActive, SessionOwner, SessionV2Info
from ..schema.skill import SkillV2Info
from ..schema.stats import SessionStats
from .host import Host
from .sse import Frames, frame

P = TypeVar("P")
Q = TypeVar("Q")
B = TypeVar("B")


@dataclass(frozen=True)
class Call(Generic[P, Q, B]):
    """One request as its endpoint declares it: the validated path, query and body models (None where the endpoint
    declares none), the endpoint itself, and the server's shutdown."""

    path: P
    query: Q
    body: B
    endpoint: Endpoint
    shutdown: anyio.Event
    host: Host = field(default_factory=Host)  # the server's own services (terminal tickets, the PTY Environment)
    traceparent: str | None = None  # the request's W3C `traceparent` header, when it is a valid one


Handler = Callable[[Runtime, Call[Any, Any, Any]], Awaitable[Any]]
HANDLERS: dict[str, Handler] = {}
Page = tuple[list[Any], CursorLinks]


def op(operation_id: str) -> Callable[[Any], Any]:
    def deco(fn: Any) -> Any:
        HANDLERS[operation_id] = fn
        return fn

    return deco


# --- the server, its Locations and catalog --------------------------------------------------------


@op("v2.health.get")
async def health(rt: Runtime, call: Call[None, None, None]) -> HealthStatus:
    return HealthStatus(healthy=True)


def _location(rt: Runtime, query: LocationQuery | FsListQuery | FsFindQuery) -> Location:
    selector = query.location
    return select_location(rt.location, selector.directory if selector else None,
                           selector.workspace if selector else None)


async def _config(rt: Runtime, loc: Location, endpoint: Endpoint) -> Config:
    """The configuration in effect at `loc`. A broken one fails the request as the operation declares: 503 where
    it declares the configuration may be unavailable (the catalog), else 400 (the contract gives it nothing else)."""
    try:
        return await rt.config.at(loc)
    except ConfigError as bad:
        if ServiceUnavailableError in endpoint.all_errors:
            raise ServiceUnavailableError(f"The configuration cannot be read: {bad}", service="config") from None
        raise InvalidRequestError(str(bad), kind="config") from None


@op("v2.location.get")
async def location_get(rt: Runtime, call: Call[None, LocationQuery, None]) -> LocationInfo:
    return _location(rt, call.query).info()


@op("v2.model.list")
async def model_list(rt: Runtime, call: Call[None, LocationQuery, None]) -> ModelList:
    loc = _location(rt, call.query)
    config = await _config(rt, loc, call.endpoint)
    return ModelList(location=loc.info(), data=listing.models(config, rt.options.env))


@op("v2.provider.list")
async def provider_list(rt: Runtime, call: Call[None, LocationQuery, None]) -> ProviderList:
    loc = _location(rt, call.query)
    config = await _config(rt, loc, call.endpoint)
    return ProviderList(location=loc.info(), data=listing.providers(config, rt.options.env))


@op("v2.provider.get")
async def provider_get(rt: Runtime, call: Call[ProviderPath, LocationQuery, None]) -> ProviderAnswer:
    loc = _location(rt, call.query)
    config = await _config(rt, loc, call.endpoint)
    for provider in listing.providers(config, rt.options.env):
        if provider.id == call.path.providerID:
            return ProviderAnswer(location=loc.info(), data=provider)
    raise ProviderNotFoundError(providerID=call.path.providerID)


@op("v2.agent.list")
async def agent_list(rt: Runtime, call: Call[None, LocationQuery, None]) -> AgentList:
    loc = _location(rt, call.query)
    return AgentList(location=loc.info(), data=agent_info(await _config(rt, loc, call.endpoint), rt.options.env))


# --- sessions -----------------------------------------------------------------------------------------


@op("v2.session.list")
async def session_list(rt: Runtime, call: Call[None, SessionListQuery, None]) -> Page:
    q = call.query
    if q.directory is not None:
        require_usable_directory(q.directory, "query", "directory")
    return await rt.sessions.list(
        cursor=q.cursor, limit=q.limit if "limit" in q.model_fields_set else None, order=q.order, search=q.search,
        directory=q.directory, project=q.project, subpath=q.subpath, workspace=q.workspace, parent=q.parentID,
    )


@op("v2.session.create")
async def session_create(rt: Runtime, call: Call[None, None, SessionCreateBody]) -> SessionV2Info:
    b = call.body
    if b.location is not None:
        require_usable_directory(b.location.directory, "body", "location.directory")
    return await rt.sessions.create(id=b.id, agent=b.agent, model=b.model, location=b.location,
                                    parent_id=b.parentID, title=b.title, metadata=b.metadata,
                                    permissions=b.permissions)


@op("v2.session.active")
async def session_active(rt: Runtime, call: Call[None, None, None]) -> dict[SessionID, SessionActive]:
    active = rt.execution.active() if rt.execution is not None else []
    return {sid: SessionActive() for sid in active}


@op("v2.session.owner")
async def session_owner(rt: Runtime, call: Call[SessionPath, None, None]) -> SessionOwner:
    await rt.sessions.require(call.path.sessionID)
    return await rt.owner(call.path.sessionID)


@op("v2.session.get")
async def session_get(rt: Runtime, call: Call[SessionPath, None, None]) -> SessionV2Info:
    return await rt.sessions.get(call.path.sessionID)


@op("v2.session.switchAgent")
async def session_switch_agent(rt: Runtime, call: Call[SessionPath, None, SessionSwitchAgentBody]) -> None:
    await rt.sessions.require_agent(call.path.sessionID, call.body.agent)
    await rt.sessions.switch_agent(call.path.sessionID, call.body.agent)


@op("v2.session.switchModel")
async def session_switch_model(rt: Runtime, call: Call[SessionPath, None, SessionSwitchModelBody]) -> None:
    await rt.sessions.switch_model(call.path.sessionID, call.body.model)


@op("v2.session.prompt")
async def session_prompt(rt: Runtime, call: Call[SessionPath, None, SessionPromptBody]) -> SessionInputAdmitted:
    b = call.body
    return await rt.sessions.admit(call.path.sessionID, b.prompt, id=b.id, delivery=b.delivery or "steer",
                                   resume=True if b.resume is None else b.resume, traceparent=call.traceparent)


def _execution(rt: Runtime) -> Any:
    if rt.execution is None:
        raise ServiceUnavailableError("Session execution is not running", service="execution")
    return rt.execution


@op("v2.session.wait")
async def session_wait(rt: Runtime, call: Call[SessionPath, SessionWaitQuery, None]) -> None:
    await _until_idle(rt, call.path.sessionID, call.shutdown)
    if call.query.outcome:
        failure = await rt.sessions.execution_failure(call.path.sessionID)
        if failure is not None:
            raise SessionExecutionFailedError(failure.message, sessionID=call.path.sessionID, type=failure.type)


async def _until_idle(rt: Runtime, session_id: str, shutdown: anyio.Event) -> None:
    """Once the session is idle (ServiceUnavailableError when the server shuts down first)."""
    await rt.sessions.require(session_id)
    execution = _execution(rt)
    async with anyio.create_task_group() as tg:
        async def _stop_on_shutdown() -> None:
            await shutdown.wait()
            tg.cancel_scope.cancel()

        tg.start_soon(_stop_on_shutdown)
        await execution.wait(session_id)
        tg.cancel_scope.cancel()
    if shutdown.is_set():
        raise ServiceUnavailableError("The server is shutting down", service="execution")


@op("v2.session.context")
async def session_context(rt: Runtime, call: Call[SessionPath, None, None]) -> list[SessionMessage]:
    return await rt.sessions.context(call.path.sessionID)


@op("v2.session.compact")
async def session_compact(rt: Runtime, call: Call[SessionPath, None, None]) -> None:
    if rt.execution is None:  # nobody would ever run the barrier, and it would hold back all later input
        await rt.sessions.require(call.path.sessionID)
        _execution(rt)
    await rt.sessions.compact(call.path.sessionID)


@op("v2.session.interrupt")
async def session_interrupt(rt: Runtime, call: Call[SessionPath, SessionInterruptQuery, None]) -> SessionInterrupted:
    sid = call.path.sessionID
    await rt.sessions.require(sid)
    if rt.execution is None:
        return SessionInterrupted(interrupted=False)
    interrupted = await rt.execution.interrupt(sid, "user")
    # resume: what waits for the next boundary (steers, a compaction barrier) runs now; queued prompts stay parked
    if call.query.resume is True and await rt.sessions.steering(sid):
        rt.execution.wake(sid)
    return SessionInterrupted(interrupted=interrupted)


@op("v2.session.synthetic")
async def session_synthetic(rt: Runtime, call: Call[SessionPath, None, SessionSyntheticBody]) -> InboxSyntheticItem:
    b = call.body
    item = await rt.sessions.admit_synthetic(
        call.path.sessionID, SyntheticInputData(text=b.text, description=b.description, metadata=b.metadata),
        id=b.id, delivery=b.delivery or "steer", resume=True if b.resume is None else b.resume)
    return cast(InboxSyntheticItem, inbox_item(item))


@op("v2.session.shell")
async def session_shell(rt: Runtime, call: Call[SessionPath, None, SessionShellBody]) -> None:
    await rt.shell.run(call.path.sessionID, call.body.command, id=call.body.id)


@op("v2.session.resume")
async def session_resume(rt: Runtime, call: Call[SessionPath, None, None]) -> None:
    await rt.sessions.require(call.path.sessionID)
    _execution(rt).wake(call.path.sessionID, force=True)
    await _until_idle(rt, call.path.sessionID, call.shutdown)


@op("v2.session.generate")
async def session_generate(rt: Runtime, call: Call[SessionPath, None, SessionGenerateBody]) -> SessionGenerated:
    from ..core.execution.generate import generate  # imported by the first generate

    text = await generate(rt.store, rt.config, rt.options.env, rt.providers.for_model, call.path.sessionID,
                          call.body.prompt)
    return SessionGenerated(text=text)


@op("v2.session.view")
async def session_view(rt: Runtime, call: Call[SessionPath, None, SessionViewBody]) -> None:
    await rt.lifecycle.view(call.path.sessionID, call.body.idle)


@op("v2.session.environment")
async def session_environment(rt: Runtime, call: Call[SessionPath, None, SessionEnvironmentBody]) -> None:
    await rt.shell.set_environment(call.path.sessionID, call.body.variables)


@op("v2.session.message")
async def session_message(rt: Runtime, call: Call[SessionMessagePath, None, None]) -> SessionMessage:
    return await rt.sessions.message(call.path.sessionID, call.path.messageID)


@op("v2.session.message.context")
async def session_message_context(rt: Runtime, call: Call[StepMessagePath, None, None]) -> StepModelContext:
    from ..core.execution import context_view  # imported by the first context request

    return await context_view.step_context(rt.store, call.path.sessionID, call.path.messageID)


@op("v2.session.messages")
async def session_messages(rt: Runtime, call: Call[SessionPath, SessionMessagesQuery, None]) -> Page:
    q = call.query
    return await rt.sessions.messages(call.path.sessionID, cursor=q.cursor,
                                      limit=q.limit if "limit" in q.model_fields_set else None, order=q.order)


@op("v2.session.revert.stage")
async def session_revert_stage(rt: Runtime, call: Call[SessionPath, None, SessionRevertStageBody]) -> RevertState:
    b = call.body
    return await rt.reverts.stage(call.path.sessionID, b.messageID, files=b.files is not False)


@op("v2.session.revert.clear")
async def session_revert_clear(rt: Runtime, call: Call[SessionPath, None, None]) -> None:
    await rt.reverts.clear(call.path.sessionID)


@op("v2.session.revert.commit")
async def session_revert_commit(rt: Runtime, call: Call[SessionPath, None, None]) -> None:
    await rt.reverts.commit(call.path.sessionID)


@op("v2.session.fork")
async def session_fork(rt: Runtime, call: Call[SessionPath, None, SessionForkBody]) -> SessionV2Info:
    return await rt.sessions.fork(call.path.sessionID, call.body.messageID)


@op("v2.session.move")
async def session_move(rt: Runtime, call: Call[SessionPath, None, SessionMoveBody]) -> SessionV2Info:
    require_usable_directory(call.body.location.directory, "body", "location.directory")
    return await rt.sessions.move(call.path.sessionID, call.body.location)


@op("v2.session.context.entry.list")
async def entry_list(rt: Runtime, call: Call[SessionPath, None, None]) -> list[InstructionEntry]:
    return await rt.entries.list(call.path.sessionID)


@op("v2.session.context.entry.put")
async def entry_put(rt: Runtime, call: Call[ContextEntryPath, None, InstructionEntryPut]) -> None:
    await rt.entries.put(call.path.sessionID, call.path.key, call.body.value)


@op("v2.session.context.entry.remove")
async def entry_remove(rt: Runtime, call: Call[ContextEntryPath, None, None]) -> None:
    await rt.entries.remove(call.path.sessionID, call.path.key)


# --- session management: update, remove, the inbox, export and import -------------------------------------


@op("v2.session.remove")
async def session_remove(rt: Runtime, call: Call[SessionPath, None, None]) -> None:
    await rt.lifecycle.remove(call.path.sessionID)


@op("v2.session.update")
async def session_update(rt: Runtime, call: Call[SessionPath, None, SessionUpdateBody]) -> None:
    b = call.body
    await rt.lifecycle.update(call.path.sessionID, title=b.title, metadata=b.metadata, permissions=b.permissions)


@op("v2.session.inbox.list")
async def session_inbox_list(rt: Runtime, call: Call[SessionPath, None, None]) -> list[InboxItem]:
    return await rt.lifecycle.inbox(call.path.sessionID)


@op("v2.session.inbox.cancel")
async def session_inbox_cancel(rt: Runtime, call: Call[InboxPath, None, None]) -> None:
    await rt.lifecycle.cancel(call.path.sessionID, call.path.inboxID)


@op("v2.session.inbox.update")
async def session_inbox_update(rt: Runtime, call: Call[InboxPath, None, InboxUpdateBody]) -> None:
    await rt.lifecycle.deliver(call.path.sessionID, call.path.inboxID, call.body.delivery)


@op("v2.experimental.session.export")
async def session_export(rt: Runtime, call: Call[SessionPath, SessionExportQuery, None]) -> SessionTranscript:
    from ..core.session import transcript  # imported by the first export or import

    return await transcript.export(rt.store, call.path.sessionID, sanitize=call.query.sanitize is True,
                                   env=rt.options.env)


@op("v2.experimental.session.import")
async def session_import(rt: Runtime, call: Call[None, None, SessionImportBody]) -> SessionV2Info:
    b = call.body
    if b.location is not None:
        require_usable_directory(b.location.directory, "body", "location.directory")
    from ..core.session import transcript

    return await transcript.import_transcript(rt.store, SessionTranscript(info=b.info, messages=b.messages),
                                              b.location, rt.location)


@op("v2.session.diff")
async def session_diff(rt: Runtime, call: Call[SessionPath, SessionDiffQuery, None]) -> list[FileDiff]:
    q = call.query
    return await rt.diffs.diff(call.path.sessionID, q.from_, q.to, q.context)


@op("v2.experimental.session.stats")
async def session_stats(rt: Runtime, call: Call[None, SessionStatsQuery, None]) -> SessionStats:
    from ..core.session import stats  # imported by the first stats request

    q = call.query
    return await stats.session_stats(rt.store, start=q.from_, end=q.to, project=q.project, timezone=q.timezone,
                                     tools=q.tools is not False)


# --- permissions and questions ----------------------------------------------------------------------------


@op("v2.permission.request.list")
async def permission_request_list(rt: Runtime, call: Call[None, LocationQuery, None]) -> PermissionRequestList:
    loc = _location(rt, call.query)
    return PermissionRequestList(location=loc.info(),
                                 data=await in_location(rt.sessions, loc, rt.permissions.pending()))


@op("v2.permission.saved.list")
async def permission_saved_list(rt: Runtime,
                                call: Call[None, SavedPermissionQuery, None]) -> list[PermissionSavedInfo]:
    return await rt.permissions.saved(call.query.projectID)


@op("v2.permission.saved.remove")
async def permission_saved_remove(rt: Runtime, call: Call[SavedPermissionPath, None, None]) -> None:
    await rt.permissions.remove_saved(call.path.id)


@op("v2.session.permission.create")
async def session_permission_create(rt: Runtime,
                                    call: Call[SessionPath, None, SessionPermissionCreateBody]) -> PermissionCreated:
    b = call.body
    need = PermissionAsk(b.action, tuple(b.resources), tuple(b.save if b.save is not None else b.resources),
                         dict(b.metadata or {}))
    try:
        request_id, effect = await file_permission(rt.sessions, rt.permissions, rt.config, rt.options.env,
                                                   call.path.sessionID, need, agent=b.agent, source=b.source,
                                                   request_id=b.id)
    except ConfigError as bad:
        raise InvalidRequestError(str(bad), kind="config") from None
    return PermissionCreated(id=request_id, effect=effect)


@op("v2.session.permission.list")
async def session_permission_list(rt: Runtime, call: Call[SessionPath, None, None]) -> list[PermissionV2Request]:
    # a subagent's requests too (each names its own session): whoever watches the parent answers for its children
    return [r for sid in reversed(await rt.lifecycle.family(call.path.sessionID)) for r in rt.permissions.pending(sid)]


@op("v2.session.permission.get")
async def session_permission_get(rt: Runtime, call: Call[PermissionRequestPath, None, None]) -> PermissionV2Request:
    await rt.sessions.require(call.path.sessionID)
    return rt.permissions.get(call.path.sessionID, call.path.requestID)


@op("v2.session.permission.reply")
async def session_permission_reply(rt: Runtime, call: Call[PermissionRequestPath, None, PermissionReplyBody]) -> None:
    await rt.sessions.require(call.path.sessionID)
    await rt.reply_permission(call.path.sessionID, call.path.requestID, call.body.reply, call.body.message)


@op("v2.question.request.list")
async def question_request_list(rt: Runtime, call: Call[None, LocationQuery, None]) -> QuestionRequestList:
    loc = _location(rt, call.query)
    return QuestionRequestList(location=loc.info(), data=await in_location(rt.sessions, loc, rt.questions.pending()))


@op("v2.session.question.list")
async def session_question_list(rt: Runtime, call: Call[SessionPath, None, None]) -> list[QuestionV2Request]:
    await rt.sessions.require(call.path.sessionID)
    return rt.questions.pending(call.path.sessionID)


@op("v2.session.question.reply")
async def session_question_reply(rt: Runtime, call: Call[QuestionRequestPath, None, QuestionV2Reply]) -> None:
    await rt.sessions.require(call.path.sessionID)
    await rt.reply_question(call.path.sessionID, call.path.requestID, call.body.answers)


@op("v2.session.question.reject")
async def session_question_reject(rt: Runtime, call: Call[QuestionRequestPath, None, None]) -> None:
    await rt.sessions.require(call.path.sessionID)
    await rt.reply_question(call.path.sessionID, call.path.requestID, None)


# --- streams --------------------------------------------------------------------------------------------------


class _FrameCache:
    """Encoded SSE frames of recent events by event ID: one encoding per event, however many readers."""

    def __init__(self, encode: Callable[[EventRecord], bytes], size: int = 4096) -> None:
        self._encode = encode
        self._size = size
        self._frames: OrderedDict[str, bytes] = OrderedDict()

    def __call__(self, item: EventRecord) -> bytes:
        encoded = self._frames.get(item.id)
        if encoded is None:
            encoded = self._frames[item.id] = self._encode(item)
            if len(self._frames) > self._size:
                self._frames.popitem(last=False)
        return encoded


_live_frame = _FrameCache(lambda item: frame(item.wire()))  # the instance stream: no SSE id
_durable_frame = _FrameCache(lambda item: frame(item.wire(), id=item.seq))  # a session's log: its seq as SSE id


def _durable_frames(batches: AsyncGenerator[list[EventRecord | LogSynced], None]) -> AsyncIterator[bytes]:
    async def gen() -> AsyncIterator[bytes]:
        try:
            async for batch in batches:
                yield b"".join(_durable_frame(item) if isinstance(item, EventRecord)
                               else frame(item.wire(), id=item.seq) for item in batch)
        finally:
            await batches.aclose()

    return gen()


@op("v2.session.events")
async def session_events(rt: Runtime, call: Call[SessionPath, SessionEventsQuery, None]) -> AsyncIterator[bytes]:
    after = call.query.after if call.query.after is not None else -1
    return _durable_frames(await rt.sessions.log_batches(call.path.sessionID, after, follow=True, synced=False))


@op("v2.session.log")
async def session_log(rt: Runtime, call: Call[SessionPath, SessionLogQuery, None]) -> AsyncIterator[bytes]:
    after = call.query.after if call.query.after is not None else -1
    follow = bool(call.query.follow) if call.query.follow is not None else False
    return _durable_frames(await rt.sessions.log_batches(call.path.sessionID, after, follow=follow, synced=True))


@op("v2.event.subscribe")
async def event_subscribe(rt: Runtime, call: Call[None, None, None]) -> Frames:
    subscription = rt.store.live.subscribe()

    async def gen() -> AsyncIterator[bytes]:
        yield frame(ServerConnected(id=event_id(), created=now_ms()).wire())
        while True:
            # SubscriptionLost (a reader far behind, or the bus closing) escapes: the stream ends as a failure
            yield b"".join(_live_frame(item) for item in await subscription.next())

    return Frames(gen(), farewell=lambda: frame(GlobalDisposed(id=event_id(), created=now_ms()).wire()))


# --- terminals --------------------------------------------------------------------------------------------


async def _authority(rt: Runtime, loc: Location, endpoint: Endpoint) -> Authority:
    return workspace_authority(loc, await _config(rt, loc, endpoint), rt.options.env)


@op("v2.pty.list")
async def pty_list(rt: Runtime, call: Call[None, LocationQuery, None]) -> PtyList:
    loc = _location(rt, call.query)
    return PtyList(location=loc.info(), data=rt.terminals.list(loc.directory))


@op("v2.pty.create")
async def pty_create(rt: Runtime, call: Call[None, LocationQuery, PtyCreateBody]) -> PtyAnswer:
    loc = _location(rt, call.query)
    b = call.body
    info = rt.terminals.create(await _authority(rt, loc, call.endpoint), command=b.command, args=b.args or (),
                               cwd=b.cwd, title=b.title, env=b.env,
                               overlay=lambda cwd: call.host.pty_environment(loc, cwd))
    return PtyAnswer(location=loc.info(), data=info)


@op("v2.pty.get")
async def pty_get(rt: Runtime, call: Call[PtyPath, LocationQuery, None]) -> PtyAnswer:
    loc = _location(rt, call.query)
    return PtyAnswer(location=loc.info(), data=rt.terminals.get(loc.directory, call.path.ptyID).info)


@op("v2.pty.update")
async def pty_update(rt: Runtime, call: Call[PtyPath, LocationQuery, PtyUpdateBody]) -> PtyAnswer:
    loc = _location(rt, call.query)
    size = call.body.size
    info = rt.terminals.update(loc.directory, call.path.ptyID, title=call.body.title,
                               size=(size.rows, size.cols) if size is not None else None)
    return PtyAnswer(location=loc.info(), data=info)


@op("v2.pty.remove")
async def pty_remove(rt: Runtime, call: Call[PtyPath, LocationQuery, None]) -> None:
    loc = _location(rt, call.query)
    await rt.terminals.remove(loc.directory, call.path.ptyID)


@op("v2.pty.connectToken")
async def pty_connect_token(rt: Runtime, call: Call[PtyPath, LocationQuery, None]) -> PtyTokenAnswer:
    loc = _location(rt, call.query)
    rt.terminals.get(loc.directory, call.path.ptyID)
    return PtyTokenAnswer(location=loc.info(), data=call.host.tickets.issue(call.path.ptyID, loc.directory))


@op("v2.pty.connect")
async def pty_connect(rt: Runtime, call: Call[PtyPath, PtyConnectQuery, None]) -> bool:
    """A plain request to the WebSocket route (terminal_socket serves the upgrade)."""
    loc = connect_location(rt, call.query)
    rt.terminals.get(loc.directory, call.path.ptyID)
    raise InvalidRequestError("This operation is a WebSocket: send it as an upgrade request", kind="upgrade")


def connect_location(rt: Runtime, query: PtyConnectQuery) -> Location:
    """The Location of a connect request, whose query names its two location fields flat."""
    try:
        return select_location(rt.location, query.location_directory, query.location_workspace)
    except InvalidRequestError as bad:
        raise InvalidRequestError(bad.message, kind="query", field="location[directory]") from None


# --- files --------------------------------------------------------------------------------------------------


@op("v2.fs.read")
async def fs_read(rt: Runtime, call: Call[FsReadPath, LocationQuery, None]) -> bytes:
    authority = await _authority(rt, _location(rt, call.query), call.endpoint)
    return await anyio.to_thread.run_sync(read_file, authority, call.path.path)


@op("v2.fs.list")
async def fs_list(rt: Runtime, call: Call[None, FsListQuery, None]) -> FsEntries:
    loc = _location(rt, call.query)
    authority = await _authority(rt, loc, call.endpoint)
    entries = await anyio.to_thread.run_sync(list_directory, authority, call.query.path, rt.options.env)
    return FsEntries(location=loc.info(), data=entries)


@op("v2.fs.find")
async def fs_find(rt: Runtime, call: Call[None, FsFindQuery, None]) -> FsEntries:
    from ..core.fs.finder import DEFAULT_LIMIT  # imported with Runtime.finder by the first find

    loc = _location(rt, call.query)
    q = call.query
    authority = await _authority(rt, loc, call.endpoint)
    # a file the rules deny reading is not named (as in the glob tool and the listing)
    found = await anyio.to_thread.run_sync(partial(
        rt.finder.find, loc.directory, q.query, rt.options.env, q.type, q.limit or DEFAULT_LIMIT,
        lambda path: authority.effect_on("read", loc.directory / path) == "deny"))
    return FsEntries(location=loc.info(), data=found)


# --- provider connections -----------------------------------------------------------------------------------


@op("v2.integration.list")
async def integration_list(rt: Runtime, call: Call[None, LocationQuery, None]) -> IntegrationList:
    loc = _location(rt, call.query)
    config = await _config(rt, loc, call.endpoint)
    return IntegrationList(location=loc.info(), data=rt.integrations.list(config, rt.options.env))


@op("v2.integration.get")
async def integration_get(rt: Runtime, call: Call[IntegrationPath, LocationQuery, None]) -> IntegrationAnswer:
    loc = _location(rt, call.query)
    config = await _config(rt, loc, call.endpoint)
    return IntegrationAnswer(location=loc.info(),
                             data=rt.integrations.get(call.path.integrationID, config, rt.options.env))


@op("v2.integration.connect.key")
async def integration_connect_key(rt: Runtime, call: Call[IntegrationPath, LocationQuery, IntegrationKeyBody]) -> None:
    config = await _config(rt, _location(rt, call.query), call.endpoint)
    await anyio.to_thread.run_sync(rt.integrations.connect_key, call.path.integrationID, call.body.key,
                                   call.body.label, config)


@op("v2.integration.connect.oauth")
async def integration_connect_oauth(rt: Runtime, call: Call[IntegrationPath, LocationQuery, IntegrationOAuthBody],
                                    ) -> IntegrationAttemptAnswer:
    loc = _location(rt, call.query)
    config = await _config(rt, loc, call.endpoint)
    attempt = rt.integrations.begin(call.path.integrationID, call.body.methodID, call.body.label, config)
    return IntegrationAttemptAnswer(location=loc.info(), data=attempt)


@op("v2.integration.attempt.status")
async def integration_attempt_status(rt: Runtime, call: Call[AttemptPath, LocationQuery, None],
                                     ) -> IntegrationAttemptStatusAnswer:
    loc = _location(rt, call.query)
    return IntegrationAttemptStatusAnswer(location=loc.info(), data=rt.integrations.status(call.path.attemptID))


@op("v2.integration.attempt.cancel")
async def integration_attempt_cancel(rt: Runtime, call: Call[AttemptPath, LocationQuery, None]) -> None:
    _location(rt, call.query)
    rt.integrations.cancel(call.path.attemptID)


@op("v2.integration.attempt.complete")
async def integration_attempt_complete(rt: Runtime, call: Call[AttemptPath, LocationQuery, AttemptCompleteBody],
                                       ) -> None:
    _location(rt, call.query)
    await rt.integrations.complete(call.path.attemptID, call.body.code)


@op("v2.credential.update")
async def credential_update(rt: Runtime, call: Call[CredentialPath, LocationQuery, CredentialUpdateBody]) -> None:
    _location(rt, call.query)
    if not await anyio.to_thread.run_sync(rt.credentials.rename, call.path.credentialID, call.body.label):
        raise InvalidRequestError(f"No stored credential {call.path.credentialID!r}", kind="credential",
                                  field="credentialID")


@op("v2.credential.remove")
async def credential_remove(rt: Runtime, call: Call[CredentialPath, LocationQuery, None]) -> None:
    _location(rt, call.query)
    await anyio.to_thread.run_sync(rt.credentials.remove, call.path.credentialID)


# --- commands, skills, references ---------------------------------------------------------------------------


@op("v2.command.list")
async def command_list(rt: Runtime, call: Call[None, LocationQuery, None]) -> CommandList:
    loc = _location(rt, call.query)
    config = await _config(rt, loc, call.endpoint)
    commands = await anyio.to_thread.run_sync(discover_commands, loc, config, rt.options.env)
    return CommandList(location=loc.info(), data=commands)


@op("v2.skill.list")
async def skill_list(rt: Runtime, call: Call[None, LocationQuery, None]) -> SkillList:
    loc = _location(rt, call.query)
    config = await _config(rt, loc, call.endpoint)
    skills = await anyio.to_thread.run_sync(available_skills, loc, config, rt.options.env)
    return SkillList(location=loc.info(), data=[SkillV2Info(name=s.name, description=s.description,
                                                            location=str(s.path), content=s.body) for s in skills])


@op("v2.mcp.status")
async def mcp_status(rt: Runtime, call: Call[None, LocationQuery, None]) -> McpStatusList:
    loc = _location(rt, call.query)
    config = await _config(rt, loc, call.endpoint)
    statuses = rt.mcp.statuses(loc.directory, config)  # a GET starts no process
    return McpStatusList(location=loc.info(), data={name: McpServerStatus(status=s.status, error=s.error)
                                                    for name, s in statuses.items()})


@op("v2.mcp.connect")
async def mcp_connect(rt: Runtime, call: Call[None, LocationQuery, None]) -> McpStatusList:
    loc = _location(rt, call.query)
    config = await _config(rt, loc, call.endpoint)
    statuses = await rt.mcp.status(loc.directory, config)
    return McpStatusList(location=loc.info(), data={name: McpServerStatus(status=s.status, error=s.error)
                                                    for name, s in statuses.items()})


@op("v2.experimental.trust.get")
async def trust_get(rt: Runtime, call: Call[None, LocationQuery, None]) -> TrustInfo:
    loc = _location(rt, call.query)
    return _trust_info(loc, *await rt.config.standing(loc))


@op("v2.experimental.trust.grant")
async def trust_grant(rt: Runtime, call: Call[None, LocationQuery, TrustGrantBody]) -> TrustInfo:
    from ..core.config.trust import ContentChanged

    loc = _location(rt, call.query)
    try:
        await anyio.to_thread.run_sync(rt.trust.grant, loc, call.body.digest)
    except ContentChanged as changed:
        raise ConflictError(str(changed), resource="trust") from None
    return _trust_info(loc, *await rt.config.standing(loc))


def _trust_info(loc: Location, state: TrustState, ignored: tuple[str, ...]) -> TrustInfo:
    return TrustInfo(location=loc.info(), trusted=state.trusted, trustAll=state.trust_all, digest=state.digest,
                     granted=state.granted, changed=state.granted is not None and state.granted != state.digest,
                     files=[str(path) for path in state.files], ignored=list(ignored))


@op("v2.reference.list")
async def reference_list(rt: Runtime, call: Call[None, LocationQuery, None]) -> ReferenceList:
    from ..core.references import discover_references  # imported by the first listing

    loc = _location(rt, call.query)
    try:  # the configuration with authority there: an untrusted project's file names no reference
        config = await rt.config.at(loc)
    except ConfigError as bad:
        raise InvalidRequestError(str(bad), kind="config") from None
    return ReferenceList(location=loc.info(), data=discover_references(loc, config, rt.options.env))
