"""The store backend protocol: what a database must offer the Store (open and close, reads, queued write
transactions that report their events' commit-ordered positions), and which backend a database address selects."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Protocol, TypeVar

from ...schema.events import EventRecord
from .rows import Lease, Reader, Writer

T = TypeVar("T")
# Called once per write when its transaction has settled: (result, error, the store positions of the events the
# write inserted, in insertion order). Called in submission order, before the write's future resolves.
Settle = Callable[[object, BaseException | None, list[int]], None]
# Hands the Store events other hosts committed, oldest first with their positions, in commit order with its own.
Foreign = Callable[[list[tuple[int, EventRecord]]], None]
# Hands the Store a live-only event another host published, with the newest store position that host had announced
# before it (so it is announced here after that position too).
ForeignLive = Callable[[EventRecord, int], None]


class Backend(Protocol):
    """One database. A write is a synchronous function over a `Writer` (it reads its own writes) run inside one
    transaction; the backend chooses where it runs (SQLite: on the event loop, group-committed; a networked database:
    on a worker thread), so Core never awaits inside a transaction. Failures of the database itself are raised as
    `StoreError`; an exception a write raises rolls that write back alone and reaches its caller unchanged."""

    @property
    def shared(self) -> bool:
        """Whether several hosts may use the database at once (their executions coordinate through session leases);
        False where one process holds it alone."""
        ...

    @property
    def description(self) -> str:
        """The database as a user named it, for messages (never with a password)."""
        ...

    async def open(self) -> None:
        """Connect and migrate; raises StoreError (DatabaseInUseError where one process may hold it)."""
        ...

    async def close(self) -> None:
        """Settle every queued write, then release the database."""
        ...

    def read(self, fn: Callable[[Reader], T]) -> Awaitable[T]:
        """Run a read-only function on a read handle that sees every write already settled."""
        ...

    def submit(self, fn: Callable[[Writer], T], settle: Settle, *, lazy: bool = False) -> asyncio.Future[T]:
        """Queue a write. Writes commit in submission order; a `lazy` one may wait for the next write that is not
        (or `kick`) to share its commit."""
        ...

    def kick(self) -> None:
        """Commit the lazy writes queued so far."""
        ...

    async def renew_lease(self, lease: Lease, expires: int) -> bool:
        """Extend `lease` to `expires` now, beside the queue of writes rather than behind it: a host's own backlog
        of events must not delay the renewal that keeps its sessions. False when the lease changed hands."""
        ...

    async def idle(self) -> None:
        """Return once every write submitted so far has settled."""
        ...

    def listen(self, foreign: Foreign, signal: Callable[[str], None], live: ForeignLive) -> None:
        """Where the backend hands what other hosts do: their committed events (on the loop, ordered with this
        host's own commits), the signals they send (`signal`) and their live-only events (`live`, in the order
        each host published them). A database one process holds calls none of them."""
        ...

    def broadcast(self, record: EventRecord, after: int) -> None:
        """Send a live-only event this host published (after the store position `after`) to the other hosts,
        without waiting: under overload it may be dropped. Called only where the database is `shared`."""
        ...

    async def signal(self, payload: str) -> None:
        """Send a short text to every host listening on the database (this one included)."""
        ...
