"""The event log: each aggregate's sequence counter, the event rows, and reads after a sequence, after a store
position (`rowid`: the backend makes it commit order) or by the input they admitted."""

from __future__ import annotations

import json
from collections.abc import Iterator

from ....schema import events as ev
from ....schema import jsontext
from ....schema.common import LocationRef
from ....schema.events import BY_STORED_TYPE, EventRecord, definition_for
from .connection import Connection, Row

_ADMITTED = definition_for(ev.InputAdmitted).stored_type
INSERT = "INSERT INTO event (id, aggregate_id, seq, type, created, location, data) VALUES (?, ?, ?, ?, ?, ?, ?)"


def row_of(record: EventRecord, data_text: str) -> tuple[object, ...]:
    """The values of `INSERT` for one event."""
    return (record.id, record.aggregate_id, record.seq, record.definition.stored_type, record.created,
            None if record.location is None else json.dumps(record.location.wire()), data_text)


class SqlEvents:
    """The event log's reads and (on the writer connection) its writes. Inserted rowids are collected in
    `positions`, which the group writer hands back per write once it committed."""

    def __init__(self, conn: Connection) -> None:
        self.conn = conn
        self.positions: list[int] = []

    def latest_seq(self, aggregate_id: str) -> int:
        row = self.conn.execute("SELECT seq FROM event_sequence WHERE aggregate_id = ?", (aggregate_id,)).fetchone()
        return -1 if row is None else int(row[0])

    def allocate_seq(self, aggregate_id: str) -> int:
        # the upsert locks the counter row until commit (writers of one aggregate queue there); a rolled-back savepoint
        # undoes the increment
        row = self.conn.execute(
            "INSERT INTO event_sequence (aggregate_id, seq) VALUES (?, 0)"
            " ON CONFLICT (aggregate_id) DO UPDATE SET seq = event_sequence.seq + 1 RETURNING seq",
            (aggregate_id,)).fetchone()
        return int(row[0])

    def reserve_seq(self, aggregate_id: str, seq: int) -> None:
        self.conn.execute(
            "INSERT INTO event_sequence (aggregate_id, seq) VALUES (?, ?)"
            " ON CONFLICT (aggregate_id) DO UPDATE SET"
            " seq = CASE WHEN excluded.seq > event_sequence.seq THEN excluded.seq ELSE event_sequence.seq END",
            (aggregate_id, seq))

    def insert(self, record: EventRecord, data_text: str) -> None:
        inserted = self.conn.execute(INSERT + " RETURNING rowid", row_of(record, data_text))
        self.positions.append(int(inserted.fetchone()[0]))

    def after(self, aggregate_id: str, seq: int, limit: int) -> list[EventRecord]:
        rows = self.conn.execute(
            "SELECT * FROM event WHERE aggregate_id = ? AND seq > ? ORDER BY seq LIMIT ?", (aggregate_id, seq, limit)
        ).fetchall()
        return [_decode(row) for row in rows]

    def of_types(self, aggregate_id: str, types: tuple[str, ...], after: int, through: int) -> list[EventRecord]:
        rows = self.conn.execute(
            f"SELECT * FROM event WHERE aggregate_id = ? AND seq > ? AND seq <= ? AND type IN"
            f" ({', '.join('?' * len(types))}) ORDER BY seq", (aggregate_id, after, through, *types)).fetchall()
        return [_decode(row) for row in rows]

    def latest_of_types(self, aggregate_id: str, types: tuple[str, ...]) -> EventRecord | None:
        row = self.conn.execute(
            f"SELECT * FROM event WHERE aggregate_id = ? AND type IN ({', '.join('?' * len(types))})"
            " ORDER BY seq DESC LIMIT 1", (aggregate_id, *types)).fetchone()
        return None if row is None else _decode(row)

    def from_position(self, position: int, limit: int) -> list[tuple[int, EventRecord]]:
        rows = self.conn.execute(
            "SELECT rowid AS position, * FROM event WHERE rowid > ? ORDER BY rowid LIMIT ?", (position, limit)
        ).fetchall()
        return [(row["position"], _decode(row)) for row in rows]

    def every(self) -> Iterator[EventRecord]:
        for row in self.conn.execute("SELECT * FROM event ORDER BY rowid").fetchall():
            yield _decode(row)

    def admission_of(self, session_id: str, input_id: str) -> EventRecord | None:
        row = self.conn.execute(
            "SELECT * FROM event WHERE aggregate_id = ? AND type = ? AND json_extract(data, '$.inputID') = ?",
            (session_id, _ADMITTED, input_id),
        ).fetchone()
        return None if row is None else _decode(row)


def _decode(row: Row) -> EventRecord:
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
