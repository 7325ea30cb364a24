"""The short way of the commands that only print (`ocs sessions`, `ocs show`, `ocs stats`): a local SQLite database
that no process holds is opened read-only (`core/store/sqlite/readonly.py`) and read with the store's own SQL, and
only what the command prints is imported, so it answers at once. Each function returns None when the short way does
not apply (`--attach`, a PostgreSQL database, one a server or another command holds, one of an older schema, one that
cannot be read as it is): the caller then takes the long way, through a host (`hosts.py`), which knows those cases."""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable, Iterator
from contextlib import closing, contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .startup import default_db_path, missing_database, say_stderr

if TYPE_CHECKING:
    from ..schema.errors import TaggedError
    from .served import Served

EXIT_OK, EXIT_FAILED = 0, 1
PAGE = 200  # messages read at a time


@contextmanager
def _reading(attach: str | None, db: str | Path | None, absent: bool) -> Iterator[sqlite3.Connection | None]:
    """The read-only connection to the local database, or None for the long way; when the file does not exist,
    StartupError (`absent`: None, the long way creates it)."""
    from ..core.store.backends import is_postgres
    from ..core.store.errors import DatabaseNotFoundError, StoreError
    from ..core.store.sqlite.readonly import open_readonly

    path = db or default_db_path()
    if attach or is_postgres(path) or str(path) == ":memory:":
        yield None
        return
    try:
        conn = open_readonly(path)
    except DatabaseNotFoundError:
        if not absent:
            raise missing_database(path) from None
        conn = None
    except StoreError:
        conn = None  # the long way says what is wrong with it, as it always has
    if conn is None:
        yield None
        return
    with closing(conn):
        yield conn


def _answer(attach: str | None, db: str | Path | None, command: Callable[[sqlite3.Connection], int], *,
            served: Callable[[Served], int] | None = None, absent: bool = False) -> int | None:
    """`command`'s exit code on the read-only connection, or `served`'s on the `ocs serve` that holds the database;
    None for the long way. Failures a user can cause end in one line on stderr, as `run_command` words them."""
    from .startup import StartupError

    try:
        with _reading(attach, db, absent) as conn:
            if conn is None:
                return None if attach or served is None else _through_server(db, served)
            return command(conn)
    except StartupError as cannot:
        say_stderr(f"ocs: {cannot}")
        return EXIT_FAILED
    except sqlite3.Error:
        return None  # e.g. a schema changed under the read: the long way opens it properly


def _through_server(db: str | Path | None, served: Callable[[Served], int]) -> int | None:
    from .listening import holding_server
    from .served import Declined, Served, Unreachable

    holding = holding_server(db or default_db_path())
    if holding is None:
        return None
    try:
        return served(Served(holding[0]))
    except Unreachable:
        # alive but answering nothing (stopped, hung): refused as the long way refuses it, without making the user
        # wait for a second probe of the same server there
        say_stderr(f"ocs: {holding[1]}; talk to that server with --attach URL instead")
        return EXIT_FAILED
    except Declined:
        return None


def _declined(error: TaggedError) -> int:
    say_stderr(f"error: {error.tag}: {error.message}")
    return EXIT_FAILED


def sessions(attach: str | None, db: str | Path | None, limit: int, as_json: bool) -> int | None:
    """`ocs sessions` (without --children or --search): the most recently updated first."""
    def command(conn: sqlite3.Connection) -> int:
        from ..core.store.sql.sessions import SqlSessions
        from .inspect import print_sessions

        stored = SqlSessions(conn).recent(limit)
        if as_json:  # through the public model, as the API answers them
            from ..schema.base import wire
            from ..schema.session import SessionV2Info

            stored = [wire(SessionV2Info.model_validate(info)) for info in stored]
        print_sessions(stored, as_json)
        return EXIT_OK

    def served(server: Served) -> int:
        from .inspect import print_sessions

        found = server.pages("/api/session", {})  # in the order of creation, as the long way lists them
        found.sort(key=lambda s: s["time"]["updated"], reverse=True)
        say_stderr(server.using)
        print_sessions(found[:limit], as_json)
        return EXIT_OK

    return _answer(attach, db, command, served=served)


def show(attach: str | None, db: str | Path | None, session_id: str, as_json: bool) -> int | None:
    """`ocs show ID`: the transcript, or every projected message as JSON lines."""
    def command(conn: sqlite3.Connection) -> int:
        from ..core.store.keyset import PageRequest
        from ..core.store.sql.messages import SqlMessages
        from ..core.store.sql.sessions import SqlSessions
        from ..schema.base import wire
        from ..schema.errors import SessionNotFoundError
        from .inspect import print_transcript

        session = SqlSessions(conn).load(session_id)
        if session is None:
            return _declined(SessionNotFoundError(sessionID=session_id))
        reads = SqlMessages(conn)
        messages: list[dict[str, Any]] = []
        page = reads.page(session_id, PageRequest("asc", PAGE))
        while page.items:
            messages += [wire(m) for m in page.items]
            page = reads.page(session_id, PageRequest("asc", PAGE, page.last))
        print_transcript(wire(session), messages, as_json, None if as_json else _failure(conn, session_id))
        return EXIT_OK

    def served(server: Served) -> int:
        from .inspect import print_transcript

        session = server.data(server.session_path(session_id))
        messages = server.pages(server.session_path(session_id, "/message"), {"order": "asc"})
        failure = None if as_json else server.execution_failure(session_id)
        say_stderr(server.using)
        print_transcript(session, messages, as_json, failure)
        return EXIT_OK

    return _answer(attach, db, command, served=served)


def _failure(conn: sqlite3.Connection, session_id: str) -> tuple[str, str] | None:
    """How the session's latest execution failed (type, message), if it did. No execution runs: no process holds
    the database."""
    from ..core.store.sql.events import SqlEvents
    from ..schema import events as ev

    ended = tuple(ev.definition_for(t).stored_type
                  for t in (ev.ExecutionSucceeded, ev.ExecutionFailed, ev.ExecutionInterrupted))
    record = SqlEvents(conn).latest_of_types(session_id, ended)
    if record is None or not isinstance(record.data, ev.ExecutionFailed):
        return None
    return record.data.error.type, record.data.error.message


def stats(attach: str | None, db: str | Path | None, since: str | None, by: str, timezone: str | None) -> int | None:
    """`ocs stats`: usage per model, day or agent, and the tools'."""
    from .usage import print_stats, since_ms, stats_zone

    now = int(time.time() * 1000)
    try:
        start = None if since is None else since_ms(since, now)
    except ValueError:
        return None  # the long way says what is wrong with it

    def command(conn: sqlite3.Connection) -> int:
        from ..core.session.stats import counted_stats
        from ..core.store.sql.stats import SqlStats
        from ..schema.errors import TaggedError

        try:
            found = counted_stats(SqlStats(conn), start=start, timezone=stats_zone(timezone))
        except TaggedError as declined:
            return _declined(declined)
        print_stats(found, since, by)
        return EXIT_OK

    def served(server: Served) -> int:
        from ..schema.stats import SessionStats

        found = SessionStats.model_validate(server.data("/api/experimental/session/stats",
                                                        {"from": start, "timezone": stats_zone(timezone)}))
        say_stderr(server.using)
        print_stats(found, since, by)
        return EXIT_OK

    return _answer(attach, db, command, served=served, absent=True)  # the long way creates a missing one, as before

