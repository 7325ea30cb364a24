"""Which store backend a database address selects: a `postgresql://` (or `postgres://`) URL is PostgreSQL; a file path
(or `:memory:`) is SQLite."""

from __future__ import annotations

from pathlib import Path

from .backend import Backend

_POSTGRES = ("postgresql://", "postgres://")


def is_postgres(database: str | Path) -> bool:
    return isinstance(database, str) and database.startswith(_POSTGRES)


def open_backend(database: str | Path) -> Backend:
    """The backend a database address names."""
    if is_postgres(database):
        from .postgres import PostgresBackend

        return PostgresBackend(str(database))
    from .sqlite import SqliteBackend

    return SqliteBackend(database)


def describe_database(database: str | Path) -> str:
    """The database as messages name it: a URL without its password."""
    if is_postgres(database):
        from .postgres import describe

        return describe(str(database))
    return str(database)
