"""InstructionEntry values: per-Session JSON values under slash-free keys, managed through the API and read by the
runner at each boundary."""

from __future__ import annotations

from typing import Any

from ...schema.instruction_entry import InstructionEntry
from ..session.service import require_session
from ..store import Reader, Store, Tx, now_ms


class InstructionEntries:
    def __init__(self, store: Store) -> None:
        self.store = store

    async def list(self, session_id: str) -> list[InstructionEntry]:
        def _q(reader: Reader) -> list[InstructionEntry]:
            require_session(reader, session_id)
            return [InstructionEntry(key=k, value=v) for k, v in reader.instructions.entries(session_id)]

        return await self.store.read(_q)

    async def put(self, session_id: str, key: str, value: Any) -> None:
        def _put(tx: Tx) -> None:
            require_session(tx, session_id)
            tx.instructions.put_entry(session_id, key, value, now_ms())

        await self.store.write(_put)

    async def remove(self, session_id: str, key: str) -> None:
        def _remove(tx: Tx) -> None:
            require_session(tx, session_id)
            tx.instructions.remove_entry(session_id, key)

        await self.store.write(_remove)
