"""Every concern's SQLite operations over one connection, and which tables are the log, the projections and the
state beside them (what a rebuild keeps)."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from typing import Any

from .continuation import SqliteContinuation
from .events import SqliteEvents
from .instructions import SqliteInstructions
from .messages import SqliteMessages
from .pending import SqlitePending
from .permissions import SqlitePermissions
from .sessions import SqliteSessions
from .suspension import SqliteSuspension

# The log, which replay reads and never changes.
LOG_TABLES = ("event_sequence", "event")
# The tables the projector writes: cleared and rebuilt from the event log by replay.
PROJECTION_TABLES = ("session", "session_message", "session_pending")
# State kept beside the projections but not derived from events, which a rebuild leaves as it was: the instruction
# checkpoint and entries (the files and values a baseline was read from are not in the log), the "always"
# permissions, the count of removed messages the history cache watches, and the suspension mark, continuation claim
# and continuation record of a session row.
STATE_TABLES = ("instruction_checkpoint", "instruction_entry", "permission_saved", "session_message_removal")
SESSION_STATE_COLUMNS = ("time_suspended", "time_claimed", "continued")


def _read_all(conn: sqlite3.Connection, sql: str) -> tuple[list[str], list[tuple[Any, ...]]]:
    """A query's column names and all its rows."""
    cursor = conn.execute(sql)
    return [d[0] for d in cursor.description], [tuple(row) for row in cursor]


class SqliteRows:
    """Every concern's operations over one connection: the reader's, or the writer's inside its transaction. `execute`
    is SQLite's own, for tests and tools that inspect the file; Core never calls it."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn
        self.events = SqliteEvents(conn)
        self.sessions = SqliteSessions(conn)
        self.messages = SqliteMessages(conn)
        self.pending = SqlitePending(conn)
        self.instructions = SqliteInstructions(conn)
        self.permissions = SqlitePermissions(conn)
        self.suspension = SqliteSuspension(conn)
        self.continuation = SqliteContinuation(conn)

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
