"""PostgreSQL writes on a thread of their own: what the loop queued since the last batch runs in one transaction
(each write under its own savepoint when there are several). Just before the commit the batch takes the
`event_feed` row lock, numbers its events after the newest committed position and commits, so positions follow
commit order across hosts while the lock is held for the commit alone; events other hosts committed meanwhile are
read under that lock and handed to the loop before this batch's own."""

from __future__ import annotations

import asyncio
import logging
import queue
import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, cast

import psycopg

from ....schema.events import EventRecord
from ...telemetry import hooks
from ..backend import Foreign
from ..errors import StoreError
from .rows import PgRows

log = logging.getLogger(__name__)

# Writes per transaction at most: each write that changes rows is a subtransaction, and PostgreSQL tracks 64 per
# transaction before every snapshot on the server gets slower.
MAX_BATCH = 48
# Foreign events read per query while catching up.
_CATCH_UP_PAGE = 1000
# Times a batch runs again after PostgreSQL broke a deadlock by rolling it back (two hosts' batches writing the same
# sessions in opposite orders), it waited too long for a lock, or its connection was lost before the commit, before
# its writes fail.
_DEADLOCK_RETRIES = 5
_DEADLOCK_BACKOFF_S = 0.002  # the first retry's pause is up to this, each next one up to twice the one before


@dataclass
class Job:
    run: Callable[[PgRows], Any]
    settle: Callable[[Any, BaseException | None, list[int]], None]
    future: asyncio.Future[Any]
    outcome: tuple[Any, BaseException | None] = (None, None)
    positions: list[int] = field(default_factory=list)


_CATCH_UP = object()  # a queue item: read what other hosts committed, without writing


class PgWriter:
    """Owns the writer connection and its thread. `submit` and `kick` are called on the loop; outcomes come back to
    the loop in submission order, each batch's foreign events first."""

    def __init__(self, connect: Callable[[], psycopg.Connection[Any]], host_tag: str,
                 channel: Callable[[], str]) -> None:
        self._connect = connect
        self._host_tag = host_tag
        self._channel = channel
        self._conn: psycopg.Connection[Any] | None = None
        self._queue: queue.SimpleQueue[object] = queue.SimpleQueue()
        self._pending: list[Job] = []  # lazy writes waiting for a kick (loop side)
        self._unsettled = 0
        self._idle: list[asyncio.Future[None]] = []
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._catching_up = threading.Event()
        self.seen = 0  # the newest store position handed to the loop
        self.foreign: Foreign | None = None

    # --- the loop's side ---------------------------------------------------------------------------------

    def start(self, seen: int) -> None:
        self._loop = asyncio.get_running_loop()
        self.seen = seen
        self._thread = threading.Thread(target=self._serve, name="ocs-pg-writer", daemon=True)
        self._thread.start()

    def submit(self, run: Callable[[PgRows], Any], settle: Callable[[Any, BaseException | None, list[int]], None],
               *, lazy: bool = False) -> asyncio.Future[Any]:
        job = Job(run, settle, asyncio.get_running_loop().create_future())
        if self._thread is None:
            job.future.set_exception(RuntimeError("store is not open"))
            return job.future
        self._pending.append(job)
        self._unsettled += 1
        if not lazy:
            self.kick()
        return job.future

    def kick(self) -> None:
        if self._pending:
            batch, self._pending = self._pending, []
            self._queue.put(batch)

    def catch_up(self) -> None:
        """Another host committed: read its events (once, however many notifications arrive meanwhile)."""
        if not self._catching_up.is_set():
            self._catching_up.set()
            self._queue.put(_CATCH_UP)

    async def idle(self) -> None:
        self.kick()
        if self._unsettled:
            waiter = asyncio.get_running_loop().create_future()
            self._idle.append(waiter)
            await waiter

    async def stop(self) -> None:
        await self.idle()
        if self._thread is not None:
            self._queue.put(None)
            await asyncio.get_running_loop().run_in_executor(None, self._thread.join)
            self._thread = None

    def _settled(self, batch: list[Job], foreign: list[tuple[int, EventRecord]], error: BaseException | None) -> None:
        if foreign and self.foreign is not None:
            self.foreign(foreign)
        for job in batch:
            result, own = job.outcome
            failure = own if own is not None else error
            job.settle(None if failure else result, failure, job.positions)
            if not job.future.done():
                if failure is None:
                    job.future.set_result(result)
                else:
                    job.future.set_exception(failure)
        self._unsettled -= len(batch)
        if not self._unsettled:
            waiters, self._idle = self._idle, []
            for waiter in waiters:
                if not waiter.done():
                    waiter.set_result(None)

    # --- the thread's side -------------------------------------------------------------------------------

    def _serve(self) -> None:
        while True:
            item = self._queue.get()
            if item is None:
                break
            batch: list[Job] = [] if item is _CATCH_UP else list(cast(list[Job], item))
            while len(batch) < MAX_BATCH:  # whatever else is queued joins this transaction
                try:
                    more = self._queue.get_nowait()
                except queue.Empty:
                    break
                if more is None:
                    self._queue.put(None)
                    break
                if more is not _CATCH_UP:
                    batch.extend(cast(list[Job], more))
            catch_up = item is _CATCH_UP or self._catching_up.is_set()
            if catch_up:
                self._catching_up.clear()
            foreign: list[tuple[int, EventRecord]] = []  # (what a rolled-back attempt read of others' stays read)
            for attempt in range(1, _DEADLOCK_RETRIES + 1):
                read, error, again = self._transaction(batch, catch_up)
                foreign += read
                if not again:
                    break
                if attempt == _DEADLOCK_RETRIES:
                    log.warning("a PostgreSQL write transaction failed %d times in a row: %s", attempt, error)
                    break
                log.info("a write batch was rolled back (%s); running it again", error)
                # the other side runs first: a random, growing pause keeps two hosts from colliding again in step
                time.sleep(random.uniform(0, _DEADLOCK_BACKOFF_S * 2 ** attempt))
            assert self._loop is not None
            self._loop.call_soon_threadsafe(self._settled, batch, foreign, error)
        if self._conn is not None:
            self._conn.close()

    def _connection(self) -> psycopg.Connection[Any]:
        if self._conn is None or self._conn.closed or self._conn.broken:
            self._conn = self._connect()
        return self._conn

    def _transaction(self, batch: list[Job], catch_up: bool
                     ) -> tuple[list[tuple[int, EventRecord]], BaseException | None, bool]:
        """Run the batch in one transaction: what it read of other hosts' events, its failure, and whether running
        it again may well succeed (the server rolled it back, or the connection was lost before the commit was
        sent: nothing of it is durable, and a fresh connection may work)."""
        foreign: list[tuple[int, EventRecord]] = []
        connected = committing = False
        try:
            conn = self._connection()
            connected = True
            rows = PgRows(conn)  # one per transaction: what its lease checks remember lasts as long as their locks
            inserted: list[list[str]] = []
            several = len(batch) > 1
            for job in batch:
                job.outcome = (None, None)
                ids: list[str] = []
                rows.events.inserted = ids
                if several:
                    conn.execute("SAVEPOINT job")  # never released: a RELEASE would cost a round trip per write
                try:
                    job.outcome = (job.run(rows), None)
                except psycopg.OperationalError:
                    raise  # the connection failed, or the server rolled the batch back: nothing of it is durable
                except BaseException as error:  # noqa: BLE001 - this write alone is rolled back
                    if several:
                        conn.execute("ROLLBACK TO SAVEPOINT job")
                    else:
                        conn.rollback()
                    rows.leases.forget()  # the row locks its checks took went with it
                    ids = []
                    job.outcome = (None, _neutral(error))
                inserted.append(ids)
            count = sum(len(ids) for ids in inserted)
            if count:  # one round trip: lock the feed, number this batch's events after it, and tell the others
                row = conn.execute(
                    "WITH feed AS (UPDATE event_feed SET last = last + %s WHERE id = 1 RETURNING last - %s AS base),"
                    " numbered AS (UPDATE event SET position = feed.base + item.n FROM feed,"
                    " unnest(%s::text[]) WITH ORDINALITY AS item(id, n) WHERE event.id = item.id)"
                    " SELECT base, pg_notify(%s::text, %s::text || ':' || (base + %s::bigint)::text) FROM feed",
                    (count, count, [event_id for ids in inserted for event_id in ids], self._channel(),
                     self._host_tag, count)).fetchone()
                last = 0 if row is None else int(row[0])
                position = last
                for job, ids in zip(batch, inserted, strict=True):
                    job.positions[:] = range(position + 1, position + 1 + len(ids))
                    position += len(ids)
            elif catch_up:
                row = conn.execute("SELECT last FROM event_feed WHERE id = 1").fetchone()
                last = 0 if row is None else int(row[0])
            else:
                last = self.seen  # no events of ours to order after theirs: a notification brings theirs
            while self.seen < last:  # other hosts committed before this batch: theirs are announced first
                page = [entry for entry in rows.events.from_position(self.seen, _CATCH_UP_PAGE) if entry[0] <= last]
                if not page:
                    break
                foreign.extend(page)
                self.seen = page[-1][0]
            self.seen = max(self.seen, last)
            started = time.perf_counter()
            committing = True
            conn.commit()
            hooks.committed(time.perf_counter() - started)
            self.seen = max(self.seen, last + count)
            return foreign, None, False
        except Exception as error:  # noqa: BLE001 - every write of the batch fails with it
            failure = _neutral(error)
            # (a connection lost during the commit may have committed it: that batch is never run again)
            lost = connected and not committing and isinstance(error, psycopg.OperationalError) and self._lost()
            again = lost or _rolled_back(failure)
            if not again:  # (one run again is logged once if it gives up)
                log.warning("a PostgreSQL write transaction failed: %s", error)
            self._rollback()
            for job in batch:
                job.positions.clear()
            return foreign, failure, again

    def _lost(self) -> bool:
        """Whether the writer's connection is gone (closed by the server, say by `idle_in_transaction_session_timeout`
        after this thread was starved of CPU mid-batch, or cut off): the next transaction makes a new one."""
        conn = self._conn
        return conn is None or conn.closed or bool(conn.broken)

    def _rollback(self) -> None:
        conn = self._conn
        if conn is not None and not conn.closed and not conn.broken:
            try:
                conn.rollback()
            except psycopg.Error:
                conn.close()


def _rolled_back(error: BaseException | None) -> bool:
    """Whether the server rolled the batch back on its own (SQLSTATE class 40: a deadlock it broke, a serialization
    failure; 55P03: a lock waited for longer than `lock_timeout`, say behind a paused host's transaction, which the
    server ends by `idle_in_transaction_session_timeout`): running it again may well succeed."""
    cause = error.__cause__ if isinstance(error, StoreError) else None
    state = cause.sqlstate or "" if isinstance(cause, psycopg.Error) else ""
    return state.startswith("40") or state == "55P03"


def _neutral(error: BaseException) -> BaseException:
    """psycopg's failures as the store's StoreError (the original is its cause); a domain error as it is."""
    if isinstance(error, psycopg.Error):
        neutral = StoreError(str(error).strip() or type(error).__name__)
        neutral.__cause__ = error
        return neutral
    return error
