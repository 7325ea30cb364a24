"""Helpers to open a real on-disk store with the session projector for core-level tests."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from opencode_session.core.location import resolve_location
from opencode_session.core.session import Sessions
from opencode_session.core.session.projector import project
from opencode_session.core.store import Store
from tests.support.config import write_global_config


@asynccontextmanager
async def open_sessions(tmp_path: Path, live_capacity: int = 4096, wake: Callable[[str], None] | None = None):
    """Sessions over a fresh store (ringing `wake`); the global config declares the models of
    `tests.support.config.DECLARED`."""
    workdir = tmp_path / "work"
    workdir.mkdir(exist_ok=True)
    write_global_config()
    async with Store(tmp_path / "db.sqlite", project=project, live_capacity=live_capacity) as store:
        yield Sessions(store, resolve_location(workdir), wake=wake)


async def projected_state(sessions: Sessions) -> dict[str, Any]:
    """What the read model answers, as wire data: the session list and, for each session, its record, every message,
    its pending input and its context. Replay rebuilt the projections faithfully exactly when this is unchanged."""
    listed, links = await sessions.list(limit=200, order="asc")
    while links.next is not None:
        more, links = await sessions.list(cursor=links.next)
        listed += more
    state: dict[str, Any] = {"list": [info.wire() for info in listed]}
    for info in listed:
        page, message_links = await sessions.messages(info.id, limit=200, order="asc")
        messages = list(page)
        while message_links.next is not None:
            page, message_links = await sessions.messages(info.id, cursor=message_links.next)
            messages += page
        state[info.id] = {
            "session": (await sessions.get(info.id)).wire(),
            "messages": [m.wire() for m in messages],
            "pending": [p.wire() for p in await sessions.pending(info.id)],
            "context": [m.wire() for m in await sessions.context(info.id)],
        }
    return state
