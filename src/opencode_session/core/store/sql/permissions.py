"""Saved permissions: the patterns a user allowed "always", remembered per project."""

from __future__ import annotations

from ....schema.ids import ascending
from ....schema.permission import PermissionSavedInfo
from .connection import Connection


class SqlPermissions:
    def __init__(self, conn: Connection) -> None:
        self.conn = conn

    def save(self, project_id: str, action: str, resources: list[str], now: int) -> None:
        self.conn.executemany(
            "INSERT INTO permission_saved (id, project_id, action, resource, time_created)"
            " VALUES (?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
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
