"""Followers of a session's log read its newest events from memory: what they get is exactly what the database holds,
and anything the in-memory tail cannot vouch for still comes from the database."""

from __future__ import annotations

import pytest

from opencode_session.core.store.tail import Tails
from opencode_session.schema import events as ev
from tests.support.core import open_sessions

pytestmark = pytest.mark.anyio


async def test_the_log_served_from_memory_is_the_stored_log(tmp_path):
    async with open_sessions(tmp_path) as s:
        sid = (await s.create()).id
        for n in range(40):  # more than the tail keeps, so early reads must fall back to the database
            await s.switch_agent(sid, agent=f"agent {n} \u00e9")
        for after in range(-1, 42):
            for limit in (1, 7, 100):
                served = await s.store.events_after(sid, after, limit)
                stored = await s.store.read(lambda r, a=after, li=limit: r.events.after(sid, a, li))
                assert [e.wire() for e in served] == [e.wire() for e in stored], (after, limit)
    # a new process starts with an empty tail: the log comes from the database
    async with open_sessions(tmp_path) as s:
        assert [e.seq for e in await s.store.events_after(sid, 30)] == list(range(31, 41))


def test_a_tail_with_a_gap_answers_nothing_it_cannot_vouch_for():
    tails = Tails(per_session=4, sessions=2)

    def record(sid: str, seq: int) -> ev.EventRecord:
        return ev.EventRecord(id=f"evt_{sid}{seq}", created=0, aggregate_id=sid, seq=seq,
                              data=ev.AgentSelected(sessionID=sid, agent="a"))

    for seq in range(1, 7):
        tails.add(record("ses_a", seq))
    assert [r.seq for r in tails.after("ses_a", 2, 10) or []] == [3, 4, 5, 6]
    assert tails.after("ses_a", 1, 10) is None  # seq 2 fell out of the tail
    assert tails.after("ses_a", 6, 10) == []
    tails.add(record("ses_a", 9))  # a gap: never served across
    assert tails.after("ses_a", 6, 10) is None
    tails.add(record("ses_b", 0))
    tails.add(record("ses_c", 0))  # the least recently announced session is dropped
    assert tails.after("ses_a", 8, 10) is None and tails.after("ses_c", -1, 10) is not None
