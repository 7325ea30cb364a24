"""SQLite group commit: every write queued since the last commit runs on the event loop in one transaction, each under
its own savepoint so a failing write rolls back alone; a COMMIT (the fsync) that is slow runs on a thread of its own,
and the writes queued meanwhile form the next batch. Outcomes are settled in submission order once their batch is
durable."""

from __future__ import annotations

import asyncio
import sqlite3
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ...telemetry import hooks
from ..errors import StoreError

if TYPE_CHECKING:
    from .rows import SqliteRows

# Writes per transaction at most: bounds how long one batch holds the event loop and how much one commit can fail.
MAX_BATCH = 256
# Commits that take less than this on average (a local disk: ~0.1-0.2 ms here) run on the loop: handing one to a
# thread and back costs 0.1-0.4 ms of wake-ups on this machine. Slower ones (a network disk, a disk under contention)
# run on the commit thread, so the loop keeps serving while they wait.
INLINE_COMMIT_S = 0.001


@dataclass
class Job:
    """One queued write: `run` executes inside the batch transaction; `settle` is then called with (result, error,
    the positions of the events it inserted), in queue order, once the batch committed (or failed)."""

    run: Callable[[SqliteRows], Any]
    settle: Callable[[Any, BaseException | None, list[int]], None]
    future: asyncio.Future[Any]
    outcome: tuple[Any, BaseException | None] = field(default=(None, None))
    positions: list[int] = field(default_factory=list)


class GroupWriter:
    """Owns the writer connection. Writes run on the event loop's thread (no thread hops, and no contention for the
    interpreter lock with a second thread doing Python work), batched per loop turn. A commit runs inline while
    commits are quick, and on the commit thread once they are slow (`INLINE_COMMIT_S`), so a slow disk's fsync
    does not block the loop. An in-memory database always commits inline."""

    def __init__(self, fsyncs: bool = True) -> None:
        self.rows: SqliteRows | None = None  # the writer connection's handle, set once it is open
        self._fsyncs = fsyncs
        self._thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="ocs-db-commit")
        self._queue: list[Job] = []
        self._scheduled = False
        self._committing = False
        self._idle: list[asyncio.Future[None]] = []  # who waits for every queued write to settle
        self._commit_s = 0.0  # how long commits take lately (a moving average)

    async def call(self, fn: Callable[[], Any]) -> Any:
        """Run `fn` on the commit thread, outside any transaction (opening, migrating and closing the database)."""
        return await asyncio.get_running_loop().run_in_executor(self._thread, fn)

    def submit(self, run: Callable[[SqliteRows], Any], settle: Callable[[Any, BaseException | None, list[int]], None],
               *, lazy: bool = False) -> asyncio.Future[Any]:
        """Queue a write for the next batch. A `lazy` one starts no batch by itself: it waits for the next write
        that does (or `kick`), so writes that follow it closely share its commit."""
        job = Job(run, settle, asyncio.get_running_loop().create_future())
        self._queue.append(job)
        if not lazy:
            self.kick()
        return job.future

    def kick(self) -> None:
        """Start a batch of whatever is queued, on the next turn of the loop (after the commit in flight)."""
        if self._queue and not self._scheduled and not self._committing:
            self._scheduled = True
            asyncio.get_running_loop().call_soon(self._flush)

    async def idle(self) -> None:
        """Return once every write submitted so far has settled."""
        self.kick()
        if self._queue or self._committing or self._scheduled:
            waiter = asyncio.get_running_loop().create_future()
            self._idle.append(waiter)
            await waiter

    def close(self) -> None:
        self._thread.shutdown(wait=True)

    # --- the pipeline ------------------------------------------------------------------------------------

    def _flush(self) -> None:
        self._scheduled = False
        if self._committing or not self._queue:
            return
        batch, self._queue = self._queue[:MAX_BATCH], self._queue[MAX_BATCH:]
        rows = self.rows
        if rows is None:
            self._done(batch, RuntimeError("store is not open"))
            return
        conn = rows.conn
        try:
            conn.execute("BEGIN IMMEDIATE")
        except Exception as error:  # every write of the batch fails with it
            self._done(batch, _neutral(error))
            return
        changes = conn.total_changes
        events = rows.events
        try:
            for job in batch:
                conn.execute("SAVEPOINT job")
                events.positions = job.positions
                try:
                    job.outcome = (job.run(rows), None)
                    conn.execute("RELEASE job")
                except BaseException as error:  # noqa: BLE001 - this write alone is rolled back, its caller gets why
                    conn.execute("ROLLBACK TO job")
                    conn.execute("RELEASE job")
                    job.outcome = (None, _neutral(error))
        except Exception as error:  # the connection itself failed (the disk, say): nothing of the batch is durable
            self._committed(batch, conn, _neutral(error))
            return
        if not self._fsyncs or conn.total_changes == changes:  # nothing to make durable: no fsync to wait for
            self._committed(batch, conn, _commit(conn)[0])
            return
        if self._commit_s < INLINE_COMMIT_S:
            self._committed(batch, conn, self._timed(_commit(conn)))
            return
        self._committing = True
        loop = asyncio.get_running_loop()
        done = loop.run_in_executor(self._thread, _commit, conn)
        done.add_done_callback(lambda f: self._committed(batch, conn, self._timed(f.result())))

    def _timed(self, outcome: tuple[BaseException | None, float]) -> BaseException | None:
        error, seconds = outcome
        self._commit_s = 0.8 * self._commit_s + 0.2 * seconds
        return error

    def _committed(self, batch: list[Job], conn: sqlite3.Connection, error: BaseException | None) -> None:
        self._committing = False
        if error is not None and conn.in_transaction:
            conn.execute("ROLLBACK")
        self._done(batch, _neutral(error))

    def _done(self, batch: list[Job], error: BaseException | None) -> None:
        """Settle a finished batch, then start the next one (or wake who waits for the writer to be idle)."""
        self._settle(batch, error)
        if self._queue:
            self.kick()
        elif not self._scheduled:
            waiters, self._idle = self._idle, []
            for waiter in waiters:
                if not waiter.done():
                    waiter.set_result(None)

    @staticmethod
    def _settle(batch: list[Job], error: BaseException | None) -> None:
        """Settle each write: its own outcome, or `error` (nothing of the batch is durable) when the batch failed."""
        for job in batch:
            result, own = job.outcome
            failure = own if own is not None else error
            job.settle(None if failure else result, failure, job.positions)
            if not job.future.done():  # a waiter cancelled meanwhile has let it go
                if failure is None:
                    job.future.set_result(result)
                else:
                    job.future.set_exception(failure)


def _neutral(error: BaseException | None) -> BaseException | None:
    """SQLite's own failures as the store's backend-neutral StoreError (the original is its cause); anything else,
    such as a domain error a write raised, as it is."""
    if isinstance(error, sqlite3.Error):
        neutral = StoreError(str(error) or type(error).__name__)
        neutral.__cause__ = error
        return neutral
    return error


def _commit(conn: sqlite3.Connection) -> tuple[BaseException | None, float]:
    """COMMIT: the error, if any, and how long it took."""
    start = time.perf_counter()
    try:
        conn.execute("COMMIT")
    except Exception as error:
        return error, time.perf_counter() - start
    seconds = time.perf_counter() - start
    hooks.committed(seconds)
    return None, seconds
