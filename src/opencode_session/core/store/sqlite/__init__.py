"""The SQLite backend of the store: the embedded default (one process per database file)."""

from ..sql.rows import LOG_TABLES, PROJECTION_TABLES, STATE_TABLES
from .backend import SqliteBackend, sqlite_files
from .migrations import SEARCH_INDEX_TABLES
from .rows import SqliteRows

__all__ = ["LOG_TABLES", "PROJECTION_TABLES", "SEARCH_INDEX_TABLES", "STATE_TABLES", "SqliteBackend", "SqliteRows",
           "sqlite_files"]
