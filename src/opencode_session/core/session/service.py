"""The Session facade used by the server: lifecycle, admission, pages of sessions and messages, the durable log."""

from __future__ import annotations

import builtins
import os
import re
from collections.abc import AsyncGenerator, Callable, Mapping
from datetime import UTC, datetime
from typing import Any

import anyio

from ...schema import events as ev
from ...schema.common import LocationRef, ModelRef, SessionErrorInfo
from ...schema.errors import (
    ConflictError,
    InvalidCursorError,
    InvalidRequestError,
    MessageNotFoundError,
    SessionNotFoundError,
)
from ...schema.events import EventRecord, LogSynced
from ...schema.ids import message_id
from ...schema.ids import session_id as new_session_id
from ...schema.input import SessionInputAdmitted
from ...schema.message import SessionMessage
from ...schema.page import CursorLinks
from ...schema.permission import PermissionV2Rule
from ...schema.prompt import PromptInput
from ...schema.session import SessionTime, SessionV2Info
from ..agents import AgentNotFoundError, resolve_agent
from ..attachments import admission_authority, check_prompt_files
from ..config import ConfigError, ConfigSource
from ..llm.catalog import undeclared
from ..location import Location, resolve_location
from ..store import PendingInput, Reader, SessionFilter, Store, Tx, now_ms
from ..store.codec import decode
from ..store.feed import CommitWaiter
from ..store.keyset import Direction, Key, Order, PageRequest
from ..telemetry import hooks
from ..userhooks import HookRun, UserHooks
from . import admission
from .cursor import MESSAGE_PAGE_MAX, SESSION_PAGE_MAX, MessageCursor, SessionCursor, SessionQuery, page_links
from .history import active_history
from .revert import Hold, commit_staged, no_hold

SESSION_PAGE_DEFAULT = 50
DEFAULT_TITLE_PREFIX = "New session - "  # followed by the creation time; a generated title replaces it
MESSAGE_PAGE_DEFAULT = 50


def default_title(created: int) -> str:
    """The title a session has until it is named: the prefix and its creation time."""
    return DEFAULT_TITLE_PREFIX + datetime.fromtimestamp(created / 1000, UTC).isoformat(
        timespec="milliseconds").replace("+00:00", "Z")


def untitled(info: SessionV2Info) -> bool:
    """Whether the session still has its default title (no client and no title call has named it): a title a
    client chose, even one that looks like a default, is never the default of this session's creation time."""
    return info.title == default_title(info.time.created)


def require_session(reader: Reader, session_id: str) -> SessionV2Info:
    info = reader.sessions.load(session_id)
    if info is None:
        raise SessionNotFoundError(sessionID=session_id)
    return info


class Sessions:  # its `list` method shadows the builtin in annotations below it: those say `builtins.list`
    """Core operations on durable Sessions. `wake` is the execution's advisory wake-up and `hold` keeps a session
    idle while it moves (the runtime's execution gives both); `env` is what permission rules see and `config` the
    configuration source (the model a session selects must be declared there; None: one of its own over `env`)."""

    def __init__(self, store: Store, default_location: Location, wake: Callable[[str], None] | None = None,
                 env: Mapping[str, str] | None = None, config: ConfigSource | None = None,
                 hooks: UserHooks | None = None, hold: Hold = no_hold) -> None:
        self.store = store
        self.hooks = hooks  # the config's SessionStart and UserPromptSubmit hooks run here
        self.default_location = default_location
        self.env = os.environ if env is None else env
        self.config = ConfigSource(self.env) if config is None else config
        self.wake: Callable[[str], None] = wake or (lambda _sid: None)
        self.hold = hold

    async def _require_declared(self, location: Location, model: ModelRef) -> None:
        """A model the configuration at `location` does not declare is a bad request, not a later provider call."""
        try:
            config = await self.config.at(location)
        except ConfigError as bad:
            raise InvalidRequestError(f"Cannot check the model against the configuration: {bad}",
                                      field="model") from None
        problem = undeclared(config, model)
        if problem is not None:
            raise InvalidRequestError(str(problem), field="model")

    # --- lifecycle ---------------------------------------------------------------------------------

    async def create(
        self,
        id: str | None = None,
        agent: str | None = None,
        model: ModelRef | None = None,
        location: LocationRef | None = None,
        *,
        parent_id: str | None = None,
        title: str | None = None,
        metadata: dict[str, Any] | None = None,
        permissions: builtins.list[PermissionV2Rule] | None = None,
    ) -> SessionV2Info:
        """A new session (an existing ID returns that session as it is). A child (`parent_id`) starts at its
        parent's Location unless `location` says otherwise; an unknown parent is SessionNotFoundError."""
        parent = None if parent_id is None else await self.get(parent_id)
        if location is None and parent is not None:
            location = parent.location
        loc = self.default_location if location is None else resolve_location(location.directory,
                                                                                location.workspaceID)
        if location is not None and not loc.directory.is_dir():
            raise InvalidRequestError(f"Location directory does not exist: {location.directory}", kind="body",
                                      field="location.directory")
        if agent is not None:
            await self._require_agent_at(loc, agent)
        if model is not None:
            await self._require_declared(loc, model)
        sid = id or new_session_id()

        def _create(tx: Tx) -> tuple[SessionV2Info, bool]:
            existing = tx.sessions.load(sid)
            if existing is not None:
                return existing, False
            if parent_id is not None:
                require_session(tx, parent_id)
            now = now_ms()
            info = SessionV2Info(
                id=sid, parentID=parent_id, projectID=loc.project_id, agent=agent, model=model,
                time=SessionTime(created=now, updated=now),
                title=default_title(now) if title is None else title,
                location=LocationRef(directory=str(loc.directory), workspaceID=loc.workspace_id),
                metadata=metadata, permissions=permissions,
            )
            tx.append(ev.SessionCreated(sessionID=sid, info=info), created=now)
            return info, True

        info, new = await self.store.write(_create)
        if new and self.hooks is not None:
            run = await self._hook_run(info)
            if run is not None:
                await self.hooks.notify(run, "SessionStart", {"source": "startup"})
        return info

    async def _hook_run(self, session: SessionV2Info) -> HookRun | None:
        """Where the session's hooks run, when its Location's config has any (a broken config runs none)."""
        location = resolve_location(session.location.directory, session.location.workspaceID)
        try:
            config = await self.config.at(location)
        except ConfigError:
            return None
        if not config.hooks:
            return None
        return HookRun(session.id, location.directory, location.project_root, self.env, config)

    async def get(self, session_id: str) -> SessionV2Info:
        return await self.store.read(lambda reader: require_session(reader, session_id))

    async def require(self, session_id: str) -> None:
        await self.get(session_id)

    async def execution_failure(self, session_id: str) -> SessionErrorInfo | None:
        """The error of the session's latest execution when it failed (None: it succeeded or was interrupted, or
        none ended yet); an unknown session is SessionNotFoundError."""
        ended = tuple(ev.definition_for(t).stored_type
                      for t in (ev.ExecutionSucceeded, ev.ExecutionFailed, ev.ExecutionInterrupted))

        def _latest(reader: Reader) -> SessionErrorInfo | None:
            require_session(reader, session_id)
            record = reader.events.latest_of_types(session_id, ended)
            return record.data.error if record is not None and isinstance(record.data, ev.ExecutionFailed) else None

        return await self.store.read(_latest)

    async def require_agent(self, session_id: str, agent: str) -> None:
        """An agent the configuration at the session's Location does not know is a bad request now (before a
        switch to it), not a failed execution later; an unknown session is SessionNotFoundError."""
        session = await self.get(session_id)
        await self._require_agent_at(resolve_location(session.location.directory, session.location.workspaceID),
                                     agent)

    async def _require_agent_at(self, location: Location, agent: str) -> None:
        """An agent the configuration at `location` does not know is a bad request (400 on `agent`)."""
        try:
            resolve_agent(await self.config.at(location), agent)
        except ConfigError as bad:
            raise InvalidRequestError(f"Cannot check the agent against the configuration: {bad}", kind="body",
                                      field="agent") from None
        except AgentNotFoundError as missing:
            raise InvalidRequestError(str(missing), kind="body", field="agent") from None

    async def switch_agent(self, session_id: str, agent: str) -> None:
        def _switch(tx: Tx) -> None:
            require_session(tx, session_id)
            tx.append(ev.AgentSelected(sessionID=session_id, agent=agent))

        await self.store.write(_switch)

    async def switch_model(self, session_id: str, model: ModelRef) -> None:
        session = await self.get(session_id)
        await self._require_declared(resolve_location(session.location.directory, session.location.workspaceID),
                                     model)

        def _switch(tx: Tx) -> None:
            info = require_session(tx, session_id)
            if model.same_as(info.model):
                return
            tx.append(ev.ModelSelected(sessionID=session_id, model=model, previous=info.model))

        await self.store.write(_switch)

    async def fork(self, session_id: str, message_id_: str | None = None) -> SessionV2Info:
        """A new session (its parent this one, in the same Location) holding this one's settled history up to and
        including `message_id_` (all of it without one), with its instruction entries; its own log starts with
        `session.forked`, and its first Step takes a fresh instruction baseline. Allowed while this one executes:
        a Step or compaction still under way is not copied."""

        def _fork(tx: Tx) -> SessionV2Info:
            parent = require_session(tx, session_id)
            if message_id_ is not None and tx.messages.find(session_id, message_id_) is None:
                raise MessageNotFoundError(sessionID=session_id, messageID=message_id_)
            now = now_ms()
            info = SessionV2Info(
                id=new_session_id(), parentID=parent.id, projectID=parent.projectID, agent=parent.agent,
                model=parent.model, time=SessionTime(created=now, updated=now), title=fork_title(parent.title),
                location=parent.location, subpath=parent.subpath,
            )
            tx.append(ev.Forked(sessionID=info.id, parentID=parent.id, from_=message_id_, info=info), created=now)
            for key, value in tx.instructions.entries(session_id):
                tx.instructions.put_entry(info.id, key, value, now)
            return require_session(tx, info.id)

        return await self.store.write(_fork)

    async def move(self, session_id: str, location: LocationRef) -> SessionV2Info:
        """Move an idle session to another directory (SessionBusyError while it executes): its next Step runs
        there, on a fresh instruction baseline. A missing directory is a bad request; a staged revert must be
        committed or cleared first (its files belong to the old Location)."""
        loc = resolve_location(location.directory, location.workspaceID)
        if not loc.directory.is_dir():
            raise InvalidRequestError(f"Location directory does not exist: {location.directory}",
                                      field="location.directory")
        destination = LocationRef(directory=str(loc.directory), workspaceID=loc.workspace_id)

        def _move(tx: Tx) -> SessionV2Info:
            info = require_session(tx, session_id)
            if info.revert is not None:
                raise ConflictError("A revert is staged: commit or clear it before moving the session",
                                    resource=session_id)
            if info.location == destination:
                return info
            tx.append(ev.Moved(sessionID=session_id, location=destination,
                               projectID=loc.project_id if loc.project_id != info.projectID else None))
            return require_session(tx, session_id)

        async with self.hold(session_id):
            return await self.store.write(_move)

    # --- listing -------------------------------------------------------------------------------------

    async def list(
        self,
        *,
        cursor: str | None = None,
        limit: int | None = None,
        order: Order | None = None,
        search: str | None = None,
        directory: str | None = None,
        project: str | None = None,
        subpath: str | None = None,
        workspace: str | None = None,
        parent: str | None = None,
    ) -> tuple[list[SessionV2Info], CursorLinks]:
        """A page of sessions; `parent` keeps the children of that session (the string `null`: root sessions)."""
        anchor: Key | None = None
        direction: Direction = "next"
        if cursor is not None:
            extra = {k: v for k, v in dict(limit=limit, order=order, search=search, directory=directory,
                                           project=project, subpath=subpath, workspace=workspace,
                                           parentID=parent).items()
                     if v is not None}
            if extra:
                raise InvalidCursorError(f"Cursor cannot be combined with {', '.join(sorted(extra))}")
            state = SessionCursor.decode(cursor)
            query, anchor, direction = state.query, state.anchor, state.direction
        else:
            if limit is not None and limit < 1:
                raise InvalidRequestError("limit must be a positive integer", field="limit")
            query = SessionQuery(limit=min(limit or SESSION_PAGE_DEFAULT, SESSION_PAGE_MAX), order=order or "desc",
                                 search=search, directory=directory, project=project, subpath=subpath,
                                 workspace=workspace, parent=parent)

        def cursor_at(key: Key, to: Direction) -> str:
            return SessionCursor(kind="sessions", query=query, anchor=(key[0], key[1]), direction=to).encode()

        def _page(reader: Reader) -> tuple[list[SessionV2Info], CursorLinks]:
            where = SessionFilter(
                search=query.search, project=query.project, workspace=query.workspace, subpath=query.subpath,
                directory=_directory_key(query.directory, from_cursor=cursor is not None) if query.directory else None,
                parent=query.parent,
            )
            page = reader.sessions.page(where, PageRequest(query.order, query.limit, anchor, direction))
            return page.items, page_links(page, cursor_at)

        return await self.store.read(_page)

    # --- input -----------------------------------------------------------------------------------------

    async def admit(
        self,
        session_id: str,
        prompt: PromptInput,
        *,
        id: str | None = None,
        delivery: ev.Delivery = "steer",
        resume: bool = True,
        traceparent: str | None = None,
    ) -> SessionInputAdmitted:
        """Durably admit a prompt (or reconcile an exact retry), then wake the execution (advisory) unless resume is
        false; a staged revert is committed first. A new input keeps the caller's `traceparent` (W3C), whose trace its
        execution joins when tracing. An attachment the Session may not read (outside its Location without
        permission, denied, not a regular file, too large) is a 400, known before anything is stored."""
        stored = admission.resolve_prompt(prompt)
        input_id = id or message_id()
        if self.hooks is not None:
            await self._prompt_hooks(session_id, input_id, id is not None, stored.text)
        if stored.files and not (id is not None and await self.store.read(
                lambda reader: reader.pending.input_recorded(input_id))):
            session = await self.get(session_id)
            files = stored.files

            def _check() -> None:
                authority = admission_authority(session.location.directory, session.agent, self.config, self.env)
                check_prompt_files(files, authority)

            await anyio.to_thread.run_sync(_check)

        at = await self._admit(session_id, input_id, ev.UserInput(data=stored, delivery=delivery), resume, traceparent)
        return SessionInputAdmitted(admittedSeq=at.seq, id=input_id, sessionID=session_id, prompt=stored,
                                    delivery=delivery, timeCreated=at.created, promotedSeq=at.promoted_seq)

    async def _admit(self, session_id: str, input_id: str, input: ev.AdmittedInput, resume: bool,
                     traceparent: str | None = None) -> admission.Admitted:
        """Admit `input` (`admission.admit`) in a write of its own, a staged revert committed first; count a new
        input, keep its `traceparent`, and wake the execution unless resume is false."""

        def _write(tx: Tx) -> tuple[admission.Admitted, bool]:
            require_session(tx, session_id)
            # input sent while a revert is staged commits it first (as OpenCode does): it answers the shortened
            # history, on a fresh instruction baseline
            commit_staged(tx, session_id)
            at, new = admission.admit(tx, session_id, input_id, input)
            if new and traceparent is not None:
                tx.pending.set_trace(input_id, traceparent)
            return at, new

        at, new = await self.store.write(_write)
        if new:
            hooks.prompt_admitted(input.delivery)
        if resume:
            self.wake(session_id)
        return at

    async def _prompt_hooks(self, session_id: str, input_id: str, retry: bool, text: str) -> None:
        """The UserPromptSubmit hooks see a new prompt before it is admitted; one that blocks rejects it (400,
        nothing stored). An exact retry of an input already admitted is not shown to them again."""
        assert self.hooks is not None
        run = await self._hook_run(await self.get(session_id))
        if run is None or not self.hooks.configured(run.config, "UserPromptSubmit"):
            return
        if retry and await self.store.read(lambda reader: reader.pending.input_recorded(input_id)):
            return
        reason = await self.hooks.user_prompt_submit(run, text)
        if reason is not None:
            raise InvalidRequestError(f"A UserPromptSubmit hook rejected the prompt: {reason}", field="prompt")
    async def admit_synthetic(self, session_id: str, data: ev.SyntheticInputData, *, id: str | None = None,
                              delivery: ev.Delivery = "steer", resume: bool = True) -> PendingInput:
        """Durably admit synthetic input (it executes like a prompt, shown as synthetic), or reconcile an exact
        retry; then wake the execution unless resume is false. A staged revert is committed first, as for a prompt."""
        input_id = id or message_id()
        at = await self._admit(session_id, input_id, ev.SyntheticInput(data=data, delivery=delivery), resume)
        return PendingInput(input_id, session_id, "synthetic", data.wire(), delivery, at.seq, at.created)

    async def steering(self, session_id: str) -> bool:
        """Whether input waits for the next Safe Step Boundary: a steer, or a compaction barrier."""

        def _q(reader: Reader) -> bool:
            require_session(reader, session_id)
            return reader.pending.barrier(session_id) is not None or any(
                delivery == "steer" for _, delivery in reader.pending.promotable(session_id))

        return await self.store.read(_q)

    async def compact(self, session_id: str) -> str:
        """Admit a manual compaction barrier (or join the pending one) and wake the execution. Returns its input ID."""

        def _admit(tx: Tx) -> str:
            require_session(tx, session_id)
            return admission.admit_compaction(tx, session_id, message_id())

        barrier = await self.store.write(_admit)
        self.wake(session_id)
        return barrier

    async def promote(self, session_id: str, scope: admission.PromotionScope) -> builtins.list[str]:
        return await self.store.write(lambda tx: admission.promote(tx, session_id, scope))

    async def pending(self, session_id: str) -> builtins.list[SessionInputAdmitted]:
        def _q(reader: Reader) -> builtins.list[SessionInputAdmitted]:
            require_session(reader, session_id)
            return admission.pending_inputs(reader, session_id)

        return await self.store.read(_q)

    # --- messages --------------------------------------------------------------------------------------

    async def messages(
        self, session_id: str, *, cursor: str | None = None, limit: int | None = None, order: Order | None = None
    ) -> tuple[builtins.list[SessionMessage], CursorLinks]:
        request: PageRequest
        if cursor is not None:
            if order is not None:
                raise InvalidCursorError("Cursor cannot be combined with order")
            if limit is not None:
                raise InvalidCursorError("Cursor cannot be combined with limit")
            state = MessageCursor.decode(cursor)
            if state.session_id != session_id:
                raise InvalidCursorError()
            request = PageRequest(state.order, state.limit, (state.anchor,), state.direction)
        else:
            size = MESSAGE_PAGE_DEFAULT if limit is None else limit
            if not 1 <= size <= MESSAGE_PAGE_MAX:
                raise InvalidRequestError(f"limit must be between 1 and {MESSAGE_PAGE_MAX}", field="limit")
            request = PageRequest(order or "desc", size)

        def cursor_at(key: Key, to: Direction) -> str:
            return MessageCursor(kind="messages", session_id=session_id, order=request.order, limit=request.limit,
                                 anchor=key[0], direction=to).encode()

        def _page(reader: Reader) -> tuple[builtins.list[SessionMessage], CursorLinks]:
            require_session(reader, session_id)
            page = reader.messages.page(session_id, request)
            return page.items, page_links(page, cursor_at)

        return await self.store.read(_page)

    async def message(self, session_id: str, message_id_: str) -> SessionMessage:
        def _q(reader: Reader) -> SessionMessage:
            require_session(reader, session_id)
            message = reader.messages.find(session_id, message_id_)
            if message is None:
                raise MessageNotFoundError(sessionID=session_id, messageID=message_id_)
            return message

        return await self.store.read(_q)

    async def context(self, session_id: str) -> builtins.list[SessionMessage]:
        """Projected Session History after the active compaction and instruction-baseline cutoffs."""

        def _q(reader: Reader) -> builtins.list[SessionMessage]:
            require_session(reader, session_id)
            return [decode(data) for data in active_history(reader, session_id)]

        return await self.store.read(_q)

    # --- the durable log -------------------------------------------------------------------------------

    async def log(
        self, session_id: str, after: int = -1, *, follow: bool = True, synced: bool = False
    ) -> AsyncGenerator[EventRecord | LogSynced, None]:
        """Public durable events after `after` (exclusive). Verifies the session first (raises before the stream).

        The commit waiter is subscribed before replay, so nothing committed between replay and waiting is lost.
        With `synced`, one `log.synced` marker follows the replay; without `follow` the stream ends there."""
        batches = await self.log_batches(session_id, after, follow=follow, synced=synced)

        async def flatten() -> AsyncGenerator[EventRecord | LogSynced, None]:
            try:
                async for batch in batches:
                    for item in batch:
                        yield item
            finally:
                await batches.aclose()

        return flatten()

    async def log_batches(
        self, session_id: str, after: int = -1, *, follow: bool = True, synced: bool = False
    ) -> AsyncGenerator[builtins.list[EventRecord | LogSynced], None]:
        """The same stream as `log`, one list per store page (what a transport can write in one go)."""
        commits = self.store.durable.subscribe(session_id)
        try:
            await self.require(session_id)
        except BaseException:
            commits.close()
            raise
        return self._log_stream(commits, session_id, after, follow, synced)

    async def _log_stream(self, commits: CommitWaiter, session_id: str, after: int, follow: bool,
                          synced: bool) -> AsyncGenerator[builtins.list[EventRecord | LogSynced], None]:
        last = after
        replaying = True
        with commits:
            while True:
                commits.clear()
                batch = await self.store.events_after(session_id, last)
                if batch:
                    last = batch[-1].sequence
                    public: builtins.list[EventRecord | LogSynced] = [r for r in batch if r.definition.public]
                    if public:
                        yield public
                if len(batch) == 100:
                    continue
                if replaying:
                    replaying = False
                    if synced:
                        yield [LogSynced(aggregateID=session_id, seq=last if last >= 0 else None)]
                    if not follow:
                        return
                await commits.wait()


_FORK_NUMBER = re.compile(r" \(fork #(\d+)\)$")


def fork_title(title: str) -> str:
    """`X (fork #1)`, or the next number for a fork of a fork."""
    found = _FORK_NUMBER.search(title)
    if found is None:
        return f"{title} (fork #1)"
    return f"{title[:found.start()]} (fork #{int(found.group(1)) + 1})"


def _directory_key(directory: str, *, from_cursor: bool) -> str:
    """The stored form of a directory filter. One that cannot even be resolved (a NUL byte, `~nouser`, a name too
    long) is a bad request, or a forged cursor."""
    try:
        return str(resolve_location(directory).directory)
    except (ValueError, RuntimeError, OSError):
        if from_cursor:
            raise InvalidCursorError() from None
        raise InvalidRequestError("Invalid query: directory: unusable directory path", kind="query",
                                  field="directory") from None
