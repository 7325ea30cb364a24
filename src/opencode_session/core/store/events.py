"""The event log's SQL: each aggregate's latest sequence, appending an event, and reading events back after a
sequence, after a store position (the rowid, a global commit order), or by the input they admitted."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from typing import TYPE_CHECKING

from ...schema import events as ev
from ...schema import jsontext
from ...schema.common import LocationRef
from ...schema.events import BY_STORED_TYPE, EventRecord, definition_for

if TYPE_CHECKING:
    from .db import Reader, Tx


def latest_seq(reader: Reader, aggregate_id: str) -> int:
    """The newest sequence of `aggregate_id`; -1 before its first event."""
    row = reader.execute("SELECT seq FROM event_sequence WHERE aggregate_id = ?", (aggregate_id,)).fetchone()
    return -1 if row is None else int(row[0])


def insert(tx: Tx, record: EventRecord, data_text: str) -> int:
    """Store one event (its data already encoded as `data_text`) and advance its aggregate's sequence. Returns its
    store position."""
    tx.execute(
        "INSERT INTO event_sequence (aggregate_id, seq) VALUES (?, ?)"
        " ON CONFLICT (aggregate_id) DO UPDATE SET seq = excluded.seq",
        (record.aggregate_id, record.seq),
    )
    inserted = tx.execute(
        "INSERT INTO event (id, aggregate_id, seq, type, created, location, data) VALUES (?, ?, ?, ?, ?, ?, ?)",
        (
            record.id, record.aggregate_id, record.seq, record.definition.stored_type, record.created,
            None if record.location is None else json.dumps(record.location.wire()),
            data_text,
        ),
    )
    position = inserted.lastrowid
    if position is None:
        raise RuntimeError("SQLite gave the inserted event no rowid")
    return position


def after(reader: Reader, aggregate_id: str, seq: int, limit: int) -> list[EventRecord]:
    """At most `limit` events of `aggregate_id` after `seq` (exclusive), in sequence order."""
    rows = reader.execute(
        "SELECT * FROM event WHERE aggregate_id = ? AND seq > ? ORDER BY seq LIMIT ?", (aggregate_id, seq, limit)
    ).fetchall()
    return [_decode(row) for row in rows]


def from_position(reader: Reader, position: int, limit: int) -> list[tuple[int, EventRecord]]:
    """At most `limit` events committed after store position `position`, oldest first, each with its position."""
    rows = reader.execute(
        "SELECT rowid AS position, * FROM event WHERE rowid > ? ORDER BY rowid LIMIT ?", (position, limit)
    ).fetchall()
    return [(row["position"], _decode(row)) for row in rows]


def every(reader: Reader) -> Iterator[EventRecord]:
    """Every stored event in commit order (replay)."""
    for row in reader.execute("SELECT * FROM event ORDER BY rowid").fetchall():
        yield _decode(row)


def admission_of(reader: Reader, session_id: str, input_id: str) -> EventRecord | None:
    """The `session.input.admitted` event that admitted `input_id` into `session_id`, if any."""
    row = reader.execute(
        "SELECT * FROM event WHERE aggregate_id = ? AND type = ? AND json_extract(data, '$.inputID') = ?",
        (session_id, definition_for(ev.InputAdmitted).stored_type, input_id),
    ).fetchone()
    return None if row is None else _decode(row)


def _decode(row: sqlite3.Row) -> EventRecord:
    definition = BY_STORED_TYPE[row["type"]]
    location = None if row["location"] is None else LocationRef.model_validate_json(row["location"])
    try:
        data = definition.data.model_validate_json(row["data"])
    except ValueError:  # stored before values were cleaned at the door (a lone surrogate escape)
        data = definition.data.model_validate(jsontext.loads(row["data"]))
    return EventRecord(
        id=row["id"], created=row["created"], data=data,
        aggregate_id=row["aggregate_id"], seq=row["seq"], location=location,
    )
