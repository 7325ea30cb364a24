"""Page links: the `{data, cursor: {previous, next}}` envelope of listed resources."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import WithJsonSchema

from .base import Struct

# Always on the wire, as OpenCode sends it: a string on a page with items (even at an edge, where the page it leads
# to is empty), null on an empty page.
Link = Annotated[str | None, WithJsonSchema({"type": ["string", "null"]})]


class CursorLinks(Struct):
    """Cursors to the pages before the first item and after the last."""

    previous: Link
    next: Link

    def wire(self) -> dict[str, Any]:
        return self.model_dump(mode="json")  # both links, null included
