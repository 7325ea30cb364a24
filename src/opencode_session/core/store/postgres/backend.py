"""The PostgreSQL backend: several hosts on one database. Writes run on a writer thread (`PgWriter`), reads on a
small pool of connections in worker threads, one listening connection on the loop hears the other hosts' commits
(read back from the log, in position order), their signals and their live events, and one more sends this host's
live events (`live.py`)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import secrets
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

import psycopg
from psycopg import sql
from psycopg_pool import ConnectionPool, PoolTimeout

from ....schema.events import EventRecord
from ..backend import Foreign, ForeignLive
from ..errors import StoreError
from ..rows import Lease
from .dialect import rows as row_factory
from .live import LiveSender, Reassembly, receive
from .migrations import migrate
from .rows import PgRows
from .writer import PgWriter

T = TypeVar("T")
log = logging.getLogger(__name__)

READERS = 4
# The lease lifetime the database's time limits are cut from unless the host says otherwise (the runtime's default).
DEFAULT_LEASE_MS = 10_000


def bounded(url: str, lease_ms: int = DEFAULT_LEASE_MS, *, statements: bool = True) -> str:
    """The address with the time limits every connection of a host gets, each well inside a lease lifetime, so no
    host can hold the others back longer than that whatever happens to it:

    - `idle_in_transaction_session_timeout` (a third of the lease): a host paused (SIGSTOP) or cut off in the middle
      of a transaction has it rolled back by the server, and the row locks it held (a lease row its fencing check
      share-locked, a session's sequence row) are released before its lease can have expired, so the host taking
      its sessions over is not left waiting behind it. A host never leaves a transaction open across anything but
      its own next statement (the writer runs a batch's statements back to back), so only a stopped one is cut.
    - `lock_timeout` (a third of the lease): a statement waiting for a lock gives up rather than queueing for ever
      behind whatever holds it (the writer runs its batch again).
    - `statement_timeout` (half the lease): no statement runs longer than that.
    - `connect_timeout`: a connection that cannot be made within the lease fails (libpq counts whole seconds).

    Unless the address names one, `application_name` is `ocs:PID`, so pg_stat_activity tells the hosts apart (a
    host's lease owner name holds the same process id).

    Without `statements` (the migrations' connection: a migration may rightly take long) all but the statement limit.
    """
    try:
        params = psycopg.conninfo.conninfo_to_dict(url)
    except psycopg.ProgrammingError:
        return url  # (connecting says what is wrong with it)
    third, half = max(lease_ms // 3, 1), max(lease_ms // 2, 1)
    limits = f"-c idle_in_transaction_session_timeout={third} -c lock_timeout={third}"
    if statements:
        limits += f" -c statement_timeout={half}"
    params["options"] = f"{params['options']} {limits}" if params.get("options") else limits
    params.setdefault("connect_timeout", str(max(2, lease_ms // 1000)))
    params.setdefault("application_name", f"ocs:{os.getpid()}")  # which host a connection is, in pg_stat_activity
    return psycopg.conninfo.make_conninfo("", **params)


def describe(url: str) -> str:
    """The address without its password, for messages."""
    try:
        params = psycopg.conninfo.conninfo_to_dict(url)
    except psycopg.ProgrammingError:
        return "postgresql://(unparsable address)"
    host, port, dbname = params.get("host", "localhost"), params.get("port", "5432"), params.get("dbname", "")
    user = f"{params['user']}@" if params.get("user") else ""
    return f"postgresql://{user}{host}:{port}/{dbname}"


class PostgresBackend:
    """A PostgreSQL database shared by any number of hosts (`shared`: no process holds it alone)."""

    shared = True

    def __init__(self, url: str, lease_ms: int = DEFAULT_LEASE_MS) -> None:
        self.url = url
        self.conninfo = bounded(url, lease_ms)  # what every connection but the migrations' is made with
        self._migrating = bounded(url, lease_ms, statements=False)
        self.host_tag = secrets.token_hex(6)
        self._writer = PgWriter(self._connect, self.host_tag, lambda: self._commits)
        self._pool: ConnectionPool[Any] | None = None
        self._readers: ThreadPoolExecutor | None = None
        self._listener: asyncio.Task[None] | None = None
        self._signal: Callable[[str], None] | None = None
        self._live: ForeignLive | None = None
        # notification channels are per database: named after the schema too, so stores in two schemas stay apart
        self._commits = self._signals = self._lives = ""
        self._sender = LiveSender(self.conninfo, self.host_tag, lambda: self._lives)
        self._reassembly = Reassembly(self.host_tag)
        self._lost_before = 0  # live events lost on listening connections before the current one
        self.opened_at = 0  # the newest store position when this host opened the database
        self.listener_pid: int | None = None  # the database's process serving the listening connection

    @property
    def description(self) -> str:
        return describe(self.url)

    def _connect(self) -> psycopg.Connection[Any]:
        return psycopg.Connection.connect(self.conninfo, row_factory=row_factory)

    async def open(self) -> None:
        loop = asyncio.get_running_loop()
        try:
            def _migrate() -> int:
                with psycopg.Connection.connect(self._migrating, autocommit=True) as conn:
                    migrate(conn)
                    schema = conn.execute("SELECT current_schema()").fetchone()
                    name = schema[0] if schema else ""
                    self._commits, self._signals, self._lives = (f"ocs_commit:{name}", f"ocs_signal:{name}",
                                                                 f"ocs_live:{name}")
                    head = conn.execute("SELECT last FROM event_feed WHERE id = 1").fetchone()
                    return 0 if head is None else int(head[0])

            seen = self.opened_at = await loop.run_in_executor(None, _migrate)
            self._pool = pool = ConnectionPool(self.conninfo, min_size=1, max_size=READERS, open=False,
                                               name="ocs-readers",
                                               kwargs={"autocommit": True, "row_factory": row_factory})
            await loop.run_in_executor(None, lambda: pool.open(wait=True, timeout=10))
            self._readers = ThreadPoolExecutor(max_workers=READERS, thread_name_prefix="ocs-pg-read")
            self._writer.start(seen)
            ready = asyncio.Event()
            self._listener = asyncio.create_task(self._listen(ready), name="ocs-pg-listener")
            listening = asyncio.ensure_future(ready.wait())
            try:
                await asyncio.wait({self._listener, listening}, return_when=asyncio.FIRST_COMPLETED)
            finally:
                listening.cancel()
            if self._listener.done():
                self._listener.result()
            self._sender.start()
        except (psycopg.Error, PoolTimeout) as failed:
            await self.close()
            raise StoreError(f"{self.description}: {failed}".strip()) from failed
        except BaseException:
            await self.close()
            raise

    async def close(self) -> None:
        await self._sender.stop()
        await self._writer.stop()
        if self._listener is not None:
            self._listener.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._listener
            self._listener = None
        loop = asyncio.get_running_loop()
        if self._readers is not None:
            self._readers.shutdown(wait=True)
            self._readers = None
        if self._pool is not None:
            pool, self._pool = self._pool, None
            await loop.run_in_executor(None, pool.close)

    # --- reads and writes --------------------------------------------------------------------------------

    def _read(self, fn: Callable[[PgRows], T]) -> T:
        pool = self._pool
        if pool is None:
            raise RuntimeError("store is not open")
        try:
            with pool.connection() as conn:
                return fn(PgRows(conn))
        except psycopg.Error as failed:
            raise StoreError(str(failed).strip() or type(failed).__name__) from failed

    async def read(self, fn: Callable[[PgRows], T]) -> T:
        if self._readers is None:
            raise RuntimeError("store is not open")
        return await asyncio.get_running_loop().run_in_executor(self._readers, self._read, fn)

    def submit(self, fn: Callable[[PgRows], T], settle: Callable[[object, BaseException | None, list[int]], None],
               *, lazy: bool = False) -> asyncio.Future[T]:
        return self._writer.submit(fn, settle, lazy=lazy)

    def kick(self) -> None:
        self._writer.kick()

    async def renew_lease(self, lease: Lease, expires: int) -> bool:
        # one autocommit statement on a reading connection: it changes only the expiry, which no write of the
        # queue depends on (their fencing checks owner and epoch)
        return await self.read(lambda rows: rows.leases.renew(lease, expires))

    async def idle(self) -> None:
        await self._writer.idle()

    # --- other hosts -------------------------------------------------------------------------------------

    def listen(self, foreign: Foreign, signal: Callable[[str], None], live: ForeignLive) -> None:
        self._writer.foreign = foreign
        self._signal = signal
        self._live = live

    def broadcast(self, record: EventRecord, after: int) -> None:
        self._sender.put(record, after)

    @property
    def live_dropped(self) -> int:
        """This host's live events that never left it (an overloaded outbox, a refused message)."""
        return self._sender.dropped

    @property
    def live_lost(self) -> int:
        """Other hosts' live events that arrived incomplete or unreadable here."""
        return self._lost_before + self._reassembly.lost

    def _received_live(self, record: EventRecord, after: int) -> None:
        if self._live is not None:
            # a position from before this host opened the database is one it will never announce: nothing to wait for
            self._live(record, after if after > self.opened_at else -1)

    async def signal(self, payload: str) -> None:
        await self.read(lambda rows: rows.pg.execute("SELECT pg_notify(%s, %s)", (self._signals, payload)))

    async def _listen(self, ready: asyncio.Event) -> None:
        """Hear commits, signals and live events of every host; reconnect (and catch up) when the connection
        drops (live events sent meanwhile are lost, as a live reader's are when it reconnects)."""
        delay = 0.1
        while True:
            self._lost_before += self._reassembly.lost
            self._reassembly = reassembly = Reassembly(self.host_tag)
            try:
                async with await psycopg.AsyncConnection.connect(self.conninfo, autocommit=True) as conn:
                    for channel in (self._commits, self._signals, self._lives):
                        await conn.execute(sql.SQL("LISTEN {}").format(sql.Identifier(channel)))
                    self.listener_pid = conn.info.backend_pid
                    ready.set()
                    delay = 0.1
                    self._writer.catch_up()  # whatever was committed while nobody listened
                    async for note in conn.notifies():
                        if note.channel == self._lives:
                            try:
                                receive(reassembly, note.payload, self._received_live)
                            except Exception:
                                log.exception("a live event from another host failed")
                        elif note.channel == self._commits:
                            if not note.payload.startswith(self.host_tag + ":"):
                                self._writer.catch_up()
                        elif self._signal is not None:
                            try:
                                self._signal(note.payload)
                            except Exception:
                                log.exception("a signal from another host failed")
            except asyncio.CancelledError:
                raise
            except psycopg.Error as failed:
                if not ready.is_set():
                    raise
                log.warning("lost the PostgreSQL notification connection (%s); reconnecting", failed)
                await asyncio.sleep(delay)
                delay = min(delay * 2, 5.0)

