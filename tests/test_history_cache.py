"""The incremental history cache always equals a fresh read of the active history, through appends, in-place
assistant updates, instruction-baseline cutoffs and deleted rows."""

from __future__ import annotations

import json

import pytest

from opencode_session.core.session.history import HistoryCache, active_history
from opencode_session.core.store import instructions
from opencode_session.schema import events as ev
from opencode_session.schema.common import ModelRef
from opencode_session.schema.prompt import PromptInput
from tests.support.core import open_sessions

pytestmark = pytest.mark.anyio


async def _check(s, cache: HistoryCache, sid: str) -> list[dict]:
    cached = await s.store.read(lambda conn: [e.message for e in cache.load(conn, sid)])
    fresh = await s.store.read(lambda conn: [json.loads(d) for d in active_history(conn, sid)])
    assert cached == fresh
    return cached


async def test_cache_tracks_appends_updates_cutoffs_and_deletions(tmp_path):
    async with open_sessions(tmp_path) as s:
        sid = (await s.create()).id
        cache = HistoryCache()
        assert await _check(s, cache, sid) == []
        await s.admit(sid, PromptInput(text="one"))
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
        await s.store.write(lambda tx: instructions.initialize(tx, sid, instructions.Checkpoint(
            "", "{}", tx.latest_seq(sid))))
        assert "system" not in [m["type"] for m in await _check(s, cache, sid)]
        # no operation removes a message yet (committed revert will); the cache must already notice one that vanished
        await s.store.write(lambda tx: tx.execute("DELETE FROM session_message WHERE id = ?", (aid,)))
        assert [m["type"] for m in await _check(s, cache, sid)] == ["user"]
