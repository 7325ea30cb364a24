"""Keyset paging in SQL: one page of a table's rows ordered by a key, after (or before) an anchor key, with the keys
of its first and last rows."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from ..keyset import Key, KeysetPage, Order, PageRequest
from .connection import Connection, Row

T = TypeVar("T")


@dataclass(frozen=True)
class Keyset:
    """The rows of `table` matching every clause of `where` (with `params`), ordered by the `key` columns."""

    table: str
    key: tuple[str, ...]
    where: tuple[str, ...] = ()
    params: tuple[Any, ...] = ()


def keyset_page(conn: Connection, keyset: Keyset, request: PageRequest,
                decode: Callable[[Row], T]) -> KeysetPage[T]:
    toward_next = request.direction == "next"
    rows = _rows(conn, keyset, request.order, toward_next, request.anchor, request.limit)
    if not toward_next:
        rows.reverse()
    if not rows:
        return KeysetPage([])
    return KeysetPage([decode(row) for row in rows], _key_of(keyset, rows[0]), _key_of(keyset, rows[-1]))


def _beyond(keyset: Keyset, order: Order, toward_next: bool, anchor: Key) -> tuple[list[str], list[Any]]:
    """The query's clauses and parameters narrowed to rows beyond `anchor` toward the next (or previous) page."""
    forward = (order == "asc") == toward_next
    columns = ", ".join(keyset.key)
    marks = ", ".join("?" * len(anchor))
    return [*keyset.where, f"({columns}) {'>' if forward else '<'} ({marks})"], [*keyset.params, *anchor]


def _rows(conn: Connection, keyset: Keyset, order: Order, toward_next: bool, anchor: Key | None,
          limit: int) -> list[Row]:
    clauses, params = (list(keyset.where), list(keyset.params)) if anchor is None else \
        _beyond(keyset, order, toward_next, anchor)
    sort = "ASC" if (order == "asc") == toward_next else "DESC"
    order_by = ", ".join(f"{column} {sort}" for column in keyset.key)
    sql = f"SELECT * FROM {keyset.table} WHERE {' AND '.join(clauses) or 'TRUE'} ORDER BY {order_by} LIMIT ?"
    return conn.execute(sql, (*params, limit)).fetchall()


def _key_of(keyset: Keyset, row: Row) -> Key:
    return tuple(row[column] for column in keyset.key)
