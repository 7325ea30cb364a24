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
from ..sql.search import TITLE, SqlSearch, message_text, prefixed
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

    def claimable(self, now: int, limit: int = 100) -> list[Lease]:
        return self._leases(self._EXPIRED + " FOR UPDATE SKIP LOCKED", now, limit)


class PgSearch(SqlSearch):
    """Session search on PostgreSQL: the documents' tsvector under its GIN index, matched by a tsquery of the words;
    a document carries its session's created_order (session_order), so the matching sessions are read in list order,
    the planner choosing between the GIN index (a rare word) and the order's index (a frequent one)."""

    def add_title(self, session_id: str, title: str) -> None:
        self.conn.execute("INSERT INTO session_search_doc (session_id, session_order, title)"
                          " SELECT id, created_order, ? FROM session WHERE id = ?", (title, session_id))

    def index_message(self, session_id: str, seq: int, message: dict[str, Any]) -> None:
        text = message_text(message)
        if not text:
            self.conn.execute("DELETE FROM session_search_doc WHERE message_id = ?", (message["id"],))
            return
        self.conn.execute(
            "INSERT INTO session_search_doc (session_id, session_order, message_id, body)"
            " SELECT id, created_order, ?, ? FROM session WHERE id = ?"
            " ON CONFLICT (message_id) DO UPDATE SET body = excluded.body"
            " WHERE session_search_doc.body <> excluded.body",
            (message["id"], text, session_id))

    def candidates(self, tier: int, words: list[str], bound: int | None, ascending: bool,
                   size: int) -> tuple[list[tuple[int, str]], int | None, bool]:
        # The query and the bound are written into the SQL (as literals: see _tsquery), not passed as parameters:
        # a prepared statement's generic plan would not know how rare the words are.
        kind = "message_id IS NULL" if tier == TITLE else "message_id IS NOT NULL"
        beyond = "" if bound is None else f" AND session_order {'>' if ascending else '<'} {int(bound)}"
        query = _tsquery(words)
        # a word in few documents: all of them from the GIN index, ordered here
        rows = self.conn.execute(
            f"SELECT session_order, session_id FROM session_search_doc WHERE tsv @@ {query} AND {kind}{beyond}"
            f" LIMIT {_FEW + 1}").fetchall()
        if len(rows) <= _FEW:
            found = sorted({(int(row[0]), row[1]) for row in rows}, reverse=not ascending)
            return found[:size], found[min(size, len(found)) - 1][0] if found else bound, len(found) <= size
        # a frequent one: the documents in list order, each tested (ts_match_vq is @@ the GIN index cannot serve),
        # until the batch is full
        sort = "ASC" if ascending else "DESC"
        rows = self.conn.execute(
            f"SELECT session_order, session_id FROM session_search_doc WHERE ts_match_vq(tsv, {query}) AND {kind}"
            f"{beyond} GROUP BY session_order, session_id ORDER BY session_order {sort}, session_id {sort}"
            f" LIMIT {int(size)}").fetchall()
        found = [(int(row[0]), row[1]) for row in rows]
        return found, found[-1][0] if found else bound, len(found) < size

    def titled(self, words: list[str], candidates: list[tuple[int, str]]) -> set[str]:
        marks = ", ".join("?" * len(candidates))
        rows = self.conn.execute(
            f"SELECT session_id FROM session_search_doc WHERE message_id IS NULL AND session_id IN ({marks})"
            f" AND tsv @@ {_tsquery(words)}", [sid for _, sid in candidates]).fetchall()
        return {row[0] for row in rows}


# The most documents a search reads from the GIN index; a word in more is read in list order instead.
_FEW = 2000


def _tsquery(words: list[str]) -> str:
    """The tsquery of every word (the last a prefix) as an SQL expression. The words are letters and digits only, so
    none is a tsquery operator; the literal spells each character as a Unicode escape, so no word is SQL to the
    dialect's rewriting (a search for "rowid") and nothing ends the literal."""
    text = " & ".join(words) + (":*" if prefixed(words) else "")
    escaped = "".join(f"\\{ord(c):04x}" if ord(c) < 0x10000 else f"\\+{ord(c):06x}" for c in text)
    return f"to_tsquery('simple', U&'{escaped}')"


class PgRows(SqlRows):
    def __init__(self, conn: psycopg.Connection[Any]) -> None:
        adapted = PgConnection(conn)
        super().__init__(adapted)
        self.events: PgEvents = PgEvents(adapted)
        self.leases: PgLeases = PgLeases(adapted)
        self.sessions = SqlSessions(adapted, PgSearch(adapted))
        self.messages.search = self.sessions.search
        self.pg = conn

    def replace_projections(self, replay: Callable[[], None]) -> None:
        # Clearing the sessions cascades into their state: the state is read first and written back as it was.
        conn = self.pg
        conn.execute("SET LOCAL statement_timeout = 0")  # a whole database rebuilt, asked for: it may take long
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
