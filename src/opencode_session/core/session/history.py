"""Session History selection: projected messages after the latest compaction and the instruction-baseline cutoff
(for the model, an automatic compaction is followed by the input it was made for), plus an incremental per-session
cache so a Step decodes only messages that changed since the last one."""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

from ...schema.message_data import SessionMessageData
from ..store import HistoryRow, Reader
from ..store.codec import as_data


def _bounds(reader: Reader, session_id: str) -> tuple[int, int]:
    """(exclusive start seq, instruction cutoff seq) of the active history: it starts at the latest completed
    compaction, and Instruction Updates up to the baseline are already in the baseline."""
    compaction = reader.messages.latest_completed_compaction(session_id)
    return (-1 if compaction is None else compaction - 1), reader.instructions.baseline_seq(session_id)


def active_history(reader: Reader, session_id: str) -> list[str]:
    """Message JSON in seq order: from the latest completed compaction on, minus Instruction Updates already
    folded into the stored baseline."""
    return [row.data for row in reader.messages.window(session_id, *_bounds(reader, session_id))]


@dataclass(eq=False)
class HistoryEntry:
    """One decoded message at one revision; `derived` memoizes what callers compute from it (e.g. lowering)."""

    id: str
    seq: int
    rev: int
    message: SessionMessageData
    derived: dict[Any, Any] = field(default_factory=dict)
    # the user message an automatic compaction was made for, sent again right after its checkpoint
    replayed: bool = False

    @classmethod
    def of(cls, row: HistoryRow, replayed: bool = False) -> HistoryEntry:
        return cls(row.id, row.seq, row.rev, as_data(row.data), replayed=replayed)


@dataclass
class _SessionHistory:
    bounds: tuple[int, int]
    entries: list[HistoryEntry]
    by_id: dict[str, HistoryEntry]
    watermark: int  # the newest time_updated seen; rows touched at or after it are re-checked
    removed: int  # the session's removed-message count when it was read whole


class HistoryCache:
    """Decoded active history per session, refreshed incrementally: a Step reads only rows created or updated
    since the previous load, so its cost does not grow with history length. Entries are shared: never mutate
    them. Use it from one thread (the store's reader) only."""

    def __init__(self, max_sessions: int = 64) -> None:
        self.max_sessions = max_sessions
        self._sessions: OrderedDict[str, _SessionHistory] = OrderedDict()

    def load(self, reader: Reader, session_id: str) -> list[HistoryEntry]:
        """The active history in seq order, except that after an automatic compaction's checkpoint comes the input
        it was made for (a user message from before it), so the Step rebuilt on it still answers that input: the
        checkpoint's record of recent context leaves it out."""
        bounds = _bounds(reader, session_id)
        state = self._sessions.pop(session_id, None)
        if (state is None or state.bounds != bounds or state.removed != reader.messages.removed(session_id)
                or not self._refresh(reader, session_id, state)):
            state = self._full(reader, session_id, bounds)
        self._sessions[session_id] = state
        while len(self._sessions) > self.max_sessions:
            self._sessions.popitem(last=False)
        return state.entries

    def _full(self, reader: Reader, session_id: str, bounds: tuple[int, int]) -> _SessionHistory:
        removed = reader.messages.removed(session_id)
        rows = reader.messages.window(session_id, *bounds)
        entries = [HistoryEntry.of(row) for row in rows]
        if entries and entries[0].message["type"] == "compaction" and entries[0].message["reason"] == "auto":
            trigger = reader.messages.compaction_trigger(session_id, entries[0].seq)
            if trigger is not None:
                entries.insert(1, HistoryEntry.of(trigger, replayed=True))
        watermark = max((row.updated for row in rows), default=0)
        return _SessionHistory(bounds, entries, {e.id: e for e in entries}, watermark, removed)

    def _refresh(self, reader: Reader, session_id: str, state: _SessionHistory) -> bool:
        """Apply rows touched since the watermark; False when only a full reload is safe (rows appeared out of
        order; rows that vanished show in the removed-message count, checked before)."""
        start, cutoff = state.bounds
        for row in reader.messages.touched_since(session_id, state.watermark):
            if row.seq <= start or (row.type == "system" and row.seq <= cutoff):
                continue
            entry = state.by_id.get(row.id)
            if entry is not None:
                if entry.rev != row.rev:
                    fresh = HistoryEntry.of(row)
                    # updates land near the end (the running assistant): search from there
                    index = next(i for i in range(len(state.entries) - 1, -1, -1) if state.entries[i] is entry)
                    state.entries[index] = fresh
                    state.by_id[row.id] = fresh
            else:
                if state.entries and row.seq < state.entries[-1].seq:
                    return False
                fresh = HistoryEntry.of(row)
                state.entries.append(fresh)
                state.by_id[row.id] = fresh
            state.watermark = max(state.watermark, row.updated)
        return True
