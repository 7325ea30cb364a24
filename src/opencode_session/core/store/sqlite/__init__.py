"""The SQLite backend of the store: the embedded default (one process per database file)."""

from .backend import LOG_TABLES, PROJECTION_TABLES, STATE_TABLES, SqliteBackend, SqliteRows

__all__ = ["LOG_TABLES", "PROJECTION_TABLES", "STATE_TABLES", "SqliteBackend", "SqliteRows"]
