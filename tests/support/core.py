"""Helpers to open a real on-disk store with the session projector for core-level tests."""

from __future__ import annotations

import sqlite3
from contextlib import asynccontextmanager
from pathlib import Path

from opencode_session.core.location import resolve_location
from opencode_session.core.session import Sessions
from opencode_session.core.session.projector import project
from opencode_session.core.store import PROJECTION_TABLES, Store
from tests.support.config import write_global_config


@asynccontextmanager
async def open_sessions(tmp_path: Path):
    """Sessions over a fresh store; the global config declares the models of `tests.support.config.DECLARED`."""
    workdir = tmp_path / "work"
    workdir.mkdir(exist_ok=True)
    write_global_config()
    async with Store(tmp_path / "db.sqlite", project=project) as store:
        yield Sessions(store, resolve_location(workdir))


def snapshot_projections(db_path: Path) -> dict[str, list[tuple]]:
    """Every projection row, ordered, read through a separate connection (what a restart would see)."""
    conn = sqlite3.connect(db_path)
    try:
        return {t: conn.execute(f"SELECT * FROM {t} ORDER BY 1").fetchall() for t in PROJECTION_TABLES}
    finally:
        conn.close()
