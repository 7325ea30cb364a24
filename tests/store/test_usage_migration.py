"""The usage projection on a database made before it: the migration (SQLite's 11th, PostgreSQL's 4th) back-fills a
row per prompt and Step and per settled tool call from the messages already stored, the same rows the store writes
for a new message, so an upgraded host's statistics count its old sessions."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import psycopg
import pytest

from opencode_session.core.session.stats import session_stats
from opencode_session.core.store import Store
from opencode_session.core.store.postgres import PostgresBackend
from opencode_session.core.store.postgres import migrations as pg_migrations
from opencode_session.core.store.sql.usage import step_row
from opencode_session.core.store.sqlite import migrations as sqlite_migrations
from tests.support.postgres import fresh_schema

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(60)]

INFO = {"id": "ses_old", "projectID": "prj", "title": "Old", "location": {"directory": "/w"},
        "time": {"created": 1, "updated": 1}, "agent": "build"}
TOKENS = {"input": 1200, "output": 300, "reasoning": 50, "cache": {"read": 800, "write": 10}}


def _tool(call: str, name: str, status: str) -> dict[str, Any]:
    return {"type": "tool", "id": call, "name": name, "state": {"status": status, "input": {}, "content": [],
                                                                "structured": {}}, "time": {"created": 2}}


MESSAGES: list[dict[str, Any]] = [
    {"id": "msg_1", "type": "user", "time": {"created": 2}, "text": "count the lighthouses"},
    {"id": "msg_2", "type": "assistant", "time": {"created": 3, "completed": 4}, "agent": "build",
     "model": {"id": "m1", "providerID": "p"}, "finish": "tool-calls", "cost": 0.25, "tokens": TOKENS,
     "content": [{"type": "text", "id": "t", "text": "looking"}, _tool("c1", "bash", "completed"),
                 _tool("c2", "read", "error"), _tool("c3", "bash", "running")]},
    {"id": "msg_3", "type": "assistant", "time": {"created": 5, "completed": 6}, "agent": "plan",
     "model": {"id": "m2", "providerID": "q"}, "finish": "error",
     "error": {"type": "provider", "message": "overloaded"}, "content": []},
    {"id": "msg_4", "type": "system", "time": {"created": 7}, "text": "instructions"},  # not counted
    {"id": "msg_5", "type": "assistant", "time": {"created": 8}, "agent": "build",
     "model": {"id": "m1", "providerID": "p"}, "content": [_tool("c4", "grep", "completed")]},  # still running
]
SESSION = ("INSERT INTO session (id, project_id, directory, title, time_created, time_updated, created_order, data)"
           " VALUES (?, 'prj', '/w', 'Old', 1, 1, 1, ?)")
MESSAGE = ("INSERT INTO session_message (id, session_id, type, seq, time_created, time_updated, data)"
           " VALUES (?, 'ses_old', ?, ?, ?, ?, ?)")
# how many migrations come before the usage projection's (found by what it makes, so a renumbering at merge changes
# nothing here)
SQLITE_BEFORE = next(n for n, m in enumerate(sqlite_migrations.MIGRATIONS) if "TABLE session_usage " in m)
PG_BEFORE = next(n for n, m in enumerate(pg_migrations.MIGRATIONS) if "TABLE session_usage " in m)
# what the store writes for these messages (the shape of SqlUsage.record), as the back-fill must: the prompt with
# the agent and model of the first Step that answered it
EXPECTED_STEPS = sorted(
    (*step_row("ses_old", m)[:4], "build", "p", "m1", *step_row("ses_old", m)[7:]) if m["type"] == "user"
    else step_row("ses_old", m) for m in MESSAGES if m["type"] in ("user", "assistant"))
EXPECTED_TOOLS = sorted([("msg_2", 1, "ses_old", 3, "bash", 0), ("msg_2", 2, "ses_old", 3, "read", 1),
                         ("msg_5", 0, "ses_old", 8, "grep", 0)])
STEPS = ("SELECT message_id, session_id, type, time_created, agent, provider, model, failed, input, output, reasoning,"
         " cache_read, cache_write, cost FROM session_usage")
TOOLS = "SELECT message_id, position, session_id, time_created, tool, failed FROM session_usage_tool"


def _rows() -> list[tuple[Any, ...]]:
    return [(m["id"], m["type"], seq, m["time"]["created"], m["time"]["created"], json.dumps(m))
            for seq, m in enumerate(MESSAGES)]


async def _check(store: Store) -> None:
    stats = await session_stats(store)
    assert (stats.total.sessions, stats.total.prompts, stats.total.steps, stats.total.failed) == (1, 1, 3, 1)
    assert (stats.total.tokens.input, stats.total.tokens.cache.read, stats.total.cost) == (1200, 800, 0.25)
    assert [(m.providerID, m.modelID, m.steps, m.prompts) for m in stats.models] == [("p", "m1", 2, 1),
                                                                                         ("q", "m2", 1, 0)]
    assert [(a.agent, a.steps, a.failed, a.prompts) for a in stats.agents] == [("build", 2, 0, 1), ("plan", 1, 1, 0)]
    assert [(t.tool, t.calls, t.failures) for t in stats.tools or ()] == [("bash", 1, 0), ("grep", 1, 0),
                                                                          ("read", 1, 1)]


def _same(steps: list[tuple[Any, ...]], tools: list[tuple[Any, ...]]) -> None:
    assert sorted(tuple(r) for r in steps) == EXPECTED_STEPS
    assert sorted(tuple(r) for r in tools) == EXPECTED_TOOLS


async def test_sqlite_migration_back_fills_the_usage_of_stored_messages(tmp_path: Path):
    db = tmp_path / "old.sqlite"
    conn = sqlite3.connect(db)
    for script in sqlite_migrations.MIGRATIONS[:SQLITE_BEFORE]:
        conn.executescript(script)
    conn.execute(f"PRAGMA user_version = {SQLITE_BEFORE}")
    conn.execute(SESSION, ("ses_old", json.dumps(INFO)))
    conn.executemany(MESSAGE, _rows())
    conn.commit()
    conn.close()
    async with Store(db) as store:
        await _check(store)
    conn = sqlite3.connect(db)
    try:
        _same(conn.execute(STEPS).fetchall(), conn.execute(TOOLS).fetchall())
    finally:
        conn.close()


async def test_postgres_migration_back_fills_the_usage_of_stored_messages():
    with fresh_schema() as url:
        with psycopg.connect(url, autocommit=True) as conn:
            for script in pg_migrations.MIGRATIONS[:PG_BEFORE]:
                conn.execute(script)
            conn.execute("CREATE TABLE ocs_schema (version INTEGER NOT NULL)")
            conn.execute("INSERT INTO ocs_schema (version) VALUES (%s)", (PG_BEFORE,))
            conn.execute(SESSION.replace("?", "%s"), ("ses_old", json.dumps(INFO)))
            with conn.cursor() as cursor:
                cursor.executemany(MESSAGE.replace("?", "%s"), _rows())
        async with Store(PostgresBackend(url)) as store:
            await _check(store)
        with psycopg.connect(url, autocommit=True) as conn:
            _same(conn.execute(STEPS).fetchall(), conn.execute(TOOLS).fetchall())
