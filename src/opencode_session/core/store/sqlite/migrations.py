"""Versioned schema migrations for the SQLite store, applied in order at open."""

from __future__ import annotations

import re
import sqlite3

# The FTS5 indexes of session search (messages' text, titles) and their shadow tables: derived from
# session_search_doc by its triggers.
SEARCH_INDEX_TABLES = tuple(f"{index}{shadow}" for index in ("session_search", "session_title_search")
                            for shadow in ("", "_config", "_data", "_docsize", "_idx"))

MIGRATIONS: list[str] = [
    # 1: the event log and the session read model
    """
    CREATE TABLE event_sequence (
        aggregate_id TEXT PRIMARY KEY,
        seq INTEGER NOT NULL
    );
    CREATE TABLE event (
        id TEXT PRIMARY KEY,
        aggregate_id TEXT NOT NULL,
        seq INTEGER NOT NULL,
        type TEXT NOT NULL,
        created INTEGER NOT NULL,
        location TEXT,
        data TEXT NOT NULL,
        UNIQUE (aggregate_id, seq)
    );
    CREATE TABLE session (
        id TEXT PRIMARY KEY,
        project_id TEXT NOT NULL,
        workspace_id TEXT,
        parent_id TEXT,
        directory TEXT NOT NULL,
        title TEXT NOT NULL,
        time_created INTEGER NOT NULL,
        time_updated INTEGER NOT NULL,
        created_order INTEGER NOT NULL,
        data TEXT NOT NULL
    );
    CREATE INDEX session_created_idx ON session (time_created, created_order);
    CREATE INDEX session_directory_idx ON session (directory);
    CREATE TABLE session_message (
        id TEXT PRIMARY KEY,
        session_id TEXT NOT NULL REFERENCES session (id) ON DELETE CASCADE,
        type TEXT NOT NULL,
        seq INTEGER NOT NULL,
        time_created INTEGER NOT NULL,
        time_updated INTEGER NOT NULL,
        data TEXT NOT NULL,
        UNIQUE (session_id, seq)
    );
    CREATE INDEX session_message_type_idx ON session_message (session_id, type, seq);
    CREATE TABLE session_pending (
        id TEXT PRIMARY KEY,
        session_id TEXT NOT NULL REFERENCES session (id) ON DELETE CASCADE,
        type TEXT NOT NULL,
        data TEXT NOT NULL,
        delivery TEXT,
        admitted_seq INTEGER NOT NULL,
        time_created INTEGER NOT NULL,
        UNIQUE (session_id, admitted_seq)
    );
    CREATE INDEX session_pending_order_idx ON session_pending (session_id, delivery, admitted_seq);
    """,
    # 2: private restart-continuation marker (not a projection: replay never infers suspension)
    """
    ALTER TABLE session ADD COLUMN time_suspended INTEGER;
    CREATE INDEX session_time_suspended_idx ON session (time_suspended) WHERE time_suspended IS NOT NULL;
    """,
    # 3: the instruction checkpoint and API-managed instruction entries
    """
    CREATE TABLE instruction_checkpoint (
        session_id TEXT PRIMARY KEY REFERENCES session (id) ON DELETE CASCADE,
        baseline TEXT NOT NULL,
        snapshot TEXT NOT NULL,
        baseline_seq INTEGER NOT NULL
    );
    CREATE TABLE instruction_entry (
        session_id TEXT NOT NULL REFERENCES session (id) ON DELETE CASCADE,
        key TEXT NOT NULL,
        value TEXT NOT NULL,
        time_created INTEGER NOT NULL,
        time_updated INTEGER NOT NULL,
        PRIMARY KEY (session_id, key)
    );
    """,
    # 4: message revisions (incremental history reads) and partial indexes for open/retrying assistants
    """
    ALTER TABLE session_message ADD COLUMN rev INTEGER NOT NULL DEFAULT 0;
    CREATE INDEX session_message_history_idx ON session_message (session_id, seq, type, id, rev);
    CREATE INDEX session_message_updated_idx ON session_message (session_id, time_updated);
    CREATE INDEX session_message_open_assistant_idx ON session_message (session_id)
        WHERE type = 'assistant' AND json_extract(data, '$.time.completed') IS NULL;
    CREATE INDEX session_message_retry_idx ON session_message (session_id)
        WHERE type = 'assistant' AND json_extract(data, '$.retry') IS NOT NULL;
    """,
    # 5: permissions the user allowed "always", per project
    """
    CREATE TABLE permission_saved (
        id TEXT PRIMARY KEY,
        project_id TEXT NOT NULL,
        action TEXT NOT NULL,
        resource TEXT NOT NULL,
        time_created INTEGER NOT NULL,
        UNIQUE (project_id, action, resource)
    );
    """,
    # 6: how many messages each session has had removed, so the history cache notices a removal without counting
    # the session's messages at every Step
    """
    CREATE TABLE session_message_removal (
        session_id TEXT PRIMARY KEY,
        removed INTEGER NOT NULL
    );
    CREATE TRIGGER session_message_removal_count AFTER DELETE ON session_message
        BEGIN INSERT INTO session_message_removal (session_id, removed) VALUES (OLD.session_id, 1)
            ON CONFLICT (session_id) DO UPDATE SET removed = removed + 1; END;
    """,
    # 7: continuation after a hard crash: the private claim of a running execution and when the session was last
    # continued automatically (a JSON list of times), both beside the projections
    """
    ALTER TABLE session ADD COLUMN time_claimed INTEGER;
    ALTER TABLE session ADD COLUMN continued TEXT;
    CREATE INDEX session_time_claimed_idx ON session (time_claimed) WHERE time_claimed IS NOT NULL;
    """,
    # 8: session leases (owner, epoch, expiry): which host executes a session, and the fencing token of its writes
    """
    CREATE TABLE session_lease (
        session_id TEXT PRIMARY KEY,
        owner TEXT,
        epoch INTEGER NOT NULL,
        expires INTEGER NOT NULL
    );
    CREATE INDEX session_lease_expires_idx ON session_lease (expires) WHERE owner IS NOT NULL;
    """,
    # 9: the caller's W3C traceparent an input was admitted with (tracing: its execution joins that trace)
    """
    ALTER TABLE session_pending ADD COLUMN trace TEXT;
    """,
    # 10: session search: a document per session title and per message's text (session_search_doc, written with the
    # projections), indexed by two FTS5 tables, session_title_search of the titles and session_search of the text
    # (external content, kept in step by triggers); a document's id is its session's created_order << 24, plus the
    # message's seq + 1 for a message's, so an index lists a session's documents together in list order; existing
    # titles and messages are back-filled (an assistant's text once it completed, as the store writes it)
    """
    CREATE TABLE session_search_doc (
        id INTEGER PRIMARY KEY,
        session_id TEXT NOT NULL REFERENCES session (id) ON DELETE CASCADE,
        message_id TEXT UNIQUE REFERENCES session_message (id) ON DELETE CASCADE,
        title TEXT NOT NULL DEFAULT '',
        body TEXT NOT NULL DEFAULT ''
    );
    CREATE INDEX session_search_doc_session_idx ON session_search_doc (session_id);
    CREATE VIRTUAL TABLE session_title_search USING fts5 (title, content = 'session_search_doc', content_rowid = 'id',
        tokenize = 'unicode61 remove_diacritics 2');
    CREATE VIRTUAL TABLE session_search USING fts5 (body, content = 'session_search_doc', content_rowid = 'id',
        tokenize = 'unicode61 remove_diacritics 2');
    CREATE TRIGGER session_search_doc_insert AFTER INSERT ON session_search_doc BEGIN
        INSERT INTO session_title_search (rowid, title) SELECT NEW.id, NEW.title WHERE NEW.message_id IS NULL; INSERT
        INTO session_search (rowid, body) SELECT NEW.id, NEW.body WHERE NEW.message_id IS NOT NULL; END;
    CREATE TRIGGER session_search_doc_delete AFTER DELETE ON session_search_doc BEGIN
        INSERT INTO session_title_search (session_title_search, rowid, title)
            SELECT 'delete', OLD.id, OLD.title WHERE OLD.message_id IS NULL; INSERT INTO session_search
            (session_search, rowid, body) SELECT 'delete', OLD.id, OLD.body WHERE OLD.message_id IS NOT NULL; END;
    CREATE TRIGGER session_search_doc_update AFTER UPDATE ON session_search_doc BEGIN
        INSERT INTO session_title_search (session_title_search, rowid, title)
            SELECT 'delete', OLD.id, OLD.title WHERE OLD.message_id IS NULL; INSERT INTO session_search
            (session_search, rowid, body) SELECT 'delete', OLD.id, OLD.body WHERE OLD.message_id IS NOT NULL; INSERT
        INTO session_title_search (rowid, title) SELECT NEW.id, NEW.title WHERE NEW.message_id IS NULL; INSERT
        INTO session_search (rowid, body) SELECT NEW.id, NEW.body WHERE NEW.message_id IS NOT NULL; END;
    INSERT INTO session_search_doc (id, session_id, title) SELECT created_order << 24, id, title FROM session;
    INSERT INTO session_search_doc (id, session_id, message_id, body)
        SELECT (s.created_order << 24) + m.seq + 1, m.session_id, m.id,
            substr(json_extract(m.data, '$.text'), 1, 100000)
        FROM session_message m JOIN session s ON s.id = m.session_id
        WHERE m.type = 'user' AND coalesce(json_extract(m.data, '$.text'), '') <> '';
    INSERT INTO session_search_doc (id, session_id, message_id, body)
        SELECT id, session_id, message_id, body FROM (
            SELECT (s.created_order << 24) + m.seq + 1 AS id, m.session_id, m.id AS message_id,
                substr((SELECT group_concat(json_extract(c.value, '$.text'), char(10))
                FROM json_each(m.data, '$.content') c WHERE json_extract(c.value, '$.type') = 'text'), 1, 100000)
                AS body
            FROM session_message m JOIN session s ON s.id = m.session_id
            WHERE m.type = 'assistant' AND json_extract(m.data, '$.time.completed') IS NOT NULL)
        WHERE coalesce(body, '') <> '';
    """,
]


def migrate(conn: sqlite3.Connection) -> int:
    """Apply every migration newer than the database's user_version; returns the resulting version."""
    version = conn.execute("PRAGMA user_version").fetchone()[0]
    if version > len(MIGRATIONS):
        raise RuntimeError(f"database schema version {version} is newer than this program ({len(MIGRATIONS)})")
    for index in range(version, len(MIGRATIONS)):
        conn.execute("BEGIN IMMEDIATE")
        try:
            for statement in _statements(MIGRATIONS[index]):
                conn.execute(statement)
            conn.execute(f"PRAGMA user_version = {index + 1}")
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
    return len(MIGRATIONS)


def _statements(script: str) -> list[str]:
    """The script's statements: each ends with a semicolon that ends its line (a trigger body's own do not)."""
    return [s.strip() for s in re.split(r";[ \t]*\n", script) if s.strip()]
