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


def database_files(database: str | Path) -> list[Path]:
    """The files a database keeps on this host (a SQLite file, its -wal, -shm and -journal side files and its lock
    file; none for PostgreSQL or in memory): what a snapshot of the user's files must never include."""
    if is_postgres(database) or str(database) == ":memory:":
        return []
    from .sqlite import sqlite_files

    return sqlite_files(database)


def describe_database(database: str | Path) -> str:
    """The database as messages name it: a URL without its password."""
    if is_postgres(database):
        from .postgres import describe

        return describe(str(database))
    return str(database)
