"""Group commit: the one writer thread runs every write job queued while it was busy in one SQLite transaction
(one fsync), each job under its own savepoint so a failing job rolls back alone, and settles them in order."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

# Jobs per transaction at most: bounds how long a batch holds the write lock and how much one commit can fail.
MAX_BATCH = 256


@dataclass
class Job:
    """One queued write: `run` executes on the writer thread inside the batch transaction; `settle` is then called
    on `loop` with (result, error), in queue order, after the batch committed (or failed)."""

    run: Callable[[sqlite3.Connection], Any]
    settle: Callable[[Any, BaseException | None], None]
    loop: asyncio.AbstractEventLoop
    transactional: bool = True  # False: a read that shares the writer connection (an in-memory database)
    outcome: tuple[Any, BaseException | None] = field(default=(None, None))


class GroupWriter:
    """Owns the writer connection's thread. `submit` queues a job; the thread takes everything queued, runs it in
    one BEGIN IMMEDIATE ... COMMIT, and hands the outcomes back to each job's event loop in submission order."""

    def __init__(self, name: str = "ocs-db-writer") -> None:
        self._jobs: deque[Job] = deque()
        self._ready = threading.Condition()
        self._closed = False
        self._thread = threading.Thread(target=self._loop, name=name, daemon=True)
        self._started = False
        self.conn: sqlite3.Connection | None = None

    def call(self, fn: Callable[[], Any], loop: asyncio.AbstractEventLoop) -> asyncio.Future[Any]:
        """Run `fn` alone on the writer thread, outside any transaction (opening and closing the connection)."""
        return self.submit(Job(lambda _conn: fn(), _noop, loop, transactional=False))

    def submit(self, job: Job) -> asyncio.Future[Any]:
        future: asyncio.Future[Any] = job.loop.create_future()
        settle = job.settle

        def _settle(result: Any, error: BaseException | None) -> None:
            settle(result, error)
            if not future.done():  # a waiter cancelled meanwhile has let it go
                if error is None:
                    future.set_result(result)
                else:
                    future.set_exception(error)

        job.settle = _settle
        with self._ready:
            if self._closed:
                raise RuntimeError("store is not open")
            if not self._started:
                self._started = True
                self._thread.start()
            self._jobs.append(job)
            self._ready.notify()
        return future

    def close(self) -> None:
        """Stop the thread once every queued job has run."""
        with self._ready:
            self._closed = True
            self._ready.notify()
        if self._started:
            self._thread.join()

    # --- the writer thread -----------------------------------------------------------------------------------

    def _take(self) -> list[Job] | None:
        with self._ready:
            while not self._jobs:
                if self._closed:
                    return None
                self._ready.wait()
            first = self._jobs.popleft()
            if not first.transactional:
                return [first]
            batch = [first]
            while self._jobs and len(batch) < MAX_BATCH and self._jobs[0].transactional:
                batch.append(self._jobs.popleft())
            return batch

    def _loop(self) -> None:
        while (batch := self._take()) is not None:
            if batch[0].transactional:
                self._commit(batch)
            else:
                job = batch[0]
                try:
                    job.outcome = (job.run(self.conn), None)  # type: ignore[arg-type]  # opening sets conn
                except BaseException as error:  # noqa: BLE001 - handed to the waiter
                    job.outcome = (None, error)
            _hand_back(batch)

    def _commit(self, batch: list[Job]) -> None:
        conn = self.conn
        if conn is None:
            for job in batch:
                job.outcome = (None, RuntimeError("store is not open"))
            return
        try:
            conn.execute("BEGIN IMMEDIATE")
        except BaseException as error:  # noqa: BLE001 - every job of the batch fails with it
            for job in batch:
                job.outcome = (None, error)
            return
        for job in batch:
            conn.execute("SAVEPOINT job")
            try:
                job.outcome = (job.run(conn), None)
                conn.execute("RELEASE job")
            except BaseException as error:  # noqa: BLE001 - this job alone is rolled back
                conn.execute("ROLLBACK TO job")
                conn.execute("RELEASE job")
                job.outcome = (None, error)
        try:
            conn.execute("COMMIT")
        except BaseException as error:  # noqa: BLE001 - nothing of the batch is durable
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            for job in batch:
                if job.outcome[1] is None:
                    job.outcome = (None, error)


def _hand_back(batch: list[Job]) -> None:
    """Settle each job on its own loop; one call per loop keeps the batch's order (a closed loop is skipped)."""
    by_loop: dict[asyncio.AbstractEventLoop, list[Job]] = {}
    for job in batch:
        by_loop.setdefault(job.loop, []).append(job)
    for loop, jobs in by_loop.items():
        try:
            loop.call_soon_threadsafe(_settle_all, jobs)
        except RuntimeError:
            pass  # the loop is gone: nobody waits for these


def _settle_all(jobs: list[Job]) -> None:
    for job in jobs:
        job.settle(*job.outcome)


def _noop(_result: Any, _error: BaseException | None) -> None:
    return None
