"""Handlers: each protocol operation adapted to core, keyed by operation ID."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import anyio

from ..core.agents import AgentNotFoundError, agent_info, resolve_agent
from ..core.commands import discover_commands
from ..core.config import Config, ConfigError
from ..core.fs import DEFAULT_LIMIT, list_directory, read_file
from ..core.llm import listing
from ..core.location import Location, resolve_location
from ..core.permission import Authority, PermissionAsk
from ..core.references import discover_references
from ..core.runtime import Runtime
from ..core.store import now_ms
from ..core.workspace import available_skills, workspace_authority
from ..protocol.api import (
    CommandList,
    FsEntries,
    IntegrationAnswer,
    IntegrationAttemptAnswer,
    IntegrationAttemptStatusAnswer,
    IntegrationList,
    LocationQuery,
    LocationSelector,
    PtyAnswer,
    PtyList,
    PtyTokenAnswer,
    ReferenceList,
    SkillList,
)
from ..schema.errors import InvalidRequestError, ProviderNotFoundError, ServiceUnavailableError
from ..schema.events import EventRecord, GlobalDisposed, LogSynced, ServerConnected
from ..schema.ids import event_id
from ..schema.session import SessionActive
from ..schema.skill import SkillV2Info
from .host import Host
from .sse import Frames, frame


@dataclass
class Call:
    path: Any
    query: Any
    body: Any
    shutdown: anyio.Event
    host: Host = field(default_factory=Host)


Handler = Callable[[Runtime, Call], Awaitable[Any]]
HANDLERS: dict[str, Handler] = {}


def op(operation_id: str):
    def deco(fn: Handler) -> Handler:
        HANDLERS[operation_id] = fn
        return fn

    return deco


@op("v2.health.get")
async def health(rt: Runtime, call: Call) -> Any:
    return {"healthy": True}


def _require_usable_path(directory: str, where: str, field: str) -> None:
    """A directory that cannot even be looked up (a NUL byte, a name too long, `~nosuchuser`) is a bad request,
    not a 500.

    Resolving and probing it here, where the request is still in hand, keeps core's path handling unchanged.
    """
    try:
        resolve_location(directory).directory.is_dir()
    except (ValueError, OSError, RuntimeError) as exc:  # RuntimeError: pathlib's expanduser of an unknown ~user
        raise InvalidRequestError(f"Invalid {where}: {field}: unusable directory path ({type(exc).__name__})",
                                  kind=where, field=field) from None


@op("v2.location.get")
async def location_get(rt: Runtime, call: Call) -> Any:
    return _selected_location(rt, call).info()


def _selected_location(rt: Runtime, call: Call) -> Location:
    """The Location a `location` query selects: the server's own when none is given."""
    selector = call.query.location if call.query is not None else None
    if selector is None or selector.directory is None:
        return rt.location
    _require_usable_path(selector.directory, "query", "location.directory")
    loc = resolve_location(selector.directory, selector.workspace)
    if not loc.directory.is_dir():
        raise InvalidRequestError(f"Location directory does not exist: {selector.directory}", kind="query",
                                  field="location.directory")
    return loc


async def _catalog_config(rt: Runtime, call: Call) -> tuple[Any, Config]:
    loc = _selected_location(rt, call)
    try:
        config = await rt.config.at(loc)
    except ConfigError as bad:
        raise ServiceUnavailableError(f"The configuration cannot be read: {bad}", service="config") from None
    return loc, config


@op("v2.model.list")
async def model_list(rt: Runtime, call: Call) -> Any:
    loc, config = await _catalog_config(rt, call)
    return {"location": loc.info(), "data": listing.models(config, rt.options.env)}


@op("v2.provider.list")
async def provider_list(rt: Runtime, call: Call) -> Any:
    loc, config = await _catalog_config(rt, call)
    return {"location": loc.info(), "data": listing.providers(config, rt.options.env)}


@op("v2.provider.get")
async def provider_get(rt: Runtime, call: Call) -> Any:
    loc, config = await _catalog_config(rt, call)
    for provider in listing.providers(config, rt.options.env):
        if provider.id == call.path.providerID:
            return {"location": loc.info(), "data": provider}
    raise ProviderNotFoundError(providerID=call.path.providerID)


@op("v2.session.list")
async def session_list(rt: Runtime, call: Call) -> Any:
    q = call.query
    fields = q.model_fields_set
    if q.directory is not None:
        _require_usable_path(q.directory, "query", "directory")
    return await rt.sessions.list(
        cursor=q.cursor,
        limit=q.limit if "limit" in fields else None,
        order=q.order, search=q.search, directory=q.directory, project=q.project, subpath=q.subpath,
        workspace=q.workspace,
    )


@op("v2.session.create")
async def session_create(rt: Runtime, call: Call) -> Any:
    b = call.body
    if b.location is not None:
        _require_usable_path(b.location.directory, "body", "location.directory")
    return await rt.sessions.create(id=b.id, agent=b.agent, model=b.model, location=b.location)


@op("v2.session.active")
async def session_active(rt: Runtime, call: Call) -> Any:
    active = rt.execution.active() if rt.execution is not None else []
    return {sid: SessionActive() for sid in active}


@op("v2.session.get")
async def session_get(rt: Runtime, call: Call) -> Any:
    return await rt.sessions.get(call.path.sessionID)


@op("v2.session.switchAgent")
async def session_switch_agent(rt: Runtime, call: Call) -> Any:
    await rt.sessions.switch_agent(call.path.sessionID, call.body.agent)


@op("v2.session.switchModel")
async def session_switch_model(rt: Runtime, call: Call) -> Any:
    await rt.sessions.switch_model(call.path.sessionID, call.body.model)


@op("v2.session.prompt")
async def session_prompt(rt: Runtime, call: Call) -> Any:
    b = call.body
    return await rt.sessions.admit(
        call.path.sessionID, b.prompt, id=b.id, delivery=b.delivery or "steer",
        resume=True if b.resume is None else b.resume,
    )


@op("v2.session.wait")
async def session_wait(rt: Runtime, call: Call) -> Any:
    await rt.sessions.require(call.path.sessionID)
    if rt.execution is None:
        raise ServiceUnavailableError("Session execution is not running", service="execution")
    async with anyio.create_task_group() as tg:
        async def _stop_on_shutdown() -> None:
            await call.shutdown.wait()
            tg.cancel_scope.cancel()

        tg.start_soon(_stop_on_shutdown)
        await rt.execution.wait(call.path.sessionID)
        tg.cancel_scope.cancel()
    if call.shutdown.is_set():
        raise ServiceUnavailableError("The server is shutting down", service="execution")


@op("v2.session.context")
async def session_context(rt: Runtime, call: Call) -> Any:
    return await rt.sessions.context(call.path.sessionID)


@op("v2.session.compact")
async def session_compact(rt: Runtime, call: Call) -> Any:
    if rt.execution is None:  # nobody would ever run the barrier, and it would hold back all later input
        await rt.sessions.require(call.path.sessionID)
        raise ServiceUnavailableError("Session execution is not running", service="execution")
    await rt.sessions.compact(call.path.sessionID)


@op("v2.session.interrupt")
async def session_interrupt(rt: Runtime, call: Call) -> Any:
    await rt.sessions.require(call.path.sessionID)
    if rt.execution is not None:
        await rt.execution.interrupt(call.path.sessionID, "user")


@op("v2.session.message")
async def session_message(rt: Runtime, call: Call) -> Any:
    return await rt.sessions.message(call.path.sessionID, call.path.messageID)


@op("v2.session.messages")
async def session_messages(rt: Runtime, call: Call) -> Any:
    q = call.query
    return await rt.sessions.messages(call.path.sessionID, cursor=q.cursor,
                                      limit=q.limit if "limit" in q.model_fields_set else None, order=q.order)


@op("v2.session.context.entry.list")
async def entry_list(rt: Runtime, call: Call) -> Any:
    return await rt.entries.list(call.path.sessionID)


@op("v2.session.context.entry.put")
async def entry_put(rt: Runtime, call: Call) -> Any:
    await rt.entries.put(call.path.sessionID, call.path.key, call.body.value)


@op("v2.session.context.entry.remove")
async def entry_remove(rt: Runtime, call: Call) -> Any:
    await rt.entries.remove(call.path.sessionID, call.path.key)


# --- agents, permissions and questions ----------------------------------------------------------------


async def _config(rt: Runtime, loc: Location) -> Config:
    """The configuration in effect at `loc`; a broken one is the request's problem to report, not a 500."""
    try:
        return await rt.config.at(loc)
    except ConfigError as bad:
        raise InvalidRequestError(str(bad), kind="config") from None


@op("v2.agent.list")
async def agent_list(rt: Runtime, call: Call) -> Any:
    loc = _selected_location(rt, call)
    return {"location": loc.info(), "data": agent_info(await _config(rt, loc), rt.options.env)}


async def _in_location(rt: Runtime, loc: Location, requests: list[Any]) -> list[Any]:
    """The pending requests whose session works in `loc`."""
    directories: dict[str, str] = {}
    for sid in {r.sessionID for r in requests}:
        directories[sid] = (await rt.sessions.get(sid)).location.directory
    return [r for r in requests if directories[r.sessionID] == str(loc.directory)]


@op("v2.permission.request.list")
async def permission_request_list(rt: Runtime, call: Call) -> Any:
    loc = _selected_location(rt, call)
    return {"location": loc.info(), "data": await _in_location(rt, loc, rt.permissions.pending())}


@op("v2.permission.saved.list")
async def permission_saved_list(rt: Runtime, call: Call) -> Any:
    return await rt.permissions.saved(call.query.projectID)


@op("v2.permission.saved.remove")
async def permission_saved_remove(rt: Runtime, call: Call) -> Any:
    await rt.permissions.remove_saved(call.path.id)


@op("v2.session.permission.create")
async def session_permission_create(rt: Runtime, call: Call) -> Any:
    b = call.body
    session = await rt.sessions.get(call.path.sessionID)
    loc = resolve_location(session.location.directory, session.location.workspaceID)
    config = await _config(rt, loc)
    try:
        agent = resolve_agent(config, b.agent or session.agent)
    except AgentNotFoundError as missing:
        raise InvalidRequestError(str(missing), kind="body", field="agent") from None
    need = PermissionAsk(b.action, tuple(b.resources), tuple(b.save if b.save is not None else b.resources),
                         dict(b.metadata or {}))
    request_id, effect = await rt.permissions.create(session.id, loc.project_id,
                                                     agent.rules(config.permission, rt.options.env), need, b.source,
                                                     b.id)
    return {"id": request_id, "effect": effect}


@op("v2.session.permission.list")
async def session_permission_list(rt: Runtime, call: Call) -> Any:
    await rt.sessions.require(call.path.sessionID)
    return rt.permissions.pending(call.path.sessionID)


@op("v2.session.permission.get")
async def session_permission_get(rt: Runtime, call: Call) -> Any:
    await rt.sessions.require(call.path.sessionID)
    return rt.permissions.get(call.path.sessionID, call.path.requestID)


@op("v2.session.permission.reply")
async def session_permission_reply(rt: Runtime, call: Call) -> Any:
    await rt.sessions.require(call.path.sessionID)
    await rt.permissions.reply(call.path.sessionID, call.path.requestID, call.body.reply, call.body.message)


@op("v2.question.request.list")
async def question_request_list(rt: Runtime, call: Call) -> Any:
    loc = _selected_location(rt, call)
    return {"location": loc.info(), "data": await _in_location(rt, loc, rt.questions.pending())}


@op("v2.session.question.list")
async def session_question_list(rt: Runtime, call: Call) -> Any:
    await rt.sessions.require(call.path.sessionID)
    return rt.questions.pending(call.path.sessionID)


@op("v2.session.question.reply")
async def session_question_reply(rt: Runtime, call: Call) -> Any:
    await rt.sessions.require(call.path.sessionID)
    rt.questions.reply(call.path.sessionID, call.path.requestID, call.body.answers)


@op("v2.session.question.reject")
async def session_question_reject(rt: Runtime, call: Call) -> Any:
    await rt.sessions.require(call.path.sessionID)
    rt.questions.reject(call.path.sessionID, call.path.requestID)


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
async def session_events(rt: Runtime, call: Call) -> Any:
    after = call.query.after if call.query.after is not None else -1
    return _durable_frames(await rt.sessions.log_batches(call.path.sessionID, after, follow=True, synced=False))


@op("v2.session.log")
async def session_log(rt: Runtime, call: Call) -> Any:
    after = call.query.after if call.query.after is not None else -1
    follow = bool(call.query.follow) if call.query.follow is not None else False
    return _durable_frames(await rt.sessions.log_batches(call.path.sessionID, after, follow=follow, synced=True))


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


@op("v2.event.subscribe")
async def event_subscribe(rt: Runtime, call: Call) -> Any:
    subscription = rt.store.live.subscribe()

    async def gen() -> AsyncIterator[bytes]:
        yield frame(ServerConnected(id=event_id(), created=now_ms()).wire())
        while True:
            # SubscriptionLost (a reader far behind, or the bus closing) escapes: the stream ends as a failure
            yield b"".join(_live_frame(item) for item in await subscription.next())

    return Frames(gen(), farewell=lambda: frame(GlobalDisposed(id=event_id(), created=now_ms()).wire()))


# --- terminals --------------------------------------------------------------------------------------------


@op("v2.pty.list")
async def pty_list(rt: Runtime, call: Call) -> Any:
    loc = _selected_location(rt, call)
    return PtyList(location=loc.info(), data=rt.terminals.list(loc.directory))


@op("v2.pty.create")
async def pty_create(rt: Runtime, call: Call) -> Any:
    loc = _selected_location(rt, call)
    b = call.body
    authority = workspace_authority(loc, await _config(rt, loc), rt.options.env)
    info = rt.terminals.create(authority, command=b.command, args=b.args or (), cwd=b.cwd, title=b.title,
                               env=b.env, overlay=lambda cwd: call.host.pty_environment(loc, cwd))
    return PtyAnswer(location=loc.info(), data=info)


@op("v2.pty.get")
async def pty_get(rt: Runtime, call: Call) -> Any:
    loc = _selected_location(rt, call)
    return PtyAnswer(location=loc.info(), data=rt.terminals.get(loc.directory, call.path.ptyID).info)


@op("v2.pty.update")
async def pty_update(rt: Runtime, call: Call) -> Any:
    loc = _selected_location(rt, call)
    size = call.body.size
    info = rt.terminals.update(loc.directory, call.path.ptyID, title=call.body.title,
                               size=(size.rows, size.cols) if size is not None else None)
    return PtyAnswer(location=loc.info(), data=info)


@op("v2.pty.remove")
async def pty_remove(rt: Runtime, call: Call) -> Any:
    loc = _selected_location(rt, call)
    await rt.terminals.remove(loc.directory, call.path.ptyID)


@op("v2.pty.connectToken")
async def pty_connect_token(rt: Runtime, call: Call) -> Any:
    loc = _selected_location(rt, call)
    rt.terminals.get(loc.directory, call.path.ptyID)
    return PtyTokenAnswer(location=loc.info(), data=call.host.tickets.issue(call.path.ptyID, loc.directory))


@op("v2.pty.connect")
async def pty_connect(rt: Runtime, call: Call) -> Any:
    """A plain request to the WebSocket route (the upgrade is served by terminal_socket)."""
    loc = connect_location(rt, call.query)
    rt.terminals.get(loc.directory, call.path.ptyID)
    raise InvalidRequestError("This operation is a WebSocket: send it as an upgrade request", kind="upgrade")


def connect_location(rt: Runtime, query: Any) -> Location:
    """The Location of a connect request, whose query names its two location fields flat."""
    selector = LocationSelector(directory=query.location_directory, workspace=query.location_workspace)
    try:
        return _selected_location(rt, Call(None, LocationQuery(location=selector), None, anyio.Event()))
    except InvalidRequestError as bad:
        raise InvalidRequestError(bad.message, kind="query", field="location[directory]") from None


# --- files --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Bytes:
    """A binary answer: the bytes and the headers that describe them."""

    data: bytes
    headers: dict[str, str]


async def _authority(rt: Runtime, loc: Location) -> Authority:
    return workspace_authority(loc, await _config(rt, loc), rt.options.env)


@op("v2.fs.read")
async def fs_read(rt: Runtime, call: Call) -> Any:
    authority = await _authority(rt, _selected_location(rt, call))
    read = await anyio.to_thread.run_sync(read_file, authority, call.path.path)
    return Bytes(read.data, {"X-File-Kind": "binary" if read.binary else "text"})


@op("v2.fs.list")
async def fs_list(rt: Runtime, call: Call) -> Any:
    loc = _selected_location(rt, call)
    authority = await _authority(rt, loc)
    entries = await anyio.to_thread.run_sync(list_directory, authority, call.query.path, rt.options.env)
    return FsEntries(location=loc.info(), data=entries)


@op("v2.fs.find")
async def fs_find(rt: Runtime, call: Call) -> Any:
    loc = _selected_location(rt, call)
    q = call.query
    found = await anyio.to_thread.run_sync(partial(rt.finder.find, loc.directory, q.query, rt.options.env, q.type,
                                                   q.limit or DEFAULT_LIMIT))
    return FsEntries(location=loc.info(), data=found)


# --- provider connections -----------------------------------------------------------------------------------


async def _connections_config(rt: Runtime, call: Call) -> tuple[Location, Config]:
    loc = _selected_location(rt, call)
    return loc, await _config(rt, loc)


@op("v2.integration.list")
async def integration_list(rt: Runtime, call: Call) -> Any:
    loc, config = await _connections_config(rt, call)
    return IntegrationList(location=loc.info(), data=rt.integrations.list(config, rt.options.env))


@op("v2.integration.get")
async def integration_get(rt: Runtime, call: Call) -> Any:
    loc, config = await _connections_config(rt, call)
    return IntegrationAnswer(location=loc.info(),
                             data=rt.integrations.get(call.path.integrationID, config, rt.options.env))


@op("v2.integration.connect.key")
async def integration_connect_key(rt: Runtime, call: Call) -> Any:
    _, config = await _connections_config(rt, call)
    await anyio.to_thread.run_sync(rt.integrations.connect_key, call.path.integrationID, call.body.key,
                                   call.body.label, config)


@op("v2.integration.connect.oauth")
async def integration_connect_oauth(rt: Runtime, call: Call) -> Any:
    loc, config = await _connections_config(rt, call)
    attempt = rt.integrations.begin(call.path.integrationID, call.body.methodID, call.body.label, config)
    return IntegrationAttemptAnswer(location=loc.info(), data=attempt)


@op("v2.integration.attempt.status")
async def integration_attempt_status(rt: Runtime, call: Call) -> Any:
    loc = _selected_location(rt, call)
    return IntegrationAttemptStatusAnswer(location=loc.info(), data=rt.integrations.status(call.path.attemptID))


@op("v2.integration.attempt.cancel")
async def integration_attempt_cancel(rt: Runtime, call: Call) -> Any:
    _selected_location(rt, call)
    rt.integrations.cancel(call.path.attemptID)


@op("v2.integration.attempt.complete")
async def integration_attempt_complete(rt: Runtime, call: Call) -> Any:
    _selected_location(rt, call)
    await rt.integrations.complete(call.path.attemptID, call.body.code)


@op("v2.credential.update")
async def credential_update(rt: Runtime, call: Call) -> Any:
    _selected_location(rt, call)
    if not await anyio.to_thread.run_sync(rt.credentials.rename, call.path.credentialID, call.body.label):
        raise InvalidRequestError(f"No stored credential {call.path.credentialID!r}", kind="credential",
                                  field="credentialID")


@op("v2.credential.remove")
async def credential_remove(rt: Runtime, call: Call) -> Any:
    _selected_location(rt, call)
    await anyio.to_thread.run_sync(rt.credentials.remove, call.path.credentialID)


# --- commands, skills, references ---------------------------------------------------------------------------


@op("v2.command.list")
async def command_list(rt: Runtime, call: Call) -> Any:
    loc, config = await _connections_config(rt, call)
    commands = await anyio.to_thread.run_sync(discover_commands, loc, config, rt.options.env)
    return CommandList(location=loc.info(), data=commands)


@op("v2.skill.list")
async def skill_list(rt: Runtime, call: Call) -> Any:
    loc, config = await _connections_config(rt, call)
    skills = await anyio.to_thread.run_sync(available_skills, loc, config, rt.options.env)
    return SkillList(location=loc.info(), data=[SkillV2Info(name=s.name, description=s.description,
                                                            location=str(s.path), content=s.body) for s in skills])


@op("v2.reference.list")
async def reference_list(rt: Runtime, call: Call) -> Any:
    loc = _selected_location(rt, call)
    try:
        references = await anyio.to_thread.run_sync(discover_references, loc, rt.options.env)
    except ConfigError as bad:
        raise InvalidRequestError(str(bad), kind="config") from None
    return ReferenceList(location=loc.info(), data=references)
