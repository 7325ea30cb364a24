"""Which store backend a database address selects: a `postgresql://` (or `postgres://`) URL is PostgreSQL; a file path
(or `:memory:`) is SQLite."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from .errors import BackendNotInstalledError

if TYPE_CHECKING:
    from .backend import Backend

_POSTGRES = ("postgresql://", "postgres://")


def is_postgres(database: str | Path) -> bool:
    return isinstance(database, str) and database.startswith(_POSTGRES)


def require_backend(database: str | Path) -> None:
    """Raise BackendNotInstalledError when the backend `database` names lacks its optional dependencies (a SQLite
    address needs none; psycopg is imported only for a PostgreSQL one)."""
    if is_postgres(database):
        try:
            import psycopg  # noqa: F401
            import psycopg_pool  # noqa: F401
        except ImportError:  # missing, or psycopg without a libpq to load: the extra brings its C build
            raise BackendNotInstalledError(describe_database(database)) from None


def open_backend(database: str | Path, *, lease_ms: int | None = None) -> Backend:
    """The backend a database address names; raises BackendNotInstalledError if its extra is not installed. A shared
    database's time limits are cut from `lease_ms`, the lease lifetime its hosts use (the default one if None)."""
    if is_postgres(database):
        require_backend(database)
        from .postgres import PostgresBackend

        return PostgresBackend(str(database)) if lease_ms is None else PostgresBackend(str(database), lease_ms)
    from .sqlite import SqliteBackend

    return SqliteBackend(database)


def database_files(database: str | Path) -> list[Path]:
    """The files a database keeps on this host (a SQLite file, its -wal, -shm and -journal side files, its lock file
    and its server's record; none for PostgreSQL or in memory): what a snapshot of the user's files must never
    include."""
    if is_postgres(database) or str(database) == ":memory:":
        return []
    from .sqlite import sqlite_files

    return sqlite_files(database)


def server_record_file(database: str | Path) -> Path | None:
    """Where the one process a SQLite database admits, when it is an `ocs serve`, records the URL it listens on (the
    lock file's neighbour); None for a database several hosts share or one in memory."""
    if is_postgres(database) or str(database) == ":memory:":
        return None
    from .sqlite.lock import SERVER_SUFFIX

    return Path(f"{database}{SERVER_SUFFIX}")


def describe_database(database: str | Path) -> str:
    """The database as messages name it: a URL without its password."""
    if is_postgres(database):
        try:
            from .postgres import describe
        except ImportError:  # psycopg is not installed: the address as written, its password left out
            parts = urlsplit(str(database))
            netloc = parts.hostname or ""
            if parts.port:
                netloc = f"{netloc}:{parts.port}"
            if parts.username:
                netloc = f"{parts.username}@{netloc}"
            return f"{parts.scheme}://{netloc}{parts.path}"
        return describe(str(database))
    return str(database)
