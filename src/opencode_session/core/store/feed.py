"""In-process fan-out: commit waiters that wake durable log readers per aggregate, and the instance-wide live bus whose
readers never lose a durable event while they keep reading."""

from __future__ import annotations

import asyncio
from collections import defaultdict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any


class CommitWaiter:
    """Wakes one reader of an aggregate's durable log after a commit touched it: `notify` sets it (a commit while
    nobody waits is remembered once, until `clear`), `wait` waits until it is set."""

    def __init__(self, feed: DurableFeed, aggregate_id: str) -> None:
        self._event = asyncio.Event()
        self._feed = feed
        self.aggregate_id = aggregate_id

    def clear(self) -> None:
        self._event.clear()

    def notify(self) -> None:
        self._event.set()

    async def wait(self) -> None:
        await self._event.wait()

    def close(self) -> None:
        self._feed._waiters[self.aggregate_id].discard(self)

    def __enter__(self) -> CommitWaiter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class DurableFeed:
    """Readers subscribe before they replay, so a commit between replay and waiting is never missed."""

    def __init__(self) -> None:
        self._waiters: dict[str, set[CommitWaiter]] = defaultdict(set)

    def subscribe(self, aggregate_id: str) -> CommitWaiter:
        waiter = CommitWaiter(self, aggregate_id)
        self._waiters[aggregate_id].add(waiter)
        return waiter

    def notify(self, aggregate_id: str) -> None:
        for waiter in list(self._waiters.get(aggregate_id, ())):
            waiter.notify()


# Reads committed durable events with a store position greater than the first argument, oldest first, at most the
# second argument of them, each with its position.
ReadAfter = Callable[[int, int], Awaitable[list[tuple[int, Any]]]]


class SubscriptionLost(Exception):
    """The live stream ended for this reader: the bus closed, or the reader fell too far behind to be live."""


@dataclass
class _Entry:
    item: Any
    position: int | None  # a durable event's store position; None for a live-only event
    after: int            # the newest durable position when this was published (orders live-only events)


class LiveSubscription:
    """One reader of the bus: a cursor into the shared ring, and the store position of the last durable event it
    was given. It holds nothing the bus must release: a reader leaves by no longer calling `next`."""

    def __init__(self, bus: LiveBus) -> None:
        self._bus = bus
        self._cursor = bus._next
        self.position = bus.position
        self.lost = False

    async def next(self) -> list[Any]:
        """The next events, in commit order, waiting for at least one. A reader that fell out of the ring gets the
        durable events it missed from the store (live-only ones are gone). Raises SubscriptionLost at the end."""
        bus = self._bus
        while True:
            if bus.closed or self.lost:
                raise SubscriptionLost("the live event stream closed")
            if bus.position - self.position > bus.max_backlog:
                self.lost = True
                raise SubscriptionLost(f"the reader fell more than {bus.max_backlog} events behind")
            if bus._evicted > self.position:
                rows = await bus._read_after(self.position, bus.page)
                if rows:
                    self.position = rows[-1][0]
                    return [item for _, item in rows]
                self.position = bus._evicted  # nothing committed there (cannot happen with a gap-free log)
            items = []
            slots, size = bus._slots, bus.capacity
            for index in range(max(self._cursor, bus._next - size), bus._next):
                entry = slots[index % size]
                assert entry is not None
                if entry.position is not None:
                    if entry.position <= self.position:
                        continue  # already read from the store
                    self.position = entry.position
                elif entry.after < self.position:
                    continue  # a live delta from before what the store already gave: too late to be useful
                items.append(entry.item)
            self._cursor = bus._next
            if items:
                return items
            await bus._published.wait()


class LiveBus:
    """Instance-wide live events with no replay, in one bounded ring shared by every reader: publishing never waits
    on a reader and memory stays bounded whoever lags. A reader behind the ring catches up on durable events from
    the store, by position (the event table's rowid, a global commit order), so only live deltas can be lost."""

    def __init__(self, read_after: ReadAfter, *, capacity: int = 4096, max_backlog: int = 100_000,
                 page: int = 500) -> None:
        self._read_after = read_after
        self.capacity = capacity
        self.max_backlog = max_backlog
        self.page = page
        self._slots: list[_Entry | None] = [None] * capacity  # entry n lives in slot n % capacity
        self._next = 0          # the number of the next entry
        self._evicted = -1      # the newest store position that has left the ring
        self.position = -1      # the newest durable event published
        self._published = asyncio.Event()
        self.closed = False

    def subscribe(self) -> LiveSubscription:
        return LiveSubscription(self)

    def publish(self, item: Any, position: int | None = None) -> None:
        """Publish a durable event at its store position (in commit order), or a live-only one without."""
        slot = self._next % self.capacity
        old = self._slots[slot]
        if old is not None and old.position is not None:
            self._evicted = old.position
        self._slots[slot] = _Entry(item, position, self.position)
        self._next += 1
        if position is not None:
            self.position = position
        self._wake()

    def _wake(self) -> None:
        # every waiting reader holds the current event; a fresh one serves the next publish
        published, self._published = self._published, asyncio.Event()
        published.set()

    def close(self) -> None:
        """End every subscription (their next `next` raises SubscriptionLost)."""
        self.closed = True
        self._wake()
