"""Orphan reconciliation: what a Step leaves open when its host is lost before its terminal event. Before a drain's
first Step, the tool calls an earlier process left streaming or running settle (an idempotent one with the result of
running it again, the others failed with what the model must know) and their assistant messages fail; and one
assistant message the drain itself leaves open (a retry that never ran) is failed."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ...schema import events as ev
from ...schema import session_errors
from ...schema.common import SessionErrorInfo
from ..store import Reader, Store, Tx

LOST_STEP = "The host running this Step was lost before the Step ended"
# What the model reads in place of a result: a call whose outcome nobody knows, and one that never started.
LOST_CALL = ("The host running this session was lost while this {name} call ran: it may or may not have taken "
             "effect. Check its effects before repeating it.")
LOST_INPUT = "The host running this session was lost before this {name} call was complete: it never ran."


@dataclass(frozen=True)
class Orphan:
    """A tool call left open: `running` when it was complete (it may have run, its outcome is ambiguous), else its
    input was still streaming (it never ran); `hosted` when the provider ran it. `agent` is the agent of the Step that
    made it (whose rules a run again keeps)."""

    assistant_id: str
    agent: str
    call_id: str
    name: str
    input: dict[str, Any]
    running: bool
    hosted: bool


Settled = Mapping[tuple[str, str], ev.ToolSuccess | ev.ToolFailed]


def find_orphans(reader: Reader, session_id: str) -> list[Orphan] | None:
    """The tool calls left open in the session's open assistant messages; None when no assistant message is open
    (the common case: nothing to reconcile)."""
    messages = reader.messages.open_assistants(session_id)
    if not messages:
        return None
    found: list[Orphan] = []
    for message in messages:
        for part in message["content"]:
            if part["type"] == "tool" and part["state"]["status"] in ("streaming", "running"):
                given = part["state"]["input"]
                provider = part.get("provider")
                found.append(Orphan(message["id"], message["agent"], part["id"], part["name"],
                                    given if isinstance(given, dict) else {},
                                    part["state"]["status"] == "running",
                                    provider is not None and bool(provider["executed"])))
    return found


def settle_orphans(tx: Tx, session_id: str, settled: Settled | None = None) -> int:
    """Settle every open tool call of the session's open assistant messages (with its entry in `settled`, keyed by
    assistant and call ID, else failed as `tool.stale`) and fail those messages as `host.lost`; never run anything.
    Returns how many calls failed."""
    failed = 0
    for message in tx.messages.open_assistants(session_id):
        for part in message["content"]:
            if part["type"] != "tool" or part["state"]["status"] not in ("streaming", "running"):
                continue
            settlement = (settled or {}).get((message["id"], part["id"]))
            if settlement is None:
                text = LOST_CALL if part["state"]["status"] == "running" else LOST_INPUT
                settlement = ev.ToolFailed(sessionID=session_id, assistantMessageID=message["id"], callID=part["id"],
                                           error=SessionErrorInfo(type=session_errors.TOOL_STALE,
                                                                  message=text.format(name=part["name"])))
                failed += 1
            tx.append(settlement)
        tx.append(ev.StepFailed(sessionID=session_id, assistantMessageID=message["id"],
                                error=SessionErrorInfo(type=session_errors.HOST_LOST, message=LOST_STEP)))
    return failed


async def close_assistant(store: Store, session_id: str, assistant_id: str, error: SessionErrorInfo) -> None:
    """Fail an assistant message that is still open, so no Step is left without its terminal event."""

    def _close(tx: Tx) -> None:
        message = tx.messages.load(assistant_id)
        if message is not None and "completed" not in message["time"]:
            tx.append(ev.StepFailed(sessionID=session_id, assistantMessageID=assistant_id, error=error))

    await store.write(_close)


__all__ = ["LOST_CALL", "LOST_INPUT", "LOST_STEP", "Orphan", "close_assistant", "find_orphans", "settle_orphans"]
