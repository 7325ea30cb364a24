"""Managed restart continuation: a graceful shutdown marks the sessions it is about to interrupt as suspended; the
next managed start consumes each mark once and resumes that session. An execution that starts or ends on its own
clears the mark; one that was interrupted keeps it."""

from __future__ import annotations

from ..store import suspension
from ..store.db import Store, Tx, now_ms
from .coordinator import SessionExecution


async def suspend(store: Store, session_ids: list[str]) -> None:
    """Mark sessions suspended (before interrupting them)."""
    if session_ids:
        stamp = now_ms()
        await store.write(lambda tx: suspension.mark(tx, session_ids, stamp))


async def resume(store: Store, execution: SessionExecution) -> list[str]:
    """Atomically consume every suspension and resume each of those sessions once."""
    resumed = await store.write(suspension.take_all)
    for session_id in resumed:
        execution.wake(session_id, force=True)
    return resumed


def on_started(tx: Tx, session_id: str) -> None:
    suspension.clear(tx, session_id)


def on_settled(tx: Tx, session_id: str, outcome: str) -> None:
    # an interrupted execution keeps its suspension mark: a graceful shutdown resumes it next start
    if outcome != "interrupted":
        suspension.clear(tx, session_id)
