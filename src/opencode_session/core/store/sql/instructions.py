"""A session's instruction state: its InstructionCheckpoint (baseline, baseline sequence, Applied
Instructions) and its API-managed InstructionEntry values."""

from __future__ import annotations

import json
from typing import Any

from ....schema import jsontext
from ..rows import Checkpoint
from .connection import Connection


class SqlInstructions:
    def __init__(self, conn: Connection) -> None:
        self.conn = conn

    def checkpoint(self, session_id: str) -> Checkpoint | None:
        row = self.conn.execute(
            "SELECT baseline, snapshot, baseline_seq FROM instruction_checkpoint WHERE session_id = ?",
            (session_id,)).fetchone()
        return None if row is None else Checkpoint(row[0], row[1], row[2])

    def baseline_seq(self, session_id: str) -> int:
        row = self.conn.execute("SELECT baseline_seq FROM instruction_checkpoint WHERE session_id = ?",
                                (session_id,)).fetchone()
        return -1 if row is None else int(row[0])

    def initialize(self, session_id: str, fresh: Checkpoint) -> str:
        existing = self.conn.execute("SELECT baseline FROM instruction_checkpoint WHERE session_id = ?",
                                     (session_id,)).fetchone()
        if existing is not None:
            return str(existing[0])
        self.conn.execute(
            "INSERT INTO instruction_checkpoint (session_id, baseline, snapshot, baseline_seq) VALUES (?, ?, ?, ?)",
            (session_id, fresh.baseline, fresh.applied, fresh.baseline_seq))
        return fresh.baseline

    def rebaseline(self, session_id: str, fresh: Checkpoint) -> None:
        self.conn.execute(
            "UPDATE instruction_checkpoint SET baseline = ?, snapshot = ?, baseline_seq = ? WHERE session_id = ?",
            (fresh.baseline, fresh.applied, fresh.baseline_seq, session_id))

    def advance(self, session_id: str, applied: str) -> None:
        self.conn.execute("UPDATE instruction_checkpoint SET snapshot = ? WHERE session_id = ?",
                          (applied, session_id))

    def reset(self, session_id: str) -> None:
        self.conn.execute("DELETE FROM instruction_checkpoint WHERE session_id = ?", (session_id,))

    def entries(self, session_id: str) -> list[tuple[str, Any]]:
        rows = self.conn.execute("SELECT key, value FROM instruction_entry WHERE session_id = ? ORDER BY key",
                                 (session_id,)).fetchall()
        # a value stored before the door checked it stays usable
        return [(row[0], jsontext.loads(row[1])) for row in rows]

    def put_entry(self, session_id: str, key: str, value: Any, now: int) -> None:
        encoded = json.dumps(value, separators=(",", ":"), ensure_ascii=False)
        self.conn.execute(
            "INSERT INTO instruction_entry (session_id, key, value, time_created, time_updated)"
            " VALUES (?, ?, ?, ?, ?) ON CONFLICT (session_id, key) DO UPDATE SET value = excluded.value,"
            " time_updated = excluded.time_updated", (session_id, key, encoded, now, now))

    def remove_entry(self, session_id: str, key: str) -> None:
        self.conn.execute("DELETE FROM instruction_entry WHERE session_id = ? AND key = ?", (session_id, key))
