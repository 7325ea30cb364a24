"""The session_pending table's SQL: the durable inbox of admitted input waiting for promotion."""

from __future__ import annotations

import json
import sqlite3
from typing import TYPE_CHECKING, Any, NamedTuple

if TYPE_CHECKING:
    from .db import Reader, Tx

# What promotion takes from the inbox: user prompts and synthetic input (the compaction barrier is neither).
_PROMOTABLE = "type IN ('user', 'synthetic')"
# The manual compaction barrier: at most one per session (admission coalesces), consumed when compaction settles.
BARRIER = "compaction"


class PendingInput(NamedTuple):
    id: str
    session_id: str
    type: str
    data: dict[str, Any]
    delivery: str | None
    admitted_seq: int
    time_created: int


def insert(tx: Tx, item: PendingInput) -> None:
    tx.execute(
        "INSERT INTO session_pending (id, session_id, type, data, delivery, admitted_seq, time_created)"
        " VALUES (?, ?, ?, ?, ?, ?, ?)",
        (item.id, item.session_id, item.type, json.dumps(item.data, separators=(",", ":")), item.delivery,
         item.admitted_seq, item.time_created),
    )


def get(reader: Reader, input_id: str) -> PendingInput | None:
    row = reader.execute("SELECT * FROM session_pending WHERE id = ?", (input_id,)).fetchone()
    return None if row is None else _pending(row)


def take(tx: Tx, session_id: str, input_id: str) -> PendingInput:
    """Remove one pending input of `session_id` and return it; LookupError when it is not pending there."""
    row = tx.execute("SELECT * FROM session_pending WHERE id = ? AND session_id = ?",
                     (input_id, session_id)).fetchone()
    if row is None:
        raise LookupError(f"promotion of input {input_id} that is not pending")
    tx.execute("DELETE FROM session_pending WHERE id = ?", (input_id,))
    return _pending(row)


def user_inputs(reader: Reader, session_id: str) -> list[PendingInput]:
    """The session's pending user prompts in admission order."""
    rows = reader.execute("SELECT * FROM session_pending WHERE session_id = ? AND type = 'user' ORDER BY admitted_seq",
                          (session_id,)).fetchall()
    return [_pending(row) for row in rows]


def promotable(reader: Reader, session_id: str) -> list[tuple[str, str | None]]:
    """(input ID, delivery) of every input promotion may take, in admission order."""
    rows = reader.execute(f"SELECT id, delivery FROM session_pending WHERE session_id = ? AND {_PROMOTABLE}"
                          " ORDER BY admitted_seq", (session_id,)).fetchall()
    return [(row[0], row[1]) for row in rows]


def any_promotable(reader: Reader, session_id: str) -> bool:
    """Whether promotion could take anything."""
    row = reader.execute(f"SELECT 1 FROM session_pending WHERE session_id = ? AND {_PROMOTABLE} LIMIT 1",
                         (session_id,)).fetchone()
    return row is not None


def barrier(reader: Reader, session_id: str) -> str | None:
    """The input ID of the session's pending manual compaction barrier, if one is pending."""
    row = reader.execute("SELECT id FROM session_pending WHERE session_id = ? AND type = ? LIMIT 1",
                         (session_id, BARRIER)).fetchone()
    return None if row is None else str(row[0])


def settle_barrier(tx: Tx, session_id: str, input_id: str) -> None:
    """Consume the barrier `input_id` (a no-op when it is already gone)."""
    tx.execute("DELETE FROM session_pending WHERE id = ? AND session_id = ? AND type = ?",
               (input_id, session_id, BARRIER))


def input_recorded(reader: Reader, input_id: str) -> bool:
    """Whether an input with this ID was admitted, still pending or already promoted into a message."""
    row = reader.execute("SELECT 1 FROM session_pending WHERE id = ?"
                         " UNION ALL SELECT 1 FROM session_message WHERE id = ? LIMIT 1", (input_id, input_id))
    return row.fetchone() is not None


def _pending(row: sqlite3.Row) -> PendingInput:
    return PendingInput(row["id"], row["session_id"], row["type"], json.loads(row["data"]), row["delivery"],
                        row["admitted_seq"], row["time_created"])
