"""Session search in SQL: the documents a search matches (a session's title, each message's text) written beside
the projections, a user's search text made into terms no query syntax can reach, and pages of the ranked sessions a
search finds (SQLite FTS5 here; PostgreSQL's full-text search in `postgres/rows.py`)."""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from ..keyset import Key, KeysetPage, PageRequest
from .connection import Connection, Row

T = TypeVar("T")

# The most text of one message a search indexes, and the most terms of a search it matches on.
BODY_LIMIT = 100_000
TERM_LIMIT = 16
# A term of the search text: a run of letters and digits (what SQLite's unicode61 and PostgreSQL's parser keep).
_TERM = re.compile(r"[^\W_]+")
# The last term matches as a prefix (the user may still be typing it) when it is at least this long.
_PREFIX_FROM = 3
# A session's rank: a match in its title ranks above one in its messages' text (sessions ranked alike: newest first).
TITLE, BODY = 2, 1
# A document's FTS5 rowid on SQLite: its session's created_order shifted by this, plus 0 for the title and the
# message's seq + 1 for a message; so a session's documents are adjacent and the index lists them in list order.
SHIFT = 24
# Candidate documents read per query while filling a page: from a few pages' worth, doubling up to the most.
_BATCH_FROM, _BATCH_MOST = 64, 4096


def terms(search: str) -> list[str]:
    """The words of a user's search text, lower-cased and normalized; operators and punctuation are not words."""
    return _TERM.findall(unicodedata.normalize("NFKC", search).casefold())[:TERM_LIMIT]


def prefixed(words: list[str]) -> bool:
    return bool(words) and len(words[-1]) >= _PREFIX_FROM


def fts5_query(words: list[str]) -> str:
    """An FTS5 query matching every word (each a quoted string, so no word is an operator), the last as a prefix."""
    quoted = [f'"{word}"' for word in words]
    if prefixed(words):
        quoted[-1] += "*"
    return " ".join(quoted)


def message_text(message: dict[str, Any]) -> str:
    """What a search matches of a message: a user's prompt, or a completed assistant's text (not its reasoning or
    tools); nothing of other messages or of an assistant still writing."""
    kind = message.get("type")
    if kind == "user":
        text = message.get("text") or ""
    elif kind == "assistant" and "completed" in message.get("time", {}):
        text = "\n".join(part.get("text") or "" for part in message.get("content", ()) if part.get("type") == "text")
    else:
        text = ""
    return text[:BODY_LIMIT]


class SqlSearch:
    """The documents of session search, and pages of the sessions matching a search: each tier (title, then text)
    read from the index in list order (newest first) a batch of documents at a time, so a frequent word costs a page
    of its matches rather than all of them. This class is SQLite's (an FTS5 index of the titles and one of the text,
    rowids in list order); PostgreSQL's overrides the documents' keys and the candidates' queries."""

    def __init__(self, conn: Connection) -> None:
        self.conn = conn

    # --- the documents ----------------------------------------------------------------------------------------

    def add_title(self, session_id: str, title: str) -> None:
        self.conn.execute(f"INSERT INTO session_search_doc (id, session_id, title) SELECT created_order << {SHIFT},"
                          " id, ? FROM session WHERE id = ?", (title, session_id))

    def retitle(self, session_id: str, title: str) -> None:
        self.conn.execute("UPDATE session_search_doc SET title = ? WHERE session_id = ? AND message_id IS NULL"
                          " AND title <> ?", (title, session_id, title))

    def index_message(self, session_id: str, seq: int, message: dict[str, Any]) -> None:
        """Index the message's text (or drop it when it has none); an unchanged text is left as it is."""
        text = message_text(message)
        if not text:
            self.conn.execute("DELETE FROM session_search_doc WHERE message_id = ?", (message["id"],))
            return
        self.conn.execute(
            f"INSERT INTO session_search_doc (id, session_id, message_id, body) SELECT (created_order << {SHIFT})"
            " + ?, id, ?, ? FROM session WHERE id = ?"
            " ON CONFLICT (message_id) DO UPDATE SET body = excluded.body"
            " WHERE session_search_doc.body <> excluded.body",
            (seq + 1, message["id"], text, session_id))

    # --- pages of matching sessions ---------------------------------------------------------------------------

    def page(self, words: list[str], where: Sequence[str], params: Sequence[Any], request: PageRequest,
             decode: Callable[[Row], T]) -> KeysetPage[T]:
        """The sessions (rows of `session` matching every clause of `where`) matching every word, keyed by
        (rank, created_order): the title tier above the text tier, each newest first in "desc" order."""
        toward_next = request.direction == "next"
        ascending = (request.order == "asc") == toward_next
        anchor = request.anchor
        found: list[tuple[int, Row]] = []
        for tier in ((BODY, TITLE) if ascending else (TITLE, BODY)):
            if anchor is not None and (tier < anchor[0] if ascending else tier > anchor[0]):
                continue  # the whole tier lies before the anchor
            bound = anchor[1] if anchor is not None and tier == anchor[0] else None
            found += [(tier, row) for row in self._tier(tier, words, bound, ascending, request.limit - len(found),
                                                        where, params)]
            if len(found) >= request.limit:
                break
        if not toward_next:
            found.reverse()
        if not found:
            return KeysetPage([])
        return KeysetPage([decode(row) for _, row in found], _key(*found[0]), _key(*found[-1]))

    def _tier(self, tier: int, words: list[str], bound: int | None, ascending: bool, wanted: int,
              where: Sequence[str], params: Sequence[Any]) -> list[Row]:
        """Up to `wanted` sessions of the tier beyond `bound` (a created_order) in traversal order."""
        found: list[Row] = []
        size = _BATCH_FROM
        while len(found) < wanted:
            candidates, bound, exhausted = self.candidates(tier, words, bound, ascending, size)
            if tier == BODY and candidates:  # a session whose title matches is in the title tier only
                titled = self.titled(words, candidates)
                candidates = [c for c in candidates if c[1] not in titled]
            found += self._sessions(candidates, where, params)
            if exhausted:
                break
            size = min(size * 2, _BATCH_MOST)
        return found[:wanted]

    def _sessions(self, candidates: list[tuple[int, str]], where: Sequence[str], params: Sequence[Any]) -> list[Row]:
        """The candidates' session rows that match every clause, in the candidates' order."""
        if not candidates:
            return []
        ids = [sid for _, sid in candidates]
        marks = ", ".join("?" * len(ids))
        rows = self.conn.execute(f"SELECT * FROM session WHERE id IN ({marks})"
                                 + "".join(f" AND {clause}" for clause in where), (*ids, *params)).fetchall()
        by_id = {row["id"]: row for row in rows}
        return [by_id[sid] for sid in ids if sid in by_id]

    def candidates(self, tier: int, words: list[str], bound: int | None, ascending: bool,
                   size: int) -> tuple[list[tuple[int, str]], int | None, bool]:
        """The distinct sessions (created_order, id) of the next `size` documents of the tier matching the words,
        beyond `bound` (a created_order) in traversal order; the bound to go on from (past every document of the
        last session found); and whether the index has no more."""
        index = "session_title_search" if tier == TITLE else "session_search"
        clauses = [f"{index} MATCH ?"]
        params: list[Any] = [fts5_query(words)]
        if bound is not None:
            clauses.append("rowid >= ?" if ascending else "rowid < ?")
            params.append(_rowid(bound + 1) if ascending else _rowid(bound))
        rows = self.conn.execute(
            f"SELECT rowid FROM {index} WHERE {' AND '.join(clauses)}"
            f" ORDER BY rowid {'ASC' if ascending else 'DESC'} LIMIT ?", (*params, size)).fetchall()
        orders = list(dict.fromkeys(row[0] >> SHIFT for row in rows))
        if not orders:
            return [], bound, True
        marks = ", ".join("?" * len(orders))
        ids = dict(self.conn.execute(
            f"SELECT id >> {SHIFT}, session_id FROM session_search_doc WHERE id IN ({marks})",
            [order << SHIFT for order in orders]).fetchall())
        return [(order, ids[order]) for order in orders if order in ids], orders[-1], len(rows) < size

    def titled(self, words: list[str], candidates: list[tuple[int, str]]) -> set[str]:
        """The candidates (by session id) whose title matches every word: one range of the titles' index (between
        the candidates' first and last), rather than a lookup per candidate."""
        orders = [order for order, _ in candidates]
        rows = self.conn.execute(
            "SELECT rowid FROM session_title_search WHERE session_title_search MATCH ? AND rowid >= ? AND rowid <= ?",
            (fts5_query(words), min(orders) << SHIFT, max(orders) << SHIFT)).fetchall()
        ids = dict(candidates)
        return {ids[row[0] >> SHIFT] for row in rows if row[0] >> SHIFT in ids}


def _key(rank: int, row: Row) -> Key:
    return rank, int(row["created_order"])


def _rowid(order: int) -> int:
    """The first rowid of a session's documents, kept within SQLite's integers (a cursor's key may be any int64)."""
    return max(min(order << SHIFT, 2**63 - 1), -(2**63))
