"""The SQLite backend of the store: the embedded default (one process per database file)."""

from .backend import PROJECTION_TABLES, SqliteBackend, SqliteRows

__all__ = ["PROJECTION_TABLES", "SqliteBackend", "SqliteRows"]
