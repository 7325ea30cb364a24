"""The incremental history cache always equals a fresh read of the active history, and the incremental lowering
of it equals lowering it from nothing, through appends, in-place assistant updates, instruction-baseline cutoffs,
attachments, a model switch and deleted rows; an attachment that reads the same at the next Step keeps its message
object; after an automatic compaction the model's history goes on with the input it was made for."""

from __future__ import annotations

import json

import pytest

from opencode_session.core.attachments import load_attachments, needs_loading
from opencode_session.core.execution.lowering import LoweredHistory, lower_message
from opencode_session.core.llm import model as llm
from opencode_session.core.permission import Authority
from opencode_session.core.session.history import HistoryCache, active_history
from opencode_session.core.store import Checkpoint
from opencode_session.schema import events as ev
from opencode_session.schema.common import ModelRef
from opencode_session.schema.prompt import PromptInput, PromptInputFileAttachment
from tests.support.core import open_sessions

pytestmark = pytest.mark.anyio


LOWERED = LoweredHistory()
MODELS = (ModelRef(id="m", providerID="p"), ModelRef(id="other", providerID="p"))


async def _check(s, cache: HistoryCache, sid: str) -> list[dict]:
    entries = await s.store.read(lambda conn: cache.load(conn, sid))
    cached = [e.message for e in entries if not e.replayed]  # the public context has no replayed input
    fresh = await s.store.read(lambda conn: [json.loads(d) for d in active_history(conn, sid)])
    assert cached == fresh
    for model in (*MODELS, MODELS[0]):  # a switch and back: each model's lowering from nothing
        cold = [m for entry in entries for m in lower_message(entry.message, model)]
        assert LOWERED.lower(sid, entries, model) == (cold, needs_loading(cold))
    return cached


async def test_cache_tracks_appends_updates_cutoffs_and_deletions(tmp_path):
    async with open_sessions(tmp_path) as s:
        sid = (await s.create()).id
        cache = HistoryCache()
        assert await _check(s, cache, sid) == []
        (tmp_path / "work" / "notes.txt").write_text("read at every Step")
        await s.admit(sid, PromptInput(text="one", files=[PromptInputFileAttachment(uri="notes.txt")]))
        await s.promote(sid, "steer")
        assert [m["type"] for m in await _check(s, cache, sid)] == ["user"]
        aid = "msg_assistant_1"
        await s.store.append(ev.StepStarted(sessionID=sid, assistantMessageID=aid, agent="build",
                                             model=ModelRef(id="m", providerID="p")))
        await _check(s, cache, sid)
        for i in range(3):  # several updates of the same row, likely within one millisecond
            await s.store.append(ev.TextStarted(sessionID=sid, assistantMessageID=aid, ordinal=i))
            await s.store.append(ev.TextEnded(sessionID=sid, assistantMessageID=aid, ordinal=i, text=f"t{i}"))
            history = await _check(s, cache, sid)
        assert [p["text"] for p in history[-1]["content"]] == ["t0", "t1", "t2"]
        await s.store.append(ev.InstructionsUpdated(sessionID=sid, text="update"))
        assert history != await _check(s, cache, sid)
        # a new baseline folds the update in: the cutoff moves and the system message leaves the history
        await s.store.write(lambda tx: tx.instructions.initialize(sid, Checkpoint(
            "", "{}", tx.latest_seq(sid))))
        assert "system" not in [m["type"] for m in await _check(s, cache, sid)]
        # no operation removes a message yet (committed revert will); the cache must already notice one that vanished
        await s.store.write(lambda tx: tx.rows.execute("DELETE FROM session_message WHERE id = ?", (aid,)))
        assert [m["type"] for m in await _check(s, cache, sid)] == ["user"]


async def test_an_attachment_read_alike_keeps_its_message_until_the_file_changes(tmp_path):
    async with open_sessions(tmp_path) as s:
        sid = (await s.create()).id
        notes = tmp_path / "work" / "notes.txt"
        notes.write_text("first version")
        await s.admit(sid, PromptInput(text="read it", files=[PromptInputFileAttachment(uri="notes.txt")]))
        await s.promote(sid, "steer")
        cache, lowered = HistoryCache(), LoweredHistory()
        authority = Authority(tmp_path / "work")

        async def step() -> llm.UserMessage:
            entries = await s.store.read(lambda conn: cache.load(conn, sid))
            messages, unread = lowered.lower(sid, entries, MODELS[0])
            assert unread
            message = lowered.keep_loaded(sid, load_attachments(messages, authority))[0]
            assert isinstance(message, llm.UserMessage)
            return message

        first = await step()
        assert await step() is first  # read again, same bytes: the same object, whose wire form adapters keep
        notes.write_text("second version")
        changed = await step()
        assert changed is not first and changed != first
        assert [getattr(p, "data", None) for p in changed.parts][-1] == b"second version"
        assert await step() is changed


async def _compacted(s, sid: str, mid: str, reason: str) -> None:
    await s.store.append(ev.CompactionStarted(sessionID=sid, messageID=mid, reason=reason, recent=""))
    await s.store.append(ev.CompactionEnded(sessionID=sid, messageID=mid, reason=reason, text="## Objective",
                                            recent=""))


async def _prompted(s, sid: str, text: str) -> None:
    await s.admit(sid, PromptInput(text=text))
    await s.promote(sid, "steer")


async def test_an_automatic_checkpoint_is_followed_by_the_input_it_was_made_for(tmp_path):
    async with open_sessions(tmp_path) as s:
        sid = (await s.create()).id
        cache = HistoryCache()

        async def shown() -> list[tuple[str, str]]:
            await _check(s, cache, sid)  # and the public context, without it, is the fresh read
            entries = await s.store.read(lambda conn: cache.load(conn, sid))
            return [(e.message["type"], str(e.message.get("text", e.message["id"]))) for e in entries]

        await _prompted(s, sid, "one")
        await _compacted(s, sid, "msg_auto_1", "auto")
        assert await shown() == [("compaction", "msg_auto_1"), ("user", "one")]
        await _prompted(s, sid, "two")
        assert await shown() == [("compaction", "msg_auto_1"), ("user", "one"), ("user", "two")]
        await _compacted(s, sid, "msg_auto_2", "auto")  # made for the newest prompt
        assert await shown() == [("compaction", "msg_auto_2"), ("user", "two")]
        # a manual checkpoint is made between turns: the prompt before it was answered, none is replayed, nor after
        # a later automatic one with no newer prompt
        await _compacted(s, sid, "msg_manual", "manual")
        assert await shown() == [("compaction", "msg_manual")]
        await _compacted(s, sid, "msg_auto_3", "auto")
        assert await shown() == [("compaction", "msg_auto_3")]
        cold = await s.store.read(lambda conn: HistoryCache().load(conn, sid))
        assert [e.message["type"] for e in cold] == ["compaction"]
