"""The private suspension mark: a column of the session row that a graceful shutdown sets on the sessions
it interrupts (not a projection: replay never infers it)."""

from __future__ import annotations

from .connection import Connection


class SqlSuspension:
    def __init__(self, conn: Connection) -> None:
        self.conn = conn

    def mark(self, session_ids: list[str], at: int) -> None:
        self.conn.executemany("UPDATE session SET time_suspended = ? WHERE id = ?",
                              [(at, sid) for sid in session_ids])

    def clear(self, session_id: str) -> None:
        self.conn.execute("UPDATE session SET time_suspended = NULL WHERE id = ?", (session_id,))

    def take_all(self) -> list[str]:
        ids = [row[0] for row in self.conn.execute("SELECT id FROM session WHERE time_suspended IS NOT NULL")]
        return [sid for sid in ids if self.conn.execute(
            "UPDATE session SET time_suspended = NULL WHERE id = ? AND time_suspended IS NOT NULL RETURNING id",
            (sid,)).fetchone() is not None]
