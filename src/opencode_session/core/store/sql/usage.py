"""The usage projection: a row per prompt and per Step (session_usage: its time, agent, model, tokens, cost, whether
it failed; a prompt's agent and model are those of the first Step that answered it) and per settled tool call
(session_usage_tool), written beside the messages they are read from, which usage statistics count instead of parsing
each message's JSON."""

from __future__ import annotations

from typing import Any

from .connection import Connection

# The messages usage statistics count: a user's prompt, and an assistant's Step.
COUNTED = ("user", "assistant")
# A migration of both dialects (the same statement on each): the prompts stored before each prompt counted for the
# agent and model of the first Step that answered it are given theirs (the usage triggers move their sums).
PROMPTS_ANSWERED = """
    UPDATE session_usage SET (agent, provider, model) = (
        SELECT s.agent, s.provider, s.model FROM session_usage s JOIN session_message m ON m.id = s.message_id
        WHERE s.session_id = session_usage.session_id AND s.type = 'assistant'
            AND m.seq > (SELECT p.seq FROM session_message p WHERE p.id = session_usage.message_id)
        ORDER BY m.seq LIMIT 1)
    WHERE type = 'user' AND agent IS NULL AND provider IS NULL AND model IS NULL;
"""
# A migration of both dialects: every Step's first usage row gives its agent and model to the session's prompts no
# Step answered yet (`_ANSWERED`), found through this index instead of among all of the session's rows (a cost that
# grew with its history: 0.14 ms a Step at 10 messages, 0.70 ms at 2,000).
UNANSWERED_INDEX = """
    CREATE INDEX session_usage_unanswered_idx ON session_usage (session_id)
        WHERE type = 'user' AND agent IS NULL AND provider IS NULL AND model IS NULL;
"""
_SETTLED = ("completed", "error")

# (the session's project is read from its row: a move changes it there, and a trigger here)
_UPSERT = (
    "INSERT INTO session_usage (message_id, session_id, type, time_created, agent, provider, model, failed, input,"
    " output, reasoning, cache_read, cache_write, cost, project_id) SELECT ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?,"
    " project_id FROM session WHERE id = ?"
    " ON CONFLICT (message_id) DO UPDATE SET agent = excluded.agent, provider = excluded.provider,"
    " model = excluded.model, failed = excluded.failed, input = excluded.input, output = excluded.output,"
    " reasoning = excluded.reasoning, cache_read = excluded.cache_read, cache_write = excluded.cache_write,"
    " cost = excluded.cost"
    # a message written again with the same numbers (most of a Step's writes) leaves its row, and the sums the
    # triggers keep from it, untouched
    " WHERE coalesce(session_usage.agent, '') <> coalesce(excluded.agent, '')"
    " OR coalesce(session_usage.provider, '') <> coalesce(excluded.provider, '')"
    " OR coalesce(session_usage.model, '') <> coalesce(excluded.model, '') OR session_usage.failed <> excluded.failed"
    " OR session_usage.input <> excluded.input OR session_usage.output <> excluded.output"
    " OR session_usage.reasoning <> excluded.reasoning OR session_usage.cache_read <> excluded.cache_read"
    " OR session_usage.cache_write <> excluded.cache_write OR session_usage.cost <> excluded.cost"
)
_UPSERT_TOOL = (
    "INSERT INTO session_usage_tool (message_id, position, session_id, time_created, tool, failed, project_id)"
    " SELECT ?, ?, ?, ?, ?, ?, project_id FROM session WHERE id = ?"
    " ON CONFLICT (message_id, position) DO UPDATE SET tool = excluded.tool, failed = excluded.failed"
    " WHERE coalesce(session_usage_tool.tool, '') <> coalesce(excluded.tool, '')"
    " OR session_usage_tool.failed <> excluded.failed"
)


def _count(value: Any) -> int:
    return int(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else 0


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def step_row(session_id: str, message: dict[str, Any]) -> tuple[Any, ...]:
    """A counted message's usage row: a prompt has only its time; a Step its agent, model, tokens, cost and failure."""
    kind = message["type"]
    created = message["time"]["created"]
    if kind != "assistant":
        return (message["id"], session_id, kind, created, None, None, None, 0, 0, 0, 0, 0, 0, 0.0)
    tokens = message.get("tokens") or {}
    cache = tokens.get("cache") or {}
    model = message.get("model") or {}
    cost = message.get("cost")
    return (message["id"], session_id, kind, created, _text(message.get("agent")), _text(model.get("providerID")),
            _text(model.get("id")), 0 if message.get("error") is None else 1, _count(tokens.get("input")),
            _count(tokens.get("output")), _count(tokens.get("reasoning")), _count(cache.get("read")),
            _count(cache.get("write")),
            float(cost) if isinstance(cost, (int, float)) and not isinstance(cost, bool) else 0.0)


# A prompt counts for the agent and model of the first Step that answers it: the Step's row, when first written,
# gives them to the session's prompts no Step answered yet (the usage triggers move their sums). A prompt no Step
# answered (its execution failed first) keeps neither.
_ANSWERED = (
    "UPDATE session_usage SET agent = ?, provider = ?, model = ? WHERE session_id = ? AND type = 'user'"
    " AND agent IS NULL AND provider IS NULL AND model IS NULL"
)


class SqlUsage:
    """Writes the usage projection of one message (its numbers are read back by `SqlStats`)."""

    def __init__(self, conn: Connection) -> None:
        self.conn = conn

    def record(self, session_id: str, message: dict[str, Any]) -> None:
        """Write a counted message's usage row and its settled tool calls (each by its place among the message's
        parts); a tool call no longer settled leaves. Nothing for a message statistics do not count."""
        if message.get("type") not in COUNTED:
            return
        row = step_row(session_id, message)
        first = message["type"] == "assistant" and self.conn.execute(
            "SELECT 1 FROM session_usage WHERE message_id = ?", (message["id"],)).fetchone() is None
        self.conn.execute(_UPSERT, (*row, session_id))
        if message["type"] != "assistant":
            return
        if first:
            self.conn.execute(_ANSWERED, (row[4], row[5], row[6], session_id))
        created = message["time"]["created"]
        settled: list[tuple[Any, ...]] = []
        unsettled: list[tuple[Any, ...]] = []
        for position, part in enumerate(message.get("content") or ()):
            if not isinstance(part, dict) or part.get("type") != "tool":
                continue
            status = (part.get("state") or {}).get("status")
            if status in _SETTLED:
                settled.append((message["id"], position, session_id, created, _text(part.get("name")),
                                1 if status == "error" else 0, session_id))
            else:
                unsettled.append((message["id"], position))
        if settled:
            self.conn.executemany(_UPSERT_TOOL, settled)
        if unsettled:  # a call started again after it settled (nothing is there the first time)
            self.conn.executemany("DELETE FROM session_usage_tool WHERE message_id = ? AND position = ?", unsettled)
