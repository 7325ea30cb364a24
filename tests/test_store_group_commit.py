"""Group commit in the store: writes queued together commit together, yet each keeps its own outcome (a failing one
rolls back alone), their events keep submission order, and live events wait behind earlier writes."""

from __future__ import annotations

import threading

import anyio
import pytest

from opencode_session.core.store import StoreError
from opencode_session.core.store.sqlite import writer as writer_module
from opencode_session.schema import events as ev
from tests.support.core import open_sessions

pytestmark = pytest.mark.anyio


def _delta(sid: str, text: str) -> ev.TextDelta:
    return ev.TextDelta(sessionID=sid, assistantMessageID="msg_x", ordinal=0, delta=text)


async def test_a_failing_write_in_a_batch_rolls_back_alone(tmp_path):
    async with open_sessions(tmp_path) as s:
        sid = (await s.create()).id

        def boom(tx):
            tx.append(ev.AgentSelected(sessionID=sid, agent="never"))
            raise ValueError("this write fails after appending")

        first = s.store.submit(lambda tx: tx.append(ev.AgentSelected(sessionID=sid, agent="first")))
        failing = s.store.submit(boom)
        last = s.store.submit(lambda tx: tx.append(ev.AgentSelected(sessionID=sid, agent="last")))
        with anyio.fail_after(10):  # submitted in one turn of the loop: one transaction
            assert (await first).seq == 1
            with pytest.raises(ValueError, match="fails after appending"):
                await failing
            assert (await last).seq == 2  # the failed write's seq is not a gap: it never happened
        stored = await s.store.events_after(sid, 0)
        session = await s.get(sid)
    assert [(e.seq, e.data.agent) for e in stored] == [(1, "first"), (2, "last")]
    assert session.agent == "last"


async def test_batched_writes_reach_readers_in_order_with_live_events_behind_their_writes(tmp_path):
    async with open_sessions(tmp_path) as s:
        sid = (await s.create()).id
        sub = s.store.live.subscribe()
        writes = []
        for n in range(5):
            writes.append(s.store.submit(lambda tx, n=n: tx.append(ev.AgentSelected(sessionID=sid, agent=f"a{n}"))))
            s.store.publish_live(_delta(sid, f"after a{n}"), sid)  # must not overtake the write queued before it
        got: list = []
        with anyio.fail_after(10):
            for write in writes:
                await write
            while len(got) < 10:
                got += await sub.next()
        s.store.publish_live(_delta(sid, "nothing queued"), sid)  # no write pending: published at once
        with anyio.fail_after(10):
            got += await sub.next()
    assert [(i.type, i.data.agent if i.seq else i.data.delta) for i in got] == [
        t for n in range(5) for t in (("session.agent.selected", f"a{n}"), ("session.text.delta", f"after a{n}"))
    ] + [("session.text.delta", "nothing queued")]


async def test_many_concurrent_writers_all_commit_with_contiguous_sequences(tmp_path):
    async with open_sessions(tmp_path) as s:
        sids = [(await s.create()).id for _ in range(4)]
        with anyio.fail_after(30):
            async with anyio.create_task_group() as tg:
                for sid in sids:
                    for n in range(25):
                        tg.start_soon(s.switch_agent, sid, f"agent{n}")
        for sid in sids:
            stored = await s.store.events_after(sid, 0, limit=100)
            assert [e.seq for e in stored] == list(range(1, 26))
            assert await s.store.read(lambda r, sid=sid: r.events.latest_seq(sid)) == 25


async def test_a_cancelled_writer_still_commits_and_announces_its_write(tmp_path):
    async with open_sessions(tmp_path) as s:
        sid = (await s.create()).id
        sub = s.store.live.subscribe()
        scope = anyio.CancelScope()

        async def writer() -> None:
            with scope:
                await s.store.write(lambda tx: tx.append(ev.AgentSelected(sessionID=sid, agent="kept")))

        with anyio.fail_after(10):
            async with anyio.create_task_group() as tg:
                tg.start_soon(writer)
                await anyio.wait_all_tasks_blocked()  # the write is submitted and its caller waits for it
                scope.cancel()  # then gives up before it is known durable
        assert scope.cancelled_caught
        with anyio.fail_after(10):
            got = await sub.next()
    assert [(i.seq, i.data.agent) for i in got] == [(1, "kept")]


async def test_commits_run_on_the_loop_while_quick_and_on_the_commit_thread_once_slow(tmp_path, monkeypatch):
    # "quick" is 20 ms here, so a busy CI disk still counts as quick: what is tested is the switch, not this disk
    monkeypatch.setattr(writer_module, "INLINE_COMMIT_S", 0.02)
    async with open_sessions(tmp_path) as s:
        sid = (await s.create()).id
        writer = s.store.backend._writer
        committed_on: list[str] = []
        assert writer.rows is not None
        writer.rows.conn.set_trace_callback(
            lambda sql: committed_on.append(threading.current_thread().name) if sql == "COMMIT" else None)

        async def commit_one(n: int) -> str:
            await s.store.append(ev.AgentSelected(sessionID=sid, agent=f"a{n}"))
            return committed_on[-1]

        with anyio.fail_after(10):
            assert await commit_one(0) == threading.main_thread().name
            writer._commit_s = 0.5  # as if the disk had just taken 500 ms per commit
            assert (await commit_one(1)).startswith("ocs-db-commit")
            threads = [await commit_one(n) for n in range(2, 40)]  # quick commits bring it back to the loop
        assert threading.main_thread().name in threads
        assert [e.data.agent for e in await s.store.events_after(sid, 0)] == [f"a{n}" for n in range(40)]


async def test_a_batch_whose_commit_fails_reports_every_write_failed_and_the_store_goes_on(tmp_path):
    async with open_sessions(tmp_path) as s:
        sid = (await s.create()).id

        def violates_at_commit(tx) -> None:
            # a deferred foreign key is checked only by COMMIT: the whole batch's commit fails, as a full disk would
            tx.rows.execute("PRAGMA defer_foreign_keys = ON")
            tx.rows.execute("INSERT INTO instruction_checkpoint VALUES ('ses_missing', '', '{}', 0)")

        bystander = s.store.submit(lambda tx: tx.append(ev.AgentSelected(sessionID=sid, agent="lost with the batch")))
        culprit = s.store.submit(violates_at_commit)
        with anyio.fail_after(10):
            with pytest.raises(StoreError, match="FOREIGN KEY"):
                await bystander  # written before the culprit, yet not durable: it must not look committed
            with pytest.raises(StoreError, match="FOREIGN KEY"):
                await culprit
            after = await s.store.append(ev.AgentSelected(sessionID=sid, agent="next"))
        stored = await s.store.events_after(sid, 0)
        assert [(e.seq, e.data.agent) for e in stored] == [(1, "next")] and after.seq == 1
        assert (await s.get(sid)).agent == "next"


async def test_a_lazy_write_commits_with_the_next_write_or_before_the_next_live_event(tmp_path):
    async with open_sessions(tmp_path) as s:
        sid = (await s.create()).id
        writer = s.store.backend._writer
        commits: list[str] = []
        assert writer.rows is not None
        writer.rows.conn.set_trace_callback(lambda sql: commits.append(sql) if sql == "COMMIT" else None)
        sub = s.store.live.subscribe()

        def agent(name: str):
            return lambda tx: tx.append(ev.AgentSelected(sessionID=sid, agent=name))

        with anyio.fail_after(10):
            lazy = s.store.submit(agent("lazy"), lazy=True)
            await anyio.wait_all_tasks_blocked()
            assert not lazy.done() and commits == []  # nothing asked for a commit yet
            await s.store.write(agent("eager"))  # shares the lazy write's transaction
            assert (await lazy).seq == 1 and len(commits) == 1

            lazy = s.store.submit(agent("before the delta"), lazy=True)
            s.store.publish_live(_delta(sid, "after it"), sid)  # must not overtake it, so it commits now
            assert (await lazy).seq == 3
            got: list = []
            while len(got) < 4:
                got += await sub.next()

            lazy = s.store.submit(agent("kicked"), lazy=True)
            s.store.kick()
            assert (await lazy).seq == 4
    assert [(i.data.agent if i.seq else i.data.delta) for i in got] == ["lazy", "eager", "before the delta", "after it"]
