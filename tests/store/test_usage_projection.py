"""The usage projection kept in step by a real runtime: after tool calls, a fork, a committed revert and a
compaction, its rows are exactly what deriving them afresh from the stored messages gives (the migration's
back-fill) and its quarter hours' sums what its rows add up to; a removed session takes its rows along, and the
statistics count what the messages hold."""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from opencode_session.core.session.stats import session_stats
from opencode_session.core.store import Store
from opencode_session.core.store.sqlite import migrations as sqlite_migrations
from opencode_session.sdk import OpenCode
from tests.support.server import isolated_env
from tests.test_replay_rebuild import write_history

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(120)]

USAGE = sqlite_migrations.MIGRATIONS[next(n for n, m in enumerate(sqlite_migrations.MIGRATIONS)
                                          if "TABLE session_usage " in m)]
# the back-fill's rows, then each prompt given the agent and model of the Step that answered it (a later migration)
BACK_FILL = [s for s in sqlite_migrations._statements(USAGE) if s.startswith("INSERT")] + [
    s for m in sqlite_migrations.MIGRATIONS for s in sqlite_migrations._statements(m)
    if s.startswith("UPDATE session_usage SET (agent, provider, model)")]


# the quarter hours' sessions and sums as the rows add up (what the triggers must keep)
PERIODS = {
    "session_usage_active": "SELECT session_id, time_created - time_created % 900000, count(*) FROM session_usage"
                            " GROUP BY 1, 2",
    "session_usage_period": "SELECT session_id, time_created - time_created % 900000, coalesce(agent, ''),"
                            " coalesce(provider, ''), coalesce(model, ''), count(*) FROM session_usage"
                            " WHERE type = 'assistant' GROUP BY 1, 2, 3, 4, 5",
    "session_usage_sums": "SELECT time_created - time_created % 900000, project_id, type, coalesce(agent, ''),"
                          " coalesce(provider, ''), coalesce(model, ''), count(*), sum(failed), sum(input),"
                          " sum(output), sum(reasoning), sum(cache_read), sum(cache_write), sum(cost)"
                          " FROM session_usage GROUP BY 1, 2, 3, 4, 5, 6",
    "session_usage_tool_period": "SELECT time_created - time_created % 900000, project_id, coalesce(tool, ''),"
                                 " count(*), sum(failed) FROM session_usage_tool GROUP BY 1, 2, 3",
}


def _usage(db: Path) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
    """The usage rows, each table's sorted; the quarter hours' sums checked against them."""
    conn = sqlite3.connect(db)
    try:
        for table, derived in PERIODS.items():
            kept = sorted(conn.execute(f"SELECT * FROM {table}").fetchall())
            assert [row[:-1] for row in kept] == [row[:-1] for row in sorted(conn.execute(derived).fetchall())]
            assert [row[-1] for row in kept] == pytest.approx([row[-1] for row in sorted(conn.execute(derived))])
        return (sorted(conn.execute("SELECT * FROM session_usage").fetchall()),
                sorted(conn.execute("SELECT * FROM session_usage_tool").fetchall()))
    finally:
        conn.close()


def _derived(db: Path, copy: Path) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
    """The usage rows the migration's back-fill derives from the messages of (a copy of) the database."""
    shutil.copy(db, copy)
    conn = sqlite3.connect(copy)
    try:
        conn.execute("DELETE FROM session_usage_tool")
        conn.execute("DELETE FROM session_usage")
        for statement in BACK_FILL:
            conn.execute(statement)
        conn.commit()
    finally:
        conn.close()
    return _usage(copy)


async def test_the_runtime_keeps_usage_rows_equal_to_the_messages(tmp_path, loop_provider):
    db = tmp_path / "db.sqlite"
    sid, fork = await write_history(tmp_path, db, loop_provider)
    steps, tools = _usage(db)
    assert (steps, tools) == _derived(db, tmp_path / "derived.sqlite")
    sessions = {row[1] for row in steps}
    assert {sid, fork} <= sessions
    assert {(row[2], row[5]) for row in tools} == {(sid, "bash"), (fork, "bash")}  # the fork copied the call
    async with Store(db) as store:
        before = await session_stats(store)
    assert before.total.steps == sum(1 for row in steps if row[3] == "assistant")
    assert before.total.prompts == sum(1 for row in steps if row[3] == "user")
    # the first call and the fork's copy of it completed; the last was refused when the host shut down
    assert [(t.tool, t.calls, t.failures) for t in before.tools or ()] == [("bash", 3, 1)]

    async with OpenCode(db=db, directory=tmp_path / "work", env=isolated_env(tmp_path)) as oc:
        await oc.session.remove(fork)
    steps, tools = _usage(db)
    assert fork not in {row[1] for row in steps} | {row[2] for row in tools}
    assert sid in {row[1] for row in steps}
    assert (steps, tools) == _derived(db, tmp_path / "derived-after.sqlite")
    async with Store(db) as store:
        after = await session_stats(store)
    assert [(t.tool, t.calls, t.failures) for t in after.tools or ()] == [("bash", 2, 1)]
    assert after.total.steps == sum(1 for row in steps if row[3] == "assistant")
