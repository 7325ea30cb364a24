"""The SQLite store: group-committed writes (event append + projection atomically per write), a reader connection
beside them, and live events published in order behind the writes queued before them."""

from __future__ import annotations

import asyncio
import os
import sqlite3
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from ...schema import jsontext
from ...schema.base import Struct
from ...schema.common import LocationRef
from ...schema.events import EventRecord, definition_of
from ...schema.ids import event_id
from . import events
from .feed import DurableFeed, LiveBus
from .lock import DatabaseLock
from .migrations import migrate
from .tail import Tails
from .writer import GroupWriter

T = TypeVar("T")
Projector = Callable[["Tx", EventRecord], None]
CommitHook = Callable[["Tx", EventRecord], None]


def now_ms() -> int:
    return int(time.time() * 1000)


# The database holds prompts, file contents and tool output: only its owner may read it.
_PRIVATE_DIR, _PRIVATE_FILE = 0o700, 0o600
_SQLITE_FILES = ("", "-wal", "-shm", "-journal")


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


# The log, which replay reads and never changes.
LOG_TABLES = ("event_sequence", "event")
# The tables the projector writes: cleared and rebuilt from the event log by replay.
PROJECTION_TABLES = ("session", "session_message", "session_pending")
# State kept beside the projections but not derived from events, which a rebuild leaves as it was: the instruction
# checkpoint and entries (the files and values a baseline was read from are not in the log), the "always"
# permissions, the count of removed messages the history cache watches, and the suspension mark of a session row.
STATE_TABLES = ("instruction_checkpoint", "instruction_entry", "permission_saved", "session_message_removal")
SESSION_STATE_COLUMNS = ("time_suspended",)


def live_event(data: Struct, aggregate_id: str) -> EventRecord:
    """A live-only event: no sequence, published once and never stored."""
    return EventRecord(id=event_id(), created=now_ms(), data=data, aggregate_id=aggregate_id)


def _read_all(reader: Reader, sql: str) -> tuple[list[str], list[tuple[Any, ...]]]:
    """A query's column names and all its rows."""
    cursor = reader.execute(sql)
    return [d[0] for d in cursor.description], [tuple(row) for row in cursor]


class Reader:
    """What the store's table modules run SQL on: the reader connection, or (as Tx) the open write transaction.
    Code above the store only passes it along to those modules."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self._conn = conn

    def execute(self, sql: str, params: Any = ()) -> sqlite3.Cursor:
        return self._conn.execute(sql, params)

    def executemany(self, sql: str, params: Any) -> sqlite3.Cursor:
        return self._conn.executemany(sql, params)


class Tx(Reader):
    """One open write transaction. `append` assigns the next seq, runs projections and the optional commit hook."""

    def __init__(self, store: Store, conn: sqlite3.Connection) -> None:
        super().__init__(conn)
        self.store = store
        self.appended: list[tuple[int, EventRecord]] = []  # with each event's store position
        self.live: list[EventRecord] = []

    def latest_seq(self, aggregate_id: str) -> int:
        return events.latest_seq(self, aggregate_id)

    def append(
        self,
        data: Struct,
        *,
        location: LocationRef | None = None,
        commit_hook: CommitHook | None = None,
        id: str | None = None,
        created: int | None = None,
    ) -> EventRecord:
        definition = definition_of(data)
        if not definition.durable:
            raise ValueError(f"{definition.type} is live-only; publish it with publish_live")
        wire = data.wire()
        aggregate_id: str = wire["sessionID"]  # every durable event belongs to a session
        clean, text = jsontext.encode(wire)
        if clean is not wire:  # text from outside (a provider, a tool) that JSON cannot carry is never stored as is
            data = type(data).model_validate(clean)
        seq = self.latest_seq(aggregate_id) + 1
        record = EventRecord(
            id=id or event_id(), created=created or now_ms(), data=data, aggregate_id=aggregate_id, seq=seq,
            location=location,
        )
        self.store.project(self, record)
        if commit_hook is not None:
            commit_hook(self, record)
        self.appended.append((events.insert(self, record, text), record))
        return record

    def publish_live(self, data: Struct, aggregate_id: str) -> None:
        """Queue a live-only event to be published after this transaction commits."""
        self.live.append(live_event(data, aggregate_id))


class Store:
    """Owns the database file. All writes go through one connection (group commit, see `GroupWriter`); reads use
    another, on the event loop."""

    def __init__(self, path: str | Path, project: Projector | None = None, live_capacity: int = 4096) -> None:
        self.path = str(path)
        self._projector = project
        self._writer = GroupWriter(fsyncs=self.path != ":memory:")
        self._wconn: sqlite3.Connection | None = None
        self._rconn: sqlite3.Connection | None = None
        self._read_handle: Reader | None = None
        # the live events published since the newest write not yet settled: they wait for it, so none overtakes it
        self._held: list[EventRecord] | None = None
        self._tails = Tails()
        self.durable = DurableFeed()
        self.live = LiveBus(self._events_from, capacity=live_capacity)
        self._lock = DatabaseLock(self.path) if self.path != ":memory:" else None

    # --- lifecycle ---------------------------------------------------------------------------------

    async def open(self) -> Store:
        """Open (and migrate) the database; raises DatabaseInUseError while another process has it open."""
        if self._lock is not None:
            make_private(Path(self.path))  # first, so the lock file's directory is created private too
            self._lock.acquire()

        def _open_writer() -> None:
            self._wconn = self._writer.conn = _connect(self.path)
            migrate(self._wconn)

        try:
            await self._writer.call(_open_writer)
            self._rconn = conn = self._wconn if self.path == ":memory:" else _connect(self.path)
            if conn is None:
                raise RuntimeError("the writer connection opens first")
            self._read_handle = Reader(conn)
        except BaseException:
            await self.close()
            raise
        return self

    async def close(self) -> None:
        loop = asyncio.get_running_loop()
        await self._writer.idle()
        if self._rconn is not None and self._rconn is not self._wconn:
            self._rconn.close()
        if self._wconn is not None:
            await self._writer.call(self._wconn.close)
        self._rconn = self._wconn = self._writer.conn = None
        self._read_handle = None
        await loop.run_in_executor(None, self._writer.close)
        self.live.close()
        if self._lock is not None:
            self._lock.release()

    async def __aenter__(self) -> Store:
        return await self.open()

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # --- projection ----------------------------------------------------------------------------------

    def project(self, tx: Tx, record: EventRecord) -> None:
        if self._projector is not None:
            self._projector(tx, record)

    # --- transactions ----------------------------------------------------------------------------------

    def submit(self, fn: Callable[[Tx], T], *, lazy: bool = False) -> asyncio.Future[T]:
        """Queue `fn` to run in a write transaction without waiting for it. It commits together with whatever else
        is queued (each write rolls back alone if it raises); readers are notified in commit order, before the
        returned future resolves. Writes commit in submission order, and live events published after this call
        reach readers after its events. A `lazy` write waits for the next one that is not, a live event that must
        follow it, or `kick`, to share their commit. The caller must await the future (or it loses the write's
        error), after a `kick` if it was lazy."""
        held: list[EventRecord] = []
        self._held = held
        tx_of: list[Tx] = []

        def _run(conn: sqlite3.Connection) -> T:
            tx = Tx(self, conn)
            result = fn(tx)
            tx_of.append(tx)
            return result

        def _settle(_result: object, error: BaseException | None) -> None:
            if error is None:
                self._announce(tx_of[0])
            for record in held:
                self.live.publish(record)
            if self._held is held:
                self._held = None

        return self._writer.submit(_run, _settle, lazy=lazy)

    def kick(self) -> None:
        """Commit the lazy writes queued so far, without waiting for a write that is not."""
        self._writer.kick()

    async def write(self, fn: Callable[[Tx], T]) -> T:
        """Run `fn` inside a write transaction (see `submit`) and return its result once it is durable. Once
        submitted the write runs to its end (and is announced) even if the caller is cancelled meanwhile; the caller
        then still waits for it before seeing the cancellation."""
        future = self.submit(fn)
        try:
            return await asyncio.shield(future)
        except asyncio.CancelledError:
            try:
                await future
            except Exception:
                pass
            raise

    async def append(self, data: Struct) -> EventRecord:
        """Commit one durable event, and what it projects, in a transaction of its own."""
        return await self.write(lambda tx: tx.append(data))

    def _announce(self, tx: Tx) -> None:
        for position, record in tx.appended:
            self._tails.add(record)
            self.durable.ring(record.aggregate_id)
            self.live.publish(record, position)
        for record in tx.live:
            self.live.publish(record)

    def publish_live(self, data: Struct, aggregate_id: str) -> None:
        record = live_event(data, aggregate_id)
        if self._held is not None:
            self._held.append(record)  # after the write queued before it, which must commit now
            self._writer.kick()
        else:
            self.live.publish(record)

    async def read(self, fn: Callable[[Reader], T]) -> T:
        """Run a read-only function on the reader connection, on the calling (event loop) thread: WAL readers never
        wait for the writer, and a read is shorter than the two thread hops it would otherwise cost (its rows are
        Python work that holds the interpreter lock wherever it runs). In memory it shares the writer's
        connection, which is only ever used on this thread there."""
        handle = self._read_handle
        if handle is None:
            raise RuntimeError("store is not open")
        return fn(handle)

    # --- the log -------------------------------------------------------------------------------------

    async def events_after(self, aggregate_id: str, after: int, limit: int = 100) -> list[EventRecord]:
        """At most `limit` events of the session after seq `after`; a follower that keeps pace gets them from the
        session's in-memory tail."""
        recent = self._tails.after(aggregate_id, after, limit)
        if recent is not None:
            return recent
        return await self.read(lambda reader: events.after(reader, aggregate_id, after, limit))

    async def _events_from(self, position: int, limit: int) -> list[tuple[int, EventRecord]]:
        """Durable events committed after a store position (the event rowid: a global commit order), oldest first."""
        return await self.read(lambda reader: events.from_position(reader, position, limit))

    async def latest_seq(self, aggregate_id: str) -> int:
        return await self.read(lambda reader: events.latest_seq(reader, aggregate_id))

    async def rebuild_projections(self) -> None:
        """Clear the projection tables and replay every stored event through the projector, in one transaction.
        The state beside them reads the same afterwards, whatever clearing the sessions cascaded into (or replaying
        an event reset); replay publishes nothing."""

        def _rebuild(tx: Tx) -> None:
            tx.execute("PRAGMA defer_foreign_keys = ON")
            kept = {table: _read_all(tx, f"SELECT rowid, * FROM {table}") for table in STATE_TABLES}
            marks = {column: _read_all(tx, f"SELECT {column}, id FROM session")[1] for column in SESSION_STATE_COLUMNS}
            for table in reversed(PROJECTION_TABLES):
                tx.execute(f"DELETE FROM {table}")
            for record in events.every(tx):
                self.project(tx, record)
            tx.live.clear()  # the usage of old Steps is no news to live readers
            for table, (columns, rows) in kept.items():
                tx.execute(f"DELETE FROM {table}")
                tx.executemany(f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({', '.join('?' * len(columns))})",
                               rows)
            for column, values in marks.items():
                tx.executemany(f"UPDATE session SET {column} = ? WHERE id = ?", values)

        await self.write(_rebuild)
