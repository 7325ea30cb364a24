"""Versioned schema migrations for the PostgreSQL store, applied in order at open under an advisory lock (hosts that
start together migrate once)."""

from __future__ import annotations

import psycopg

from ..sql.contexts import STEP_CONTEXT_TABLE
from ..sql.usage import PROMPTS_ANSWERED, UNANSWERED_INDEX

# The advisory lock every host takes while it migrates (an arbitrary constant of this program's).
_MIGRATION_LOCK = 7_301_1984

MIGRATIONS: list[str] = [
    # 1: the log (positions commit-ordered: a writer numbers its events under the event_feed lock just before it
    # commits), the projections and the state beside them
    """
    CREATE TABLE event_sequence (
        aggregate_id TEXT PRIMARY KEY,
        seq BIGINT NOT NULL
    );
    CREATE TABLE event (
        id TEXT PRIMARY KEY,
        position BIGINT UNIQUE,
        aggregate_id TEXT NOT NULL,
        seq BIGINT NOT NULL,
        type TEXT NOT NULL,
        created BIGINT NOT NULL,
        location TEXT,
        data TEXT NOT NULL,
        UNIQUE (aggregate_id, seq)
    );
    CREATE TABLE event_feed (
        id INTEGER PRIMARY KEY CHECK (id = 1),
        last BIGINT NOT NULL
    );
    INSERT INTO event_feed (id, last) VALUES (1, 0);
    CREATE TABLE session (
        id TEXT PRIMARY KEY,
        project_id TEXT NOT NULL,
        workspace_id TEXT,
        parent_id TEXT,
        directory TEXT NOT NULL,
        title TEXT NOT NULL,
        time_created BIGINT NOT NULL,
        time_updated BIGINT NOT NULL,
        created_order BIGINT NOT NULL,
        data TEXT NOT NULL,
        time_suspended BIGINT,
        time_claimed BIGINT,
        continued TEXT
    );
    CREATE INDEX session_created_idx ON session (time_created, created_order);
    CREATE INDEX session_directory_idx ON session (directory);
    CREATE INDEX session_time_suspended_idx ON session (time_suspended) WHERE time_suspended IS NOT NULL;
    CREATE INDEX session_time_claimed_idx ON session (time_claimed) WHERE time_claimed IS NOT NULL;
    CREATE TABLE session_message (
        id TEXT PRIMARY KEY,
        session_id TEXT NOT NULL REFERENCES session (id) ON DELETE CASCADE,
        type TEXT NOT NULL,
        seq BIGINT NOT NULL,
        time_created BIGINT NOT NULL,
        time_updated BIGINT NOT NULL,
        data TEXT NOT NULL,
        rev BIGINT NOT NULL DEFAULT 0,
        UNIQUE (session_id, seq)
    );
    CREATE INDEX session_message_type_idx ON session_message (session_id, type, seq);
    CREATE INDEX session_message_updated_idx ON session_message (session_id, time_updated);
    CREATE INDEX session_message_open_assistant_idx ON session_message (session_id)
        WHERE type = 'assistant' AND (data::json #>> '{time,completed}') IS NULL;
    CREATE INDEX session_message_retry_idx ON session_message (session_id)
        WHERE type = 'assistant' AND (data::json #>> '{retry}') IS NOT NULL;
    CREATE TABLE session_pending (
        id TEXT PRIMARY KEY,
        session_id TEXT NOT NULL REFERENCES session (id) ON DELETE CASCADE,
        type TEXT NOT NULL,
        data TEXT NOT NULL,
        delivery TEXT,
        admitted_seq BIGINT NOT NULL,
        time_created BIGINT NOT NULL,
        UNIQUE (session_id, admitted_seq)
    );
    CREATE INDEX session_pending_order_idx ON session_pending (session_id, delivery, admitted_seq);
    CREATE TABLE instruction_checkpoint (
        session_id TEXT PRIMARY KEY REFERENCES session (id) ON DELETE CASCADE,
        baseline TEXT NOT NULL,
        snapshot TEXT NOT NULL,
        baseline_seq BIGINT NOT NULL
    );
    CREATE TABLE instruction_entry (
        session_id TEXT NOT NULL REFERENCES session (id) ON DELETE CASCADE,
        key TEXT NOT NULL,
        value TEXT NOT NULL,
        time_created BIGINT NOT NULL,
        time_updated BIGINT NOT NULL,
        PRIMARY KEY (session_id, key)
    );
    CREATE TABLE permission_saved (
        id TEXT PRIMARY KEY,
        project_id TEXT NOT NULL,
        action TEXT NOT NULL,
        resource TEXT NOT NULL,
        time_created BIGINT NOT NULL,
        UNIQUE (project_id, action, resource)
    );
    CREATE TABLE session_message_removal (
        session_id TEXT PRIMARY KEY,
        removed BIGINT NOT NULL
    );
    CREATE FUNCTION session_message_removal_count() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            INSERT INTO session_message_removal (session_id, removed) VALUES (OLD.session_id, 1)
                ON CONFLICT (session_id) DO UPDATE SET removed = session_message_removal.removed + 1;
            RETURN OLD;
        END $$;
    CREATE TRIGGER session_message_removal_count AFTER DELETE ON session_message
        FOR EACH ROW EXECUTE FUNCTION session_message_removal_count();
    CREATE TABLE session_lease (
        session_id TEXT PRIMARY KEY,
        owner TEXT,
        epoch BIGINT NOT NULL,
        expires BIGINT NOT NULL
    );
    CREATE INDEX session_lease_expires_idx ON session_lease (expires) WHERE owner IS NOT NULL;
    """,
    # 2: the caller's W3C traceparent an input was admitted with (tracing: its execution joins that trace)
    """
    ALTER TABLE session_pending ADD COLUMN trace TEXT;
    """,
    # 3: session search: a document per session title and per message's text (session_search_doc, written with the
    # projections) with its tsvector (the title weighted A, the text D) under a GIN index; punctuation separates
    # words (as it does for SQLite's FTS5: a path's or a URL's parts are words, not one token); existing titles and
    # messages are back-filled (an assistant's text once it completed, as the store writes it); session_order is the
    # session's created_order, so a search reads its matches in list order
    """
    CREATE TABLE session_search_doc (
        id BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
        session_id TEXT NOT NULL REFERENCES session (id) ON DELETE CASCADE,
        session_order BIGINT NOT NULL,
        message_id TEXT UNIQUE REFERENCES session_message (id) ON DELETE CASCADE,
        title TEXT NOT NULL DEFAULT '',
        body TEXT NOT NULL DEFAULT '',
        tsv tsvector GENERATED ALWAYS AS (
            setweight(to_tsvector('simple', regexp_replace(title, '[[:punct:]]+', ' ', 'g')), 'A')
            || setweight(to_tsvector('simple', regexp_replace(body, '[[:punct:]]+', ' ', 'g')), 'D')) STORED
    );
    CREATE INDEX session_search_doc_session_idx ON session_search_doc (session_id);
    CREATE INDEX session_search_doc_tsv_idx ON session_search_doc USING GIN (tsv);
    CREATE INDEX session_search_doc_title_tsv_idx ON session_search_doc USING GIN (tsv) WHERE message_id IS NULL;
    CREATE UNIQUE INDEX session_search_doc_title_idx ON session_search_doc (session_id) WHERE message_id IS NULL;
    CREATE INDEX session_search_doc_order_idx ON session_search_doc (session_order, session_id);
    CREATE INDEX session_search_doc_title_order_idx ON session_search_doc (session_order, session_id)
        WHERE message_id IS NULL;
    INSERT INTO session_search_doc (session_id, session_order, title) SELECT id, created_order, title FROM session;
    INSERT INTO session_search_doc (session_id, session_order, message_id, body)
        SELECT m.session_id, s.created_order, m.id, left(m.data::json ->> 'text', 100000)
        FROM session_message m JOIN session s ON s.id = m.session_id
        WHERE m.type = 'user' AND coalesce(m.data::json ->> 'text', '') <> '';
    INSERT INTO session_search_doc (session_id, session_order, message_id, body)
        SELECT session_id, session_order, message_id, body FROM (
            SELECT m.session_id, s.created_order AS session_order, m.id AS message_id,
                left((SELECT string_agg(c.part ->> 'text', E'\\n' ORDER BY c.n)
                FROM json_array_elements(m.data::json -> 'content') WITH ORDINALITY AS c (part, n)
                WHERE c.part ->> 'type' = 'text'), 100000) AS body
            FROM session_message m JOIN session s ON s.id = m.session_id
            WHERE m.type = 'assistant' AND (m.data::json #>> '{time,completed}') IS NOT NULL) AS t
        WHERE coalesce(body, '') <> '';
    """,
    # 4: the usage projection statistics count: a row per prompt and per Step (session_usage: session, project,
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
        time_created BIGINT NOT NULL,
        agent TEXT,
        provider TEXT,
        model TEXT,
        failed INTEGER NOT NULL,
        input BIGINT NOT NULL,
        output BIGINT NOT NULL,
        reasoning BIGINT NOT NULL,
        cache_read BIGINT NOT NULL,
        cache_write BIGINT NOT NULL,
        cost DOUBLE PRECISION NOT NULL
    );
    CREATE INDEX session_usage_time_idx ON session_usage (time_created);
    CREATE INDEX session_usage_session_idx ON session_usage (session_id);
    CREATE TABLE session_usage_tool (
        message_id TEXT NOT NULL REFERENCES session_message (id) ON DELETE CASCADE,
        position INTEGER NOT NULL,
        session_id TEXT NOT NULL,
        project_id TEXT NOT NULL,
        time_created BIGINT NOT NULL,
        tool TEXT,
        failed INTEGER NOT NULL,
        PRIMARY KEY (message_id, position)
    );
    CREATE INDEX session_usage_tool_time_idx ON session_usage_tool (time_created);
    CREATE INDEX session_usage_tool_session_idx ON session_usage_tool (session_id);
    CREATE TABLE session_usage_active (
        session_id TEXT NOT NULL,
        time_created BIGINT NOT NULL,
        n BIGINT NOT NULL,
        PRIMARY KEY (session_id, time_created)
    );
    CREATE INDEX session_usage_active_time_idx ON session_usage_active (time_created);
    CREATE TABLE session_usage_period (
        session_id TEXT NOT NULL,
        time_created BIGINT NOT NULL,
        agent TEXT NOT NULL,
        provider TEXT NOT NULL,
        model TEXT NOT NULL,
        n BIGINT NOT NULL,
        PRIMARY KEY (session_id, time_created, agent, provider, model)
    );
    CREATE INDEX session_usage_period_time_idx ON session_usage_period (time_created);
    CREATE TABLE session_usage_sums (
        time_created BIGINT NOT NULL,
        project_id TEXT NOT NULL,
        type TEXT NOT NULL,
        agent TEXT NOT NULL,
        provider TEXT NOT NULL,
        model TEXT NOT NULL,
        n BIGINT NOT NULL,
        failed BIGINT NOT NULL,
        input BIGINT NOT NULL,
        output BIGINT NOT NULL,
        reasoning BIGINT NOT NULL,
        cache_read BIGINT NOT NULL,
        cache_write BIGINT NOT NULL,
        cost DOUBLE PRECISION NOT NULL,
        PRIMARY KEY (time_created, project_id, type, agent, provider, model)
    );
    CREATE TABLE session_usage_tool_period (
        time_created BIGINT NOT NULL,
        project_id TEXT NOT NULL,
        tool TEXT NOT NULL,
        calls BIGINT NOT NULL,
        failed BIGINT NOT NULL,
        PRIMARY KEY (time_created, project_id, tool)
    );
    CREATE FUNCTION session_usage_count() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        IF TG_OP IN ('DELETE', 'UPDATE') THEN
            UPDATE session_usage_active SET n = n - 1 WHERE session_id = OLD.session_id AND time_created =
                OLD.time_created - OLD.time_created % 900000;
            DELETE FROM session_usage_active WHERE session_id = OLD.session_id AND time_created = OLD.time_created -
                OLD.time_created % 900000 AND n = 0;
            UPDATE session_usage_period SET n = n - 1 WHERE OLD.type = 'assistant' AND session_id = OLD.session_id AND
                time_created = OLD.time_created - OLD.time_created % 900000 AND agent = coalesce(OLD.agent, '') AND
                provider = coalesce(OLD.provider, '') AND model = coalesce(OLD.model, '');
            DELETE FROM session_usage_period WHERE OLD.type = 'assistant' AND session_id = OLD.session_id AND
                time_created = OLD.time_created - OLD.time_created % 900000 AND agent = coalesce(OLD.agent, '') AND
                provider = coalesce(OLD.provider, '') AND model = coalesce(OLD.model, '') AND n = 0;
            UPDATE session_usage_sums SET n = n - 1, failed = failed - OLD.failed, input = input - OLD.input, output =
                output - OLD.output, reasoning = reasoning - OLD.reasoning, cache_read = cache_read - OLD.cache_read,
                cache_write = cache_write - OLD.cache_write, cost = cost - OLD.cost WHERE time_created =
                OLD.time_created - OLD.time_created % 900000 AND project_id = OLD.project_id AND type = OLD.type AND
                agent = coalesce(OLD.agent, '') AND provider = coalesce(OLD.provider, '') AND model =
                coalesce(OLD.model, '');
            DELETE FROM session_usage_sums WHERE time_created = OLD.time_created - OLD.time_created % 900000 AND
                project_id = OLD.project_id AND type = OLD.type AND agent = coalesce(OLD.agent, '') AND provider =
                coalesce(OLD.provider, '') AND model = coalesce(OLD.model, '') AND n = 0;
        END IF;
        IF TG_OP IN ('INSERT', 'UPDATE') THEN
            INSERT INTO session_usage_active (session_id, time_created, n) VALUES (NEW.session_id, NEW.time_created -
                NEW.time_created % 900000, 1) ON CONFLICT (session_id, time_created) DO UPDATE SET n =
                session_usage_active.n + 1;
            INSERT INTO session_usage_period (session_id, time_created, agent, provider, model, n) SELECT
                NEW.session_id, NEW.time_created - NEW.time_created % 900000, coalesce(NEW.agent, ''),
                coalesce(NEW.provider, ''), coalesce(NEW.model, ''), 1 WHERE NEW.type = 'assistant' ON CONFLICT
                (session_id, time_created, agent, provider, model) DO UPDATE SET n = session_usage_period.n + 1;
            INSERT INTO session_usage_sums (time_created, project_id, type, agent, provider, model, n, failed, input,
                output, reasoning, cache_read, cache_write, cost) VALUES (NEW.time_created - NEW.time_created %
                900000, NEW.project_id, NEW.type, coalesce(NEW.agent, ''), coalesce(NEW.provider, ''),
                coalesce(NEW.model, ''), 1, NEW.failed, NEW.input, NEW.output, NEW.reasoning, NEW.cache_read,
                NEW.cache_write, NEW.cost) ON CONFLICT (time_created, project_id, type, agent, provider, model) DO
                UPDATE SET n = session_usage_sums.n + 1, failed = session_usage_sums.failed + excluded.failed, input =
                session_usage_sums.input + excluded.input, output = session_usage_sums.output + excluded.output,
                reasoning = session_usage_sums.reasoning + excluded.reasoning, cache_read =
                session_usage_sums.cache_read + excluded.cache_read, cache_write = session_usage_sums.cache_write +
                excluded.cache_write, cost = session_usage_sums.cost + excluded.cost;
        END IF;
        RETURN NULL;
    END $$;
    CREATE TRIGGER session_usage_count AFTER INSERT OR UPDATE OR DELETE ON session_usage
        FOR EACH ROW EXECUTE FUNCTION session_usage_count();
    CREATE FUNCTION session_usage_tool_count() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        IF TG_OP IN ('DELETE', 'UPDATE') THEN
            UPDATE session_usage_tool_period SET calls = calls - 1, failed = failed - OLD.failed WHERE time_created =
                OLD.time_created - OLD.time_created % 900000 AND project_id = OLD.project_id AND tool =
                coalesce(OLD.tool, '');
            DELETE FROM session_usage_tool_period WHERE time_created = OLD.time_created - OLD.time_created % 900000
                AND project_id = OLD.project_id AND tool = coalesce(OLD.tool, '') AND calls = 0;
        END IF;
        IF TG_OP IN ('INSERT', 'UPDATE') THEN
            INSERT INTO session_usage_tool_period (time_created, project_id, tool, calls, failed) VALUES
                (NEW.time_created - NEW.time_created % 900000, NEW.project_id, coalesce(NEW.tool, ''), 1, NEW.failed)
                ON CONFLICT (time_created, project_id, tool) DO UPDATE SET calls = session_usage_tool_period.calls +
                1, failed = session_usage_tool_period.failed + excluded.failed;
        END IF;
        RETURN NULL;
    END $$;
    CREATE TRIGGER session_usage_tool_count AFTER INSERT OR UPDATE OR DELETE ON session_usage_tool
        FOR EACH ROW EXECUTE FUNCTION session_usage_tool_count();
    CREATE FUNCTION session_usage_moved() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        UPDATE session_usage SET project_id = NEW.project_id WHERE session_id = NEW.id;
        UPDATE session_usage_tool SET project_id = NEW.project_id WHERE session_id = NEW.id;
        RETURN NULL;
    END $$;
    CREATE TRIGGER session_usage_moved AFTER UPDATE OF project_id ON session
        FOR EACH ROW WHEN (OLD.project_id IS DISTINCT FROM NEW.project_id)
        EXECUTE FUNCTION session_usage_moved();
    INSERT INTO session_usage (message_id, session_id, project_id, type, time_created, agent, provider, model, failed,
            input, output, reasoning, cache_read, cache_write, cost)
        SELECT id, session_id, project_id, type, time_created,
            CASE WHEN type = 'assistant' THEN j ->> 'agent' END,
            CASE WHEN type = 'assistant' THEN j #>> '{model,providerID}' END,
            CASE WHEN type = 'assistant' THEN j #>> '{model,id}' END,
            CASE WHEN type = 'assistant' AND j ->> 'error' IS NOT NULL THEN 1 ELSE 0 END,
            CASE WHEN type = 'assistant' THEN coalesce((j #>> '{tokens,input}')::numeric::bigint, 0) ELSE 0 END,
            CASE WHEN type = 'assistant' THEN coalesce((j #>> '{tokens,output}')::numeric::bigint, 0) ELSE 0 END,
            CASE WHEN type = 'assistant' THEN coalesce((j #>> '{tokens,reasoning}')::numeric::bigint, 0) ELSE 0 END,
            CASE WHEN type = 'assistant' THEN coalesce((j #>> '{tokens,cache,read}')::numeric::bigint, 0) ELSE 0 END,
            CASE WHEN type = 'assistant' THEN coalesce((j #>> '{tokens,cache,write}')::numeric::bigint, 0) ELSE 0 END,
            CASE WHEN type = 'assistant' THEN coalesce((j ->> 'cost')::double precision, 0) ELSE 0 END
        FROM (SELECT m.id, m.session_id, s.project_id, m.type, m.time_created, m.data::json AS j
              FROM session_message m JOIN session s ON s.id = m.session_id
              WHERE m.type IN ('user', 'assistant')) AS m;
    INSERT INTO session_usage_tool (message_id, position, session_id, project_id, time_created, tool, failed)
        SELECT m.id, c.n - 1, m.session_id, s.project_id, m.time_created, c.part ->> 'name',
            CASE WHEN c.part #>> '{state,status}' = 'error' THEN 1 ELSE 0 END
        FROM session_message m JOIN session s ON s.id = m.session_id,
            json_array_elements(m.data::json -> 'content') WITH ORDINALITY AS c (part, n)
        WHERE m.type = 'assistant' AND c.part ->> 'type' = 'tool'
            AND c.part #>> '{state,status}' IN ('completed', 'error');
    """,
    # 5: the per-project sums (session_usage_sums, session_usage_tool_period) get a shard, the writing backend's
    # process ID: each host's writer adds (and, for a message that changed or left, subtracts) into rows of its own,
    # so two hosts' Steps of one project in one quarter hour never wait on (nor deadlock over) the same row. The
    # readers sum over shards as they sum over quarter hours.
    """
    ALTER TABLE session_usage_sums ADD COLUMN shard INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE session_usage_sums DROP CONSTRAINT session_usage_sums_pkey;
    ALTER TABLE session_usage_sums ADD PRIMARY KEY (time_created, project_id, type, agent, provider, model, shard);
    ALTER TABLE session_usage_tool_period ADD COLUMN shard INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE session_usage_tool_period DROP CONSTRAINT session_usage_tool_period_pkey;
    ALTER TABLE session_usage_tool_period ADD PRIMARY KEY (time_created, project_id, tool, shard);
    CREATE FUNCTION session_usage_add(r session_usage, sign INTEGER) RETURNS void LANGUAGE sql AS $$
        INSERT INTO session_usage_sums (time_created, project_id, type, agent, provider, model, shard, n, failed,
            input, output, reasoning, cache_read, cache_write, cost) VALUES (r.time_created - r.time_created % 900000,
            r.project_id, r.type, coalesce(r.agent, ''), coalesce(r.provider, ''), coalesce(r.model, ''),
            pg_backend_pid(), sign, sign * r.failed, sign * r.input, sign * r.output, sign * r.reasoning,
            sign * r.cache_read, sign * r.cache_write, sign * r.cost)
        ON CONFLICT (time_created, project_id, type, agent, provider, model, shard) DO UPDATE SET
            n = session_usage_sums.n + excluded.n, failed = session_usage_sums.failed + excluded.failed,
            input = session_usage_sums.input + excluded.input, output = session_usage_sums.output + excluded.output,
            reasoning = session_usage_sums.reasoning + excluded.reasoning,
            cache_read = session_usage_sums.cache_read + excluded.cache_read,
            cache_write = session_usage_sums.cache_write + excluded.cache_write,
            cost = session_usage_sums.cost + excluded.cost;
        DELETE FROM session_usage_sums WHERE sign < 0 AND time_created = r.time_created - r.time_created % 900000
            AND project_id = r.project_id AND type = r.type AND agent = coalesce(r.agent, '')
            AND provider = coalesce(r.provider, '') AND model = coalesce(r.model, '') AND shard = pg_backend_pid()
            AND n = 0 AND failed = 0 AND input = 0 AND output = 0 AND reasoning = 0 AND cache_read = 0
            AND cache_write = 0 AND cost = 0;
    $$;
    CREATE OR REPLACE FUNCTION session_usage_count() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        IF TG_OP IN ('DELETE', 'UPDATE') THEN
            UPDATE session_usage_active SET n = n - 1 WHERE session_id = OLD.session_id AND time_created =
                OLD.time_created - OLD.time_created % 900000;
            DELETE FROM session_usage_active WHERE session_id = OLD.session_id AND time_created = OLD.time_created -
                OLD.time_created % 900000 AND n = 0;
            UPDATE session_usage_period SET n = n - 1 WHERE OLD.type = 'assistant' AND session_id = OLD.session_id AND
                time_created = OLD.time_created - OLD.time_created % 900000 AND agent = coalesce(OLD.agent, '') AND
                provider = coalesce(OLD.provider, '') AND model = coalesce(OLD.model, '');
            DELETE FROM session_usage_period WHERE OLD.type = 'assistant' AND session_id = OLD.session_id AND
                time_created = OLD.time_created - OLD.time_created % 900000 AND agent = coalesce(OLD.agent, '') AND
                provider = coalesce(OLD.provider, '') AND model = coalesce(OLD.model, '') AND n = 0;
            PERFORM session_usage_add(OLD, -1);
        END IF;
        IF TG_OP IN ('INSERT', 'UPDATE') THEN
            INSERT INTO session_usage_active (session_id, time_created, n) VALUES (NEW.session_id, NEW.time_created -
                NEW.time_created % 900000, 1) ON CONFLICT (session_id, time_created) DO UPDATE SET n =
                session_usage_active.n + 1;
            INSERT INTO session_usage_period (session_id, time_created, agent, provider, model, n) SELECT
                NEW.session_id, NEW.time_created - NEW.time_created % 900000, coalesce(NEW.agent, ''),
                coalesce(NEW.provider, ''), coalesce(NEW.model, ''), 1 WHERE NEW.type = 'assistant' ON CONFLICT
                (session_id, time_created, agent, provider, model) DO UPDATE SET n = session_usage_period.n + 1;
            PERFORM session_usage_add(NEW, 1);
        END IF;
        RETURN NULL;
    END $$;
    CREATE OR REPLACE FUNCTION session_usage_tool_count() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        IF TG_OP IN ('DELETE', 'UPDATE') THEN
            INSERT INTO session_usage_tool_period (time_created, project_id, tool, shard, calls, failed) VALUES
                (OLD.time_created - OLD.time_created % 900000, OLD.project_id, coalesce(OLD.tool, ''),
                pg_backend_pid(), -1, -OLD.failed) ON CONFLICT (time_created, project_id, tool, shard) DO UPDATE SET
                calls = session_usage_tool_period.calls + excluded.calls,
                failed = session_usage_tool_period.failed + excluded.failed;
            DELETE FROM session_usage_tool_period WHERE time_created = OLD.time_created - OLD.time_created % 900000
                AND project_id = OLD.project_id AND tool = coalesce(OLD.tool, '') AND shard = pg_backend_pid()
                AND calls = 0 AND failed = 0;
        END IF;
        IF TG_OP IN ('INSERT', 'UPDATE') THEN
            INSERT INTO session_usage_tool_period (time_created, project_id, tool, shard, calls, failed) VALUES
                (NEW.time_created - NEW.time_created % 900000, NEW.project_id, coalesce(NEW.tool, ''),
                pg_backend_pid(), 1, NEW.failed) ON CONFLICT (time_created, project_id, tool, shard) DO UPDATE SET
                calls = session_usage_tool_period.calls + 1,
                failed = session_usage_tool_period.failed + excluded.failed;
        END IF;
        RETURN NULL;
    END $$;
    """,
    # 6: a prompt counts for the agent and model of the first Step that answered it (the store now writes them on
    # its usage row when that Step's row is first written): the prompts stored before are given theirs, and the
    # usage triggers move their sums
    PROMPTS_ANSWERED,
    # 7: what each Step sent (core/execution/context_record.py): kept beside the projections, not derived from
    # events; a record is the change from its base record, the chain of a session starting at its root
    STEP_CONTEXT_TABLE,
    # 8: the prompts no Step answered yet, indexed: every Step's first usage row looks them up
    UNANSWERED_INDEX,
]


def migrate(conn: psycopg.Connection) -> int:
    """Apply every migration newer than the database's schema version; returns the resulting version."""
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (_MIGRATION_LOCK,))
        conn.execute("CREATE TABLE IF NOT EXISTS ocs_schema (version INTEGER NOT NULL)")
        row = conn.execute("SELECT version FROM ocs_schema").fetchone()
        if row is None:
            conn.execute("INSERT INTO ocs_schema (version) VALUES (0)")
        version = 0 if row is None else int(row[0])
        if version > len(MIGRATIONS):
            raise RuntimeError(f"database schema version {version} is newer than this program ({len(MIGRATIONS)})")
        for index in range(version, len(MIGRATIONS)):
            conn.execute(MIGRATIONS[index])
        conn.execute("UPDATE ocs_schema SET version = %s", (len(MIGRATIONS),))
    return len(MIGRATIONS)
