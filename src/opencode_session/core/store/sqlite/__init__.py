"""The SQLite backend of the store: the embedded default (one process per database file). Its names are imported on
first use: `readonly.py`, which opens a file only to read it, loads no writer."""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..sql.rows import LOG_TABLES, PROJECTION_TABLES, STATE_TABLES
    from .backend import SqliteBackend, sqlite_files
    from .migrations import SEARCH_INDEX_TABLES
    from .rows import SqliteRows

__all__ = ["LOG_TABLES", "PROJECTION_TABLES", "SEARCH_INDEX_TABLES", "STATE_TABLES", "SqliteBackend", "SqliteRows",
           "sqlite_files"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        for where in ("..sql.rows", ".migrations", ".rows", ".backend"):
            module = import_module(where, __name__)
            if hasattr(module, name):
                value = globals()[name] = getattr(module, name)  # looked up once
                return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
