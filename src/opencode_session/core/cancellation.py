"""Work that must finish even when its caller is cancelled: the durable write that settles a Step or a compaction, a
provider connection's close."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import Any


async def shielded(coro: Awaitable[Any]) -> Any:
    """Run `coro` to completion even when the caller is being cancelled (the cancellation is raised after it)."""
    task = asyncio.ensure_future(coro)
    try:
        return await asyncio.shield(task)
    except asyncio.CancelledError:
        await task
        raise
