"""Session History selection: projected messages after the latest compaction and the instruction-baseline cutoff,
plus an incremental per-session cache so a Step decodes only messages that changed since the last one."""

from __future__ import annotations

import json
import sqlite3
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

_ACTIVE = (
    " FROM session_message WHERE session_id = ? AND seq > ? AND NOT (type = 'system' AND seq <= ?) ORDER BY seq"
)


def baseline_seq(conn: sqlite3.Connection, session_id: str) -> int:
    row = conn.execute("SELECT baseline_seq FROM instruction_checkpoint WHERE session_id = ?",
                       (session_id,)).fetchone()
    return -1 if row is None else int(row[0])


def _bounds(conn: sqlite3.Connection, session_id: str) -> tuple[int, int]:
    """(exclusive start seq, instruction cutoff seq) of the active history."""
    row = conn.execute(
        "SELECT seq FROM session_message WHERE session_id = ? AND type = 'compaction'"
        " AND coalesce(json_extract(data, '$.status'), 'completed') = 'completed' ORDER BY seq DESC LIMIT 1",
        (session_id,),
    ).fetchone()
    return (-1 if row is None else int(row[0]) - 1), baseline_seq(conn, session_id)


def active_history(conn: sqlite3.Connection, session_id: str) -> list[str]:
    """Message JSON in seq order: from the latest completed compaction on, minus Instruction Updates already
    folded into the stored baseline."""
    start, cutoff = _bounds(conn, session_id)
    return [r[0] for r in conn.execute("SELECT data" + _ACTIVE, (session_id, start, cutoff))]


@dataclass(eq=False)
class HistoryEntry:
    """One decoded message at one revision; `derived` memoizes what callers compute from it (e.g. lowering)."""

    id: str
    seq: int
    rev: int
    message: dict[str, Any]
    derived: dict[Any, Any] = field(default_factory=dict)


@dataclass
class _SessionHistory:
    bounds: tuple[int, int]
    entries: list[HistoryEntry]
    by_id: dict[str, HistoryEntry]
    watermark: int  # the newest time_updated seen; rows touched at or after it are re-checked


class HistoryCache:
    """Decoded active history per session, refreshed incrementally: a Step reads only rows created or updated
    since the previous load, so its cost does not grow with history length. Entries are shared: never mutate
    them. Use it from one thread (the store's reader) only."""

    def __init__(self, max_sessions: int = 64) -> None:
        self.max_sessions = max_sessions
        self._sessions: OrderedDict[str, _SessionHistory] = OrderedDict()

    def load(self, conn: sqlite3.Connection, session_id: str) -> list[HistoryEntry]:
        """The active history in seq order."""
        bounds = _bounds(conn, session_id)
        state = self._sessions.pop(session_id, None)
        if state is None or state.bounds != bounds or not self._refresh(conn, session_id, state):
            state = self._full(conn, session_id, bounds)
        self._sessions[session_id] = state
        while len(self._sessions) > self.max_sessions:
            self._sessions.popitem(last=False)
        return state.entries

    def _full(self, conn: sqlite3.Connection, session_id: str, bounds: tuple[int, int]) -> _SessionHistory:
        rows = conn.execute("SELECT id, seq, rev, data, time_updated" + _ACTIVE, (session_id, *bounds)).fetchall()
        entries = [HistoryEntry(r[0], r[1], r[2], json.loads(r[3])) for r in rows]
        watermark = max((r[4] for r in rows), default=0)
        return _SessionHistory(bounds, entries, {e.id: e for e in entries}, watermark)

    def _refresh(self, conn: sqlite3.Connection, session_id: str, state: _SessionHistory) -> bool:
        """Apply rows touched since the watermark; False when only a full reload is safe (rows vanished or
        appeared out of order)."""
        start, cutoff = state.bounds
        rows = conn.execute(
            "SELECT id, seq, rev, type, data, time_updated FROM session_message"
            " WHERE session_id = ? AND time_updated >= ? ORDER BY seq", (session_id, state.watermark)).fetchall()
        for mid, seq, rev, kind, data, updated in rows:
            if seq <= start or (kind == "system" and seq <= cutoff):
                continue
            entry = state.by_id.get(mid)
            if entry is not None:
                if entry.rev != rev:
                    fresh = HistoryEntry(mid, seq, rev, json.loads(data))
                    # updates land near the end (the running assistant): search from there
                    index = next(i for i in range(len(state.entries) - 1, -1, -1) if state.entries[i] is entry)
                    state.entries[index] = fresh
                    state.by_id[mid] = fresh
            else:
                if state.entries and seq < state.entries[-1].seq:
                    return False
                fresh = HistoryEntry(mid, seq, rev, json.loads(data))
                state.entries.append(fresh)
                state.by_id[mid] = fresh
            state.watermark = max(state.watermark, updated)
        count = conn.execute("SELECT count(*)" + _ACTIVE.replace(" ORDER BY seq", ""),
                             (session_id, start, cutoff)).fetchone()[0]
        return count == len(state.entries)
