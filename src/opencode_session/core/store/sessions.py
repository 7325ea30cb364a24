"""The session table's SQL: the projected Session record (as stored JSON and as SessionV2Info), its Location, its
last activity, and pages of sessions under a filter."""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ...schema.common import LocationRef
from ...schema.session import SessionV2Info
from .keyset import Keyset, KeysetPage, PageRequest, keyset_page

if TYPE_CHECKING:
    from .db import Reader, Tx


def _dump(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"))


def insert(tx: Tx, info: dict[str, Any]) -> None:
    """A new session row from its wire record; it lists after every session created before it."""
    tx.execute(
        "INSERT INTO session (id, project_id, workspace_id, parent_id, directory, title, time_created, time_updated,"
        " created_order, data) VALUES (?, ?, ?, ?, ?, ?, ?, ?, (SELECT coalesce(max(created_order), 0) + 1"
        " FROM session), ?)",
        (
            info["id"], info["projectID"], info["location"].get("workspaceID"), info.get("parentID"),
            info["location"]["directory"], info["title"], info["time"]["created"], info["time"]["updated"],
            _dump(info),
        ),
    )


def load_data(reader: Reader, session_id: str) -> dict[str, Any] | None:
    """The stored wire record of a session, for a projection to change and save."""
    row = reader.execute("SELECT data FROM session WHERE id = ?", (session_id,)).fetchone()
    return None if row is None else json.loads(row[0])


def save_data(tx: Tx, session_id: str, info: dict[str, Any]) -> None:
    tx.execute(
        "UPDATE session SET data = ?, title = ?, directory = ?, workspace_id = ? WHERE id = ?",
        (_dump(info), info["title"], info["location"]["directory"], info["location"].get("workspaceID"), session_id),
    )


def touch(tx: Tx, session_id: str, at: int) -> None:
    """Record activity: the session's `time.updated`."""
    tx.execute("UPDATE session SET time_updated = ? WHERE id = ?", (at, session_id))


def location(reader: Reader, session_id: str) -> LocationRef | None:
    row = reader.execute("SELECT directory, workspace_id FROM session WHERE id = ?", (session_id,)).fetchone()
    return None if row is None else LocationRef(directory=row[0], workspaceID=row[1])


def load(reader: Reader, session_id: str) -> SessionV2Info | None:
    row = reader.execute("SELECT data, time_updated FROM session WHERE id = ?", (session_id,)).fetchone()
    return None if row is None else _info(row)


def _info(row: sqlite3.Row) -> SessionV2Info:
    info = json.loads(row["data"])
    info["time"]["updated"] = row["time_updated"]
    return SessionV2Info.model_validate(info)


@dataclass(frozen=True)
class SessionFilter:
    """Which sessions a list shows; None leaves a field unfiltered. `directory` is the stored (resolved) form."""

    search: str | None = None
    directory: str | None = None
    project: str | None = None
    workspace: str | None = None
    subpath: str | None = None


def page(reader: Reader, where: SessionFilter, request: PageRequest) -> KeysetPage[SessionV2Info]:
    """One page of sessions in creation order; the keys are (time created, creation order)."""
    clauses: list[str] = []
    params: list[Any] = []
    if where.search:
        clauses.append("title LIKE ? ESCAPE '\\'")
        params.append("%" + where.search.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%")
    for column, value in (("directory", where.directory), ("project_id", where.project),
                          ("workspace_id", where.workspace), ("json_extract(data, '$.subpath')", where.subpath)):
        if value:
            clauses.append(f"{column} = ?")
            params.append(value)
    keyset = Keyset("session", ("time_created", "created_order"), tuple(clauses), tuple(params))
    return keyset_page(reader, keyset, request, _info)
