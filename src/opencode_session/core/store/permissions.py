"""The SQL of saved permissions: the patterns a user allowed "always", remembered per project."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ...schema.ids import ascending
from ...schema.permission import PermissionSavedInfo

if TYPE_CHECKING:
    from .db import Reader, Tx


def save(tx: Tx, project_id: str, action: str, resources: list[str], now: int) -> None:
    """Remember each resource pattern as allowed for `action` in the project; one already saved stays as it is."""
    tx.executemany(
        "INSERT OR IGNORE INTO permission_saved (id, project_id, action, resource, time_created)"
        " VALUES (?, ?, ?, ?, ?)",
        [(ascending("prm"), project_id, action, resource, now) for resource in resources])


def listed(reader: Reader, project_id: str | None = None) -> list[PermissionSavedInfo]:
    """Saved permissions, oldest first; all projects' when `project_id` is None."""
    sql = "SELECT id, project_id, action, resource FROM permission_saved"
    params: tuple[str, ...] = ()
    if project_id is not None:
        sql += " WHERE project_id = ?"
        params = (project_id,)
    rows = reader.execute(sql + " ORDER BY id", params).fetchall()
    return [PermissionSavedInfo(id=r[0], projectID=r[1], action=r[2], resource=r[3]) for r in rows]


def remove(tx: Tx, saved_id: str) -> None:
    tx.execute("DELETE FROM permission_saved WHERE id = ?", (saved_id,))
