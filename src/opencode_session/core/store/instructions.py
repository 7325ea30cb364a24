"""The SQL of a session's instruction state: its InstructionCheckpoint (baseline, baseline sequence, Applied
Instructions) and its API-managed InstructionEntry values."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, NamedTuple

from ...schema import jsontext

if TYPE_CHECKING:
    from .db import Reader, Tx


class Checkpoint(NamedTuple):
    baseline: str
    applied: str  # the Applied Instructions record as JSON text
    baseline_seq: int


def checkpoint(reader: Reader, session_id: str) -> Checkpoint | None:
    row = reader.execute("SELECT baseline, snapshot, baseline_seq FROM instruction_checkpoint WHERE session_id = ?",
                         (session_id,)).fetchone()
    return None if row is None else Checkpoint(row[0], row[1], row[2])


def baseline_seq(reader: Reader, session_id: str) -> int:
    """The sequence the baseline was taken at; -1 without a checkpoint."""
    row = reader.execute("SELECT baseline_seq FROM instruction_checkpoint WHERE session_id = ?",
                         (session_id,)).fetchone()
    return -1 if row is None else int(row[0])


def initialize(tx: Tx, session_id: str, fresh: Checkpoint) -> str:
    """Store the session's first checkpoint unless one exists already; returns the baseline in effect."""
    existing = tx.execute("SELECT baseline FROM instruction_checkpoint WHERE session_id = ?",
                          (session_id,)).fetchone()
    if existing is not None:
        return str(existing[0])
    tx.execute("INSERT INTO instruction_checkpoint (session_id, baseline, snapshot, baseline_seq) VALUES (?, ?, ?, ?)",
               (session_id, fresh.baseline, fresh.applied, fresh.baseline_seq))
    return fresh.baseline


def rebaseline(tx: Tx, session_id: str, fresh: Checkpoint) -> None:
    tx.execute("UPDATE instruction_checkpoint SET baseline = ?, snapshot = ?, baseline_seq = ? WHERE session_id = ?",
               (fresh.baseline, fresh.applied, fresh.baseline_seq, session_id))


def advance(tx: Tx, session_id: str, applied: str) -> None:
    """Overwrite the Applied Instructions record (with the Instruction Update that told the model)."""
    tx.execute("UPDATE instruction_checkpoint SET snapshot = ? WHERE session_id = ?", (applied, session_id))


def reset(tx: Tx, session_id: str) -> None:
    """Drop the checkpoint: the next Step initializes a fresh baseline."""
    tx.execute("DELETE FROM instruction_checkpoint WHERE session_id = ?", (session_id,))


def entries(reader: Reader, session_id: str) -> list[tuple[str, Any]]:
    """The session's InstructionEntry values by key."""
    rows = reader.execute("SELECT key, value FROM instruction_entry WHERE session_id = ? ORDER BY key",
                          (session_id,)).fetchall()
    return [(row[0], jsontext.loads(row[1])) for row in rows]  # a value stored before the door checked it stays usable


def put_entry(tx: Tx, session_id: str, key: str, value: Any, now: int) -> None:
    encoded = json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    tx.execute("INSERT INTO instruction_entry (session_id, key, value, time_created, time_updated)"
               " VALUES (?, ?, ?, ?, ?) ON CONFLICT (session_id, key) DO UPDATE SET value = excluded.value,"
               " time_updated = excluded.time_updated", (session_id, key, encoded, now, now))


def remove_entry(tx: Tx, session_id: str, key: str) -> None:
    tx.execute("DELETE FROM instruction_entry WHERE session_id = ? AND key = ?", (session_id, key))
