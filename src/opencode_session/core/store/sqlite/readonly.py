"""A SQLite database file opened only to be read, for a command that prints what it holds: no lock taken, no
migration, no writer thread, no runtime. The store's SQL read side (`sql/`) runs on the connection as on the
store's own, and WAL lets it read while a writer commits."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from urllib.parse import quote

from ..errors import DatabaseNotFoundError, StoreError
from .lock import holder
from .migrations import MIGRATIONS


def open_readonly(database: str | Path) -> sqlite3.Connection | None:
    """A read-only connection to the database file, or None when it is not to be read this way: a process holds it
    (the caller goes through that process, or reports it) or its schema is not this version's (opening it to write
    migrates it). DatabaseNotFoundError when the file does not exist; StoreError when it cannot be read."""
    path = Path(database)
    if not path.exists():
        raise DatabaseNotFoundError(str(database))
    if holder(path) is not None:
        return None
    try:
        conn = sqlite3.connect(f"file:{quote(str(path.absolute()))}?mode=ro", uri=True, isolation_level=None,
                               check_same_thread=False)
    except sqlite3.Error as failed:
        raise StoreError(str(failed) or type(failed).__name__) from failed
    try:
        conn.row_factory = sqlite3.Row
        conn.execute("PRAGMA busy_timeout=5000")
        current = conn.execute("PRAGMA user_version").fetchone()[0] == len(MIGRATIONS)
    except sqlite3.Error as failed:
        conn.close()
        raise StoreError(str(failed) or type(failed).__name__) from failed
    if not current:
        conn.close()
        return None
    return conn
