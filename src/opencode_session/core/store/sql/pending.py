"""The session_pending table: the durable inbox of admitted input waiting for promotion."""

from __future__ import annotations

import json

from ..rows import BARRIER, PROMOTABLE, PendingInput
from .connection import Connection, Row

_PROMOTABLE = "type IN (" + ", ".join(f"'{kind}'" for kind in PROMOTABLE) + ")"


class SqlPending:
    def __init__(self, conn: Connection) -> None:
        self.conn = conn

    def insert(self, item: PendingInput) -> None:
        self.conn.execute(
            "INSERT INTO session_pending (id, session_id, type, data, delivery, admitted_seq, time_created)"
            " VALUES (?, ?, ?, ?, ?, ?, ?)",
            (item.id, item.session_id, item.type, json.dumps(item.data, separators=(",", ":")), item.delivery,
             item.admitted_seq, item.time_created),
        )

    def get(self, input_id: str) -> PendingInput | None:
        row = self.conn.execute("SELECT * FROM session_pending WHERE id = ?", (input_id,)).fetchone()
        return None if row is None else _pending(row)

    def take(self, session_id: str, input_id: str) -> PendingInput:
        row = self.conn.execute("SELECT * FROM session_pending WHERE id = ? AND session_id = ?",
                                (input_id, session_id)).fetchone()
        if row is None:
            raise LookupError(f"promotion of input {input_id} that is not pending")
        self.conn.execute("DELETE FROM session_pending WHERE id = ?", (input_id,))
        return _pending(row)

    def user_inputs(self, session_id: str) -> list[PendingInput]:
        rows = self.conn.execute(
            "SELECT * FROM session_pending WHERE session_id = ? AND type = 'user' ORDER BY admitted_seq",
            (session_id,)).fetchall()
        return [_pending(row) for row in rows]

    def promotable(self, session_id: str) -> list[tuple[str, str | None]]:
        rows = self.conn.execute(f"SELECT id, delivery FROM session_pending WHERE session_id = ? AND {_PROMOTABLE}"
                                 " ORDER BY admitted_seq", (session_id,)).fetchall()
        return [(row[0], row[1]) for row in rows]

    def any_promotable(self, session_id: str) -> bool:
        row = self.conn.execute(f"SELECT 1 FROM session_pending WHERE session_id = ? AND {_PROMOTABLE} LIMIT 1",
                                (session_id,)).fetchone()
        return row is not None

    def barrier(self, session_id: str) -> str | None:
        row = self.conn.execute("SELECT id FROM session_pending WHERE session_id = ? AND type = ? LIMIT 1",
                                (session_id, BARRIER)).fetchone()
        return None if row is None else str(row[0])

    def settle_barrier(self, session_id: str, input_id: str) -> None:
        self.conn.execute("DELETE FROM session_pending WHERE id = ? AND session_id = ? AND type = ?",
                          (input_id, session_id, BARRIER))

    def unowned(self, admitted_before: int, limit: int = 100) -> list[str]:
        rows = self.conn.execute(
            "SELECT DISTINCT p.session_id FROM session_pending p LEFT JOIN session_lease l"
            f" ON l.session_id = p.session_id WHERE p.{_PROMOTABLE} AND p.time_created < ?"
            " AND l.owner IS NULL LIMIT ?", (admitted_before, limit)).fetchall()
        return [str(row[0]) for row in rows]

    def set_trace(self, input_id: str, traceparent: str) -> None:
        self.conn.execute("UPDATE session_pending SET trace = ? WHERE id = ?", (traceparent, input_id))

    def first_trace(self, session_id: str) -> str | None:
        row = self.conn.execute("SELECT trace FROM session_pending WHERE session_id = ? AND trace IS NOT NULL"
                                " ORDER BY admitted_seq LIMIT 1", (session_id,)).fetchone()
        return None if row is None else str(row[0])

    def input_recorded(self, input_id: str) -> bool:
        row = self.conn.execute("SELECT 1 FROM session_pending WHERE id = ?"
                                " UNION ALL SELECT 1 FROM session_message WHERE id = ? LIMIT 1", (input_id, input_id))
        return row.fetchone() is not None


def _pending(row: Row) -> PendingInput:
    return PendingInput(row["id"], row["session_id"], row["type"], json.loads(row["data"]), row["delivery"],
                        row["admitted_seq"], row["time_created"])
