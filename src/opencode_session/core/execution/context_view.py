"""One Step's Model Context as the API shows it: its record (`context_record.py`) read back into sections keyed by
source, each compared with the session's previous Step, and the request body exactly as sent."""

from __future__ import annotations

import hashlib
from typing import Any, cast

from ...schema.common import ModelRef
from ...schema.errors import InvalidRequestError, MessageNotFoundError, StepContextNotFoundError
from ...schema.model_context import (
    ContextItem,
    ContextRequestBody,
    ContextSection,
    ContextSectionChange,
    ContextSectionKey,
    StepModelContext,
)
from ..session.service import require_session
from ..store import Reader, Store
from ..store.rows import StepContextRow
from .context_record import Record, rebuild

SECTIONS: tuple[ContextSectionKey, ...] = ("system", "instructions", "updates", "history", "tools", "additions",
                                           "options")


def _items(meta: dict[str, Any], key: str) -> dict[str, Any]:
    """A section's items by source, in order (a history item's value is its `{type, rev}`)."""
    pairs = meta.get(key) or []
    if key == "history":
        return {p[0]: {"type": p[1], "rev": p[2]} for p in pairs}
    return {p[0]: p[1] for p in pairs}


def section_changes(key: ContextSectionKey, now: dict[str, Any], before: dict[str, Any]) -> ContextSectionChange:
    return ContextSectionChange(section=key, added=[s for s in now if s not in before],
                                removed=[s for s in before if s not in now],
                                changed=[s for s, v in now.items() if s in before and before[s] != v])


def view(session_id: str, record: Record, previous: Record | None) -> StepModelContext:
    meta = record.meta
    options = _items(meta, "options")
    sections, changes = [], []
    for key in SECTIONS:
        items = _items(meta, key)
        sections.append(ContextSection(key=key, items=[ContextItem(source=s, value=v) for s, v in items.items()]))
        changes.append(section_changes(key, items, _items(previous.meta, key) if previous else {}))
    body = record.body
    model = meta.get("model") or {}
    return StepModelContext(
        sessionID=session_id, messageID=record.message_id,
        previousMessageID=previous.message_id if previous else None, agent=str(meta.get("agent", "")),
        model=ModelRef.model_validate(model), sections=sections, changes=changes,
        request=ContextRequestBody(protocol=str(options.get("protocol", "")),
                                   body=None if body is None else body.decode("utf-8"),
                                   size=0 if body is None else len(body),
                                   sha256=None if body is None else hashlib.sha256(body).hexdigest()),
        rewritten=bool(meta.get("rewritten")), redacted=record.redacted)


async def step_context(store: Store, session_id: str, message_id: str) -> StepModelContext:
    """The Model Context the Step of assistant message `message_id` sent, and what changed since the Step before.
    SessionNotFoundError, MessageNotFoundError; InvalidRequestError for a message that is not a Step's;
    StepContextNotFoundError for a Step that recorded none."""

    def read(reader: Reader) -> list[StepContextRow]:
        require_session(reader, session_id)
        message = reader.messages.find(session_id, message_id)
        if message is None:
            raise MessageNotFoundError(sessionID=session_id, messageID=message_id)
        if cast(Any, message).type != "assistant":
            raise InvalidRequestError(f"{message_id} is a {cast(Any, message).type} message, not a Step's"
                                      " assistant message", kind="path", field="messageID")
        return reader.contexts.chain(session_id, message_id)

    records = rebuild(await store.read(read))
    if not records or records[-1].message_id != message_id:
        raise StepContextNotFoundError(sessionID=session_id, messageID=message_id)
    return view(session_id, records[-1], records[-2] if len(records) > 1 else None)


__all__ = ["SECTIONS", "section_changes", "step_context", "view"]
