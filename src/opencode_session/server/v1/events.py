"""V1 bus events (`message.updated`, `message.part.delta`, `session.idle`, ...) from our live bus, by reading each
touched session's projections again after a batch and telling what changed; `bus.py` streams them."""

from __future__ import annotations

from typing import Any

import anyio

from ...core.runtime import Runtime
from ...core.store import now_ms
from ...schema.errors import TaggedError
from ...schema.events import EventRecord
from ...schema.ids import event_id
from . import shapes
from .questions import question_event

SETTLED = frozenset({"session.execution.succeeded", "session.execution.failed", "session.execution.interrupted"})


Event = dict[str, Any]  # a V1 bus event: `{id, type, properties}`


def _event(kind: str, properties: dict[str, Any]) -> Event:
    return {"id": event_id(), "type": kind, "properties": properties}


class Streams:
    """The V1 event streams open now, so a blocking prompt can answer only after each has told its reader that
    the session went idle (OpenCode's CLI stops reading at `session.idle` and exits at the prompt's answer)."""

    def __init__(self) -> None:
        self.open: set[V1Stream] = set()

    def expect_idle(self, session_id: str) -> list[anyio.Event]:
        return [stream.expect(session_id) for stream in self.open]

    def forget(self, session_id: str, idle_sent: list[anyio.Event]) -> None:
        """Stop waiting for `idle_sent` (the prompt was refused, or gave up waiting)."""
        for stream in self.open:
            left = [event for event in stream.waiting.get(session_id, []) if event not in idle_sent]
            if left:
                stream.waiting[session_id] = left
            else:
                stream.waiting.pop(session_id, None)


class V1Stream:
    """One reader's translation state: the V1 messages and parts it was last sent, by ID. Like OpenCode's bus it
    tells what happens from the moment it opened: messages created before that are not replayed."""

    def __init__(self, rt: Runtime) -> None:
        self.rt = rt
        self.opened = now_ms()
        self.infos: dict[str, Any] = {}
        self.parts: dict[str, dict[str, Any]] = {}
        self.streamed: dict[str, str] = {}  # a part's text as its live deltas built it
        self.sessions: dict[str, Any] = {}
        self.waiting: dict[str, list[anyio.Event]] = {}

    def expect(self, session_id: str) -> anyio.Event:
        idle_sent = anyio.Event()
        self.waiting.setdefault(session_id, []).append(idle_sent)
        return idle_sent

    def idle_delivered(self, session_id: str) -> None:
        for idle_sent in self.waiting.pop(session_id, []):
            idle_sent.set()

    async def changes(self, session_id: str) -> list[Event]:
        """What changed in the session's V1 view since this reader was last idle_sent."""
        out: list[Event] = []
        try:
            info = await self.rt.sessions.get(session_id)
            history, _links = await self.rt.sessions.messages(session_id, limit=50, order="desc")
        except TaggedError:  # removed meanwhile
            return out
        session = shapes.session_info(info)
        if self.sessions.get(session_id) != session:
            self.sessions[session_id] = session
            out.append(_event("session.updated", {"sessionID": session_id, "info": session}))
        for message in shapes.messages(info, list(reversed(history))):
            mid = message["info"]["id"]
            if message["info"]["time"]["created"] < self.opened:
                continue
            if self.infos.get(mid) != message["info"]:
                self.infos[mid] = message["info"]
                out.append(_event("message.updated", {"sessionID": session_id, "info": message["info"]}))
            for part in message["parts"]:
                out.extend(self._part(session_id, part))
        return out

    def _part(self, session_id: str, part: dict[str, Any]) -> list[Event]:
        before = self.parts.get(part["id"])
        if before == part:
            return []
        self.parts[part["id"]] = part
        text, old = part.get("text"), (before or {}).get("text")
        if (before is not None and isinstance(text, str) and isinstance(old, str) and text.startswith(old)
                and {k: v for k, v in part.items() if k != "text"} == {k: v for k, v in before.items() if k != "text"}):
            return [_event("message.part.delta", {"sessionID": session_id, "messageID": part["messageID"],
                                                  "partID": part["id"], "field": "text",
                                                  "delta": text[len(old):]})]
        return [_event("message.part.updated", {"sessionID": session_id, "part": part, "time": now_ms()})]

    def _delta(self, data: dict[str, Any], kind: str) -> list[Event]:
        """A live text or reasoning delta, once its part was sent and while the projection has not overtaken it
        (the projection holds a text whole only once it ended)."""
        pid = shapes.part_id(data["assistantMessageID"], f"{kind}-{data['ordinal']}")
        sent = self.parts.get(pid)
        if sent is None or sent.get("text") != self.streamed.get(pid, ""):
            return []
        self.streamed[pid] = text = sent["text"] + data["delta"]
        self.parts[pid] = {**sent, "text": text}
        return [_event("message.part.delta", {"sessionID": data["sessionID"], "messageID": data["assistantMessageID"],
                                              "partID": pid, "field": "text", "delta": data["delta"]})]

    async def translate(self, batch: list[EventRecord]) -> list[Event]:
        out: list[Event] = []
        touched: list[str] = []
        for item in batch:
            data = item.data.wire()
            sid = data.get("sessionID") if isinstance(data, dict) else None
            sid = sid if isinstance(sid, str) else item.aggregate_id
            if item.type == "permission.v2.asked":
                out.append(_event("permission.asked", {
                    "id": data["id"], "sessionID": data["sessionID"], "permission": data["action"],
                    "patterns": data["resources"], "always": data.get("save") or data["resources"],
                    "metadata": data.get("metadata") or {}}))
                continue
            if item.type in ("session.text.delta", "session.reasoning.delta"):
                if sid in touched:  # the part this delta extends may be in the batch's earlier events
                    touched.remove(sid)
                    out.extend(await self.changes(sid))
                out.extend(self._delta(data, item.type.split(".")[1]))
                continue
            asked = question_event(item.type, data)
            if asked is not None:
                out.append(_event(*asked))
                continue
            if item.type == "permission.v2.replied":
                out.append(_event("permission.replied", {"sessionID": data["sessionID"],
                                                         "requestID": data["requestID"], "reply": data["reply"]}))
                continue
            if not item.type.startswith("session.") or not sid.startswith("ses_"):
                continue
            if sid not in touched:
                touched.append(sid)
            if item.type == "session.created":
                try:
                    created = shapes.session_info(await self.rt.sessions.get(sid))
                except TaggedError:  # removed meanwhile
                    continue
                out.append(_event("session.created", {"sessionID": sid, "info": created}))
            elif item.type == "session.deleted":
                touched.remove(sid)
                out.append(_event("session.deleted", {"sessionID": sid, "info": self.sessions.pop(sid, {"id": sid})}))
            elif item.type == "session.execution.started":
                out.extend(await self.changes(sid))
                out.append(_event("session.status", {"sessionID": sid, "status": {"type": "busy"}}))
            elif item.type in SETTLED:
                out.extend(await self.changes(sid))
                if item.type == "session.execution.failed":
                    message = (data.get("error") or {}).get("message", "Session execution failed")
                    out.append(_event("session.error", {"sessionID": sid, "error": {
                        "name": "UnknownError", "data": {"message": message}}}))
                out.append(_event("session.status", {"sessionID": sid, "status": {"type": "idle"}}))
                out.append(_event("session.idle", {"sessionID": sid}))
        for sid in touched:
            out.extend(await self.changes(sid))
        return out
