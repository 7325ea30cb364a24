"""Page links: the `{data, cursor: {previous?, next?}}` envelope of listed resources."""

from __future__ import annotations

from .base import Struct


class CursorLinks(Struct):
    previous: str | None = None
    next: str | None = None
