"""InstructionEntry storage: per-Session JSON values under slash-free keys, read by the runner at each boundary."""

from __future__ import annotations

import json
import sqlite3
from typing import Any

from ...schema import jsontext
from ...schema.instruction_entry import InstructionEntry
from ..session.service import require_session
from ..store.db import Store, Tx, now_ms


def load_entries(conn: sqlite3.Connection | Tx, session_id: str) -> list[tuple[str, Any]]:
    rows = conn.execute("SELECT key, value FROM instruction_entry WHERE session_id = ? ORDER BY key",
                        (session_id,)).fetchall()
    return [(r[0], jsontext.loads(r[1])) for r in rows]  # a value stored before the door checked it stays usable


class InstructionEntries:
    def __init__(self, store: Store) -> None:
        self.store = store

    async def list(self, session_id: str) -> list[InstructionEntry]:
        def _q(conn: sqlite3.Connection) -> list[InstructionEntry]:
            require_session(conn, session_id)
            return [InstructionEntry(key=k, value=v) for k, v in load_entries(conn, session_id)]

        return await self.store.read(_q)

    async def put(self, session_id: str, key: str, value: Any) -> None:
        encoded = json.dumps(value, separators=(",", ":"), ensure_ascii=False)

        def _put(tx: Tx) -> None:
            require_session(tx, session_id)
            now = now_ms()
            tx.execute("INSERT INTO instruction_entry (session_id, key, value, time_created, time_updated)"
                       " VALUES (?, ?, ?, ?, ?) ON CONFLICT (session_id, key) DO UPDATE SET value = excluded.value,"
                       " time_updated = excluded.time_updated", (session_id, key, encoded, now, now))

        await self.store.write(_put)

    async def remove(self, session_id: str, key: str) -> None:
        def _remove(tx: Tx) -> None:
            require_session(tx, session_id)
            tx.execute("DELETE FROM instruction_entry WHERE session_id = ? AND key = ?", (session_id, key))

        await self.store.write(_remove)
