"""Keyset paging's values: what a page request asks (order, size, an anchor key and a direction) and what a page
holds (its items and the keys of its first and last rows, to page on from). Backends compute pages."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Generic, Literal, TypeVar

T = TypeVar("T")
Order = Literal["asc", "desc"]
Direction = Literal["next", "previous"]
Key = tuple[int, ...]


@dataclass(frozen=True)
class PageRequest:
    """`limit` rows in `order`; with an `anchor`, the rows beyond it toward `direction` (exclusive)."""

    order: Order
    limit: int
    anchor: Key | None = None
    direction: Direction = "next"


@dataclass(frozen=True)
class KeysetPage(Generic[T]):
    """The items in `order` and the keys of the first and last (None when empty)."""

    items: list[T]
    first: Key | None = None
    last: Key | None = None
