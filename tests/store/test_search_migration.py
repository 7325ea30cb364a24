"""Session search on a database made before it: the migration (SQLite's 10th, PostgreSQL's 3rd) indexes the sessions
and messages already stored, so an upgraded host finds them by title and by message text."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import psycopg
import pytest

from opencode_session.core.store import Store
from opencode_session.core.store.keyset import PageRequest
from opencode_session.core.store.postgres import PostgresBackend
from opencode_session.core.store.postgres import migrations as pg_migrations
from opencode_session.core.store.rows import SessionFilter
from opencode_session.core.store.sqlite import migrations as sqlite_migrations
from tests.support.postgres import fresh_schema

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(60)]

INFO = {"id": "ses_old", "projectID": "prj", "title": "Harbour inventory", "location": {"directory": "/w"},
        "time": {"created": 1, "updated": 1}, "agent": "build"}
MESSAGES = [
    ("msg_1", "user", {"id": "msg_1", "type": "user", "time": {"created": 2}, "text": "count the lighthouses"}),
    ("msg_2", "assistant", {"id": "msg_2", "type": "assistant", "time": {"created": 3, "completed": 4},
                            "agent": "build", "model": {"id": "m", "providerID": "p"},
                            "content": [{"type": "reasoning", "id": "r", "text": "pondering"},
                                        {"type": "text", "id": "t", "text": "seven beacons"}]}),
    ("msg_3", "assistant", {"id": "msg_3", "type": "assistant", "time": {"created": 5}, "agent": "build",
                            "model": {"id": "m", "providerID": "p"},
                            "content": [{"type": "text", "id": "t", "text": "unfinished sentence"}]}),
]
SESSION = ("INSERT INTO session (id, project_id, directory, title, time_created, time_updated, created_order, data)"
           " VALUES (?, 'prj', '/w', ?, 1, 1, 1, ?)")
# how many migrations come before search's (found by what it makes, so a renumbering at merge changes nothing here)
SQLITE_BEFORE = next(n for n, m in enumerate(sqlite_migrations.MIGRATIONS) if "TABLE session_search_doc" in m)
PG_BEFORE = next(n for n, m in enumerate(pg_migrations.MIGRATIONS) if "TABLE session_search_doc" in m)
MESSAGE = ("INSERT INTO session_message (id, session_id, type, seq, time_created, time_updated, data)"
           " VALUES (?, 'ses_old', ?, ?, 1, 1, ?)")


def _rows(params: Any) -> list[tuple[Any, ...]]:
    return [(mid, kind, seq, json.dumps(data)) for seq, (mid, kind, data) in enumerate(params)]


async def _found(store: Store, text: str) -> list[str]:
    page = await store.read(lambda r: r.sessions.page(SessionFilter(search=text), PageRequest("desc", 10)))
    return [s.id for s in page.items]


async def _check(store: Store) -> None:
    for text in ("harbour", "lighthouses", "seven beacons"):
        assert await _found(store, text) == ["ses_old"], text
    assert await _found(store, "pondering") == []  # reasoning is not searched
    assert await _found(store, "unfinished") == []  # nor an answer still being written


async def test_sqlite_migration_indexes_what_was_stored_before(tmp_path: Path):
    db = tmp_path / "old.sqlite"
    conn = sqlite3.connect(db)
    for script in sqlite_migrations.MIGRATIONS[:SQLITE_BEFORE]:
        conn.executescript(script)
    conn.execute(f"PRAGMA user_version = {SQLITE_BEFORE}")
    conn.execute(SESSION, ("ses_old", INFO["title"], json.dumps(INFO)))
    conn.executemany(MESSAGE, _rows(MESSAGES))
    conn.commit()
    conn.close()
    async with Store(db) as store:
        await _check(store)


async def test_postgres_migration_indexes_what_was_stored_before():
    with fresh_schema() as url:
        with psycopg.connect(url, autocommit=True) as conn:
            for script in pg_migrations.MIGRATIONS[:PG_BEFORE]:
                conn.execute(script)
            conn.execute("CREATE TABLE ocs_schema (version INTEGER NOT NULL)")
            conn.execute("INSERT INTO ocs_schema (version) VALUES (%s)", (PG_BEFORE,))
            conn.execute(SESSION.replace("?", "%s"), ("ses_old", INFO["title"], json.dumps(INFO)))
            with conn.cursor() as cursor:
                cursor.executemany(MESSAGE.replace("?", "%s"), _rows(MESSAGES))
        async with Store(PostgresBackend(url)) as store:
            await _check(store)
