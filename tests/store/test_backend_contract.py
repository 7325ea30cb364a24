"""The store backend contract: what every backend (tests/store/backends.py lists them) must do for the Store and
the projector above it — sequences, commit-ordered positions, atomic writes, every concern's operations, paging,
replay, durability across a reopen — checked through the public Store, on a real database."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator

import anyio
import pytest

from opencode_session.core.session.projector import project
from opencode_session.core.store import (
    Checkpoint,
    PendingInput,
    SessionFencedError,
    SessionFilter,
    Store,
    StoreError,
    set_fence,
)
from opencode_session.core.store.keyset import PageRequest
from opencode_session.schema import events as ev
from opencode_session.schema.common import LocationRef, ModelRef
from opencode_session.schema.prompt import Prompt
from opencode_session.schema.session import SessionTime, SessionV2Info
from tests.store.backends import BACKENDS, BackendFactory

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(60)]

MODEL = ModelRef(id="m", providerID="p")


@pytest.fixture(params=BACKENDS, ids=lambda factory: factory.name)
def factory(request, tmp_path) -> Iterator[BackendFactory]:
    made: BackendFactory = request.param
    with contextlib.ExitStack() as stack:
        made.prepare(tmp_path, stack)
        yield made


def _info(sid: str, directory: str = "/w", title: str = "t", created: int = 1) -> SessionV2Info:
    return SessionV2Info(id=sid, projectID="prj", title=title, location=LocationRef(directory=directory),
                         time=SessionTime(created=created, updated=created), agent="build")


async def _created(store: Store, sid: str, **info) -> None:
    await store.append(ev.SessionCreated(sessionID=sid, info=_info(sid, **info)))


def _agent(sid: str, name: str):
    return lambda tx: tx.append(ev.AgentSelected(sessionID=sid, agent=name))


async def test_sequences_are_gap_free_per_session_under_concurrent_writes(factory):
    async with Store(factory.backend(), project=project) as store:
        for sid in ("ses_a", "ses_b"):
            await _created(store, sid)
        writes = [store.submit(_agent(sid, f"{sid}-{n}")) for n in range(40) for sid in ("ses_a", "ses_b")]
        with anyio.fail_after(30):
            records = await asyncio.gather(*writes)
        for sid in ("ses_a", "ses_b"):
            seqs = [r.seq for r in records if r.aggregate_id == sid]
            assert seqs == list(range(1, 41))
            assert await store.latest_seq(sid) == 40
            assert [e.seq for e in await store.events_after(sid, -1, limit=100)] == list(range(41))


async def test_a_write_that_raises_is_rolled_back_alone_and_gives_its_sequence_back(factory):
    async with Store(factory.backend(), project=project) as store:
        await _created(store, "ses_a")

        def fails(tx):
            tx.append(ev.AgentSelected(sessionID="ses_a", agent="never"))
            raise ValueError("the write changed its mind")

        before = store.submit(_agent("ses_a", "before"))
        failing = store.submit(fails)
        after = store.submit(_agent("ses_a", "after"))
        with anyio.fail_after(10):
            assert (await before).seq == 1
            with pytest.raises(ValueError, match="changed its mind"):
                await failing
            assert (await after).seq == 2
        stored = await store.events_after("ses_a", 0)
        assert [(e.seq, e.data.agent) for e in stored] == [(1, "before"), (2, "after")]
        session = await store.read(lambda r: r.sessions.load("ses_a"))
        assert session is not None and session.agent == "after"


async def test_a_database_constraint_fails_as_a_store_error_and_the_store_goes_on(factory):
    async with Store(factory.backend(), project=project) as store:
        await _created(store, "ses_a")
        first = await store.write(_agent("ses_a", "one"))
        with pytest.raises(StoreError):
            await store.write(lambda tx: tx.append(ev.AgentSelected(sessionID="ses_a", agent="dup"), id=first.id))
        assert (await store.write(_agent("ses_a", "two"))).seq == 2


async def test_positions_follow_commit_order_across_sessions_and_feed_the_live_bus(factory):
    async with Store(factory.backend(), project=project) as store:
        subscription = store.live.subscribe()
        for n in range(5):
            await _created(store, f"ses_{n}")
        for n in range(5):  # sessions written out of creation order: positions follow commits, not sessions
            await store.write(_agent(f"ses_{(n * 3) % 5}", f"x{n}"))
        rows = await store.read(lambda r: r.events.from_position(-1, 100))
        positions = [p for p, _ in rows]
        assert positions == sorted(positions) and len(set(positions)) == len(positions) == 10
        seen = []
        with anyio.fail_after(10):
            while len(seen) < 10:
                seen += await subscription.next()
        assert [e.id for e in seen] == [e.id for _, e in rows]
        later = await store.read(lambda r: r.events.from_position(positions[6], 100))
        assert [e.id for _, e in later] == [e.id for _, e in rows[7:]]


async def test_events_read_back_whole_after_a_reopen(factory):
    backend = factory.backend()
    async with Store(backend, project=project) as store:
        await _created(store, "ses_a")
        admitted = await store.append(ev.InputAdmitted(sessionID="ses_a", inputID="msg_1",
                                                       input=ev.UserInput(data=Prompt(text="hi"), delivery="queue")))
    async with Store(factory.backend(), project=project) as store:
        assert await store.latest_seq("ses_a") == 1
        assert await store.latest_seq("ses_missing") == -1
        (again,) = await store.events_after("ses_a", 0)
        assert again.id == admitted.id and again.data == admitted.data and again.location == admitted.location
        found = await store.read(lambda r: r.events.admission_of("ses_a", "msg_1"))
        assert found is not None and found.id == admitted.id
        assert await store.read(lambda r: r.events.admission_of("ses_other", "msg_1")) is None
        assert [e.seq for e in await store.read(lambda r: list(r.events.every()))] == [0, 1]
        assert (await store.write(_agent("ses_a", "after reopen"))).seq == 2


async def test_session_rows_load_save_touch_and_page_in_both_directions(factory):
    async with Store(factory.backend(), project=project) as store:
        for n in range(5):
            await _created(store, f"ses_{n}", directory="/a" if n % 2 == 0 else "/b", title=f"title {n}",
                           created=100 + n)
        loc = await store.read(lambda r: r.sessions.location("ses_1"))
        assert loc == LocationRef(directory="/b")
        await store.write(lambda tx: tx.sessions.touch("ses_1", 999))
        loaded = await store.read(lambda r: r.sessions.load("ses_1"))
        assert loaded is not None and loaded.time.updated == 999
        assert await store.read(lambda r: r.sessions.load("ses_missing")) is None

        def page(**kw):
            where = kw.pop("where", SessionFilter())
            return store.read(lambda r: r.sessions.page(where, PageRequest(**kw)))

        first = await page(order="asc", limit=2)
        assert [s.id for s in first.items] == ["ses_0", "ses_1"]
        second = await page(order="asc", limit=2, anchor=first.last, direction="next")
        assert [s.id for s in second.items] == ["ses_2", "ses_3"]
        back = await page(order="asc", limit=2, anchor=second.first, direction="previous")
        assert [s.id for s in back.items] == ["ses_0", "ses_1"]
        assert (await page(order="asc", limit=2, anchor=back.first, direction="previous")).items == []
        newest = await page(order="desc", limit=3)
        assert [s.id for s in newest.items] == ["ses_4", "ses_3", "ses_2"]
        only_a = await page(order="asc", limit=10, where=SessionFilter(directory="/a"))
        assert [s.id for s in only_a.items] == ["ses_0", "ses_2", "ses_4"]
        titled = await page(order="asc", limit=10, where=SessionFilter(search="title 3"))
        assert [s.id for s in titled.items] == ["ses_3"]
        none = await page(order="asc", limit=10, where=SessionFilter(search="100%_"))
        assert none.items == [] and none.first is None
        # a saved record's project, title and Location are what the filters see
        moved = await store.read(lambda r: r.sessions.load_data("ses_3"))
        assert moved is not None
        moved.update(projectID="prj-other", title="renamed", location={"directory": "/c"})
        await store.write(lambda tx: tx.sessions.save_data("ses_3", moved))
        for where in (SessionFilter(project="prj-other"), SessionFilter(directory="/c"),
                      SessionFilter(search="renamed")):
            assert [s.id for s in (await page(order="asc", limit=10, where=where)).items] == ["ses_3"]
        assert [s.id for s in (await page(order="asc", limit=10, where=SessionFilter(project="prj"))).items] == \
            ["ses_0", "ses_1", "ses_2", "ses_4"]


async def test_message_rows_the_projector_writes_read_back_by_every_lookup(factory):
    async with Store(factory.backend(), project=project) as store:
        await _created(store, "ses_a")
        await _created(store, "ses_b")
        for n, text in enumerate(("first", "second")):
            await store.append(ev.InputAdmitted(sessionID="ses_a", inputID=f"msg_u{n}",
                                                input=ev.UserInput(data=Prompt(text=text), delivery="steer")))
            await store.append(ev.InputPromoted(sessionID="ses_a", inputID=f"msg_u{n}"))
        await store.append(ev.StepStarted(sessionID="ses_a", assistantMessageID="msg_a1", agent="build",
                                          model=MODEL))
        await store.append(ev.InstructionsUpdated(sessionID="ses_a", text="now this"))
        assert await store.read(lambda r: r.messages.first_user_text("ses_a")) == "first"
        assert await store.read(lambda r: r.messages.first_user_text("ses_b")) is None
        open_ = await store.read(lambda r: r.messages.open_assistants("ses_a"))
        assert [m["id"] for m in open_] == ["msg_a1"]
        assert await store.read(lambda r: r.messages.open_assistants("ses_a", excluding="msg_a1")) == []
        placed = await store.read(lambda r: r.messages.placement("msg_u1"))
        assert placed is not None and (placed.session_id, placed.type) == ("ses_a", "user")
        assert await store.read(lambda r: r.messages.find("ses_b", "msg_u1")) is None  # another session's
        found = await store.read(lambda r: r.messages.find("ses_a", "msg_u1"))
        assert found is not None and found.type == "user"

        window = await store.read(lambda r: r.messages.window("ses_a", -1, -1))
        assert [row.type for row in window] == ["user", "user", "assistant", "system"]
        update_seq = window[-1].seq
        folded = await store.read(lambda r: r.messages.window("ses_a", -1, update_seq))
        assert [row.type for row in folded] == ["user", "user", "assistant"]
        assert [row.id for row in await store.read(lambda r: r.messages.window("ses_a", window[0].seq, -1))] == \
            [row.id for row in window[1:]]

        await store.append(ev.RetryScheduled(sessionID="ses_a", assistantMessageID="msg_a1", attempt=2, at=5,
                                             error={"type": "provider", "message": "busy"}))
        retrying = await store.read(lambda r: r.messages.retrying_assistants("ses_a"))
        assert [m["id"] for m in retrying] == ["msg_a1"]
        touched = await store.read(lambda r: r.messages.touched_since("ses_a", window[-1].updated + 1))
        assert [row.id for row in touched] in ([], ["msg_a1"])  # same millisecond or later
        before = {row.id: row.rev for row in window}
        after = {row.id: row.rev for row in await store.read(lambda r: r.messages.window("ses_a", -1, -1))}
        assert after["msg_a1"] > before["msg_a1"] and after["msg_u0"] == before["msg_u0"]
        await store.append(ev.ExecutionSucceeded(sessionID="ses_a"))
        assert await store.read(lambda r: r.messages.retrying_assistants("ses_a")) == []

        page = await store.read(lambda r: r.messages.page("ses_a", PageRequest(order="desc", limit=2)))
        assert [m.type for m in page.items] == ["system", "assistant"]
        assert await store.read(lambda r: r.messages.removed("ses_a")) == 0


async def test_removing_messages_from_a_sequence_on_and_reserving_sequences(factory):
    async with Store(factory.backend(), project=project) as store:
        await _created(store, "ses_a")
        await _created(store, "ses_b")
        seqs = []
        for sid in ("ses_a", "ses_b"):
            for n in range(3):
                await store.append(ev.InputAdmitted(sessionID=sid, inputID=f"msg_{sid}{n}",
                                                    input=ev.UserInput(data=Prompt(text=str(n)), delivery="steer")))
                promoted = await store.append(ev.InputPromoted(sessionID=sid, inputID=f"msg_{sid}{n}"))
                seqs.append(promoted.seq)
        assert await store.write(lambda tx: tx.messages.remove_from("ses_a", seqs[1])) == 2
        assert [row.id for row in await store.read(lambda r: r.messages.window("ses_a", -1, -1))] == ["msg_ses_a0"]
        assert await store.read(lambda r: r.messages.removed("ses_a")) == 2
        assert len(await store.read(lambda r: r.messages.window("ses_b", -1, -1))) == 3  # another session's stay
        assert await store.read(lambda r: r.messages.removed("ses_b")) == 0
        assert await store.write(lambda tx: tx.messages.remove_from("ses_a", 1000)) == 0

        latest = await store.latest_seq("ses_a")
        await store.write(lambda tx: tx.events.reserve_seq("ses_a", latest + 10))
        await store.write(lambda tx: tx.events.reserve_seq("ses_a", latest + 2))  # never back
        assert (await store.write(_agent("ses_a", "next"))).seq == latest + 11
        await store.write(lambda tx: tx.events.reserve_seq("ses_new", 4))  # before an aggregate's first event
        record = await store.append(ev.SessionCreated(sessionID="ses_new", info=_info("ses_new")))
        assert record.seq == 5


async def test_compaction_and_synthetic_lookups(factory):
    async with Store(factory.backend(), project=project) as store:
        await _created(store, "ses_a")
        assert await store.read(lambda r: r.messages.latest_completed_compaction("ses_a")) is None
        started = await store.append(ev.CompactionStarted(sessionID="ses_a", messageID="msg_c1", reason="manual",
                                                          recent=""))
        running = await store.read(lambda r: r.messages.running_compaction("ses_a", "msg_c1"))
        assert running is not None and running["status"] == "running"
        await store.append(ev.CompactionEnded(sessionID="ses_a", messageID="msg_c1", reason="manual", text="summary",
                                                recent=""))
        assert await store.read(lambda r: r.messages.running_compaction("ses_a", "msg_c1")) is None
        assert await store.read(lambda r: r.messages.latest_completed_compaction("ses_a")) == started.seq
        await store.append(ev.Synthetic(sessionID="ses_a", text="nearby",
                                        metadata={"instruction": {"paths": ["/w/AGENTS.md", "/w/x/AGENTS.md"]}}))
        await store.append(ev.Synthetic(sessionID="ses_a", text="plain"))
        assert await store.read(lambda r: r.messages.injected_instruction_paths("ses_a")) == \
            {"/w/AGENTS.md", "/w/x/AGENTS.md"}


async def test_the_input_an_automatic_compaction_was_made_for(factory):
    async with Store(factory.backend(), project=project) as store:
        await _created(store, "ses_a")

        async def prompt(input_id: str) -> None:
            await store.append(ev.InputAdmitted(sessionID="ses_a", inputID=input_id,
                                                input=ev.UserInput(data=Prompt(text=input_id), delivery="steer")))
            await store.append(ev.InputPromoted(sessionID="ses_a", inputID=input_id))

        async def compaction(message_id: str, reason: str) -> int:
            started = await store.append(ev.CompactionStarted(sessionID="ses_a", messageID=message_id, reason=reason,
                                                              recent=""))
            await store.append(ev.CompactionEnded(sessionID="ses_a", messageID=message_id, reason=reason, text="s",
                                                  recent=""))
            return started.seq

        assert await store.read(lambda r: r.messages.compaction_trigger("ses_a", 100)) is None
        await prompt("msg_first")
        await prompt("msg_second")
        auto = await compaction("msg_c1", "auto")
        trigger = await store.read(lambda r: r.messages.compaction_trigger("ses_a", auto))
        assert trigger is not None and trigger.id == "msg_second" and trigger.type == "user"
        await compaction("msg_c2", "manual")
        later = await compaction("msg_c3", "auto")
        assert await store.read(lambda r: r.messages.compaction_trigger("ses_a", later)) is None  # answered before


async def test_pending_input_inbox(factory):
    async with Store(factory.backend(), project=project) as store:
        await _created(store, "ses_a")
        for n, delivery in enumerate(("queue", "steer", "queue")):
            await store.append(ev.InputAdmitted(sessionID="ses_a", inputID=f"msg_{n}",
                                                input=ev.UserInput(data=Prompt(text=str(n)), delivery=delivery)))
        assert [p.id for p in await store.read(lambda r: r.pending.user_inputs("ses_a"))] == ["msg_0", "msg_1",
                                                                                              "msg_2"]
        assert await store.read(lambda r: r.pending.promotable("ses_a")) == [
            ("msg_0", "queue"), ("msg_1", "steer"), ("msg_2", "queue")]
        got = await store.read(lambda r: r.pending.get("msg_1"))
        assert isinstance(got, PendingInput) and got.data == {"text": "1"} and got.delivery == "steer"
        assert await store.read(lambda r: r.pending.barrier("ses_a")) is None
        await store.append(ev.CompactionAdmitted(sessionID="ses_a", inputID="msg_bar"))
        assert await store.read(lambda r: r.pending.barrier("ses_a")) == "msg_bar"
        with pytest.raises(LookupError):
            await store.write(lambda tx: tx.pending.take("ses_other", "msg_0"))
        taken = await store.write(lambda tx: tx.pending.take("ses_a", "msg_0"))
        assert taken.id == "msg_0"
        assert await store.read(lambda r: r.pending.input_recorded("msg_0")) is False
        await store.append(ev.InputPromoted(sessionID="ses_a", inputID="msg_1"))
        assert await store.read(lambda r: r.pending.input_recorded("msg_1")) is True  # now a message
        assert await store.read(lambda r: r.pending.input_recorded("msg_2")) is True  # still pending
        await store.write(lambda tx: tx.pending.settle_barrier("ses_a", "msg_bar"))
        await store.write(lambda tx: tx.pending.settle_barrier("ses_a", "msg_bar"))  # already gone: a no-op
        assert await store.read(lambda r: r.pending.barrier("ses_a")) is None
        assert await store.read(lambda r: r.pending.any_promotable("ses_a")) is True
        await store.write(lambda tx: tx.pending.take("ses_a", "msg_2"))
        assert await store.read(lambda r: r.pending.any_promotable("ses_a")) is False


async def test_instruction_checkpoint_and_entries(factory):
    async with Store(factory.backend(), project=project) as store:
        await _created(store, "ses_a")
        assert await store.read(lambda r: r.instructions.checkpoint("ses_a")) is None
        assert await store.read(lambda r: r.instructions.baseline_seq("ses_a")) == -1
        first = Checkpoint("base", '{"k":1}', 0)
        assert await store.write(lambda tx: tx.instructions.initialize("ses_a", first)) == "base"
        assert await store.write(lambda tx: tx.instructions.initialize("ses_a", Checkpoint("other", "{}", 5))) == \
            "base"
        await store.write(lambda tx: tx.instructions.advance("ses_a", '{"k":2}'))
        assert await store.read(lambda r: r.instructions.checkpoint("ses_a")) == Checkpoint("base", '{"k":2}', 0)
        await store.write(lambda tx: tx.instructions.rebaseline("ses_a", Checkpoint("fresh", "{}", 7)))
        assert await store.read(lambda r: r.instructions.baseline_seq("ses_a")) == 7
        await store.write(lambda tx: tx.instructions.reset("ses_a"))
        assert await store.read(lambda r: r.instructions.checkpoint("ses_a")) is None

        await store.write(lambda tx: tx.instructions.put_entry("ses_a", "zeta", {"a": [1, "ü"]}, 1))
        await store.write(lambda tx: tx.instructions.put_entry("ses_a", "alpha", "text", 2))
        await store.write(lambda tx: tx.instructions.put_entry("ses_a", "zeta", 3, 4))
        assert await store.read(lambda r: r.instructions.entries("ses_a")) == [("alpha", "text"), ("zeta", 3)]
        await store.write(lambda tx: tx.instructions.remove_entry("ses_a", "alpha"))
        assert await store.read(lambda r: r.instructions.entries("ses_a")) == [("zeta", 3)]


async def test_saved_permissions_and_suspension_marks(factory):
    async with Store(factory.backend(), project=project) as store:
        await _created(store, "ses_a")
        await _created(store, "ses_b")
        await store.write(lambda tx: tx.permissions.save("prj_1", "bash", ["git *", "ls *"], 1))
        await store.write(lambda tx: tx.permissions.save("prj_1", "bash", ["git *"], 2))  # already saved
        await store.write(lambda tx: tx.permissions.save("prj_2", "edit", ["*"], 3))
        mine = await store.read(lambda r: r.permissions.listed("prj_1"))
        assert sorted(p.resource for p in mine) == ["git *", "ls *"]
        assert len(await store.read(lambda r: r.permissions.listed())) == 3
        await store.write(lambda tx: tx.permissions.remove(mine[0].id))
        assert len(await store.read(lambda r: r.permissions.listed("prj_1"))) == 1

        await store.write(lambda tx: tx.suspension.mark(["ses_a", "ses_b"], 10))
        await store.write(lambda tx: tx.suspension.clear("ses_b"))
        assert await store.write(lambda tx: tx.suspension.take_all()) == ["ses_a"]
        assert await store.write(lambda tx: tx.suspension.take_all()) == []


async def test_continuation_claims_and_records(factory):
    async with Store(factory.backend(), project=project) as store:
        await _created(store, "ses_a")
        await _created(store, "ses_b")
        assert await store.write(lambda tx: tx.continuation.claimed()) == []
        await store.write(lambda tx: tx.continuation.claim("ses_b", 5))
        await store.write(lambda tx: tx.continuation.claim("ses_a", 7))
        assert await store.write(lambda tx: tx.continuation.claimed()) == ["ses_b", "ses_a"]  # oldest claim first
        await store.write(lambda tx: tx.continuation.release("ses_b"))
        assert await store.write(lambda tx: tx.continuation.claimed()) == ["ses_a"]
        assert await store.write(lambda tx: tx.continuation.continued("ses_a")) == []
        await store.write(lambda tx: tx.continuation.record_continued("ses_a", [30, 20]))
        assert await store.write(lambda tx: tx.continuation.continued("ses_a")) == [20, 30]
        assert await store.write(lambda tx: tx.continuation.continued("ses_b")) == []


async def test_replay_rebuilds_the_projections(factory):
    async with Store(factory.backend(), project=project) as store:
        await _created(store, "ses_a")
        await store.append(ev.InputAdmitted(sessionID="ses_a", inputID="msg_1",
                                            input=ev.UserInput(data=Prompt(text="kept"), delivery="queue")))
        await store.append(ev.InputAdmitted(sessionID="ses_a", inputID="msg_2",
                                            input=ev.UserInput(data=Prompt(text="promoted"), delivery="steer")))
        await store.append(ev.InputPromoted(sessionID="ses_a", inputID="msg_2"))
        await store.write(_agent("ses_a", "plan"))
        # state beside the projections, which replay cannot derive and must not lose
        await store.write(lambda tx: tx.instructions.initialize("ses_a", Checkpoint("base", "{}", 3)))
        await store.write(lambda tx: tx.instructions.put_entry("ses_a", "note", {"kept": True}, 1))
        await store.write(lambda tx: tx.permissions.save("prj", "bash", ["ls *"], 1))
        await store.write(lambda tx: tx.suspension.mark(["ses_a"], 9))
        await store.write(lambda tx: tx.continuation.claim("ses_a", 8))
        await store.write(lambda tx: tx.continuation.record_continued("ses_a", [4]))
        await store.append(ev.Moved(sessionID="ses_a", location=LocationRef(directory="/elsewhere")))
        await store.write(lambda tx: tx.instructions.initialize("ses_a", Checkpoint("moved", "{}", 6)))

        def state(r):
            session = r.sessions.load("ses_a")
            window = r.messages.window("ses_a", -1, -1)
            return (session.wire() if session else None, [(w.id, w.seq, w.type, w.data) for w in window],
                    r.pending.user_inputs("ses_a"), r.instructions.checkpoint("ses_a"),
                    r.instructions.entries("ses_a"), r.permissions.listed())

        before = await store.read(state)
        subscription = store.live.subscribe()
        await store.rebuild_projections()
        assert await store.read(state) == before
        assert await store.write(lambda tx: tx.suspension.take_all()) == ["ses_a"]
        assert await store.write(lambda tx: (tx.continuation.claimed(), tx.continuation.continued("ses_a"))) == (
            ["ses_a"], [4])
        await store.write(_agent("ses_a", "after"))  # replay published nothing: the next live event is this one
        with anyio.fail_after(10):
            (first, *_) = await subscription.next()
        assert first.data.agent == "after"


async def test_a_lease_changes_hands_only_once_expired_and_fences_its_former_owners_writes(factory):
    async with Store(factory.backend(), project=project) as store:
        await _created(store, "ses_a")
        first = await store.write(lambda tx: tx.leases.take("ses_a", "host-a", 1_000, 5_000))
        assert first is not None and first.epoch == 1
        assert await store.write(lambda tx: tx.leases.take("ses_a", "host-b", 4_999, 9_000)) is None  # still live
        again = await store.write(lambda tx: tx.leases.take("ses_a", "host-a", 2_000, 6_000))
        assert again is not None and again.epoch == 1  # its holder extends it: same token
        assert await store.read(lambda r: r.leases.expired(5_500)) == []
        assert [lease.owner for lease in await store.read(lambda r: r.leases.expired(6_001))] == ["host-a"]
        taken = await store.write(lambda tx: tx.leases.take("ses_a", "host-b", 6_001, 11_000))
        assert taken is not None and taken.epoch == 2 and taken.owner == "host-b"
        assert await store.read(lambda r: r.leases.holder("ses_a")) == taken
        assert not await store.write(lambda tx: tx.leases.renew(again, 20_000))
        assert not await store.renew_lease(again, 20_000)  # (the renewal beside the queue of writes)
        assert await store.renew_lease(taken, 12_000)
        taken = await store.read(lambda r: r.leases.holder("ses_a"))
        assert taken is not None and (taken.owner, taken.epoch, taken.expires) == ("host-b", 2, 12_000)

        set_fence(again)  # the former owner writes on: refused, and nothing of it lands
        try:
            with pytest.raises(SessionFencedError):
                await store.write(_agent("ses_a", "zombie"))
        finally:
            set_fence(None)
        assert await store.latest_seq("ses_a") == 0
        set_fence(taken)
        try:
            assert (await store.write(_agent("ses_a", "owner"))).seq == 1
        finally:
            set_fence(None)

        await store.write(lambda tx: tx.leases.release(again))  # a stale release changes nothing
        assert await store.read(lambda r: r.leases.holder("ses_a")) == taken
        await store.write(lambda tx: tx.leases.release(taken))
        assert await store.read(lambda r: r.leases.holder("ses_a")) is None
        later = await store.write(lambda tx: tx.leases.take("ses_a", "host-a", 30_000, 35_000))
        assert later is not None and later.epoch == 3  # epochs never repeat, so an old token never matches again
