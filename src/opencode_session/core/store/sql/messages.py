"""The session_message table: projected messages as stored JSON and as SessionMessage, the rows of the
active history window, pages, and the indexed lookups of open and retrying assistants."""

from __future__ import annotations

import json
from typing import Any, cast

from ....schema.message import SessionMessage
from ....schema.message_data import (
    SessionMessageAssistantData,
    SessionMessageCompactionData,
    SessionMessageData,
    SessionMessageShellData,
)
from ..codec import as_data, decode, dump
from ..keyset import KeysetPage, PageRequest
from ..rows import HistoryRow, Placement
from .connection import Connection
from .keyset import Keyset, keyset_page
from .search import SqlSearch
from .usage import SqlUsage

_WINDOW = " FROM session_message WHERE session_id = ? AND seq > ? AND NOT (type = 'system' AND seq <= ?)"
_COLUMNS = "SELECT id, seq, rev, type, data, time_updated"


class SqlMessages:
    def __init__(self, conn: Connection) -> None:
        self.conn = conn
        self.search = SqlSearch(conn)
        self.usage = SqlUsage(conn)

    def insert(self, session_id: str, seq: int, message: SessionMessageData) -> None:
        created = message["time"]["created"]
        self.conn.execute(
            "INSERT INTO session_message (id, session_id, type, seq, time_created, time_updated, data)"
            " VALUES (?, ?, ?, ?, ?, ?, ?)",
            (message["id"], session_id, message["type"], seq, created, created, dump(message)),
        )
        self.search.index_message(session_id, seq, cast(dict[str, Any], message))
        self.usage.record(session_id, cast(dict[str, Any], message))

    def load(self, message_id: str) -> SessionMessageData | None:
        row = self.conn.execute("SELECT data FROM session_message WHERE id = ?", (message_id,)).fetchone()
        return None if row is None else as_data(row[0])

    def save(self, message: SessionMessageData, updated: int, *, usage: bool = False) -> None:
        row = self.conn.execute(
            "UPDATE session_message SET data = ?, time_updated = ?, rev = rev + 1 WHERE id = ?"
            " RETURNING session_id, seq",
            (dump(message), updated, message["id"]),
        ).fetchone()
        if row is not None and usage:
            self.usage.record(row[0], cast(dict[str, Any], message))
        # search indexes an assistant's text once it has completed, not at each delta
        if row is not None and (message["type"] != "assistant" or "completed" in message["time"]):
            self.search.index_message(row[0], row[1], cast(dict[str, Any], message))

    def remove_from(self, session_id: str, seq: int) -> int:
        # the removal trigger counts them, so the history cache sees the window shrink
        return self.conn.execute("DELETE FROM session_message WHERE session_id = ? AND seq >= ?",
                                 (session_id, seq)).rowcount

    def find(self, session_id: str, message_id: str) -> SessionMessage | None:
        row = self.conn.execute("SELECT data FROM session_message WHERE id = ? AND session_id = ?",
                                (message_id, session_id)).fetchone()
        return None if row is None else decode(row[0])

    def placement(self, message_id: str) -> Placement | None:
        row = self.conn.execute("SELECT session_id, type, seq FROM session_message WHERE id = ?",
                                (message_id,)).fetchone()
        return None if row is None else Placement(row[0], row[1], row[2])

    def page(self, session_id: str, request: PageRequest) -> KeysetPage[SessionMessage]:
        keyset = Keyset("session_message", ("seq",), ("session_id = ?",), (session_id,))
        return keyset_page(self.conn, keyset, request, lambda row: decode(row["data"]))

    def open_assistants(self, session_id: str, *,
                        excluding: str | None = None) -> list[SessionMessageAssistantData]:
        rows = self.conn.execute(
            "SELECT data FROM session_message INDEXED BY session_message_open_assistant_idx"
            " WHERE session_id = ? AND type = 'assistant' AND json_extract(data, '$.time.completed') IS NULL"
            " AND id IS NOT ? ORDER BY seq",
            (session_id, excluding),
        ).fetchall()
        return [cast(SessionMessageAssistantData, as_data(row[0])) for row in rows]

    def retrying_assistants(self, session_id: str) -> list[SessionMessageAssistantData]:
        rows = self.conn.execute(
            "SELECT data FROM session_message INDEXED BY session_message_retry_idx"
            " WHERE session_id = ? AND type = 'assistant' AND json_extract(data, '$.retry') IS NOT NULL",
            (session_id,),
        ).fetchall()
        return [cast(SessionMessageAssistantData, as_data(row[0])) for row in rows]

    def first_user_text(self, session_id: str) -> str | None:
        row = self.conn.execute(
            "SELECT data FROM session_message WHERE session_id = ? AND type = 'user' ORDER BY seq LIMIT 1",
            (session_id,)).fetchone()
        return None if row is None else json.loads(row[0]).get("text")

    def latest_completed_compaction(self, session_id: str) -> int | None:
        row = self.conn.execute(
            "SELECT seq FROM session_message WHERE session_id = ? AND type = 'compaction'"
            " AND coalesce(json_extract(data, '$.status'), 'completed') = 'completed' ORDER BY seq DESC LIMIT 1",
            (session_id,),
        ).fetchone()
        return None if row is None else int(row[0])

    def running_compaction(self, session_id: str, message_id: str) -> SessionMessageCompactionData | None:
        row = self.conn.execute(
            "SELECT data FROM session_message WHERE id = ? AND session_id = ? AND type = 'compaction'"
            " AND json_extract(data, '$.status') = 'running'", (message_id, session_id)).fetchone()
        return None if row is None else cast(SessionMessageCompactionData, as_data(row[0]))

    def shell(self, session_id: str, call_id: str) -> SessionMessageShellData | None:
        row = self.conn.execute(
            "SELECT data FROM session_message WHERE session_id = ? AND type = 'shell'"
            " AND json_extract(data, '$.callID') = ?", (session_id, call_id)).fetchone()
        return None if row is None else cast(SessionMessageShellData, as_data(row[0]))

    def injected_instruction_paths(self, session_id: str) -> set[str]:
        rows = self.conn.execute(
            "SELECT json_extract(data, '$.metadata.instruction.paths') FROM session_message"
            " WHERE session_id = ? AND type = 'synthetic' AND json_extract(data, '$.metadata.instruction') IS NOT NULL",
            (session_id,),
        ).fetchall()
        return {path for (paths,) in rows if paths for path in json.loads(paths)}

    def window(self, session_id: str, after: int, updates_through: int) -> list[HistoryRow]:
        rows = self.conn.execute(_COLUMNS + _WINDOW + " ORDER BY seq", (session_id, after, updates_through)).fetchall()
        return [HistoryRow(*row) for row in rows]

    def compaction_trigger(self, session_id: str, compaction_seq: int) -> HistoryRow | None:
        row = self.conn.execute(_COLUMNS + " FROM session_message WHERE session_id = ? AND type = 'user' AND seq < ?"
                                " ORDER BY seq DESC LIMIT 1", (session_id, compaction_seq)).fetchone()
        if row is None:
            return None
        manual = self.conn.execute(
            "SELECT 1 FROM session_message WHERE session_id = ? AND type = 'compaction' AND seq > ? AND seq < ?"
            " AND json_extract(data, '$.reason') = 'manual'"
            " AND coalesce(json_extract(data, '$.status'), 'completed') = 'completed' LIMIT 1",
            (session_id, row[1], compaction_seq)).fetchone()
        return None if manual is not None else HistoryRow(*row)

    def removed(self, session_id: str) -> int:
        row = self.conn.execute("SELECT removed FROM session_message_removal WHERE session_id = ?",
                                (session_id,)).fetchone()
        return 0 if row is None else int(row[0])

    def touched_since(self, session_id: str, watermark: int) -> list[HistoryRow]:
        rows = self.conn.execute(
            _COLUMNS + " FROM session_message WHERE session_id = ? AND time_updated >= ? ORDER BY seq",
            (session_id, watermark)).fetchall()
        return [HistoryRow(*row) for row in rows]
