"""The shared SQL (`core/store/sql`) in PostgreSQL's dialect: each statement translated once, and a psycopg
connection adapted to the `Connection` the concerns call (`?` parameters, rows by position and by name)."""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Sequence
from typing import Any

import psycopg
from psycopg.rows import RowMaker

_JSON_PATH = re.compile(r"json_extract\(([\w.]+), '\$\.([\w.]+)'\)")
_JSON_EACH = re.compile(r"json_each\(([\w.]+), '\$\.(\w+)'\) AS (\w+)")
_INDEXED_BY = re.compile(r" INDEXED BY \w+")
_ROWID = re.compile(r"\browid\b")


@functools.cache
def translate(sql: str) -> str:
    """One statement of the shared SQL as PostgreSQL reads it: `?` -> `%s` (a literal `%` doubled), constant-path
    `json_extract` -> `#>>` over the text cast to json, `json_each` over an array member ->
    `json_array_elements`, `rowid` -> the event table's `position`, SQLite's `IS NOT ?`
    -> `IS DISTINCT FROM`, its case-blind `LIKE` -> `ILIKE`, and its index hints dropped."""
    out = sql.replace("%", "%%")
    out = _INDEXED_BY.sub("", out)
    out = _JSON_EACH.sub(lambda m: f"json_array_elements({m[1]}::json -> '{m[2]}') AS {m[3]}(value)", out)
    out = _JSON_PATH.sub(lambda m: f"({m[1]}::json #>> '{{{m[2].replace('.', ',')}}}')", out)
    out = _ROWID.sub("position", out)
    out = out.replace(" IS NOT ?", " IS DISTINCT FROM ?").replace(" LIKE ", " ILIKE ")
    return out.replace("?", "%s")


class Row(tuple[Any, ...]):
    """A result row read by position or by column name, as `sqlite3.Row` is."""

    __slots__ = ()
    _index: dict[str, int] = {}

    def __getitem__(self, key: Any) -> Any:
        if isinstance(key, str):
            key = self._index[key]
        return tuple.__getitem__(self, key)


@functools.cache
def _row_class(names: tuple[str, ...]) -> type[Row]:
    return type("Row", (Row,), {"__slots__": (), "_index": {name: i for i, name in enumerate(names)}})


def rows(cursor: Any) -> RowMaker[Row]:
    """psycopg's row factory for `Row`."""
    return _row_class(tuple(column.name for column in cursor.description or ()))


class PgConnection:
    """A psycopg connection as the shared SQL calls it."""

    def __init__(self, conn: psycopg.Connection[Row]) -> None:
        self.conn = conn

    def execute(self, sql: str, parameters: Sequence[Any] = (), /) -> psycopg.Cursor[Row]:
        return self.conn.execute(translate(sql), parameters)

    def executemany(self, sql: str, parameters: Iterable[Sequence[Any]], /) -> None:
        # one statement at a time, not psycopg's executemany: that runs in pipeline mode, where the server waits for
        # the next statement without having armed `idle_in_transaction_session_timeout` (it arms it at a Sync), so a
        # host paused or starved in the middle would hold its transaction's row locks (a lease row's) for as long
        query = translate(sql)
        for row in parameters:
            self.conn.execute(query, row)
