"""The SQL concerns over one SQLite connection, and how SQLite replaces the projections while keeping the state
beside them."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from typing import Any

from ..sql.rows import PROJECTION_TABLES, SESSION_STATE_COLUMNS, STATE_TABLES, SqlRows


def _read_all(conn: sqlite3.Connection, sql: str) -> tuple[list[str], list[tuple[Any, ...]]]:
    """A query's column names and all its rows."""
    cursor = conn.execute(sql)
    return [d[0] for d in cursor.description], [tuple(row) for row in cursor]


class SqliteRows(SqlRows):
    """Every concern's operations over one SQLite connection. `execute` is SQLite's own, for tests and tools that
    inspect the file; Core never calls it."""

    conn: sqlite3.Connection

    def __init__(self, conn: sqlite3.Connection) -> None:
        super().__init__(conn)

    def execute(self, sql: str, params: Any = ()) -> sqlite3.Cursor:
        return self.conn.execute(sql, params)

    def replace_projections(self, replay: Callable[[], None]) -> None:
        # Clearing the sessions cascades into their state (and replaying a move resets a checkpoint): the state is
        # read first and written back exactly, rowids included.
        conn = self.conn
        conn.execute("PRAGMA defer_foreign_keys = ON")
        kept = {table: _read_all(conn, f"SELECT rowid, * FROM {table}") for table in STATE_TABLES}
        marks = {column: _read_all(conn, f"SELECT {column}, id FROM session")[1] for column in SESSION_STATE_COLUMNS}
        for table in reversed(PROJECTION_TABLES):
            conn.execute(f"DELETE FROM {table}")
        replay()
        for table, (columns, rows) in kept.items():
            conn.execute(f"DELETE FROM {table}")
            conn.executemany(f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({', '.join('?' * len(columns))})",
                             rows)
        for column, values in marks.items():
            conn.executemany(f"UPDATE session SET {column} = ? WHERE id = ?", values)
