"""A cancel of pending input racing its promotion, in the store's own transactions: on PostgreSQL from two hosts whose
transactions are held at the same lock and let go together (either may then commit first), on SQLite from two tasks
of one host. Exactly one wins, the loser changes nothing and fails nothing, and a cancelled input is never in
history."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import anyio
import psycopg
import pytest

from opencode_session.core.location import resolve_location
from opencode_session.core.session import Sessions
from opencode_session.core.session.lifecycle import SessionLifecycle
from opencode_session.core.session.projector import project
from opencode_session.core.store import Store
from opencode_session.core.store.postgres import PostgresBackend
from opencode_session.schema.prompt import PromptInput
from tests.support.postgres import fresh_schema

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(120)]
ROUNDS = 8


@pytest.fixture
def url() -> Iterator[str]:
    with fresh_schema() as made:
        yield made


async def _outcome(sessions: Sessions, sid: str, input_id: str) -> tuple[bool, bool, bool]:
    """(still pending, in history, cancelled in the log) for one input."""
    pending = [p.id for p in await sessions.pending(sid)]
    page, _ = await sessions.messages(sid, limit=200, order="asc")
    log = await sessions.store.read(lambda r: r.events.after(sid, -1, 1000))
    cancelled = any(e.type == "session.input.cancelled" and e.data.inputID == input_id for e in log)  # type: ignore[attr-defined]
    return input_id in pending, input_id in {m.id for m in page}, cancelled


async def _waiting_on_locks(conn: psycopg.AsyncConnection, count: int) -> None:
    """Until `count` other backends of this database wait for a lock (the held transactions queued behind it)."""
    while True:
        row = await (await conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'"
        )).fetchone()
        if row is not None and row[0] >= count:
            return
        await anyio.sleep(0.01)


async def test_cancel_and_promotion_from_two_hosts_have_one_winner(url, tmp_path: Path):
    location = resolve_location(tmp_path)
    async with Store(PostgresBackend(url), project=project) as a, Store(PostgresBackend(url), project=project) as b:
        promoting, cancelling = Sessions(a, location), Sessions(b, location)
        lifecycle = SessionLifecycle(b, cancelling)
        sid = (await promoting.create()).id
        winners = []
        async with await psycopg.AsyncConnection.connect(url, autocommit=True) as watch, \
                await psycopg.AsyncConnection.connect(url) as holder:
            for n in range(ROUNDS):
                admitted = await promoting.admit(sid, PromptInput(text=f"round {n}"), delivery="queue", resume=False)
                # hold the session's sequence row: both transactions below queue behind it
                await holder.execute("SELECT seq FROM event_sequence WHERE aggregate_id = %s FOR UPDATE", (sid,))
                promotion = asyncio.ensure_future(promoting.promote(sid, "input"))
                cancel = asyncio.ensure_future(lifecycle.cancel(sid, admitted.id))
                with anyio.fail_after(30):
                    await _waiting_on_locks(watch, 2)
                await holder.commit()  # let both go at once
                with anyio.fail_after(30):
                    promoted, cancelled = await promotion, await cancel  # neither fails
                assert (admitted.id in promoted) != cancelled
                pending, in_history, logged = await _outcome(promoting, sid, admitted.id)
                assert not pending and in_history == (admitted.id in promoted) and logged == cancelled
                winners.append("cancel" if cancelled else "promotion")
        assert len(winners) == ROUNDS


async def test_cancel_and_promotion_on_one_host_have_one_winner(tmp_path: Path):
    async with Store(tmp_path / "db.sqlite", project=project) as store:
        sessions = Sessions(store, resolve_location(tmp_path))
        lifecycle = SessionLifecycle(store, sessions)
        sid = (await sessions.create()).id
        for n in range(ROUNDS):
            admitted = await sessions.admit(sid, PromptInput(text=f"round {n}"), delivery="queue", resume=False)
            if n % 2:  # submitted in either order: the writer commits them in that order
                cancelled, promoted = await asyncio.gather(lifecycle.cancel(sid, admitted.id),
                                                           sessions.promote(sid, "input"))
            else:
                promoted, cancelled = await asyncio.gather(sessions.promote(sid, "input"),
                                                           lifecycle.cancel(sid, admitted.id))
            assert (admitted.id in promoted) != cancelled
            pending, in_history, logged = await _outcome(sessions, sid, admitted.id)
            assert not pending and in_history == (admitted.id in promoted) and logged == cancelled
