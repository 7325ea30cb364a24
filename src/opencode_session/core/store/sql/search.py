"""Session search in SQL: the documents a search matches (a session's title, each message's text) written beside
the projections, a user's search text made into terms no query syntax can reach, and the ranked sessions a search
finds (SQLite FTS5 with BM25 here; PostgreSQL's full-text search in `postgres/rows.py`)."""

from __future__ import annotations

import re
import unicodedata
from typing import Any

from .connection import Connection

# The most text of one message a search indexes, and the most terms of a search it matches on.
BODY_LIMIT = 100_000
TERM_LIMIT = 16
# A term of the search text: a run of letters and digits (what SQLite's unicode61 and PostgreSQL's parser keep).
_TERM = re.compile(r"[^\W_]+")
# The last term matches as a prefix (the user may still be typing it) when it is at least this long.
_PREFIX_FROM = 3
# A rank in the keyset is an integer: the score scaled by this.
RANK_SCALE = 1_000_000_000


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
    """The documents of session search, and (on SQLite) the ranked sessions matching a search."""

    def __init__(self, conn: Connection) -> None:
        self.conn = conn

    def add_title(self, session_id: str, title: str) -> None:
        self.conn.execute("INSERT INTO session_search_doc (session_id, title) VALUES (?, ?)", (session_id, title))

    def retitle(self, session_id: str, title: str) -> None:
        self.conn.execute("UPDATE session_search_doc SET title = ? WHERE session_id = ? AND message_id IS NULL"
                          " AND title <> ?", (title, session_id, title))

    def index_message(self, session_id: str, message: dict[str, Any]) -> None:
        """Index the message's text (or drop it when it has none); an unchanged text is left as it is."""
        text = message_text(message)
        if not text:
            self.conn.execute("DELETE FROM session_search_doc WHERE message_id = ?", (message["id"],))
            return
        self.conn.execute(
            "INSERT INTO session_search_doc (session_id, message_id, body) VALUES (?, ?, ?)"
            " ON CONFLICT (message_id) DO UPDATE SET body = excluded.body"
            " WHERE session_search_doc.body <> excluded.body",
            (session_id, message["id"], text))

    def ranked(self, words: list[str]) -> tuple[str, tuple[Any, ...]]:
        """A subquery of the session rows matching every word, each with its `rank` (higher is better: the best
        BM25 score of its title, weighted tenfold, and its messages), and its parameters."""
        return (
            # bm25 only answers in the query that matches: the matches are materialized before they are grouped
            "(WITH m AS MATERIALIZED (SELECT rowid AS doc, bm25(session_search, 10.0, 1.0) AS score"
            " FROM session_search WHERE session_search MATCH ?)"
            " SELECT s.*, r.rank AS rank FROM session s JOIN ("
            f"SELECT d.session_id AS sid, CAST(-min(m.score) * {RANK_SCALE} AS INTEGER) AS rank"
            " FROM m JOIN session_search_doc d ON d.id = m.doc GROUP BY d.session_id) r ON r.sid = s.id) AS ranked",
            (fts5_query(words),),
        )
