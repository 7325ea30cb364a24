"""The session_message table's SQL: projected messages as stored JSON and as SessionMessage, the rows of the active
history window, pages, and the indexed lookups of open and retrying assistants."""

from __future__ import annotations

import functools
import json
import sqlite3
from typing import TYPE_CHECKING, Any, NamedTuple, cast

from pydantic import TypeAdapter

from ...schema import jsontext
from ...schema.message import SessionMessage
from ...schema.message_data import SessionMessageAssistantData, SessionMessageCompactionData, SessionMessageData
from .keyset import Keyset, KeysetPage, PageRequest, keyset_page

if TYPE_CHECKING:
    from .db import Reader, Tx


@functools.cache
def _message() -> TypeAdapter[SessionMessage]:
    """The SessionMessage validator, built on first use: building the whole message union cost ~12 ms of start-up."""
    return TypeAdapter(SessionMessage)


def _dump(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"))


def decode(data: str) -> SessionMessage:
    """A stored message as its public model."""
    try:
        return _message().validate_json(data)
    except ValueError:  # stored before values were cleaned at the door (a lone surrogate escape)
        return _message().validate_python(jsontext.loads(data))


def as_data(text: str) -> SessionMessageData:
    """A stored message as plain data (written by the projector in the shape message_data.py declares)."""
    return cast(SessionMessageData, json.loads(text))


def insert(tx: Tx, session_id: str, seq: int, message: SessionMessageData) -> None:
    """A new message at `seq` (the sequence of the event that created it); created and updated at its time."""
    created = message["time"]["created"]
    tx.execute(
        "INSERT INTO session_message (id, session_id, type, seq, time_created, time_updated, data)"
        " VALUES (?, ?, ?, ?, ?, ?, ?)",
        (message["id"], session_id, message["type"], seq, created, created, _dump(message)),
    )


def load(reader: Reader, message_id: str) -> SessionMessageData | None:
    """The stored JSON of a message, for a projection to change and save."""
    row = reader.execute("SELECT data FROM session_message WHERE id = ?", (message_id,)).fetchone()
    return None if row is None else as_data(row[0])


def save(tx: Tx, message: SessionMessageData, updated: int) -> None:
    """Store a changed message: a new revision, updated at `updated`."""
    tx.execute(
        "UPDATE session_message SET data = ?, time_updated = ?, rev = rev + 1 WHERE id = ?",
        (_dump(message), updated, message["id"]),
    )


def find(reader: Reader, session_id: str, message_id: str) -> SessionMessage | None:
    """A message of `session_id`; None when absent or owned by another session."""
    row = reader.execute("SELECT data FROM session_message WHERE id = ? AND session_id = ?",
                         (message_id, session_id)).fetchone()
    return None if row is None else decode(row[0])


class Placement(NamedTuple):
    session_id: str
    type: str
    seq: int


def placement(reader: Reader, message_id: str) -> Placement | None:
    """Which session holds a message, its type and sequence, without decoding it."""
    row = reader.execute("SELECT session_id, type, seq FROM session_message WHERE id = ?", (message_id,)).fetchone()
    return None if row is None else Placement(row[0], row[1], row[2])


def page(reader: Reader, session_id: str, request: PageRequest) -> KeysetPage[SessionMessage]:
    """One page of a session's messages in sequence order; the key is the sequence."""
    keyset = Keyset("session_message", ("seq",), ("session_id = ?",), (session_id,))
    return keyset_page(reader, keyset, request, lambda row: decode(row["data"]))


def open_assistants(reader: Reader, session_id: str, *,
                    excluding: str | None = None) -> list[SessionMessageAssistantData]:
    """Assistant messages not yet completed (at most a few: an interrupted or running Step), in sequence order."""
    rows = reader.execute(
        "SELECT data FROM session_message INDEXED BY session_message_open_assistant_idx"
        " WHERE session_id = ? AND type = 'assistant' AND json_extract(data, '$.time.completed') IS NULL"
        " AND id IS NOT ? ORDER BY seq",
        (session_id, excluding),
    ).fetchall()
    return [cast(SessionMessageAssistantData, as_data(row[0])) for row in rows]


def retrying_assistants(reader: Reader, session_id: str) -> list[SessionMessageAssistantData]:
    """Assistant messages that show a scheduled retry."""
    rows = reader.execute(
        "SELECT data FROM session_message INDEXED BY session_message_retry_idx"
        " WHERE session_id = ? AND type = 'assistant' AND json_extract(data, '$.retry') IS NOT NULL",
        (session_id,),
    ).fetchall()
    return [cast(SessionMessageAssistantData, as_data(row[0])) for row in rows]


def first_user_text(reader: Reader, session_id: str) -> str | None:
    """The text of the session's first user message, if it has one."""
    row = reader.execute(
        "SELECT data FROM session_message WHERE session_id = ? AND type = 'user' ORDER BY seq LIMIT 1", (session_id,)
    ).fetchone()
    return None if row is None else json.loads(row[0]).get("text")


def latest_completed_compaction(reader: Reader, session_id: str) -> int | None:
    """The sequence of the session's latest completed compaction message, if any."""
    row = reader.execute(
        "SELECT seq FROM session_message WHERE session_id = ? AND type = 'compaction'"
        " AND coalesce(json_extract(data, '$.status'), 'completed') = 'completed' ORDER BY seq DESC LIMIT 1",
        (session_id,),
    ).fetchone()
    return None if row is None else int(row[0])


def running_compaction(reader: Reader, session_id: str, message_id: str) -> SessionMessageCompactionData | None:
    """The session's compaction message `message_id` while it is still running."""
    row = reader.execute(
        "SELECT data FROM session_message WHERE id = ? AND session_id = ? AND type = 'compaction'"
        " AND json_extract(data, '$.status') = 'running'", (message_id, session_id)).fetchone()
    return None if row is None else cast(SessionMessageCompactionData, as_data(row[0]))


def injected_instruction_paths(reader: Reader, session_id: str) -> set[str]:
    """The nearby instruction files already shown to the model as synthetic messages."""
    rows = reader.execute(
        "SELECT json_extract(data, '$.metadata.instruction.paths') FROM session_message"
        " WHERE session_id = ? AND type = 'synthetic' AND json_extract(data, '$.metadata.instruction') IS NOT NULL",
        (session_id,),
    ).fetchall()
    return {path for (paths,) in rows if paths for path in json.loads(paths)}


# --- the active history window ---------------------------------------------------------------------------------


class HistoryRow(NamedTuple):
    id: str
    seq: int
    rev: int
    type: str
    data: str
    updated: int


_WINDOW = " FROM session_message WHERE session_id = ? AND seq > ? AND NOT (type = 'system' AND seq <= ?)"
_COLUMNS = "SELECT id, seq, rev, type, data, time_updated"


def window(reader: Reader, session_id: str, after: int, updates_through: int) -> list[HistoryRow]:
    """Messages after sequence `after`, except Instruction Updates at or before `updates_through` (folded into the
    baseline), in sequence order."""
    rows = reader.execute(_COLUMNS + _WINDOW + " ORDER BY seq", (session_id, after, updates_through)).fetchall()
    return [_history_row(row) for row in rows]


def compaction_trigger(reader: Reader, session_id: str, compaction_seq: int) -> HistoryRow | None:
    """The input an automatic compaction at `compaction_seq` was made for: the newest user message before it, unless
    a completed manual compaction lies between the two (that message had its answer before then)."""
    row = reader.execute(_COLUMNS + " FROM session_message WHERE session_id = ? AND type = 'user' AND seq < ?"
                         " ORDER BY seq DESC LIMIT 1", (session_id, compaction_seq)).fetchone()
    if row is None:
        return None
    manual = reader.execute(
        "SELECT 1 FROM session_message WHERE session_id = ? AND type = 'compaction' AND seq > ? AND seq < ?"
        " AND json_extract(data, '$.reason') = 'manual'"
        " AND coalesce(json_extract(data, '$.status'), 'completed') = 'completed' LIMIT 1",
        (session_id, row[1], compaction_seq)).fetchone()
    return None if manual is not None else _history_row(row)


def removed(reader: Reader, session_id: str) -> int:
    """How many of the session's messages have ever been removed (a trigger counts them)."""
    row = reader.execute("SELECT removed FROM session_message_removal WHERE session_id = ?", (session_id,)).fetchone()
    return 0 if row is None else int(row[0])


def touched_since(reader: Reader, session_id: str, watermark: int) -> list[HistoryRow]:
    """Every message of the session created or updated at or after `watermark`, in sequence order."""
    rows = reader.execute(_COLUMNS + " FROM session_message WHERE session_id = ? AND time_updated >= ? ORDER BY seq",
                          (session_id, watermark)).fetchall()
    return [_history_row(row) for row in rows]


def _history_row(row: sqlite3.Row) -> HistoryRow:
    return HistoryRow(row[0], row[1], row[2], row[3], row[4], row[5])
