"""Orphan reconciliation: what a Step leaves open when it never reaches its terminal event. Before a drain's first
Step, tool calls an earlier process left streaming or running fail (never re-run) and their assistant messages
close; and one assistant message the drain itself leaves open (a retry that never ran) is failed."""

from __future__ import annotations

from ...schema import events as ev
from ...schema import session_errors
from ...schema.common import SessionErrorInfo
from ..store import Store, Tx
from .step import INTERRUPTED_STEP


async def reconcile_orphans(store: Store, session_id: str) -> int:
    """Fail tool calls an earlier process left streaming or running, and close its open assistant messages; never
    re-run them. Returns how many tool calls were failed."""

    def _reconcile(tx: Tx) -> int:
        failed = 0
        for message in tx.messages.open_assistants(session_id):
            for part in message["content"]:
                if part["type"] == "tool" and part["state"]["status"] in ("streaming", "running"):
                    tx.append(ev.ToolFailed(
                        sessionID=session_id, assistantMessageID=message["id"], callID=part["id"],
                        error=SessionErrorInfo(type=session_errors.TOOL_STALE,
                                               message=f"Tool execution interrupted: {part['name']}")))
                    failed += 1
            tx.append(ev.StepFailed(sessionID=session_id, assistantMessageID=message["id"],
                                    error=SessionErrorInfo(type=session_errors.ABORTED, message=INTERRUPTED_STEP)))
        return failed

    if not await store.read(lambda reader: reader.messages.open_assistants(session_id)):
        return 0  # the common case: nothing left open, so no write transaction at all
    return await store.write(_reconcile)


async def close_assistant(store: Store, session_id: str, assistant_id: str, error: SessionErrorInfo) -> None:
    """Fail an assistant message that is still open, so no Step is left without its terminal event."""

    def _close(tx: Tx) -> None:
        message = tx.messages.load(assistant_id)
        if message is not None and "completed" not in message["time"]:
            tx.append(ev.StepFailed(sessionID=session_id, assistantMessageID=assistant_id, error=error))

    await store.write(_close)


__all__ = ["close_assistant", "reconcile_orphans"]
