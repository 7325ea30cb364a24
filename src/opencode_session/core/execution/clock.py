"""The runner's clock, injectable so tests can observe and skip retry waits."""

from __future__ import annotations

import asyncio
import time


class Clock:
    def now_ms(self) -> int:
        return int(time.time() * 1000)

    async def sleep_ms(self, ms: float) -> None:
        await asyncio.sleep(ms / 1000)
