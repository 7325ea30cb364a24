"""Session management in SQL: a session's children, removing everything the store holds of a session, and the
inbox's own changes (listing, cancelling and re-delivering pending input), each one statement both backends run."""

from __future__ import annotations

import json

from ..rows import PendingInput
from .connection import Connection
from .pending import _pending

# What a session holds beside its projection, removed with it (its usage rows before the messages they belong to; its
# messages before session_message_removal: their removal trigger counts into it).
_SESSION_TABLES = ("session_usage_tool", "session_usage", "session_message", "session_message_removal",
                   "session_pending", "instruction_checkpoint", "instruction_entry", "session_lease",
                   "step_context")


class SqlLifecycle:
    def __init__(self, conn: Connection) -> None:
        self.conn = conn

    # --- reads -------------------------------------------------------------------------------------------

    def children(self, session_id: str) -> list[str]:
        rows = self.conn.execute("SELECT id FROM session WHERE parent_id = ? ORDER BY time_created, created_order",
                                 (session_id,)).fetchall()
        return [str(row[0]) for row in rows]

    def inbox(self, session_id: str) -> list[PendingInput]:
        rows = self.conn.execute("SELECT * FROM session_pending WHERE session_id = ? ORDER BY admitted_seq",
                                 (session_id,)).fetchall()
        return [_pending(row) for row in rows]

    def output_paths(self, session_id: str) -> list[str]:
        """The Managed Tool Output Files the session's tool calls wrote (their paths, as the messages name them)."""
        rows = self.conn.execute(
            "SELECT data FROM session_message WHERE session_id = ? AND type = 'assistant' AND data LIKE ?",
            (session_id, '%"outputPaths"%')).fetchall()
        paths: list[str] = []
        for row in rows:
            for part in json.loads(row[0]).get("content", []):
                state = part.get("state") if isinstance(part, dict) else None
                if isinstance(state, dict):
                    paths.extend(p for p in state.get("outputPaths") or () if isinstance(p, str))
        return paths

    def referenced(self, path: str) -> bool:
        """Whether a message of some session still names this tool output file (a fork's copies name its parent's)."""
        row = self.conn.execute("SELECT 1 FROM session_message WHERE data LIKE ? LIMIT 1",
                                ("%" + json.dumps(path)[1:-1] + "%",)).fetchone()
        return row is not None

    # --- writes ------------------------------------------------------------------------------------------

    def lock(self, session_id: str) -> None:
        """Serialize this transaction with every other write of the session's aggregate until it ends: PostgreSQL
        locks the sequence row (SQLite has one writer and needs nothing). Inbox changes and promotion take it before
        they read the inbox, so of a cancel and a promotion exactly one finds the item."""
        self.conn.execute("UPDATE event_sequence SET seq = seq WHERE aggregate_id = ?", (session_id,))

    def remove(self, session_id: str) -> None:
        """Everything the store holds of the session but its log: projection, messages, inbox, instruction state,
        lease."""
        for table in _SESSION_TABLES:
            self.conn.execute(f"DELETE FROM {table} WHERE session_id = ?", (session_id,))
        self.conn.execute("DELETE FROM session WHERE id = ?", (session_id,))

    def purge_events(self, session_id: str, keep: str) -> None:
        """The session's events leave the log, all but `keep` (its tombstone)."""
        self.conn.execute("DELETE FROM event WHERE aggregate_id = ? AND id <> ?", (session_id, keep))

    def cancel(self, session_id: str, input_id: str) -> bool:
        """Remove a pending item; whether it was still there."""
        row = self.conn.execute("DELETE FROM session_pending WHERE id = ? AND session_id = ? RETURNING id",
                                (input_id, session_id)).fetchone()
        return row is not None

    def deliver(self, session_id: str, input_id: str, delivery: str) -> None:
        self.conn.execute("UPDATE session_pending SET delivery = ? WHERE id = ? AND session_id = ?",
                          (delivery, input_id, session_id))
