"""The store's backend-neutral failures: what code above the store may catch, whichever database is underneath."""

from __future__ import annotations


class StoreError(Exception):
    """The database failed (it cannot be opened, read or written); the backend's own error is the cause."""


class DatabaseNotFoundError(StoreError):
    """A database that was to be opened as it is (never created) does not exist."""

    def __init__(self, database: str) -> None:
        self.database = database
        super().__init__(f"the database {database} does not exist")


class DatabaseInUseError(Exception):
    """Another running process (a server or an embedded host) holds a database that admits one process; two would
    execute Sessions twice. Not a StoreError: the database is fine, and the caller is told who holds it."""

    def __init__(self, database: str, pid: int | None) -> None:
        self.database = database
        self.pid = pid
        holder = f"process {pid}" if pid is not None else "another process"
        super().__init__(f"The database {database} is in use by {holder}; stop it first or choose another database")


POSTGRES_INSTALL = "pip install 'opencode-session[postgres]'"


class BackendNotInstalledError(ImportError):
    """The database address names a backend whose optional dependencies are not installed (PostgreSQL's are the
    `postgres` extra); the message is one line naming the install command."""

    def __init__(self, database: str, install: str = POSTGRES_INSTALL) -> None:
        self.database = database
        self.install = install
        super().__init__(f"PostgreSQL support is not installed (needed for {database}): {install}")
