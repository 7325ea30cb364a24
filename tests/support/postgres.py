"""The PostgreSQL server the clustered tests use (`OCS_TEST_POSTGRES`, default the local server's `test` database):
a fresh schema per test, dropped after. Under pytest-xdist each worker has a database of its own (`test_gw0`, …,
made on first use), so what a test reads of the server's activity (`pg_stat_activity` of its database: lock waits,
listening connections) is its worker's alone. Without a server the tests skip saying why, unless CI requires them
(`OCS_REQUIRE_POSTGRES=1`, which `.ci/run` sets after starting the server)."""

from __future__ import annotations

import contextlib
import functools
import os
import secrets
from collections.abc import Iterator
from urllib.parse import quote, urlsplit, urlunsplit

import psycopg
import pytest

DEFAULT = "postgresql://postgres@127.0.0.1:5432/test"


def server_url() -> str:
    """The configured database: the one this process connects to first, to make its worker's own."""
    return os.environ.get("OCS_TEST_POSTGRES", DEFAULT)


def base_url() -> str:
    """This test process's database: the configured one, or under xdist the worker's own beside it."""
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    if not worker:
        return server_url()
    parts = urlsplit(server_url())
    return urlunsplit(parts._replace(path=f"{parts.path.rstrip('/') or '/test'}_{worker}"))


@functools.cache
def _unreachable() -> str | None:
    try:
        with psycopg.connect(server_url(), connect_timeout=3, autocommit=True) as conn:
            conn.execute("SELECT 1")
            if base_url() != server_url():  # a worker's database, made once and kept for later runs
                name = urlsplit(base_url()).path.lstrip("/")
                if conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone() is None:
                    try:
                        conn.execute(f'CREATE DATABASE "{name}"')
                    except psycopg.errors.DuplicateDatabase:
                        pass
    except psycopg.Error as failed:
        return f"PostgreSQL at {server_url()} is not reachable ({str(failed).strip() or type(failed).__name__})"
    return None


def require_postgres() -> None:
    """Skip (saying why) when no server answers; fail instead where CI requires the PostgreSQL tests."""
    reason = _unreachable()
    if reason is None:
        return
    if os.environ.get("OCS_REQUIRE_POSTGRES") == "1":
        pytest.fail(reason + "; OCS_REQUIRE_POSTGRES=1 requires it")
    pytest.skip(reason)


def schema_url(schema: str) -> str:
    """The database URL with `schema` as its search path: every table the store makes lands there."""
    sep = "&" if "?" in base_url() else "?"
    return f"{base_url()}{sep}options={quote(f'-csearch_path={schema}')}"


@contextlib.contextmanager
def fresh_schema() -> Iterator[str]:
    """A new, empty schema for one test; yields its URL and drops the schema (and everything in it) after."""
    require_postgres()
    schema = "ocs_" + secrets.token_hex(6)
    with psycopg.connect(base_url(), autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")
    try:
        yield schema_url(schema)
    finally:
        with psycopg.connect(base_url(), autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA {schema} CASCADE")


def activity() -> list[str]:
    """What every other connection to this worker's database is doing, one line each (for a failure message): its
    process, application name (`ocs:PID` for a host), state and for how long, how long its transaction has been
    open, what it waits for and who blocks it, and its last statement."""
    with psycopg.connect(base_url(), autocommit=True) as conn:
        rows = conn.execute(
            "SELECT pid, application_name, state, (extract(epoch FROM now() - state_change) * 1000)::int,"
            " (extract(epoch FROM now() - xact_start) * 1000)::int, wait_event_type || ':' || wait_event,"
            " pg_blocking_pids(pid), left(query, 160)"
            " FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()"
            " ORDER BY xact_start NULLS LAST").fetchall()
    return [f"pid {pid} {app or '-'} {state} for {since} ms, transaction open {age} ms, waits {wait}, blocked by"
            f" {blockers}: {query!r}" for pid, app, state, since, age, wait, blockers, query in rows]
