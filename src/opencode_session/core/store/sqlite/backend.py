"""The SQLite backend: one writer connection (group commit on the event loop, see `GroupWriter`), a reader
connection beside it (WAL readers never wait for the writer), the file made private, and one process per file."""

from __future__ import annotations

import asyncio
import os
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from ....schema.events import EventRecord
from ..backend import Foreign, ForeignLive, Settle
from ..errors import StoreError
from ..rows import Lease
from .lock import LOCK_SUFFIX, SERVER_SUFFIX, DatabaseLock
from .migrations import migrate
from .rows import SqliteRows
from .writer import GroupWriter

T = TypeVar("T")

# The database holds prompts, file contents and tool output: only its owner may read it.
_PRIVATE_DIR, _PRIVATE_FILE = 0o700, 0o600
_SQLITE_FILES = ("", "-wal", "-shm", "-journal")


def sqlite_files(database: str | Path) -> list[Path]:
    """The database file, its side files, its lock file and its server's record (absolute paths)."""
    path = Path(database).resolve()
    return [Path(str(path) + suffix) for suffix in (*_SQLITE_FILES, LOCK_SUFFIX, SERVER_SUFFIX)]


def make_private(path: Path) -> None:
    """Prepare `path` as a private database: missing directories created 0700, the file created 0600 before SQLite
    opens it (SQLite gives its -wal and -shm files the database file's mode), existing files narrowed to 0600."""
    missing = [d for d in (path.parent, *path.parent.parents) if not d.exists()]
    for folder in reversed(missing):
        folder.mkdir(mode=_PRIVATE_DIR, exist_ok=True)
    os.close(os.open(path, os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), _PRIVATE_FILE))
    for suffix in _SQLITE_FILES:
        existing = Path(str(path) + suffix)
        if existing.exists():
            os.chmod(existing, _PRIVATE_FILE)


def _connect(path: str) -> sqlite3.Connection:
    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    conn.row_factory = sqlite3.Row
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=FULL")
    conn.execute("PRAGMA foreign_keys=ON")
    conn.execute("PRAGMA busy_timeout=5000")
    return conn


class SqliteBackend:
    """A database file (or `:memory:`). Reads run on the calling event-loop thread: a read is shorter than the two
    thread hops it would otherwise cost. In memory the reader shares the writer's connection, which is then only
    ever used on this thread."""

    def __init__(self, path: str | Path) -> None:
        self.path = str(path)
        self._memory = self.path == ":memory:"
        self._writer = GroupWriter(fsyncs=not self._memory)
        self._wconn: sqlite3.Connection | None = None
        self._rconn: sqlite3.Connection | None = None
        self._reader: SqliteRows | None = None
        self._lock = None if self._memory else DatabaseLock(self.path)

    shared = False  # one process per file (`DatabaseLock`)

    @property
    def description(self) -> str:
        return self.path

    async def open(self) -> None:
        try:
            if self._lock is not None:
                make_private(Path(self.path))  # first, so the lock file's directory is created private too
                self._lock.acquire()

            def _open_writer() -> None:
                self._wconn = _connect(self.path)
                self._writer.rows = SqliteRows(self._wconn)
                migrate(self._wconn)

            await self._writer.call(_open_writer)
            self._rconn = conn = self._wconn if self._memory else _connect(self.path)
            if conn is None:
                raise RuntimeError("the writer connection opens first")
            self._reader = SqliteRows(conn)
        except sqlite3.Error as failed:
            await self.close()
            raise StoreError(str(failed) or type(failed).__name__) from failed
        except OSError as failed:  # its folder cannot be created, the file made private (a read-only place)
            await self.close()
            raise StoreError(f"{failed.strerror or failed}: {failed.filename or self.path}") from failed
        except BaseException:
            await self.close()
            raise

    async def close(self) -> None:
        loop = asyncio.get_running_loop()
        await self._writer.idle()
        if self._rconn is not None and self._rconn is not self._wconn:
            self._rconn.close()
        if self._wconn is not None:
            await self._writer.call(self._wconn.close)
        self._rconn = self._wconn = None
        self._writer.rows = None
        self._reader = None
        await loop.run_in_executor(None, self._writer.close)
        if self._lock is not None:
            self._lock.release()

    async def read(self, fn: Callable[[SqliteRows], T]) -> T:
        reader = self._reader
        if reader is None:
            raise RuntimeError("store is not open")
        try:
            return fn(reader)
        except sqlite3.Error as failed:
            raise StoreError(str(failed) or type(failed).__name__) from failed

    def submit(self, fn: Callable[[SqliteRows], T], settle: Settle, *, lazy: bool = False) -> asyncio.Future[T]:
        return self._writer.submit(fn, settle, lazy=lazy)

    def kick(self) -> None:
        self._writer.kick()

    async def renew_lease(self, lease: Lease, expires: int) -> bool:
        # (one process holds the database: nothing renews leases here but the backend contract's tests)
        return await self.submit(lambda rows: rows.leases.renew(lease, expires), lambda *_: None)

    async def idle(self) -> None:
        await self._writer.idle()

    def listen(self, foreign: Foreign, signal: Callable[[str], None], live: ForeignLive) -> None:
        """No other host writes this file."""

    def broadcast(self, record: EventRecord, after: int) -> None:
        """No other host reads this file."""

    async def signal(self, payload: str) -> None:
        """No other host listens."""
