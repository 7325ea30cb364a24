"""Rebuilding the projections from the event log, on a database a real runtime wrote: instruction entries, a
checkpoint with an Instruction Update, a fork of a session and a revert committed after it, a compaction, a saved
"always" permission, input left pending and a session suspended by a graceful shutdown. Every table of the schema
reads the same, row for row, before and after."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import anyio
import pytest

from opencode_session.core.session.projector import project
from opencode_session.core.store import Store
from opencode_session.core.store.sqlite import LOG_TABLES, PROJECTION_TABLES, SEARCH_INDEX_TABLES, STATE_TABLES
from opencode_session.schema import events as ev
from opencode_session.sdk import OpenCode
from tests.security.conftest import write_provider_config
from tests.support import fake_openai as fake
from tests.support.server import isolated_env

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(120)]

WAIT = 60  # seconds: the machine may be busy


def dump(path: Path) -> dict[str, list[tuple[Any, ...]]]:
    """Every row (with its rowid) of every table the schema has, in rowid order; of the search index (whose own
    layout depends on how it was written), what each word finds instead."""
    conn = sqlite3.connect(path)
    try:
        tables = [row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")
                  if row[0] not in SEARCH_INDEX_TABLES]
        result = {table: conn.execute(f'SELECT rowid, * FROM "{table}" ORDER BY rowid').fetchall() for table in tables}
        found = {}
        for index in ("session_search", "session_title_search"):
            conn.execute(f"INSERT INTO {index} ({index}) VALUES ('integrity-check')")
            found[index] = [tuple(conn.execute(f"SELECT rowid FROM {index} WHERE {index} MATCH ? ORDER BY rowid",
                                               (f'"{word}"',)).fetchall())
                            for word in ("one", "two", "again", "three", "answer", "done", "fork", "session")]
        return {**result, **found}
    finally:
        conn.close()


def _columns(path: Path, table: str) -> list[str]:
    conn = sqlite3.connect(path)
    try:
        return [row[1] for row in conn.execute(f'PRAGMA table_info("{table}")')]
    finally:
        conn.close()


def bash(call_id: str, command: str) -> fake.Script:
    return fake.completion(fake.tool_call_deltas(0, call_id, "bash", json.dumps({"command": command,
                                                                                 "description": "look"})),
                           finish_reason="tool_calls")


async def asked(stream: Any, session_id: str) -> str:
    """The id of the next permission request of the session."""
    with anyio.fail_after(WAIT):
        async for event in stream:
            if event.type == "permission.v2.asked" and event.data.get("sessionID") == session_id:
                return str(event.data["id"])
    raise AssertionError("the instance stream ended")


async def write_history(root: Path, db: Path, provider: fake.FakeOpenAI) -> tuple[str, str]:
    """Drive one session through everything that leaves state beside the log; returns its id and its fork's."""
    write_provider_config(root, provider, permission={"bash": "ask"})
    (root / "work").mkdir(exist_ok=True)
    async with OpenCode(db=db, directory=root / "work", env=isolated_env(root)) as oc:
        other = (await oc.session.create()).id
        await oc.session.context_entry_put(other, "note", value={"kept": True})
        sid = (await oc.session.create()).id
        await oc.session.context_entry_put(sid, "style", value="terse")
        live = oc.event.subscribe()
        try:
            provider.enqueue(bash("c1", "ls"), fake.completion(fake.text_deltas("listed")))
            await oc.session.prompt(sid, prompt={"text": "one"})
            await oc.session.permission_reply(sid, await asked(live, sid), reply="always")
            with anyio.fail_after(WAIT):
                await oc.session.wait(sid)
            await oc.session.context_entry_put(sid, "style", value="verbose")  # an Instruction Update next Step
            provider.enqueue(fake.completion(fake.text_deltas("two done")))
            two = await oc.session.prompt(sid, prompt={"text": "two"})
            with anyio.fail_after(WAIT):
                await oc.session.wait(sid)
            # the fork copies the parent's history as it is now; the revert then removes turn two from the parent
            fork = (await oc.session.fork(sid)).id
            await oc.session.revert_stage(sid, message_id=two.id)
            await oc.session.revert_commit(sid)
            provider.enqueue(fake.completion(fake.text_deltas("two again")))
            await oc.session.prompt(sid, prompt={"text": "two again"})
            with anyio.fail_after(WAIT):
                await oc.session.wait(sid)
            await oc.session.compact(sid)
            with anyio.fail_after(WAIT):
                await oc.session.wait(sid)
            # the next Step rebaselines after the compaction, then waits on a permission nobody answers
            provider.enqueue(bash("c2", "cat notes.txt"))
            await oc.session.prompt(sid, prompt={"text": "three"})
            await asked(live, sid)
            await oc.session.prompt(sid, prompt={"text": "four"}, delivery="queue")
            assert await oc.runtime.suspend_active() == [sid]  # what a graceful shutdown does first
        finally:
            await live.aclose()
    return sid, fork


async def test_rebuilding_projections_reproduces_every_table(tmp_path, loop_provider):
    db = tmp_path / "db.sqlite"
    sid, fork = await write_history(tmp_path, db, loop_provider)
    before = dump(db)
    # each table is the log, a projection of it, or state beside them that a rebuild keeps
    assert sorted(before) == sorted(LOG_TABLES + PROJECTION_TABLES + STATE_TABLES
                                  + ("session_search", "session_title_search"))
    assert any(before["session_search"]) and any(before["session_title_search"])  # the history's words are found
    # the history holds everything this test is about
    assert {row[1] for row in before["instruction_entry"]} == {sid, *(row[1] for row in before["session"])}
    texts = {session: [json.loads(row[7]).get("text") for row in before["session_message"]
                       if row[2] == session and row[3] == "user"] for session in (sid, fork)}
    assert texts == {sid: ["one", "two again", "three"], fork: ["one", "two"]}  # turn two: reverted here, copied there
    assert [row[1] for row in before["instruction_checkpoint"]] == [sid]
    assert [row[4] for row in before["permission_saved"]] == ["ls *"]
    assert [json.loads(row[4])["text"] for row in before["session_pending"]] == ["four"]
    assert "compaction" in {row[3] for row in before["session_message"]}
    assert "system" in {row[3] for row in before["session_message"]}  # the Instruction Update
    suspended = 1 + _columns(db, "session").index("time_suspended")  # after the rowid
    assert [row[1] for row in before["session"] if row[suspended] is not None] == [sid]  # its suspension mark
    async with Store(db, project=project) as store:
        watcher = store.live.subscribe()
        await store.rebuild_projections()
        # replay tells live readers nothing (no usage of old Steps again): the next thing they get is what follows
        marker = ev.UsageUpdated.model_validate({"sessionID": sid, "cost": 0, "tokens": {
            "input": 0, "output": 0, "reasoning": 0, "cache": {"read": 0, "write": 0}}})
        store.publish_live(marker, sid)
        with anyio.fail_after(WAIT):
            assert [record.data for record in await watcher.next()] == [marker]
    after = dump(db)
    assert list(after) == list(before)
    for table in before:
        assert after[table] == before[table], table
