"""What a turn, or a range of turns, changed on disk (`session.diff`): each file that differs from the snapshot the
range's first Step started on to the one its last Step ended on (a Step still running: the working copy now)."""

from __future__ import annotations

import json
from dataclasses import dataclass

from ...schema.common import LocationRef
from ...schema.errors import InvalidRequestError, MessageNotFoundError, SessionNotFoundError
from ...schema.session import FileDiff
from ..location import resolve_location
from ..snapshot import Snapshots, SnapshotUnreadable
from ..store import Reader, Store


@dataclass(frozen=True)
class _Range:
    """The snapshots bounding a range: `start`, and `end` (None: the working copy), at `location`."""

    location: LocationRef
    start: str
    end: str | None


def _user(reader: Reader, session_id: str, message_id: str) -> int:
    placed = reader.messages.placement(message_id)
    if placed is None or placed.session_id != session_id or placed.type != "user":
        raise MessageNotFoundError(sessionID=session_id, messageID=message_id)
    return placed.seq


def _range(reader: Reader, session_id: str, first: str | None, last: str | None) -> _Range | None:
    """The range's bounding snapshots; None when its Steps took none (no file-changing tool ran, or snapshots are
    off). MessageNotFoundError for a `from`/`to` that is not a user message of the session; InvalidRequestError for
    a `to` before `from`, or a range whose Steps ran in more than one Location."""
    if reader.sessions.load_data(session_id) is None:
        raise SessionNotFoundError(sessionID=session_id)
    rows = reader.messages.window(session_id, -1, -1)
    users = [row.seq for row in rows if row.type == "user"]
    if first is None:
        if last is not None:
            raise InvalidRequestError("`to` needs `from`", kind="query", field="from")
        if not users:
            return None
        low = users[-1]
    else:
        low = _user(reader, session_id, first)
    through = low if last is None else _user(reader, session_id, last)
    if through < low:
        raise InvalidRequestError("`to` is an earlier message than `from`", kind="query", field="to")
    high = next((seq for seq in users if seq > through), None)
    steps = [(row.seq, json.loads(row.data)) for row in rows
             if row.type == "assistant" and row.seq > low and (high is None or row.seq < high)]
    taken = [(seq, step) for seq, step in steps if step.get("snapshot", {}).get("start")]
    if not taken:
        return None
    locations = {_location(reader, session_id, seq) for seq, _ in taken}
    if len(locations) > 1:
        raise InvalidRequestError("The range's Steps ran in more than one location (the session was moved between "
                                  "them): ask for the turns on each side of the move", kind="query", field="to")
    start = taken[0][1]["snapshot"]["start"]
    final = taken[-1][1]
    snapshot = final.get("snapshot", {})
    running = "completed" not in final.get("time", {})
    end = None if running or "end" not in snapshot else str(snapshot["end"])
    location = locations.pop()
    if location is None:
        return None
    return _Range(LocationRef.model_validate_json(location), str(start), end)


def _location(reader: Reader, session_id: str, seq: int) -> str | None:
    """Where the event at `seq` happened, as JSON text (comparable)."""
    found = reader.events.after(session_id, seq - 1, 1)
    if not found or found[0].location is None:
        return None
    return json.dumps(found[0].location.wire(), sort_keys=True)


class Diffs:
    """Per-file diffs of turns from the snapshots taken around their Steps."""

    def __init__(self, store: Store, snapshots: Snapshots) -> None:
        self.store = store
        self.snapshots = snapshots

    async def diff(self, session_id: str, first: str | None = None, last: str | None = None,
                   context: int | None = None) -> list[FileDiff]:
        """The files the turns from user message `first` (default: the newest) through `last` (default: `first`'s
        turn alone) changed, with `context` unchanged lines around each hunk (None: whole files)."""
        bounds = await self.store.read(lambda reader: _range(reader, session_id, first, last))
        if bounds is None:
            return []
        location = resolve_location(bounds.location.directory, bounds.location.workspaceID)
        try:
            return await self.snapshots.at(location).compare(bounds.start, bounds.end, context)
        except SnapshotUnreadable as exc:
            raise InvalidRequestError(f"The range's files cannot be compared: {exc}", kind="snapshot") from exc
