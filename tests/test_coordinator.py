"""SessionExecution ownership rules with a stand-in drain on a real store: no wake is ever lost."""

from __future__ import annotations

import asyncio

import pytest

from opencode_session.core.execution.coordinator import SessionExecution
from tests.support.core import open_sessions

pytestmark = pytest.mark.anyio


async def test_a_wake_during_the_terminal_write_starts_the_next_busy_period(tmp_path):
    async with open_sessions(tmp_path) as s:
        sid = (await s.create()).id
        drains: list[str] = []

        async def drain(session_id: str, force: bool) -> None:
            drains.append(session_id)

        loop = asyncio.get_running_loop()
        woke = False

        def on_settled(_tx, session_id: str, _outcome: str) -> None:
            # inside the transaction that records the end of the busy period, on the store's writer thread: a prompt
            # admitted just as the first busy period was ending
            nonlocal woke
            if not woke:
                woke = True
                loop.call_soon_threadsafe(execution.wake, session_id)

        execution = SessionExecution(s.store, drain, on_settled=on_settled)
        execution.wake(sid)
        await asyncio.wait_for(execution.wait(sid), 10)  # waits through the successor too
        types = [e.type async for e in await s.log(sid, -1, follow=False)]
        assert drains == [sid, sid]
        assert types == ["session.execution.started", "session.execution.succeeded"] * 2
