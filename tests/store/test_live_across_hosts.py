"""Live-only events between hosts on one PostgreSQL database: a message larger than a notification may carry is cut
into numbered pieces (never inside a character) and put back together per origin host; another host's bus gets
every live event after the durable events that came before it, a host never hears its own twice, a store in
another schema hears nothing, and an overloaded outbox drops and counts instead of making the publisher wait."""

from __future__ import annotations

import anyio
import psycopg
import pytest

from opencode_session.core.session.projector import project
from opencode_session.core.store import Store
from opencode_session.core.store.feed import LiveSubscription
from opencode_session.core.store.postgres import PostgresBackend
from opencode_session.core.store.postgres.live import PAYLOAD_LIMIT, Reassembly, decode, encode, pieces
from opencode_session.schema import events as ev
from opencode_session.schema.events import EventRecord
from tests.store.test_shared_backend import _agent, _created
from tests.store.test_shared_backend import url as url_fixture
from tests.support.postgres import base_url, fresh_schema

pytestmark = [pytest.mark.timeout(60)]


# --- pieces and their reassembly (no database) ----------------------------------------------------------


@pytest.mark.parametrize("unit", ["a", "é", "€", "😀", "a😀é"])
def test_a_message_over_the_payload_limit_comes_back_whole_and_no_piece_reaches_it(unit):
    text = "x" + unit * 9000  # offset by one byte, so a multi-byte character straddles each cut
    assert len(text.encode()) > 8000
    payloads = pieces("hostA", 7, text)
    assert len(payloads) > 1
    assert all(len(p.encode("utf-8")) < PAYLOAD_LIMIT <= 8000 for p in payloads)
    joined = Reassembly("hostB")
    results = [joined.add(p) for p in payloads]
    assert results[:-1] == [None] * (len(payloads) - 1) and results[-1] == text
    assert joined.lost == 0


def test_a_multibyte_character_at_the_cut_moves_whole_into_the_next_piece():
    limit = 40
    header = len("h:1:100:100:")
    text = "a" * (limit - header - 1) + "😀" + "b" * 60  # the 4-byte character begins one byte before the cut
    payloads = pieces("h", 1, text, limit=limit)
    assert all(len(p.encode()) <= limit for p in payloads)
    assert payloads[0].endswith("a") and payloads[1].split(":", 4)[4].startswith("😀")
    joined = Reassembly("other")
    assert [joined.add(p) for p in payloads][-1] == text


def test_pieces_of_two_hosts_interleaved_reassemble_apart_and_a_host_ignores_its_own():
    one, two = "α" * 5000, "β" * 6000
    first, second = pieces("hostA", 1, one), pieces("hostC", 1, two)
    joined = Reassembly("hostB")
    done = []
    for a, c in zip(first, second, strict=False):
        done += [joined.add(a), joined.add(c)]
    done += [joined.add(p) for p in second[len(first):]]
    assert [d for d in done if d is not None] == [one, two]
    assert all(Reassembly("hostA").add(p) is None for p in first)  # its own: not heard again


def test_a_lost_piece_discards_its_message_and_counts_it_and_the_next_one_arrives():
    joined = Reassembly("hostB")
    broken = pieces("hostA", 1, "z" * 20000)
    assert len(broken) >= 3
    assert [joined.add(p) for p in broken if p is not broken[1]] == [None] * (len(broken) - 1)
    assert joined.lost == 1
    assert joined.add(pieces("hostA", 2, "next")[0]) == "next"
    assert joined.add("not a piece") is None and joined.lost == 2


def test_a_live_event_survives_encoding_with_its_origin_position():
    data = ev.TextDelta(sessionID="ses_1", assistantMessageID="msg_1", ordinal=0, delta="hé\n😀\x00")
    record = EventRecord(id="evt_1", created=5, aggregate_id="ses_1", data=data)
    line = encode(record, 41)
    assert "\n" not in line
    decoded = decode(line)
    assert decoded is not None
    again, after = decoded
    assert after == 41 and again.wire() == record.wire()


# --- two stores on one database -----------------------------------------------------------------------


# the fresh schema each test gets, and the writes it makes, are the shared-backend tests' own
url = url_fixture


def _delta(sid: str, text: str) -> ev.TextDelta:
    return ev.TextDelta(sessionID=sid, assistantMessageID="msg_1", ordinal=0, delta=text)


async def _read(subscription: LiveSubscription, count: int, within: float = 10) -> list[EventRecord]:
    seen: list[EventRecord] = []
    with anyio.fail_after(within):
        while len(seen) < count:
            seen += await subscription.next()
    return seen


@pytest.mark.anyio
async def test_a_large_live_event_reaches_the_other_host_once_and_whole(url):
    async with Store(PostgresBackend(url), project=project) as a, Store(PostgresBackend(url), project=project) as b:
        on_a, on_b = a.live.subscribe(), b.live.subscribe()
        big = "x" + "€😀" * 4000  # ~28 KB of UTF-8: four notifications or more
        a.publish_live(_delta("ses_1", big), "ses_1")
        a.publish_live(_delta("ses_1", "small"), "ses_1")
        heard = await _read(on_b, 2)
        assert [r.data.delta for r in heard] == [big, "small"]  # type: ignore[attr-defined]
        assert [r.wire() for r in heard] == [r.wire() for r in await _read(on_a, 2)]
        await b.write(_created("ses_2"))  # a durable event after them: nothing else arrived on either
        assert [r.type for r in await _read(on_a, 1)] == ["session.created"]
        assert [r.type for r in await _read(on_b, 1)] == ["session.created"]
        assert a.backend.live_lost == b.backend.live_lost == 0  # type: ignore[attr-defined]


@pytest.mark.anyio
async def test_another_hosts_live_events_follow_the_durable_events_before_them(url):
    async with Store(PostgresBackend(url), project=project) as a, Store(PostgresBackend(url), project=project) as b:
        on_a, on_b = a.live.subscribe(), b.live.subscribe()
        await a.write(_created("ses_o"))
        for n in range(40):
            a.submit(_agent("ses_o", f"agent{n}"))
            a.publish_live(_delta("ses_o", f"d{n}"), "ses_o")  # held behind the write queued before it
            a.publish_live(_delta("ses_o", f"e{n}"), "ses_o")
        expected = [e.id for e in await _read(on_a, 121)]
        got = [e.id for e in await _read(on_b, 121)]
        assert sorted(got) == sorted(expected)
        for n in range(40):  # never before the durable event that came before it on its own host, and in order
            durable, first, second = (got.index(expected[i]) for i in (1 + 3 * n, 2 + 3 * n, 3 + 3 * n))
            assert durable < first < second
        print("the other host's order matches the publisher's exactly:", got == expected)


@pytest.mark.anyio
async def test_a_store_in_another_schema_hears_no_live_event(url):
    with fresh_schema() as elsewhere:
        async with (Store(PostgresBackend(url), project=project) as a,
                    Store(PostgresBackend(url), project=project) as b,
                    Store(PostgresBackend(elsewhere), project=project) as c):
            on_b, on_c = b.live.subscribe(), c.live.subscribe()
            a.publish_live(_delta("ses_1", "for this schema"), "ses_1")
            assert [r.type for r in await _read(on_b, 1)] == ["session.text.delta"]
            await c.write(_created("ses_c"))
            assert [r.type for r in await _read(on_c, 1)] == ["session.created"]  # and nothing before it


@pytest.mark.anyio
async def test_an_overloaded_outbox_drops_and_counts_without_making_the_publisher_wait(url):
    async with Store(PostgresBackend(url), project=project) as a, Store(PostgresBackend(url), project=project) as b:
        sender = a.backend._sender  # type: ignore[attr-defined]
        sender._limit = 5
        on_b = b.live.subscribe()
        for n in range(100):  # one go on the loop: the sender task cannot run in between
            a.publish_live(_delta("ses_1", f"d{n}"), "ses_1")
        assert a.backend.live_dropped == 95  # type: ignore[attr-defined]
        assert [r.data.delta for r in await _read(on_b, 5)] == [f"d{n}" for n in range(5)]  # type: ignore[attr-defined]
        sender._limit = 10_000
        a.publish_live(_delta("ses_1", "after"), "ses_1")  # the outbox works again once it drained
        assert [r.data.delta for r in await _read(on_b, 1)] == ["after"]  # type: ignore[attr-defined]


@pytest.mark.anyio
async def test_live_events_flow_again_after_both_of_their_connections_were_cut(url):
    async with Store(PostgresBackend(url), project=project) as a, Store(PostgresBackend(url), project=project) as b:
        on_b = b.live.subscribe()
        a.publish_live(_delta("ses_1", "before"), "ses_1")
        assert [r.data.delta for r in await _read(on_b, 1)] == ["before"]  # type: ignore[attr-defined]
        sending, listening = a.backend._sender.server_pid, b.backend.listener_pid  # type: ignore[attr-defined]
        with psycopg.connect(base_url(), autocommit=True) as conn:
            for pid in (sending, listening):
                conn.execute("SELECT pg_terminate_backend(%s)", (pid,))
        heard: list[str] = []
        with anyio.fail_after(20):  # each side notices, reconnects with back-off, and carries events again
            n = 0
            while "after" not in heard:
                n += 1
                a.publish_live(_delta("ses_1", "after" if n > 1 else "lost"), "ses_1")
                with anyio.move_on_after(0.5):
                    heard += [r.data.delta for r in await on_b.next()]  # type: ignore[attr-defined]
        assert a.backend._sender.server_pid != sending and b.backend.listener_pid != listening  # type: ignore[attr-defined]
        assert a.backend.live_dropped >= 1  # type: ignore[attr-defined]  # what met the cut connection is counted
