"""Managing sessions after creation: updating one, removing one with its children (and what it holds), and the
inbox's own changes (list, cancel, change delivery), each one store transaction with its durable event."""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, cast

import anyio

from ...schema import events as ev
from ...schema.errors import ConflictError
from ...schema.lifecycle import InboxCompactionItem, InboxItem, InboxSyntheticItem, InboxUserItem
from ...schema.permission import PermissionV2Rule
from ...schema.prompt import Prompt
from ..store import PendingInput, Reader, Store, Tx
from .service import Sessions, require_session

log = logging.getLogger(__name__)

Interrupt = Callable[[str], Awaitable[object]]


def inbox_item(item: PendingInput) -> InboxItem:
    """One pending row as the inbox shows it."""
    head: dict[str, Any] = {"id": item.id, "sessionID": item.session_id, "admittedSeq": item.admitted_seq,
                            "timeCreated": item.time_created}
    if item.type == "user":
        return InboxUserItem(**head, prompt=Prompt.model_validate(item.data), delivery=cast(Any, item.delivery))
    if item.type == "synthetic":
        return InboxSyntheticItem(**head, **item.data, delivery=cast(Any, item.delivery))
    return InboxCompactionItem(**head)


class SessionLifecycle:
    """Update, remove and inbox operations over the store. `interrupt` stops a session's execution and waits for
    it (the runtime's execution), `released` is told each removed session's directory once it is gone, and
    `outputs` is the directory of Managed Tool Output Files (a removed session's are deleted there)."""

    def __init__(self, store: Store, sessions: Sessions, outputs: Path | None = None, *,
                 interrupt: Interrupt | None = None, released: Callable[[str], Awaitable[None]] | None = None,
                 removed: Callable[[str], None] | None = None) -> None:
        self.store = store
        self.sessions = sessions
        self.outputs = outputs
        self.interrupt = interrupt
        self.released = released
        self.removed = removed  # told each removed session's ID
        self._viewed: dict[str, int] = {}  # the newest idle transition each session was seen at, by this process

    # --- update ------------------------------------------------------------------------------------------

    async def update(self, session_id: str, *, title: str | None = None, metadata: dict[str, Any] | None = None,
                     permissions: list[PermissionV2Rule] | None = None) -> None:
        """Replace the fields given (one `session.updated` event; nothing when none changes anything)."""

        def _update(tx: Tx) -> None:
            info = require_session(tx, session_id)
            change = ev.Updated(
                sessionID=session_id,
                title=title if title is not None and title != info.title else None,
                metadata=metadata if metadata is not None and metadata != info.metadata else None,
                permissions=permissions if permissions is not None and permissions != info.permissions else None,
            )
            if any(v is not None for v in (change.title, change.metadata, change.permissions)):
                tx.append(change)

        await self.store.write(_update)

    # --- view --------------------------------------------------------------------------------------------

    async def view(self, session_id: str, idle: int) -> None:
        """Mark the idle transition at `idle` (epoch ms) as seen: one durable `session.viewed` event, which every
        event subscriber (other viewers) receives; a view of a transition this process recorded as seen already, or
        of an older one, records nothing."""

        def _view(tx: Tx) -> bool:
            require_session(tx, session_id)
            if self._viewed.get(session_id, -1) >= idle:
                return False
            tx.append(ev.Viewed(sessionID=session_id, idle=idle))
            return True

        if await self.store.write(_view):
            self._viewed[session_id] = max(idle, self._viewed.get(session_id, -1))

    # --- remove ------------------------------------------------------------------------------------------

    async def remove(self, session_id: str) -> None:
        """Remove the session and its children, recursively (SessionNotFoundError when it is gone already): each
        executing one is interrupted first; then, in one transaction, everything the store holds of them leaves
        it and one `session.deleted` event per session is their tombstone; then their tool output files are
        deleted and their Locations' terminals released when no session works there any more."""
        tree = await self.store.read(lambda reader: _tree(reader, session_id))
        if self.interrupt is not None:
            for sid in tree:
                await self.interrupt(sid)

        def _remove(tx: Tx) -> tuple[list[str], set[str]]:
            require_session(tx, session_id)
            # children that appeared since the tree was read go too; leaves first
            paths: list[str] = []
            directories: set[str] = set()
            for sid in _tree(tx, session_id):
                info = tx.sessions.load(sid)
                if info is None:
                    continue
                directories.add(info.location.directory)
                paths.extend(tx.lifecycle.output_paths(sid))
                # the tombstone first, then the rest of the log goes: it keeps the newest position, so no later
                # event (on SQLite, numbered after the newest row left) is ever numbered below one a reader saw
                tombstone = tx.append(ev.Deleted(sessionID=sid))
                tx.lifecycle.purge_events(sid, keep=tombstone.id)
            # a file a remaining session's messages name stays (a fork's copied tool calls name its parent's files)
            return [p for p in dict.fromkeys(paths) if not tx.lifecycle.referenced(p)], directories

        paths, directories = await self.store.write(_remove)
        for sid in tree:
            self._viewed.pop(sid, None)
            if self.removed is not None:
                self.removed(sid)
        await anyio.to_thread.run_sync(self._delete_outputs, paths)
        if self.released is not None:
            for directory in directories:
                try:
                    await self.released(directory)
                except Exception:  # the session is gone: what it held is released as well as it can be
                    log.exception("releasing what a removed session held at %s failed", directory)

    def _delete_outputs(self, paths: list[str]) -> None:
        if self.outputs is None:
            return
        root = os.path.realpath(self.outputs)
        for path in paths:
            real = os.path.realpath(path)
            if os.path.dirname(real) == root:  # only files of the managed directory, never one a message names
                with contextlib.suppress(OSError):
                    os.unlink(real)

    # --- the inbox ---------------------------------------------------------------------------------------

    async def inbox(self, session_id: str) -> list[InboxItem]:
        def _list(reader: Reader) -> list[InboxItem]:
            require_session(reader, session_id)
            return [inbox_item(item) for item in reader.lifecycle.inbox(session_id)]

        return await self.store.read(_list)

    async def cancel(self, session_id: str, input_id: str) -> bool:
        """Cancel a pending item: whether this call removed it (False: it was delivered or cancelled already). The
        session's writes are serialized first, so a promotion of the same item either committed before (and this
        finds nothing) or runs after (and finds nothing): exactly one of them wins."""

        def _cancel(tx: Tx) -> bool:
            require_session(tx, session_id)
            tx.lifecycle.lock(session_id)
            item = tx.pending.get(input_id)
            if item is None or item.session_id != session_id:
                return False
            tx.append(ev.InputCancelled(sessionID=session_id, inputID=input_id))
            return True

        return await self.store.write(_cancel)

    async def deliver(self, session_id: str, input_id: str, delivery: ev.Delivery) -> None:
        """Change a pending item's delivery; to `steer` it wakes execution. ConflictError when the item is no longer
        pending (delivered or cancelled) or has no delivery (a compaction barrier)."""

        def _deliver(tx: Tx) -> bool:
            require_session(tx, session_id)
            tx.lifecycle.lock(session_id)
            item = tx.pending.get(input_id)
            if item is None or item.session_id != session_id:
                raise ConflictError(f"Input {input_id} is no longer pending", resource=input_id)
            if item.delivery is None:
                raise ConflictError(f"Input {input_id} is a compaction barrier: it has no delivery",
                                    resource=input_id)
            if item.delivery == delivery:
                return False
            data = ev.InputSteered if delivery == "steer" else ev.InputQueued
            tx.append(data(sessionID=session_id, inputID=input_id))
            return True

        changed = await self.store.write(_deliver)
        if changed and delivery == "steer":
            self.sessions.wake(session_id)


    async def family(self, session_id: str) -> list[str]:
        """The session and its descendants, leaves first; SessionNotFoundError when the session is unknown."""
        return await self.store.read(lambda reader: _tree(reader, session_id))


def _tree(reader: Reader, session_id: str) -> list[str]:
    """The session and its descendants, leaves first (SessionNotFoundError when the session is unknown)."""
    require_session(reader, session_id)
    order: list[str] = []
    todo = [session_id]
    seen: set[str] = set()
    while todo:
        sid = todo.pop()
        if sid in seen:
            continue
        seen.add(sid)
        order.append(sid)
        todo.extend(reader.lifecycle.children(sid))
    return list(reversed(order))
