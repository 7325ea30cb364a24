"""The session table: the projected Session record (as stored JSON and as SessionV2Info), its Location,
its last activity, and pages of sessions under a filter."""

from __future__ import annotations

import functools
import json
from typing import TYPE_CHECKING, Any

from ..keyset import KeysetPage, PageRequest
from .connection import Connection, Row
from .keyset import Keyset, keyset_page
from .search import SqlSearch, terms

if TYPE_CHECKING:
    from ....schema.common import LocationRef
    from ....schema.session import SessionV2Info
    from ..rows import SessionFilter


def _dump(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"))


class SqlSessions:
    def __init__(self, conn: Connection, search: SqlSearch | None = None) -> None:
        self.conn = conn
        self.search = search or SqlSearch(conn)

    def insert(self, info: dict[str, Any]) -> None:
        self.conn.execute(
            "INSERT INTO session (id, project_id, workspace_id, parent_id, directory, title, time_created,"
            " time_updated, created_order, data) VALUES (?, ?, ?, ?, ?, ?, ?, ?, (SELECT coalesce(max(created_order),"
            " 0) + 1 FROM session), ?)",
            (
                info["id"], info["projectID"], info["location"].get("workspaceID"), info.get("parentID"),
                info["location"]["directory"], info["title"], info["time"]["created"], info["time"]["updated"],
                _dump(info),
            ),
        )
        self.search.add_title(info["id"], info["title"])

    def load_data(self, session_id: str) -> dict[str, Any] | None:
        row = self.conn.execute("SELECT data FROM session WHERE id = ?", (session_id,)).fetchone()
        return None if row is None else json.loads(row[0])

    def save_data(self, session_id: str, info: dict[str, Any]) -> None:
        self.conn.execute(
            "UPDATE session SET data = ?, title = ?, directory = ?, workspace_id = ?, project_id = ? WHERE id = ?",
            (_dump(info), info["title"], info["location"]["directory"], info["location"].get("workspaceID"),
             info["projectID"], session_id),
        )
        self.search.retitle(session_id, info["title"])

    def touch(self, session_id: str, at: int) -> None:
        self.conn.execute("UPDATE session SET time_updated = ? WHERE id = ?", (at, session_id))

    def location(self, session_id: str) -> LocationRef | None:
        row = self.conn.execute("SELECT directory, workspace_id FROM session WHERE id = ?", (session_id,)).fetchone()
        return None if row is None else _models()[0](directory=row[0], workspaceID=row[1])

    def load(self, session_id: str) -> SessionV2Info | None:
        row = self.conn.execute("SELECT data, time_updated FROM session WHERE id = ?", (session_id,)).fetchone()
        return None if row is None else _info(row)

    def recent(self, limit: int) -> list[dict[str, Any]]:
        """The `limit` most recently updated sessions as stored (the JSON of their SessionV2Info), newest first, the
        later created first at equal times: what `ocs sessions` prints, read without building a model of each."""
        rows = self.conn.execute(
            "SELECT data, time_updated FROM session ORDER BY time_updated DESC, time_created DESC, created_order DESC"
            " LIMIT ?", (limit,))
        return [_stored(row) for row in rows]

    def suspended(self, session_ids: list[str]) -> set[str]:
        found: set[str] = set()
        for start in range(0, len(session_ids), 500):  # under every backend's bound on parameters
            chunk = session_ids[start:start + 500]
            found.update(row[0] for row in self.conn.execute(
                f"SELECT id FROM session WHERE time_suspended IS NOT NULL AND id IN ({', '.join('?' * len(chunk))})",
                chunk))
        return found

    def page(self, where: SessionFilter, request: PageRequest) -> KeysetPage[SessionV2Info]:
        clauses: list[str] = []
        params: list[Any] = []
        for column, value in (("directory", where.directory), ("project_id", where.project),
                              ("workspace_id", where.workspace), ("json_extract(data, '$.subpath')", where.subpath)):
            if value:
                clauses.append(f"{column} = ?")
                params.append(value)
        if where.parent == "null":
            clauses.append("parent_id IS NULL")
        elif where.parent:
            clauses.append("parent_id = ?")
            params.append(where.parent)
        if where.search is not None and where.search.strip():
            # ranked: title matches before text matches (in "desc" order), each newest first
            words = terms(where.search)
            if not words:
                return KeysetPage([])  # nothing in it a session's words could match
            return self.search.page(words, clauses, params, request, _info)
        keyset = Keyset("session", ("time_created", "created_order"), tuple(clauses), tuple(params))
        return keyset_page(self.conn, keyset, request, _info)


@functools.cache
def _models() -> tuple[type[LocationRef], type[SessionV2Info]]:
    """The public models, imported on first use: a reader of stored JSON alone (`recent`) loads no pydantic."""
    from ....schema.common import LocationRef
    from ....schema.session import SessionV2Info

    return LocationRef, SessionV2Info


def _stored(row: Row) -> dict[str, Any]:
    info: dict[str, Any] = json.loads(row["data"])
    info["time"]["updated"] = row["time_updated"]  # the last activity is kept in its column
    return info


def _info(row: Row) -> SessionV2Info:
    return _models()[1].model_validate(_stored(row))
