"""What the transcript marks that its messages do not hold, read from the session's durable log: each prompt's
delivery (steer or queue), committed reverts, failed compactions and executions that failed before their first Step
(no answer holds their error), and where each mark sits among the messages."""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

from ...core.runtime import Runtime
from ...core.store import Reader
from ...schema import events as ev
from ...schema.events import EventRecord, definition_for

SESSIONS_KEPT = 64  # sessions whose marks are kept between renders (each render reads only the log after them)
MARKING = tuple(definition_for(t).stored_type for t in (ev.InputAdmitted, ev.RevertCommitted, ev.CompactionFailed,
                                                        ev.ExecutionStarted, ev.StepStarted, ev.ExecutionFailed))


@dataclass
class Marks:
    """The marks of one session up to `seq`, the newest durable event read (which also tells whether anything
    changed since a page was rendered)."""

    seq: int = -1
    delivery: dict[str, str] = field(default_factory=dict)  # input (user message) ID -> "steer" | "queue"
    failed: dict[str, dict[str, Any]] = field(default_factory=dict)  # compaction message ID -> its error
    timed: list[dict[str, Any]] = field(default_factory=list)  # {"created", "kind", "text"}: between messages
    stepped: bool = True  # the newest execution has begun a Step (its answer, if it fails, holds the error)
    unanswered: bool = False  # the newest execution failed before its first Step

    def add(self, record: EventRecord) -> None:
        if record.seq is None or record.seq <= self.seq:
            return
        self.seq = record.seq
        d = record.data
        if isinstance(d, ev.InputAdmitted) and d.input.type == "user":
            self.delivery[d.inputID] = d.input.delivery
        elif isinstance(d, ev.ExecutionStarted):
            self.stepped, self.unanswered = False, False
        elif isinstance(d, ev.StepStarted):
            self.stepped = True
        elif isinstance(d, ev.ExecutionFailed) and not self.stepped:
            self.unanswered = True
            error = d.error.model_dump(mode="json")
            self.timed.append({"created": record.created, "kind": "execution failed", "error": error,
                               "text": f"{error.get('type') or 'error'}: {error.get('message') or error}"})
        elif isinstance(d, ev.RevertCommitted):
            self.timed.append({"created": record.created, "kind": "revert",
                               "text": "Reverted here: the messages after this point were undone"})
        elif isinstance(d, ev.CompactionFailed):
            error = d.error.model_dump(mode="json")
            if d.messageID is not None:
                self.failed[d.messageID] = error
            else:  # it failed before a compaction message began: only the mark tells
                self.timed.append({"created": record.created, "kind": "compaction failed",
                                   "text": f"Compaction ({d.reason}) failed: {error.get('message') or error}"})


_KEPT: OrderedDict[str, Marks] = OrderedDict()


async def marks(runtime: Runtime, session_id: str) -> Marks:
    """The session's marks up to its newest durable event; only the events of the kinds that mark, since the last
    call, are read (a long log costs one indexed scan, not a decode of every event). Renders at once share one
    Marks: each reads on from where it was, and `add` takes each event once, in order."""
    found = _KEPT.get(session_id)
    if found is None:
        found = _KEPT[session_id] = Marks()
        while len(_KEPT) > SESSIONS_KEPT:
            _KEPT.popitem(last=False)
    _KEPT.move_to_end(session_id)
    after = found.seq

    def read(r: Reader) -> tuple[int, list[EventRecord]]:
        newest = r.events.latest_seq(session_id)
        return newest, r.events.of_types(session_id, MARKING, after, newest)

    newest, records = await runtime.store.read(read)
    for record in records:
        found.add(record)
    found.seq = max(found.seq, newest)
    return found


def place(timed: list[dict[str, Any]], messages: list[dict[str, Any]], until: int | None,
          oldest: bool) -> tuple[list[dict[str, Any]], dict[str, list[dict[str, Any]]]]:
    """The marks a window of the transcript shows: those before its first message (only in the oldest window) and,
    by message ID, those after each message up to the next one. `until` is the creation time of the first message
    of the window after this one (None for the newest): a mark at or past it belongs there."""
    head: list[dict[str, Any]] = []
    after: dict[str, list[dict[str, Any]]] = {}
    for mark in timed:
        at = mark["created"]
        if until is not None and at >= until:
            continue
        anchor = None
        for m in messages:
            if m["time"]["created"] > at:
                break
            anchor = m["id"]
        if anchor is not None:
            after.setdefault(anchor, []).append(mark)
        elif oldest:
            head.append(mark)
    return head, after
