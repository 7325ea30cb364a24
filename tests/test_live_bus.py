"""The instance-wide live bus over a real store: a reader that keeps reading never loses a durable event, however
far behind the shared ring it falls; only live deltas can be lost, and order always holds."""

from __future__ import annotations

import anyio
import pytest

from opencode_session.core.store.feed import SubscriptionLost
from opencode_session.schema import events as ev
from tests.support.core import open_sessions

pytestmark = pytest.mark.anyio


async def _drain(sub, until) -> list:
    """Everything the subscription gives until `until(got)` holds."""
    got: list = []
    with anyio.fail_after(10):
        while not until(got):
            got += await sub.next()
    return got


def _delta(sid: str, text: str) -> ev.TextDelta:
    return ev.TextDelta(sessionID=sid, assistantMessageID="msg_x", ordinal=0, delta=text)


async def test_a_reader_keeps_pace_and_sees_every_event_in_publish_order(tmp_path):
    async with open_sessions(tmp_path) as s:
        sub = s.store.live.subscribe()
        sid = (await s.create()).id
        for n in range(3):
            await s.switch_agent(sid, agent=f"a{n}")
            s.store.publish_live(_delta(sid, f"d{n}"), sid)
        got = await _drain(sub, lambda got: len(got) == 7)
    assert [(i.type, i.seq) for i in got] == [("session.created", 0)] + [
        t for n in range(1, 4) for t in (("session.agent.selected", n), ("session.text.delta", None))]


async def test_a_reader_behind_the_ring_catches_up_from_the_store(tmp_path):
    async with open_sessions(tmp_path, live_capacity=8) as s:  # a small ring: the slow reader falls out of it at once
        slow, fast = s.store.live.subscribe(), s.store.live.subscribe()
        sid = (await s.create()).id
        kept = []
        for n in range(40):
            await s.switch_agent(sid, agent=f"a{n}")
            s.store.publish_live(_delta(sid, f"early {n}"), sid)
            kept += await fast.next()
        late = await _drain(slow, lambda got: sum(i.seq is not None for i in got) == 41)
        s.store.publish_live(_delta(sid, "after catching up"), sid)
        late += await _drain(slow, lambda got: got and got[-1].data.delta == "after catching up")
    # the reader that kept pace got everything; the one behind lost only the deltas it fell behind on
    assert len(kept) == 81
    durable = [i for i in late if i.seq is not None]
    assert [i.seq for i in durable] == list(range(0, 41))
    assert [i.data.agent for i in durable[1:]] == [f"a{n}" for n in range(40)]
    deltas = [i.data.delta for i in late if i.seq is None]
    assert deltas[-1] == "after catching up" and len(deltas) < 40


async def test_a_reader_too_far_behind_or_a_closed_bus_ends_the_subscription(tmp_path):
    async with open_sessions(tmp_path) as s:
        s.store.live.max_backlog = 5
        sub = s.store.live.subscribe()
        sid = (await s.create()).id
        for n in range(10):
            await s.switch_agent(sid, agent=f"a{n}")
        with pytest.raises(SubscriptionLost):
            await sub.next()
        other = s.store.live.subscribe()
        s.store.live.close()
        with pytest.raises(SubscriptionLost):
            await other.next()
