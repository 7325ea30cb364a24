"""The SQL concerns over one PostgreSQL connection, and how PostgreSQL replaces the projections while keeping the
state beside them."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import psycopg

from ....schema.events import EventRecord
from ..rows import Lease
from ..sql.events import INSERT, SqlEvents, row_of
from ..sql.leases import SqlLeases
from ..sql.rows import PROJECTION_TABLES, SESSION_STATE_COLUMNS, STATE_TABLES, SqlRows
from ..sql.search import RANK_SCALE, SqlSearch, prefixed
from ..sql.sessions import SqlSessions
from .dialect import PgConnection


class PgEvents(SqlEvents):
    """Events are inserted without a position: the writer numbers a transaction's events just before it commits,
    under the lock that orders commits (`PgWriter`), so the lock is held for the commit alone. `inserted` collects
    the IDs in insertion order."""

    def __init__(self, conn: PgConnection) -> None:
        super().__init__(conn)
        self.inserted: list[str] = []

    def insert(self, record: EventRecord, data_text: str) -> None:
        self.conn.execute(INSERT, row_of(record, data_text))
        self.inserted.append(record.id)


class PgLeases(SqlLeases):
    """Leases whose fencing check share-locks the row until the transaction ends: a takeover waits for a write that
    checked before it, so nothing a former owner checked commits after the new owner started reading. A lease
    checked once holds for the rest of the transaction (the lock keeps it), so later writes of the same execution in
    the batch skip the query; `forget` drops that memory when a write rolls back (its lock goes with it)."""

    def __init__(self, conn: PgConnection) -> None:
        super().__init__(conn)
        self._held: set[Lease] = set()

    def holds(self, lease: Lease) -> bool:
        if lease in self._held:
            return True
        row = self.conn.execute("SELECT owner, epoch FROM session_lease WHERE session_id = ? FOR SHARE",
                                (lease.session_id,)).fetchone()
        held = row is not None and row[0] == lease.owner and int(row[1]) == lease.epoch
        if held:
            self._held.add(lease)
        return held

    def take(self, session_id: str, owner: str, now: int, expires: int, *, steal: bool = False) -> Lease | None:
        self.forget()
        return super().take(session_id, owner, now, expires, steal=steal)

    def release(self, lease: Lease) -> None:
        self.forget()
        super().release(lease)

    def forget(self) -> None:
        self._held.clear()


class PgSearch(SqlSearch):
    """Sessions ranked by PostgreSQL's full-text search: the documents' tsvector (the title weighted A, messages D)
    under its GIN index, matched by a tsquery of the words, scored by ts_rank."""

    def ranked(self, words: list[str]) -> tuple[str, tuple[Any, ...]]:
        # the words are letters and digits only, so none is a tsquery operator
        query = " & ".join(words) + (":*" if prefixed(words) else "")
        return (
            "(SELECT s.*, r.rank AS rank FROM session s JOIN ("
            "SELECT d.session_id AS sid, CAST(max(CAST(ts_rank(d.tsv, q.query) AS DOUBLE PRECISION))"
            f" * {RANK_SCALE} AS BIGINT) AS rank FROM session_search_doc d, to_tsquery('simple', ?) AS q (query)"
            " WHERE d.tsv @@ q.query GROUP BY d.session_id) r ON r.sid = s.id) AS ranked",
            (query,),
        )


class PgRows(SqlRows):
    def __init__(self, conn: psycopg.Connection[Any]) -> None:
        adapted = PgConnection(conn)
        super().__init__(adapted)
        self.events: PgEvents = PgEvents(adapted)
        self.leases: PgLeases = PgLeases(adapted)
        self.sessions = SqlSessions(adapted, PgSearch(adapted))
        self.pg = conn

    def replace_projections(self, replay: Callable[[], None]) -> None:
        # Clearing the sessions cascades into their state: the state is read first and written back as it was.
        conn = self.pg
        kept: dict[str, tuple[list[str], list[tuple[Any, ...]]]] = {}
        for table in STATE_TABLES:
            cursor = conn.execute(f"SELECT * FROM {table}")
            kept[table] = ([c.name for c in cursor.description or ()], [tuple(row) for row in cursor.fetchall()])
        marks = {column: [tuple(r) for r in conn.execute(
            f"SELECT {column}, id FROM session").fetchall()] for column in SESSION_STATE_COLUMNS}
        for table in reversed(PROJECTION_TABLES):
            conn.execute(f"DELETE FROM {table}")
        replay()
        for table, (columns, values) in kept.items():
            conn.execute(f"DELETE FROM {table}")
            if values:
                with conn.cursor() as cursor:
                    cursor.executemany(
                        f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({', '.join(['%s'] * len(columns))})",
                        values)
        for column, pairs in marks.items():
            with conn.cursor() as cursor:
                cursor.executemany(f"UPDATE session SET {column} = %s WHERE id = %s", pairs)
