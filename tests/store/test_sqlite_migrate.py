"""The SQLite store's migrations apply in one transaction: a new database pays one commit (one fsync) for its whole
schema instead of one per migration, and a database a few versions behind gets the rest the same way."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from opencode_session.core.store.sqlite import migrations


def _connect(path: Path) -> tuple[sqlite3.Connection, list[str]]:
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    statements: list[str] = []
    conn.set_trace_callback(statements.append)
    return conn, statements


@pytest.mark.parametrize("behind", [len(migrations.MIGRATIONS), 2, 0])
def test_pending_migrations_are_one_transaction(tmp_path: Path, behind: int) -> None:
    conn, statements = _connect(tmp_path / "db.sqlite")
    first = len(migrations.MIGRATIONS) - behind
    for script in migrations.MIGRATIONS[:first]:  # a database an older program left at version `first`
        conn.executescript(script)
    conn.execute(f"PRAGMA user_version = {first}")
    statements.clear()
    assert migrations.migrate(conn) == len(migrations.MIGRATIONS)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == len(migrations.MIGRATIONS)
    assert statements.count("COMMIT") == (1 if behind else 0)
    assert "session_search_doc" in {r[0] for r in conn.execute("SELECT name FROM sqlite_master")}


def test_a_failing_migration_leaves_the_database_at_its_version(tmp_path: Path, monkeypatch) -> None:
    conn, _ = _connect(tmp_path / "db.sqlite")
    monkeypatch.setattr(migrations, "MIGRATIONS", [*migrations.MIGRATIONS, "CREATE TABLE event (id TEXT);\n"])
    with pytest.raises(sqlite3.OperationalError):
        migrations.migrate(conn)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == 0
    assert conn.execute("SELECT count(*) FROM sqlite_master").fetchone()[0] == 0
