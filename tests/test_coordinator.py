"""SessionExecution ownership rules with a stand-in drain on a real store: no wake is ever lost."""

from __future__ import annotations

import asyncio

import pytest

from opencode_session.core.execution.coordinator import SessionExecution
from opencode_session.schema import events as ev
from tests.support.core import open_sessions

pytestmark = pytest.mark.anyio


async def test_a_wake_during_the_terminal_write_starts_the_next_busy_period(tmp_path):
    async with open_sessions(tmp_path) as s:
        sid = (await s.create()).id
        drains: list[str] = []

        async def drain(session_id: str, force: bool) -> None:
            drains.append(session_id)

        execution = SessionExecution(s.store, drain)
        real_write = s.store.write
        woke = False

        async def write(fn):
            nonlocal woke
            result = await real_write(fn)
            recent = await s.store.events_after(sid, await s.store.latest_seq(sid) - 1)
            if not woke and recent and isinstance(recent[-1].data, ev.ExecutionSucceeded):
                woke = True
                execution.wake(sid)  # a prompt admitted just as the first busy period was ending
            return result

        s.store.write = write
        execution.wake(sid)
        await asyncio.wait_for(execution.wait(sid), 10)  # waits through the successor too
        types = [e.type async for e in await s.log(sid, -1, follow=False)]
        assert drains == [sid, sid]
        assert types == ["session.execution.started", "session.execution.succeeded"] * 2
