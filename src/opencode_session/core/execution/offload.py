"""Blocking work that is usually quick (a boundary's few small file reads): run on the event loop while it stays
quick, in a worker thread once it is not, judged by a moving average of how long it took."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

import anyio

T = TypeVar("T")


# While the work runs in a thread, every this many runs one runs inline to measure it again: timed in a thread it
# would also count the waits for the interpreter lock, and look slower than it is.
PROBE_EVERY = 8


class QuickOrThread:
    """Runs a blocking function inline while its recent inline runs averaged under `limit_s` (a hand-off to a thread
    and back costs about 1 ms of latency on this machine, more than the work), and in a worker thread otherwise, so a
    slow disk holds the loop up only once per `PROBE_EVERY` runs."""

    def __init__(self, limit_s: float = 0.001) -> None:
        self.limit_s = limit_s
        self.average_s = 0.0
        self._runs = 0

    async def run(self, fn: Callable[[], T]) -> T:
        self._runs += 1
        if self.average_s < self.limit_s:
            return self._inline(fn, weight=0.2)
        if self._runs % PROBE_EVERY == 0:
            return self._inline(fn, weight=1.0)  # a probe: what it costs now decides alone
        return await anyio.to_thread.run_sync(fn)

    def _inline(self, fn: Callable[[], T], weight: float) -> T:
        start = time.perf_counter()
        try:
            return fn()
        finally:
            self.average_s += weight * (time.perf_counter() - start - self.average_s)
