"""Managed restart continuation: a graceful shutdown marks the sessions it is about to interrupt as suspended; the
next managed start consumes each mark once and resumes that session. An execution that starts or ends on its own
clears the mark; one that was interrupted keeps it."""

from __future__ import annotations

from ..store import Store, Tx, now_ms
from .coordinator import SessionExecution


async def suspend(store: Store, session_ids: list[str]) -> None:
    """Mark sessions suspended (before interrupting them)."""
    if session_ids:
        stamp = now_ms()
        await store.write(lambda tx: tx.suspension.mark(session_ids, stamp))


async def resume(store: Store, execution: SessionExecution) -> list[str]:
    """Atomically consume every suspension and resume each of those sessions once."""
    resumed = await store.write(lambda tx: tx.suspension.take_all())
    for session_id in resumed:
        execution.wake(session_id, force=True)
    return resumed


def on_started(tx: Tx, session_id: str) -> None:
    tx.suspension.clear(session_id)


def on_settled(tx: Tx, session_id: str, outcome: str) -> None:
    # an interrupted execution keeps its suspension mark: a graceful shutdown resumes it next start
    if outcome != "interrupted":
        tx.suspension.clear(session_id)
