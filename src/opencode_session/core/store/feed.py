"""In-process fan-out: doorbells that wake durable log readers per aggregate, and the bounded live bus."""

from __future__ import annotations

import asyncio
from collections import defaultdict
from typing import Any


class Doorbell:
    """A sliding wake-up of capacity one: ringing while nobody waits is remembered once."""

    def __init__(self, feed: "DurableFeed", aggregate_id: str) -> None:
        self._event = asyncio.Event()
        self._feed = feed
        self.aggregate_id = aggregate_id

    def clear(self) -> None:
        self._event.clear()

    def ring(self) -> None:
        self._event.set()

    async def wait(self) -> None:
        await self._event.wait()

    def close(self) -> None:
        self._feed._bells[self.aggregate_id].discard(self)

    def __enter__(self) -> "Doorbell":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class DurableFeed:
    """Readers subscribe before they replay, so a commit between replay and waiting is never missed."""

    def __init__(self) -> None:
        self._bells: dict[str, set[Doorbell]] = defaultdict(set)

    def subscribe(self, aggregate_id: str) -> Doorbell:
        bell = Doorbell(self, aggregate_id)
        self._bells[aggregate_id].add(bell)
        return bell

    def ring(self, aggregate_id: str) -> None:
        for bell in list(self._bells.get(aggregate_id, ())):
            bell.ring()



class LiveSubscription:
    """One subscriber's bounded queue; overflowing it drops this subscriber alone."""

    def __init__(self, bus: "LiveBus", maxsize: int) -> None:
        self._queue: asyncio.Queue[Any] = asyncio.Queue(maxsize=maxsize)
        self._bus = bus
        self.dropped = False
        self.closed = False

    def _offer(self, item: Any) -> bool:
        try:
            self._queue.put_nowait(item)
            return True
        except asyncio.QueueFull:
            self.dropped = True
            return False

    async def get(self) -> Any:
        """The next item, or None once this subscription was dropped (fell behind) or closed."""
        if self.dropped or self.closed:
            return None
        item = await self._queue.get()
        return None if item is _CLOSE else item

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self._bus._subs.discard(self)
            try:
                self._queue.put_nowait(_CLOSE)
            except asyncio.QueueFull:
                pass

    def __enter__(self) -> "LiveSubscription":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


_CLOSE = object()


class LiveBus:
    """Instance-wide live events with no replay; publishing never waits on a subscriber."""

    def __init__(self, maxsize: int = 256) -> None:
        self._subs: set[LiveSubscription] = set()
        self.maxsize = maxsize

    def subscribe(self, maxsize: int | None = None) -> LiveSubscription:
        sub = LiveSubscription(self, maxsize or self.maxsize)
        self._subs.add(sub)
        return sub

    def publish(self, item: Any) -> None:
        for sub in list(self._subs):
            if not sub._offer(item):
                # a full queue means the reader is not waiting, so it sees `dropped` on its next get
                self._subs.discard(sub)

    def close_all(self) -> None:
        for sub in list(self._subs):
            sub.close()

    @property
    def subscriber_count(self) -> int:
        return len(self._subs)
