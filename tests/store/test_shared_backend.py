"""Two hosts on one PostgreSQL database: per-session sequences stay gap-free under writers on both, every host's
live stream carries every host's events in one commit order, commit waiters wake for the other host's commits, and a
signal reaches every host."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator

import anyio
import psycopg
import pytest

from opencode_session.core.session.projector import project
from opencode_session.core.store import Store
from opencode_session.core.store.postgres import PostgresBackend
from opencode_session.core.store.postgres.backend import bounded
from opencode_session.core.store.postgres.dialect import PgConnection
from opencode_session.schema import events as ev
from opencode_session.schema.common import LocationRef
from opencode_session.schema.prompt import Prompt
from opencode_session.schema.session import SessionTime, SessionV2Info
from tests.support.postgres import base_url, fresh_schema

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(60)]


@pytest.fixture
def url() -> Iterator[str]:
    with fresh_schema() as made:
        yield made


def _created(sid: str):
    info = SessionV2Info(id=sid, projectID="prj", title="t", location=LocationRef(directory="/w"),
                         time=SessionTime(created=1, updated=1), agent="build")
    return lambda tx: tx.append(ev.SessionCreated(sessionID=sid, info=info))


def _agent(sid: str, name: str):
    return lambda tx: tx.append(ev.AgentSelected(sessionID=sid, agent=name))


async def test_writers_on_two_hosts_share_gap_free_sequences_and_one_commit_order(url):
    async with Store(PostgresBackend(url), project=project) as a, Store(PostgresBackend(url), project=project) as b:
        following = a.live.subscribe()
        await a.write(_created("ses_x"))
        writes = [host.submit(_agent("ses_x", f"{name}{n}")) for n in range(30) for host, name in ((a, "a"), (b, "b"))]
        with anyio.fail_after(30):
            records = await asyncio.gather(*writes)
        assert sorted(r.seq for r in records) == list(range(1, 61))
        logged = await b.read(lambda r: r.events.from_position(-1, 1000))
        assert [e.seq for _, e in logged if e.aggregate_id == "ses_x"] == list(range(61))
        seen: list = []
        with anyio.fail_after(10):
            while len(seen) < len(logged):
                seen += await following.next()
        assert [e.id for e in seen] == [e.id for _, e in logged]  # b's events too, in the log's order
        assert [e.seq for e in await a.events_after("ses_x", 55)] == list(range(56, 61))


async def test_a_commit_on_one_host_rings_the_doorbell_on_the_other(url):
    async with Store(PostgresBackend(url), project=project) as a, Store(PostgresBackend(url), project=project) as b:
        await b.write(_created("ses_y"))
        with a.durable.subscribe("ses_y") as commits:
            await b.write(_agent("ses_y", "from b"))
            with anyio.fail_after(10):  # a follower reads after each wake-up until it has the other host's commit
                while [e.seq for e in await a.events_after("ses_y", -1)] != [0, 1]:
                    await commits.wait()
                    commits.clear()


async def test_a_signal_reaches_every_host(url):
    async with Store(PostgresBackend(url), project=project) as a, Store(PostgresBackend(url), project=project) as b:
        heard: dict[str, asyncio.Future[str]] = {}
        for name, store in (("a", a), ("b", b)):
            heard[name] = asyncio.get_running_loop().create_future()
            store.signals.append(lambda text, f=heard[name]: f.done() or f.set_result(text))
        await b.signal("wake ses_z")
        with anyio.fail_after(10):
            assert await heard["a"] == "wake ses_z"
            assert await heard["b"] == "wake ses_z"


async def test_commits_made_while_a_host_was_not_listening_still_reach_it(url):
    async with Store(PostgresBackend(url), project=project) as a, Store(PostgresBackend(url), project=project) as b:
        following = a.live.subscribe()
        await b.write(_created("ses_w"))
        with psycopg.connect(base_url(), autocommit=True) as admin:  # cut every listening connection
            admin.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE query LIKE 'LISTEN%'"
                          " AND datname = current_database() AND pid <> pg_backend_pid()")
        for n in range(5):
            await b.write(_agent("ses_w", f"while deaf {n}"))
        seen: list = []
        with anyio.fail_after(20):  # a reconnects, reads the log from where it was, and misses nothing
            while len(seen) < 6:
                seen += await following.next()
        assert [e.seq for e in seen] == list(range(6))


async def test_two_hosts_writing_the_same_sessions_in_opposite_orders_lose_no_write(url):
    # each host's batch locks the sessions' sequence rows in its own order: PostgreSQL breaks the deadlocks that
    # makes by rolling one batch back, and the writer runs that batch again
    quick = url + "%20-cdeadlock_timeout%3D20"
    async with Store(PostgresBackend(quick), project=project) as a, \
            Store(PostgresBackend(quick), project=project) as b:
        await a.write(_created("ses_p"))
        await a.write(_created("ses_q"))
        writes = []
        for n in range(40):
            writes += [a.submit(_agent("ses_p", f"a{n}")), a.submit(_agent("ses_q", f"a{n}")),
                       b.submit(_agent("ses_q", f"b{n}")), b.submit(_agent("ses_p", f"b{n}"))]
        with anyio.fail_after(50):
            records = await asyncio.gather(*writes)
        for sid in ("ses_p", "ses_q"):
            assert sorted(r.seq for r in records if r.aggregate_id == sid) == list(range(1, 81))


async def _prompted(store: Store, sid: str) -> None:
    await store.append(ev.InputAdmitted(sessionID=sid, inputID=f"msg_{sid}",
                                        input=ev.UserInput(data=Prompt(text="hi"), delivery="steer")))
    await store.append(ev.InputPromoted(sessionID=sid, inputID=f"msg_{sid}"))


async def test_a_host_counting_usage_never_waits_on_another_hosts_open_transaction_of_the_same_project(url):
    # the usage sums are kept per project and quarter hour: every host's Steps of one project add to them. A host
    # whose transaction has counted a prompt (and not yet committed) must not hold up the prompts of another host
    async with Store(PostgresBackend(url), project=project) as a, Store(PostgresBackend(url), project=project) as b:
        await a.write(_created("ses_p"))
        await a.write(_created("ses_q"))
        await _prompted(a, "ses_p")
        with psycopg.connect(url) as other:  # another host's writer, in the middle of its transaction
            changed = other.execute("UPDATE session_usage SET input = input + 7 WHERE session_id = 'ses_p'").rowcount
            assert changed == 1
            with anyio.fail_after(10):
                await _prompted(b, "ses_q")  # before: waited for `other` to commit (the same sums row)
            other.commit()
            sums = other.execute("SELECT sum(n), sum(input) FROM session_usage_sums WHERE type = 'user'").fetchone()
        assert sums == (2, 7)  # both prompts counted, and the other host's change, over the shards


async def test_a_batch_whose_connection_the_server_ends_mid_transaction_runs_again_on_a_new_one(url):
    # the writer's thread starved of CPU between two statements of a batch for longer than the hosts'
    # idle_in_transaction_session_timeout (a third of the lease: 100 ms here): the server ends the connection and
    # rolls the batch back, so nothing of it is durable and it runs again on a fresh connection, once
    stalls = [0.4]

    def created_after_a_stall(tx) -> None:
        _created("ses_s")(tx)
        tx.messages.load("msg_none")  # (a statement: the transaction is open on the server from here)
        if stalls:
            time.sleep(stalls.pop())  # the stall itself, in the writer's thread: what this test is about
        _agent("ses_s", "plan")(tx)

    async with Store(PostgresBackend(url, lease_ms=300), project=project) as store:
        with anyio.fail_after(20):
            await store.write(created_after_a_stall)
        logged = await store.read(lambda r: r.events.from_position(-1, 100))
    assert not stalls  # (it did stall, and the server ended that transaction)
    assert [(e.seq, e.type) for _, e in logged] == [(0, "session.created"), (1, "session.agent.selected")]


def test_a_host_stalled_in_the_middle_of_many_writes_holds_no_lock_past_the_idle_limit(url):
    # several rows written by one call (a Step's settled tool calls counted in the usage tables, say) while the
    # host's thread stalls between two of them (paused, or starved of CPU): the server still ends the transaction
    # after the idle limit (a third of the lease: 100 ms here), so the row locks it holds (a lease row another host
    # must take over) go with it
    stalled, resume = threading.Event(), threading.Event()
    failed: list[BaseException] = []

    def rows():
        yield (1,)
        stalled.set()
        resume.wait(10)  # the stall itself: what this test is about
        yield (2,)

    def writing(writer: psycopg.Connection) -> None:
        try:
            PgConnection(writer).executemany("UPDATE stall SET id = id WHERE id = ?", rows())
        except psycopg.Error as error:  # (the server ended the connection)
            failed.append(error)

    with psycopg.connect(url, autocommit=True) as other:
        other.execute("CREATE TABLE stall (id int PRIMARY KEY)")
        other.execute("INSERT INTO stall VALUES (1), (2), (3)")
        with psycopg.connect(bounded(url, lease_ms=300)) as writer:
            writer.execute("SELECT id FROM stall WHERE id = 3 FOR SHARE")  # the lock another host will need
            thread = threading.Thread(target=writing, args=(writer,))
            thread.start()
            try:
                assert stalled.wait(10)
                other.execute("SET lock_timeout = 3000")
                started = time.monotonic()
                other.execute("UPDATE stall SET id = 4 WHERE id = 3")  # waits for the lock, at most 3 s
                assert time.monotonic() - started < 2
            finally:
                resume.set()
                thread.join(10)
    assert failed  # the stalled transaction was ended by the server: nothing of it is durable
