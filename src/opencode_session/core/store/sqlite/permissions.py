"""Saved permissions in SQLite: the patterns a user allowed "always", remembered per project."""

from __future__ import annotations

import sqlite3

from ....schema.ids import ascending
from ....schema.permission import PermissionSavedInfo


class SqlitePermissions:
    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn

    def save(self, project_id: str, action: str, resources: list[str], now: int) -> None:
        self.conn.executemany(
            "INSERT OR IGNORE INTO permission_saved (id, project_id, action, resource, time_created)"
            " VALUES (?, ?, ?, ?, ?)",
            [(ascending("prm"), project_id, action, resource, now) for resource in resources])

    def listed(self, project_id: str | None = None) -> list[PermissionSavedInfo]:
        sql = "SELECT id, project_id, action, resource FROM permission_saved"
        params: tuple[str, ...] = ()
        if project_id is not None:
            sql += " WHERE project_id = ?"
            params = (project_id,)
        rows = self.conn.execute(sql + " ORDER BY id", params).fetchall()
        return [PermissionSavedInfo(id=r[0], projectID=r[1], action=r[2], resource=r[3]) for r in rows]

    def remove(self, saved_id: str) -> None:
        self.conn.execute("DELETE FROM permission_saved WHERE id = ?", (saved_id,))
