"""The private suspension mark in SQLite: a column of the session row that a graceful shutdown sets on the sessions
it interrupts (not a projection: replay never infers it)."""

from __future__ import annotations

import sqlite3


class SqliteSuspension:
    def __init__(self, conn: sqlite3.Connection) -> None:
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
