"""Waiting for a condition another process makes true (a file it writes, a process ending), where there is nothing to
await: the one polling helper of the tests."""

from __future__ import annotations

from collections.abc import Callable

import anyio

POLL_S = 0.02


async def until(condition: Callable[[], object], what: str, timeout: float) -> None:
    """Return once `condition()` is true, checking it every 20 ms; AssertionError naming `what` after `timeout`
    seconds (a guard against a hang, never a synchronisation device)."""
    deadline = anyio.current_time() + timeout
    while not condition():
        if anyio.current_time() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        await anyio.sleep(POLL_S)  # polling a condition another process makes true: not a delay
