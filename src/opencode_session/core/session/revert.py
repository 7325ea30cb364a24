"""Revert: taking a turn back, files and history together. Staging restores the files the agent's Steps changed at or
after a boundary message (from the snapshot each Step started on) and shows the revert on the session; clearing puts
the files back as the agent left them; committing removes the boundary and everything after it from the projected
history (never from the log). Each holds the session idle: none runs while it executes."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable
from typing import TYPE_CHECKING

from ...schema import events as ev
from ...schema.errors import ConflictError, MessageNotFoundError, SessionNotFoundError
from ...schema.message_data import SessionMessageAssistantData
from ...schema.session import FileDiff, RevertState, SessionV2Info
from ..config import Config, ConfigError, ConfigSource
from ..location import Location, resolve_location
from ..store import Reader, Store, Tx

if TYPE_CHECKING:  # the snapshots load with the first revert (or the runner), not with the session service
    from ..snapshot import LocationSnapshots, Snapshots

Hold = Callable[[str], contextlib.AbstractAsyncContextManager[None]]


def _session(reader: Reader, session_id: str) -> SessionV2Info:
    info = reader.sessions.load(session_id)
    if info is None:
        raise SessionNotFoundError(sessionID=session_id)
    return info


def commit_staged(tx: Tx, session_id: str) -> bool:
    """Commit the session's staged revert, if it has one, in the caller's transaction; whether it had one."""
    info = tx.sessions.load_data(session_id)  # the stored record: no validation on every promotion
    if info is None:
        raise SessionNotFoundError(sessionID=session_id)
    staged = info.get("revert")
    if staged is None:
        return False
    tx.append(ev.RevertCommitted(sessionID=session_id, to=staged["messageID"]))
    return True


def no_hold(_session_id: str) -> contextlib.AbstractAsyncContextManager[None]:
    return contextlib.nullcontext()


class Reverts:
    """Stage, clear and commit reverts; `config` says where snapshots are off. `hold` keeps a session idle meanwhile
    (SessionBusyError while it executes): the runtime's `SessionExecution.idle_hold`."""

    def __init__(self, store: Store, snapshots: Callable[[], Snapshots], config: ConfigSource,
                 hold: Hold = no_hold) -> None:
        self.store = store
        self._snapshots = snapshots  # made on first use
        self.config = config
        self.hold = hold

    async def stage(self, session_id: str, message_id: str, files: bool = True) -> RevertState:
        """Stage a revert to `message_id` (or move the staged one there) and restore the files, unless `files` is
        false. MessageNotFoundError, without saying whose, for a message that is not this session's; ConflictError
        (resource "snapshot"), with no file touched, when a snapshot it needs cannot be read."""
        from ..snapshot import off_reason

        async with self.hold(session_id):
            session, steps = await self.store.read(lambda reader: _boundary(reader, session_id, message_id))
            location = resolve_location(session.location.directory, session.location.workspaceID)
            reason = off_reason(location, await self._config(location))
            if reason is not None:
                state = RevertState(messageID=message_id, files=[], notice=f"No files were restored: {reason}.")
            else:
                state = await self._restage(self._snapshots().at(location), session.revert, message_id, steps, files)

            def _record(tx: Tx) -> None:
                _boundary(tx, session_id, message_id)  # still there
                tx.append(ev.RevertStaged(sessionID=session_id, revert=state))

            await self.store.write(_record)
            return state

    async def clear(self, session_id: str) -> None:
        """Drop the staged revert and put its files back as the agent left them (a no-op without one)."""
        async with self.hold(session_id):
            session = await self.store.read(lambda reader: _session(reader, session_id))
            staged = session.revert
            if staged is None:
                return
            if staged.snapshot is not None and staged.files:
                location = resolve_location(session.location.directory, session.location.workspaceID)
                await self._snapshots().at(location).restore({f.path: staged.snapshot for f in staged.files})

            def _record(tx: Tx) -> None:
                if _session(tx, session_id).revert == staged:
                    tx.append(ev.RevertCleared(sessionID=session_id))

            await self.store.write(_record)

    async def commit(self, session_id: str) -> None:
        """Remove the staged boundary and everything after it from the projected history (a no-op without one)."""
        async with self.hold(session_id):
            await self.store.write(lambda tx: commit_staged(tx, session_id))

    async def _config(self, location: Location) -> Config | None:
        """The configuration at `location`; None (snapshots on) when it cannot be read."""
        try:
            return await self.config.at(location)
        except ConfigError:
            return None

    async def _restage(self, snaps: LocationSnapshots, staged: RevertState | None, message_id: str,
                       steps: list[SessionMessageAssistantData], files: bool) -> RevertState:
        from ..snapshot import SnapshotUnreadable

        # the files as the agent left them: taken now, or kept from the revert staged before (the files are
        # reverted now)
        original = staged.snapshot if staged is not None and staged.snapshot else await snaps.capture()
        if original is None:
            return RevertState(messageID=message_id, files=[],
                               notice="No files were restored: the files could not be snapshotted now.")
        # everything is read before any file is touched: a snapshot that cannot be read refuses the whole stage
        try:
            wanted = await _plan(snaps, steps, original) if files else {}
            # only what `original` can give back is restored, or clearing could not undo it
            kept = await snaps.too_large(original, list(wanted))
            by_start: dict[str, list[str]] = {}
            for path, start in wanted.items():
                if path not in kept:
                    by_start.setdefault(start, []).append(path)
            for start, paths in by_start.items():
                kept.update(await snaps.too_large(start, paths))
            plan = {path: start for path, start in wanted.items() if path not in kept}
            back = {f.path: original for f in (staged.files or [])} if staged is not None else {}
            diffs: list[FileDiff] = await snaps.diffs(original, plan)
        except SnapshotUnreadable as exc:
            raise ConflictError(f"No files were restored: {exc}", resource="snapshot") from exc
        left = await snaps.restore({**back, **plan})
        kept.update((path, why) for path, why in left.items() if path in plan)
        diffs = [d for d in diffs if d.path not in left]
        notice = None
        if kept:
            notice = "Not restored: " + "; ".join(f"{path} ({why})" for path, why in sorted(kept.items())) + "."
        return RevertState(messageID=message_id, snapshot=original, files=diffs, notice=notice)


def _boundary(reader: Reader, session_id: str, message_id: str) -> tuple[SessionV2Info,
                                                                         list[SessionMessageAssistantData]]:
    """The session and its assistant messages at or after the boundary message, in order."""
    session = _session(reader, session_id)
    placed = reader.messages.placement(message_id)
    if placed is None or placed.session_id != session_id:
        raise MessageNotFoundError(sessionID=session_id, messageID=message_id)
    steps = [json.loads(row.data) for row in reader.messages.window(session_id, placed.seq - 1, -1)
             if row.type == "assistant"]
    return session, steps


async def _plan(snaps: LocationSnapshots, steps: list[SessionMessageAssistantData],
                current: str) -> dict[str, str]:
    """Each file the Steps changed, with the snapshot the first Step that changed it started on. A Step that left
    no end record (a crash) changed what differs between its start and the next Step's start (or `current`)."""
    starts = [step.get("snapshot", {}).get("start") for step in steps]
    plan: dict[str, str] = {}
    for index, step in enumerate(steps):
        start, snapshot = starts[index], step.get("snapshot", {})
        if start is None:
            continue
        changed: list[str] | None = snapshot.get("files", [])
        if "end" not in snapshot:
            later = next((s for s in starts[index + 1:] if s is not None), current)
            changed = await snaps.changed_or_refuse(start, later)
        for path in changed or []:
            plan.setdefault(path, start)
    return plan
