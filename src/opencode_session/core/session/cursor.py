"""Opaque page cursors: base64url JSON that carries the whole query, so a continuation needs only the cursor. Each
kind is a model decoded once; anything that does not decode into it is InvalidCursorError."""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from typing import Annotated, Any, Literal, Self

from pydantic import BaseModel, ConfigDict, Field, StrictStr, ValidationError

from ...schema.errors import InvalidCursorError
from ...schema.page import CursorLinks
from ..store.keyset import Direction, Key, KeysetPage, Order

MESSAGE_PAGE_MAX = 200
# The largest session page. The wire sets no bound, but SQLite counts in signed 64 bits; no store holds this many
# sessions, so a larger limit means the same page and is clamped to this instead of overflowing.
SESSION_PAGE_MAX = 1 << 62
# What SQLite can compare a cursor's keys with.
Int64 = Annotated[int, Field(ge=-(2**63), lt=2**63)]


def encode_cursor(payload: dict[str, Any]) -> str:
    raw = json.dumps(payload, separators=(",", ":"), sort_keys=True).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


class _Cursor(BaseModel):
    model_config = ConfigDict(frozen=True, populate_by_name=True)

    def encode(self) -> str:
        return encode_cursor(self.model_dump(mode="json", by_alias=True))

    @classmethod
    def decode(cls, cursor: str) -> Self:
        try:
            raw = base64.urlsafe_b64decode((cursor + "=" * (-len(cursor) % 4)).encode())
            return cls.model_validate_json(raw)
        except (ValueError, ValidationError):
            raise InvalidCursorError() from None


class SessionQuery(BaseModel):
    """What a session list shows, fixed by its first page and carried by its cursors."""

    model_config = ConfigDict(frozen=True)

    limit: Annotated[int, Field(ge=1, le=SESSION_PAGE_MAX)]
    order: Order
    search: StrictStr | None = None
    directory: StrictStr | None = None
    project: StrictStr | None = None
    subpath: StrictStr | None = None
    workspace: StrictStr | None = None
    parent: StrictStr | None = None  # a parent session's ID, or "null" for root sessions


class SessionCursor(_Cursor):
    kind: Literal["sessions"]
    query: SessionQuery = Field(alias="q")
    anchor: tuple[Int64, Int64] = Field(alias="a")
    direction: Direction = Field(alias="d")


class MessageCursor(_Cursor):
    kind: Literal["messages"]
    session_id: StrictStr = Field(alias="s")
    order: Order = Field(alias="o")
    limit: Annotated[int, Field(ge=1, le=MESSAGE_PAGE_MAX)] = Field(alias="l")
    anchor: Int64 = Field(alias="a")
    direction: Direction = Field(alias="d")


def page_links(page: KeysetPage[Any], cursor_at: Callable[[Key, Direction], str]) -> CursorLinks:
    """Links to the neighbouring pages, both whenever the page has items (as OpenCode links them: whether any lie
    beyond an edge is for the next page to say), neither on an empty page."""
    if page.first is None or page.last is None:
        return CursorLinks(previous=None, next=None)
    return CursorLinks(previous=cursor_at(page.first, "previous"), next=cursor_at(page.last, "next"))
