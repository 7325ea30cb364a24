"""Which store backend a database address selects: a file path (or `:memory:`) is SQLite."""

from __future__ import annotations

from pathlib import Path

from .backend import Backend


def open_backend(database: str | Path) -> Backend:
    """The backend a database address names: a file path (or `:memory:`) is SQLite."""
    from .sqlite import SqliteBackend

    return SqliteBackend(database)
