"""Continuation state: columns of the session row for the claim a running execution holds and the times the
session was continued automatically (not projections: replay never infers them)."""

from __future__ import annotations

import json

from .connection import Connection


class SqlContinuation:
    def __init__(self, conn: Connection) -> None:
        self.conn = conn

    def claim(self, session_id: str, at: int) -> None:
        self.conn.execute("UPDATE session SET time_claimed = ? WHERE id = ?", (at, session_id))

    def release(self, session_id: str) -> None:
        self.conn.execute("UPDATE session SET time_claimed = NULL WHERE id = ?", (session_id,))

    def claimed(self) -> list[str]:
        return [row[0] for row in self.conn.execute(
            "SELECT id FROM session WHERE time_claimed IS NOT NULL ORDER BY time_claimed, id")]

    def is_claimed(self, session_id: str) -> bool:
        row = self.conn.execute("SELECT time_claimed FROM session WHERE id = ?", (session_id,)).fetchone()
        return row is not None and row[0] is not None

    def continued(self, session_id: str) -> list[int]:
        row = self.conn.execute("SELECT continued FROM session WHERE id = ?", (session_id,)).fetchone()
        return [] if row is None or row[0] is None else [int(t) for t in json.loads(row[0])]

    def record_continued(self, session_id: str, times: list[int]) -> None:
        self.conn.execute("UPDATE session SET continued = ? WHERE id = ?", (json.dumps(sorted(times)), session_id))
