"""The SQLite backend of the store: the embedded default (one process per database file)."""

from .backend import SqliteBackend
from .rows import LOG_TABLES, PROJECTION_TABLES, STATE_TABLES, SqliteRows

__all__ = ["LOG_TABLES", "PROJECTION_TABLES", "STATE_TABLES", "SqliteBackend", "SqliteRows"]
