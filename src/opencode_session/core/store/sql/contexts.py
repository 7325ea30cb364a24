"""What each Step sent (`step_context`): one record per Step, stored as the change from a base record of the same
session; a chain starts at a full record (its root). Not derived from events: a rebuild leaves it as it was."""

from __future__ import annotations

from ..rows import StepContextRow
from .connection import Connection

# the table, as both backends' migrations create it
STEP_CONTEXT_TABLE = """
    CREATE TABLE step_context (
        session_id TEXT NOT NULL REFERENCES session (id) ON DELETE CASCADE,
        message_id TEXT NOT NULL,
        root_id TEXT NOT NULL,
        base_id TEXT,
        data TEXT NOT NULL,
        PRIMARY KEY (session_id, message_id)
    );
    """


class SqlContexts:
    def __init__(self, conn: Connection) -> None:
        self.conn = conn

    def put(self, session_id: str, message_id: str, root_id: str, base_id: str | None, data: str) -> None:
        self.conn.execute(
            "INSERT INTO step_context (session_id, message_id, root_id, base_id, data) VALUES (?, ?, ?, ?, ?)"
            " ON CONFLICT (session_id, message_id) DO UPDATE SET root_id = excluded.root_id,"
            " base_id = excluded.base_id, data = excluded.data",
            (session_id, message_id, root_id, base_id, data))

    def chain(self, session_id: str, message_id: str) -> list[StepContextRow]:
        """The records needed to rebuild the Step's record and the session's record before it, oldest first (the
        Step's last, the one before it next to last); empty when the Step has none."""
        target = self.conn.execute("SELECT root_id FROM step_context WHERE session_id = ? AND message_id = ?",
                                   (session_id, message_id)).fetchone()
        if target is None:
            return []
        low = str(target[0])
        before = self.conn.execute(
            "SELECT root_id FROM step_context WHERE session_id = ? AND message_id < ? ORDER BY message_id DESC"
            " LIMIT 1", (session_id, message_id)).fetchone()
        if before is not None:
            low = min(low, str(before[0]))
        rows = self.conn.execute(
            "SELECT message_id, base_id, data FROM step_context WHERE session_id = ? AND message_id >= ?"
            " AND message_id <= ? ORDER BY message_id", (session_id, low, message_id)).fetchall()
        return [StepContextRow(str(r[0]), None if r[1] is None else str(r[1]), str(r[2])) for r in rows]
