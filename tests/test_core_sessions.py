"""Core session behaviour on a real SQLite file: lifecycle, paging, admission, promotion, the log, replay."""

from __future__ import annotations

import anyio
import pytest

from opencode_session.schema.common import ModelRef
from opencode_session.schema.errors import (
    ConflictError,
    InvalidCursorError,
    InvalidRequestError,
    MessageNotFoundError,
    SessionNotFoundError,
)
from opencode_session.schema.events import LogSynced
from opencode_session.schema.page import CursorLinks
from opencode_session.schema.prompt import PromptInput, PromptInputFileAttachment
from tests.support.core import open_sessions, projected_state

pytestmark = pytest.mark.anyio


async def _seqs(sessions, sid):
    stream = await sessions.log(sid, -1, follow=False)
    return [e.seq async for e in stream]


async def test_create_adopts_existing_id_and_defaults_location(tmp_path):
    async with open_sessions(tmp_path) as s:
        a = await s.create(agent="build", model=ModelRef(id="m", providerID="p"))
        assert a.id.startswith("ses_") and a.location.directory == str((tmp_path / "work").resolve())
        again = await s.create(id=a.id, agent="plan")
        assert again == a  # adopting never rewrites the existing session
        assert (await s.get(a.id)).agent == "build"
        chosen = await s.create(id="ses_client_chosen")
        assert chosen.id == "ses_client_chosen"


async def test_unknown_session_is_not_found_everywhere(tmp_path):
    async with open_sessions(tmp_path) as s:
        for call in (s.get("ses_nope"), s.switch_agent("ses_nope", "x"), s.admit("ses_nope", PromptInput(text="x")),
                     s.messages("ses_nope"), s.message("ses_nope", "msg_x"), s.context("ses_nope"),
                     s.log("ses_nope")):
            with pytest.raises(SessionNotFoundError) as info:
                await call
            assert info.value.sessionID == "ses_nope"


async def test_session_list_pages_both_ways_with_opaque_cursor(tmp_path):
    async with open_sessions(tmp_path) as s:
        made = [(await s.create()).id for _ in range(5)]
        newest_first = list(reversed(made))
        page1, links1 = await s.list(limit=2)
        assert [x.id for x in page1] == newest_first[:2]
        assert await s.list(cursor=links1.previous) == ([], CursorLinks(previous=None, next=None))
        page2, links2 = await s.list(cursor=links1.next)
        assert [x.id for x in page2] == newest_first[2:4]
        page3, links3 = await s.list(cursor=links2.next)
        assert [x.id for x in page3] == newest_first[4:]
        assert await s.list(cursor=links3.next) == ([], CursorLinks(previous=None, next=None))
        back, _ = await s.list(cursor=links3.previous)
        assert [x.id for x in back] == newest_first[2:4]
        asc, _ = await s.list(order="asc", limit=10)
        assert [x.id for x in asc] == made


async def test_session_list_rejects_bad_and_combined_cursors(tmp_path):
    async with open_sessions(tmp_path) as s:
        await s.create()
        await s.create()
        _, links = await s.list(limit=1)
        with pytest.raises(InvalidCursorError):
            await s.list(cursor="not-a-cursor")
        with pytest.raises(InvalidCursorError):
            await s.list(cursor=links.next, order="asc")
        with pytest.raises(InvalidRequestError):
            await s.list(limit=0)
        from opencode_session.core.session.cursor import encode_cursor

        for forged in ({"kind": "sessions", "q": {"limit": "x", "order": "desc"}, "a": [1, 2], "d": "next"},
                       {"kind": "sessions", "q": [], "a": [1, 2], "d": "next"},
                       {"kind": "sessions", "q": {"limit": 5, "order": "sideways"}, "a": [1, 2], "d": "next"}):
            with pytest.raises(InvalidCursorError):  # a hand-made cursor is a client error, never a crash
                await s.list(cursor=encode_cursor(forged))
        sid = (await s.create()).id
        _, mlinks = await s.messages(sid, limit=1)
        with pytest.raises(InvalidCursorError):  # a message cursor is not a session cursor
            await s.list(cursor=links.next.replace("A", "B", 1) + "x")


async def test_switch_model_to_same_model_publishes_nothing(tmp_path):
    async with open_sessions(tmp_path) as s:
        sid = (await s.create()).id
        await s.switch_model(sid, ModelRef(id="a", providerID="p"))
        await s.switch_model(sid, ModelRef(id="a", providerID="p", variant="default"))
        await s.switch_agent(sid, "plan")
        assert await _seqs(s, sid) == [1, 2]
        info = await s.get(sid)
        assert info.model == ModelRef(id="a", providerID="p") and info.agent == "plan"
        kinds = [m.type for m in (await s.messages(sid, order="asc"))[0]]
        assert kinds == ["model-switched", "agent-switched"]


async def test_admission_exact_retry_and_conflicts(tmp_path):
    async with open_sessions(tmp_path) as s:
        sid = (await s.create()).id
        other = (await s.create()).id
        attached = tmp_path / "work" / "b.py"
        attached.write_text("print()")
        uri = attached.as_uri()
        first = await s.admit(sid, PromptInput(text="hi", files=[PromptInputFileAttachment(uri=uri)]),
                              id="msg_fixed", delivery="queue")
        assert first.prompt.files[0].mime == "text/x-python" and first.promotedSeq is None
        retry = await s.admit(sid, PromptInput(text="hi", files=[PromptInputFileAttachment(uri=uri)]),
                              id="msg_fixed", delivery="queue")
        assert retry == first
        for kwargs in ({"session": sid, "text": "other", "delivery": "queue"},
                       {"session": sid, "text": "hi", "delivery": "steer"},
                       {"session": other, "text": "hi", "delivery": "queue"}):
            with pytest.raises(ConflictError) as info:
                await s.admit(kwargs["session"], PromptInput(text=kwargs["text"]), id="msg_fixed",
                              delivery=kwargs["delivery"])
            assert "msg_fixed" in info.value.message
        assert await _seqs(s, sid) == [1]  # conflicts append nothing
        assert await s.promote(sid, "input") == ["msg_fixed"]
        attached.unlink()  # an exact retry reconciles with what was admitted, whatever the file is now
        after = await s.admit(sid, PromptInput(text="hi", files=[PromptInputFileAttachment(uri=uri)]),
                              id="msg_fixed", delivery="queue")
        assert after.admittedSeq == first.admittedSeq and after.promotedSeq == 2
        with pytest.raises(ConflictError):
            await s.admit(sid, PromptInput(text="changed"), id="msg_fixed", delivery="queue")


async def test_resume_false_only_admits(tmp_path):
    woken: list[str] = []
    async with open_sessions(tmp_path, wake=woken.append) as s:
        sid = (await s.create()).id
        await s.admit(sid, PromptInput(text="a"), resume=False)
        assert woken == []
        await s.admit(sid, PromptInput(text="b"))
        assert woken == [sid]


async def test_promotion_steers_together_and_one_queued_at_idle(tmp_path):
    async with open_sessions(tmp_path) as s:
        sid = (await s.create()).id
        q1 = (await s.admit(sid, PromptInput(text="q1"), delivery="queue")).id
        s1 = (await s.admit(sid, PromptInput(text="s1"))).id
        q2 = (await s.admit(sid, PromptInput(text="q2"), delivery="queue")).id
        s2 = (await s.admit(sid, PromptInput(text="s2"))).id
        assert await s.promote(sid, "steer") == [s1, s2]
        assert await s.promote(sid, "steer") == []  # queued input waits while the drain continues
        assert await s.promote(sid, "input") == [q1]
        assert [p.id for p in await s.pending(sid)] == [q2]
        assert await s.promote(sid, "input") == [q2]
        history = [m.text for m in await s.context(sid)]
        assert history == ["s1", "s2", "q1", "q2"]


async def test_messages_page_is_bound_to_its_session(tmp_path):
    async with open_sessions(tmp_path) as s:
        sid = (await s.create()).id
        other = (await s.create()).id
        for i in range(5):
            await s.admit(sid, PromptInput(text=str(i)))
        await s.promote(sid, "steer")
        page, links = await s.messages(sid, limit=2)  # default order: newest first
        assert [m.text for m in page] == ["4", "3"]
        page2, links2 = await s.messages(sid, cursor=links.next)
        assert [m.text for m in page2] == ["2", "1"]
        with pytest.raises(InvalidCursorError):
            await s.messages(other, cursor=links.next)
        with pytest.raises(InvalidCursorError):
            await s.messages(sid, cursor=links.next, order="asc")
        for bad in (0, 201):
            with pytest.raises(InvalidRequestError):
                await s.messages(sid, limit=bad)
        one = await s.message(sid, page[0].id)
        assert one.text == "4"
        with pytest.raises(MessageNotFoundError):
            await s.message(other, page[0].id)  # owned by another session: indistinguishable from absent
        with pytest.raises(MessageNotFoundError):
            await s.message(sid, "msg_absent")


async def test_log_follow_replays_marks_then_continues_live(tmp_path):
    async with open_sessions(tmp_path) as s:
        sid = (await s.create()).id
        await s.admit(sid, PromptInput(text="before"))
        stream = await s.log(sid, -1, follow=True, synced=True)
        got = []
        with anyio.fail_after(10):
            async for item in stream:
                got.append(item)
                if isinstance(item, LogSynced):
                    await s.admit(sid, PromptInput(text="after"))
                elif len(got) == 3:
                    break
        await stream.aclose()
        assert [g.seq for g in got] == [1, 1, 2]
        assert isinstance(got[1], LogSynced)
        after_one = await s.log(sid, 1, follow=False, synced=True)
        assert [getattr(e, "seq", None) async for e in after_one] == [2, 2]


async def test_replay_rebuilds_identical_projections(tmp_path):
    async with open_sessions(tmp_path) as s:
        sid = (await s.create(agent="build")).id
        await s.switch_model(sid, ModelRef(id="m", providerID="p"))
        for i in range(3):
            await s.admit(sid, PromptInput(text=f"p{i}"), delivery="queue" if i else "steer")
        await s.promote(sid, "input")
        await s.promote(sid, "input")
        before = await projected_state(s)
        await s.store.rebuild_projections()
        assert await projected_state(s) == before
        assert len(before[sid]["pending"]) == 1 and len(before[sid]["messages"]) == 3


async def test_store_is_durable_sqlite_and_event_messages_share_ids(tmp_path):
    async with open_sessions(tmp_path) as s:
        modes = await s.store.read(lambda conn: (conn.execute("PRAGMA journal_mode").fetchone()[0],
                                                 conn.execute("PRAGMA synchronous").fetchone()[0]))
        assert modes == ("wal", 2)  # 2 = FULL: a commit is on disk before it is acknowledged
        sid = (await s.create()).id
        await s.switch_agent(sid, "plan")
        [event] = [e async for e in await s.log(sid, -1, follow=False)]
        [message] = (await s.messages(sid))[0]
        assert message.id == "msg_" + event.id.removeprefix("evt_")
        stored = await s.store.events_after(sid, -1)
        assert [e.definition.stored_type for e in stored] == ["session.created.1", "session.agent.selected.1"]
        info = await s.get(sid)
        assert info.time.updated == event.created  # activity moves time.updated


async def test_session_list_defaults_to_pages_of_fifty(tmp_path):
    async with open_sessions(tmp_path) as s:
        for _ in range(51):
            await s.create()
        page, links = await s.list()
        assert len(page) == 50 and links.next is not None
        rest, more = await s.list(cursor=links.next)
        assert len(rest) == 1 and await s.list(cursor=more.next) == ([], CursorLinks(previous=None, next=None))
