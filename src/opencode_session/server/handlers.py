"""Handlers: each protocol operation adapted to core, keyed by operation ID. A handler takes the endpoint's typed
path, query and body models (`Call[Path, Query, Body]`) and returns its declared success value, which the app
encodes through that declaration; what a handler decides beyond adapting lives in core."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

import anyio

from ..core.agents import agent_info
from ..core.config import Config, ConfigError
from ..core.llm import listing
from ..core.location import Location, require_usable_directory, select_location
from ..core.permission import PermissionAsk
from ..core.runtime import Runtime
from ..core.session.requests import file_permission, in_location
from ..core.store import now_ms
from ..protocol import Endpoint
from ..protocol.api import (
    AgentList,
    ContextEntryPath,
    HealthStatus,
    LocationQuery,
    PermissionCreated,
    PermissionReplyBody,
    PermissionRequestList,
    PermissionRequestPath,
    ProviderPath,
    QuestionRequestList,
    QuestionRequestPath,
    SavedPermissionPath,
    SavedPermissionQuery,
    SessionCreateBody,
    SessionEventsQuery,
    SessionForkBody,
    SessionListQuery,
    SessionLogQuery,
    SessionMessagePath,
    SessionMessagesQuery,
    SessionMoveBody,
    SessionPath,
    SessionPermissionCreateBody,
    SessionPromptBody,
    SessionRevertStageBody,
    SessionSwitchAgentBody,
    SessionSwitchModelBody,
)
from ..schema.catalog import ModelList, ProviderAnswer, ProviderList
from ..schema.errors import InvalidRequestError, ProviderNotFoundError, ServiceUnavailableError
from ..schema.events import EventRecord, GlobalDisposed, LogSynced, ServerConnected
from ..schema.ids import SessionID, event_id
from ..schema.input import SessionInputAdmitted
from ..schema.instruction_entry import InstructionEntry, InstructionEntryPut
from ..schema.location import LocationInfo
from ..schema.message import SessionMessage
from ..schema.page import CursorLinks
from ..schema.permission import PermissionSavedInfo, PermissionV2Request
from ..schema.question import QuestionV2Reply, QuestionV2Request
from ..schema.session import RevertState, SessionActive, SessionV2Info
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


def _location(rt: Runtime, query: LocationQuery) -> Location:
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
        directory=q.directory, project=q.project, subpath=q.subpath, workspace=q.workspace,
    )


@op("v2.session.create")
async def session_create(rt: Runtime, call: Call[None, None, SessionCreateBody]) -> SessionV2Info:
    b = call.body
    if b.location is not None:
        require_usable_directory(b.location.directory, "body", "location.directory")
    return await rt.sessions.create(id=b.id, agent=b.agent, model=b.model, location=b.location)


@op("v2.session.active")
async def session_active(rt: Runtime, call: Call[None, None, None]) -> dict[SessionID, SessionActive]:
    active = rt.execution.active() if rt.execution is not None else []
    return {sid: SessionActive() for sid in active}


@op("v2.session.get")
async def session_get(rt: Runtime, call: Call[SessionPath, None, None]) -> SessionV2Info:
    return await rt.sessions.get(call.path.sessionID)


@op("v2.session.switchAgent")
async def session_switch_agent(rt: Runtime, call: Call[SessionPath, None, SessionSwitchAgentBody]) -> None:
    await rt.sessions.switch_agent(call.path.sessionID, call.body.agent)


@op("v2.session.switchModel")
async def session_switch_model(rt: Runtime, call: Call[SessionPath, None, SessionSwitchModelBody]) -> None:
    await rt.sessions.switch_model(call.path.sessionID, call.body.model)


@op("v2.session.prompt")
async def session_prompt(rt: Runtime, call: Call[SessionPath, None, SessionPromptBody]) -> SessionInputAdmitted:
    b = call.body
    return await rt.sessions.admit(call.path.sessionID, b.prompt, id=b.id, delivery=b.delivery or "steer",
                                   resume=True if b.resume is None else b.resume)


def _execution(rt: Runtime) -> Any:
    if rt.execution is None:
        raise ServiceUnavailableError("Session execution is not running", service="execution")
    return rt.execution


@op("v2.session.wait")
async def session_wait(rt: Runtime, call: Call[SessionPath, None, None]) -> None:
    await rt.sessions.require(call.path.sessionID)
    execution = _execution(rt)
    async with anyio.create_task_group() as tg:
        async def _stop_on_shutdown() -> None:
            await call.shutdown.wait()
            tg.cancel_scope.cancel()

        tg.start_soon(_stop_on_shutdown)
        await execution.wait(call.path.sessionID)
        tg.cancel_scope.cancel()
    if call.shutdown.is_set():
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
async def session_interrupt(rt: Runtime, call: Call[SessionPath, None, None]) -> None:
    await rt.sessions.require(call.path.sessionID)
    if rt.execution is not None:
        await rt.execution.interrupt(call.path.sessionID, "user")


@op("v2.session.message")
async def session_message(rt: Runtime, call: Call[SessionMessagePath, None, None]) -> SessionMessage:
    return await rt.sessions.message(call.path.sessionID, call.path.messageID)


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
    await rt.sessions.require(call.path.sessionID)
    return rt.permissions.pending(call.path.sessionID)


@op("v2.session.permission.get")
async def session_permission_get(rt: Runtime, call: Call[PermissionRequestPath, None, None]) -> PermissionV2Request:
    await rt.sessions.require(call.path.sessionID)
    return rt.permissions.get(call.path.sessionID, call.path.requestID)


@op("v2.session.permission.reply")
async def session_permission_reply(rt: Runtime, call: Call[PermissionRequestPath, None, PermissionReplyBody]) -> None:
    await rt.sessions.require(call.path.sessionID)
    await rt.permissions.reply(call.path.sessionID, call.path.requestID, call.body.reply, call.body.message)


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
    rt.questions.reply(call.path.sessionID, call.path.requestID, call.body.answers)


@op("v2.session.question.reject")
async def session_question_reject(rt: Runtime, call: Call[QuestionRequestPath, None, None]) -> None:
    await rt.sessions.require(call.path.sessionID)
    rt.questions.reject(call.path.sessionID, call.path.requestID)


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
