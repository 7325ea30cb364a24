"""Versioned schema migrations for the SQLite store, applied in order at open."""

from __future__ import annotations

import re
import sqlite3

from ..sql.contexts import STEP_CONTEXT_TABLE
from ..sql.usage import PROMPTS_ANSWERED, UNANSWERED_INDEX

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
    # 11: the usage projection statistics count: a row per prompt and per Step (session_usage: session, project,
    # time, agent, model, tokens, cost, failed) and per settled tool call (session_usage_tool: its place among the
    # message's parts, tool, failed), each removed with its message; kept by triggers from them, per quarter hour:
    # which sessions were active (session_usage_active) and had Steps per agent and model (session_usage_period),
    # the sums per project, type, agent and model (session_usage_sums) and per project and tool
    # (session_usage_tool_period); a session's move takes its rows to the new project. Existing messages are
    # back-filled.
    """
    CREATE TABLE session_usage (
        message_id TEXT PRIMARY KEY REFERENCES session_message (id) ON DELETE CASCADE,
        session_id TEXT NOT NULL,
        project_id TEXT NOT NULL,
        type TEXT NOT NULL,
        time_created INTEGER NOT NULL,
        agent TEXT,
        provider TEXT,
        model TEXT,
        failed INTEGER NOT NULL,
        input INTEGER NOT NULL,
        output INTEGER NOT NULL,
        reasoning INTEGER NOT NULL,
        cache_read INTEGER NOT NULL,
        cache_write INTEGER NOT NULL,
        cost REAL NOT NULL
    );
    CREATE INDEX session_usage_time_idx ON session_usage (time_created);
    CREATE INDEX session_usage_session_idx ON session_usage (session_id);
    CREATE TABLE session_usage_tool (
        message_id TEXT NOT NULL REFERENCES session_message (id) ON DELETE CASCADE,
        position INTEGER NOT NULL,
        session_id TEXT NOT NULL,
        project_id TEXT NOT NULL,
        time_created INTEGER NOT NULL,
        tool TEXT,
        failed INTEGER NOT NULL,
        PRIMARY KEY (message_id, position)
    );
    CREATE INDEX session_usage_tool_time_idx ON session_usage_tool (time_created);
    CREATE INDEX session_usage_tool_session_idx ON session_usage_tool (session_id);
    CREATE TABLE session_usage_active (
        session_id TEXT NOT NULL,
        time_created INTEGER NOT NULL,
        n INTEGER NOT NULL,
        PRIMARY KEY (session_id, time_created)
    );
    CREATE INDEX session_usage_active_time_idx ON session_usage_active (time_created);
    CREATE TABLE session_usage_period (
        session_id TEXT NOT NULL,
        time_created INTEGER NOT NULL,
        agent TEXT NOT NULL,
        provider TEXT NOT NULL,
        model TEXT NOT NULL,
        n INTEGER NOT NULL,
        PRIMARY KEY (session_id, time_created, agent, provider, model)
    );
    CREATE INDEX session_usage_period_time_idx ON session_usage_period (time_created);
    CREATE TABLE session_usage_sums (
        time_created INTEGER NOT NULL,
        project_id TEXT NOT NULL,
        type TEXT NOT NULL,
        agent TEXT NOT NULL,
        provider TEXT NOT NULL,
        model TEXT NOT NULL,
        n INTEGER NOT NULL,
        failed INTEGER NOT NULL,
        input INTEGER NOT NULL,
        output INTEGER NOT NULL,
        reasoning INTEGER NOT NULL,
        cache_read INTEGER NOT NULL,
        cache_write INTEGER NOT NULL,
        cost REAL NOT NULL,
        PRIMARY KEY (time_created, project_id, type, agent, provider, model)
    );
    CREATE TABLE session_usage_tool_period (
        time_created INTEGER NOT NULL,
        project_id TEXT NOT NULL,
        tool TEXT NOT NULL,
        calls INTEGER NOT NULL,
        failed INTEGER NOT NULL,
        PRIMARY KEY (time_created, project_id, tool)
    );
    CREATE TRIGGER session_usage_insert AFTER INSERT ON session_usage BEGIN
        INSERT INTO session_usage_active (session_id, time_created, n) VALUES (NEW.session_id, NEW.time_created -
            NEW.time_created % 900000, 1) ON CONFLICT (session_id, time_created) DO UPDATE SET n =
            session_usage_active.n + 1; INSERT INTO session_usage_period (session_id, time_created, agent, provider,
            model, n) SELECT NEW.session_id, NEW.time_created - NEW.time_created % 900000, coalesce(NEW.agent, ''),
            coalesce(NEW.provider, ''), coalesce(NEW.model, ''), 1 WHERE NEW.type = 'assistant' ON CONFLICT
            (session_id, time_created, agent, provider, model) DO UPDATE SET n = session_usage_period.n + 1; INSERT
            INTO session_usage_sums (time_created, project_id, type, agent, provider, model, n, failed, input, output,
            reasoning, cache_read, cache_write, cost) VALUES (NEW.time_created - NEW.time_created % 900000,
            NEW.project_id, NEW.type, coalesce(NEW.agent, ''), coalesce(NEW.provider, ''), coalesce(NEW.model, ''), 1,
            NEW.failed, NEW.input, NEW.output, NEW.reasoning, NEW.cache_read, NEW.cache_write, NEW.cost) ON CONFLICT
            (time_created, project_id, type, agent, provider, model) DO UPDATE SET n = session_usage_sums.n + 1,
            failed = session_usage_sums.failed + excluded.failed, input = session_usage_sums.input + excluded.input,
            output = session_usage_sums.output + excluded.output, reasoning = session_usage_sums.reasoning +
            excluded.reasoning, cache_read = session_usage_sums.cache_read + excluded.cache_read, cache_write =
            session_usage_sums.cache_write + excluded.cache_write, cost = session_usage_sums.cost +
            excluded.cost; END;
    CREATE TRIGGER session_usage_delete AFTER DELETE ON session_usage BEGIN
        UPDATE session_usage_active SET n = n - 1 WHERE session_id = OLD.session_id AND time_created =
            OLD.time_created - OLD.time_created % 900000; DELETE FROM session_usage_active WHERE session_id =
            OLD.session_id AND time_created = OLD.time_created - OLD.time_created % 900000 AND n = 0; UPDATE
            session_usage_period SET n = n - 1 WHERE OLD.type = 'assistant' AND session_id = OLD.session_id AND
            time_created = OLD.time_created - OLD.time_created % 900000 AND agent = coalesce(OLD.agent, '') AND
            provider = coalesce(OLD.provider, '') AND model = coalesce(OLD.model, ''); DELETE FROM
            session_usage_period WHERE OLD.type = 'assistant' AND session_id = OLD.session_id AND time_created =
            OLD.time_created - OLD.time_created % 900000 AND agent = coalesce(OLD.agent, '') AND provider =
            coalesce(OLD.provider, '') AND model = coalesce(OLD.model, '') AND n = 0; UPDATE session_usage_sums SET n
            = n - 1, failed = failed - OLD.failed, input = input - OLD.input, output = output - OLD.output, reasoning
            = reasoning - OLD.reasoning, cache_read = cache_read - OLD.cache_read, cache_write = cache_write -
            OLD.cache_write, cost = cost - OLD.cost WHERE time_created = OLD.time_created - OLD.time_created % 900000
            AND project_id = OLD.project_id AND type = OLD.type AND agent = coalesce(OLD.agent, '') AND provider =
            coalesce(OLD.provider, '') AND model = coalesce(OLD.model, ''); DELETE FROM session_usage_sums WHERE
            time_created = OLD.time_created - OLD.time_created % 900000 AND project_id = OLD.project_id AND type =
            OLD.type AND agent = coalesce(OLD.agent, '') AND provider = coalesce(OLD.provider, '') AND model =
            coalesce(OLD.model, '') AND n = 0; END;
    CREATE TRIGGER session_usage_update AFTER UPDATE ON session_usage BEGIN
        UPDATE session_usage_active SET n = n - 1 WHERE session_id = OLD.session_id AND time_created =
            OLD.time_created - OLD.time_created % 900000; DELETE FROM session_usage_active WHERE session_id =
            OLD.session_id AND time_created = OLD.time_created - OLD.time_created % 900000 AND n = 0; UPDATE
            session_usage_period SET n = n - 1 WHERE OLD.type = 'assistant' AND session_id = OLD.session_id AND
            time_created = OLD.time_created - OLD.time_created % 900000 AND agent = coalesce(OLD.agent, '') AND
            provider = coalesce(OLD.provider, '') AND model = coalesce(OLD.model, ''); DELETE FROM
            session_usage_period WHERE OLD.type = 'assistant' AND session_id = OLD.session_id AND time_created =
            OLD.time_created - OLD.time_created % 900000 AND agent = coalesce(OLD.agent, '') AND provider =
            coalesce(OLD.provider, '') AND model = coalesce(OLD.model, '') AND n = 0; UPDATE session_usage_sums SET n
            = n - 1, failed = failed - OLD.failed, input = input - OLD.input, output = output - OLD.output, reasoning
            = reasoning - OLD.reasoning, cache_read = cache_read - OLD.cache_read, cache_write = cache_write -
            OLD.cache_write, cost = cost - OLD.cost WHERE time_created = OLD.time_created - OLD.time_created % 900000
            AND project_id = OLD.project_id AND type = OLD.type AND agent = coalesce(OLD.agent, '') AND provider =
            coalesce(OLD.provider, '') AND model = coalesce(OLD.model, ''); DELETE FROM session_usage_sums WHERE
            time_created = OLD.time_created - OLD.time_created % 900000 AND project_id = OLD.project_id AND type =
            OLD.type AND agent = coalesce(OLD.agent, '') AND provider = coalesce(OLD.provider, '') AND model =
            coalesce(OLD.model, '') AND n = 0; INSERT INTO session_usage_active (session_id, time_created, n) VALUES
            (NEW.session_id, NEW.time_created - NEW.time_created % 900000, 1) ON CONFLICT (session_id, time_created)
            DO UPDATE SET n = session_usage_active.n + 1; INSERT INTO session_usage_period (session_id, time_created,
            agent, provider, model, n) SELECT NEW.session_id, NEW.time_created - NEW.time_created % 900000,
            coalesce(NEW.agent, ''), coalesce(NEW.provider, ''), coalesce(NEW.model, ''), 1 WHERE NEW.type =
            'assistant' ON CONFLICT (session_id, time_created, agent, provider, model) DO UPDATE SET n =
            session_usage_period.n + 1; INSERT INTO session_usage_sums (time_created, project_id, type, agent,
            provider, model, n, failed, input, output, reasoning, cache_read, cache_write, cost) VALUES
            (NEW.time_created - NEW.time_created % 900000, NEW.project_id, NEW.type, coalesce(NEW.agent, ''),
            coalesce(NEW.provider, ''), coalesce(NEW.model, ''), 1, NEW.failed, NEW.input, NEW.output, NEW.reasoning,
            NEW.cache_read, NEW.cache_write, NEW.cost) ON CONFLICT (time_created, project_id, type, agent, provider,
            model) DO UPDATE SET n = session_usage_sums.n + 1, failed = session_usage_sums.failed + excluded.failed,
            input = session_usage_sums.input + excluded.input, output = session_usage_sums.output + excluded.output,
            reasoning = session_usage_sums.reasoning + excluded.reasoning, cache_read = session_usage_sums.cache_read
            + excluded.cache_read, cache_write = session_usage_sums.cache_write + excluded.cache_write, cost =
            session_usage_sums.cost + excluded.cost; END;
    CREATE TRIGGER session_usage_tool_insert AFTER INSERT ON session_usage_tool BEGIN
        INSERT INTO session_usage_tool_period (time_created, project_id, tool, calls, failed) VALUES (NEW.time_created
            - NEW.time_created % 900000, NEW.project_id, coalesce(NEW.tool, ''), 1, NEW.failed) ON CONFLICT
            (time_created, project_id, tool) DO UPDATE SET calls = session_usage_tool_period.calls + 1, failed =
            session_usage_tool_period.failed + excluded.failed; END;
    CREATE TRIGGER session_usage_tool_delete AFTER DELETE ON session_usage_tool BEGIN
        UPDATE session_usage_tool_period SET calls = calls - 1, failed = failed - OLD.failed WHERE time_created =
            OLD.time_created - OLD.time_created % 900000 AND project_id = OLD.project_id AND tool = coalesce(OLD.tool,
            ''); DELETE FROM session_usage_tool_period WHERE time_created = OLD.time_created - OLD.time_created %
            900000 AND project_id = OLD.project_id AND tool = coalesce(OLD.tool, '') AND calls = 0; END;
    CREATE TRIGGER session_usage_tool_update AFTER UPDATE ON session_usage_tool BEGIN
        UPDATE session_usage_tool_period SET calls = calls - 1, failed = failed - OLD.failed WHERE time_created =
            OLD.time_created - OLD.time_created % 900000 AND project_id = OLD.project_id AND tool = coalesce(OLD.tool,
            ''); DELETE FROM session_usage_tool_period WHERE time_created = OLD.time_created - OLD.time_created %
            900000 AND project_id = OLD.project_id AND tool = coalesce(OLD.tool, '') AND calls = 0; INSERT INTO
            session_usage_tool_period (time_created, project_id, tool, calls, failed) VALUES (NEW.time_created -
            NEW.time_created % 900000, NEW.project_id, coalesce(NEW.tool, ''), 1, NEW.failed) ON CONFLICT
            (time_created, project_id, tool) DO UPDATE SET calls = session_usage_tool_period.calls + 1, failed =
            session_usage_tool_period.failed + excluded.failed; END;
    CREATE TRIGGER session_usage_moved AFTER UPDATE OF project_id ON session
        WHEN NEW.project_id IS NOT OLD.project_id BEGIN
        UPDATE session_usage SET project_id = NEW.project_id WHERE session_id = NEW.id; UPDATE session_usage_tool SET
            project_id = NEW.project_id WHERE session_id = NEW.id; END;
    INSERT INTO session_usage (message_id, session_id, project_id, type, time_created, agent, provider, model, failed,
            input, output, reasoning, cache_read, cache_write, cost)
        SELECT id, session_id, (SELECT project_id FROM session WHERE session.id = session_message.session_id), type,
            time_created, a.agent, a.provider, a.model,
            CASE WHEN type = 'assistant' AND json_extract(data, '$.error') IS NOT NULL THEN 1 ELSE 0 END,
            coalesce(a.input, 0), coalesce(a.output, 0), coalesce(a.reasoning, 0), coalesce(a.cache_read, 0),
            coalesce(a.cache_write, 0), coalesce(a.cost, 0.0)
        FROM session_message LEFT JOIN (
            SELECT id AS step, json_extract(data, '$.agent') AS agent,
                json_extract(data, '$.model.providerID') AS provider, json_extract(data, '$.model.id') AS model,
                CAST(json_extract(data, '$.tokens.input') AS INTEGER) AS input,
                CAST(json_extract(data, '$.tokens.output') AS INTEGER) AS output,
                CAST(json_extract(data, '$.tokens.reasoning') AS INTEGER) AS reasoning,
                CAST(json_extract(data, '$.tokens.cache.read') AS INTEGER) AS cache_read,
                CAST(json_extract(data, '$.tokens.cache.write') AS INTEGER) AS cache_write,
                CAST(json_extract(data, '$.cost') AS REAL) AS cost
            FROM session_message WHERE type = 'assistant') AS a ON a.step = id
        WHERE type IN ('user', 'assistant');
    INSERT INTO session_usage_tool (message_id, position, session_id, project_id, time_created, tool, failed)
        SELECT m.id, CAST(c.key AS INTEGER), m.session_id, s.project_id, m.time_created,
            json_extract(c.value, '$.name'),
            CASE WHEN json_extract(c.value, '$.state.status') = 'error' THEN 1 ELSE 0 END
        FROM session_message m JOIN session s ON s.id = m.session_id, json_each(m.data, '$.content') c
        WHERE m.type = 'assistant' AND json_extract(c.value, '$.type') = 'tool'
            AND json_extract(c.value, '$.state.status') IN ('completed', 'error');
    """,
    # 12: a prompt counts for the agent and model of the first Step that answered it (the store now writes them on
    # its usage row when that Step's row is first written): the prompts stored before are given theirs, and the
    # usage triggers move their sums
    PROMPTS_ANSWERED,
    # 13: what each Step sent (core/execution/context_record.py): kept beside the projections, not derived from
    # events; a record is the change from its base record, the chain of a session starting at its root
    STEP_CONTEXT_TABLE,
    # 14: the prompts no Step answered yet, indexed: every Step's first usage row looks them up
    UNANSWERED_INDEX,
]


def migrate(conn: sqlite3.Connection) -> int:
    """Apply every migration newer than the database's user_version, in order and in one transaction (one commit,
    so one fsync: a new database's fourteen took 40-60 ms of every first start); returns the resulting version."""
    version = conn.execute("PRAGMA user_version").fetchone()[0]
    if version > len(MIGRATIONS):
        raise RuntimeError(f"database schema version {version} is newer than this program ({len(MIGRATIONS)})")
    if version == len(MIGRATIONS):
        return version
    conn.execute("BEGIN IMMEDIATE")
    try:
        for index in range(version, len(MIGRATIONS)):
            for statement in _statements(MIGRATIONS[index]):
                conn.execute(statement)
        conn.execute(f"PRAGMA user_version = {len(MIGRATIONS)}")
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    return len(MIGRATIONS)


def _statements(script: str) -> list[str]:
    """The script's statements: each ends with a semicolon that ends its line (a trigger body's own do not)."""
    return [s.strip() for s in re.split(r";[ \t]*\n", script) if s.strip()]
