"""The SQL of the private suspension mark a graceful shutdown leaves on the sessions it interrupts (not a projection:
replay never infers it)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .db import Tx


def mark(tx: Tx, session_ids: list[str], at: int) -> None:
    tx.executemany("UPDATE session SET time_suspended = ? WHERE id = ?", [(at, sid) for sid in session_ids])


def clear(tx: Tx, session_id: str) -> None:
    tx.execute("UPDATE session SET time_suspended = NULL WHERE id = ?", (session_id,))


def take_all(tx: Tx) -> list[str]:
    """Consume every mark; returns the sessions that were marked, each once."""
    ids = [row[0] for row in tx.execute("SELECT id FROM session WHERE time_suspended IS NOT NULL").fetchall()]
    return [sid for sid in ids if tx.execute(
        "UPDATE session SET time_suspended = NULL WHERE id = ? AND time_suspended IS NOT NULL RETURNING id",
        (sid,)).fetchone() is not None]
