"""Session History selection: projected messages after the latest compaction and the instruction-baseline cutoff."""

from __future__ import annotations

import sqlite3


def baseline_seq(conn: sqlite3.Connection, session_id: str) -> int:
    try:
        row = conn.execute("SELECT baseline_seq FROM instruction_checkpoint WHERE session_id = ?",
                           (session_id,)).fetchone()
    except sqlite3.OperationalError:  # before the checkpoint migration exists
        return -1
    return -1 if row is None else int(row[0])


def active_history(conn: sqlite3.Connection, session_id: str) -> list[str]:
    """Message JSON in seq order: from the latest completed compaction on, minus Instruction Updates already
    folded into the stored baseline."""
    cutoff = baseline_seq(conn, session_id)
    row = conn.execute(
        "SELECT seq FROM session_message WHERE session_id = ? AND type = 'compaction'"
        " AND coalesce(json_extract(data, '$.status'), 'completed') = 'completed' ORDER BY seq DESC LIMIT 1",
        (session_id,),
    ).fetchone()
    start = -1 if row is None else int(row[0]) - 1
    rows = conn.execute(
        "SELECT data FROM session_message WHERE session_id = ? AND seq > ? AND NOT (type = 'system' AND seq <= ?)"
        " ORDER BY seq",
        (session_id, start, cutoff),
    ).fetchall()
    return [r[0] for r in rows]
