"""The V1 bus streams as OpenCode serves them: `GET /event` tells one directory's events (the client's `directory`,
else the server's own), `GET /global/event` every directory's, each in an envelope `{directory, project, payload}`.
Both start with `server.connected` (no history: OpenCode replays none), then send `server.heartbeat` when quiet."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import anyio

from ...core.runtime import Runtime
from ...schema.errors import TaggedError
from ...schema.ids import event_id
from ..sse import frame
from .events import SETTLED, Event, Streams, V1Stream


def _server(kind: str) -> Event:
    return {"id": event_id(), "type": kind, "properties": {}}


class _Places:
    """Where each session works (its directory and project), read once per stream."""

    def __init__(self, rt: Runtime) -> None:
        self.rt = rt
        self.known: dict[str, tuple[str, str]] = {}

    async def of(self, event: Event) -> tuple[str, str] | None:
        props = event["properties"]
        sid = props.get("sessionID")
        if not isinstance(sid, str):
            return None
        info = props.get("info")
        if event["type"].startswith("session.") and isinstance(info, dict) and "directory" in info:
            self.known[sid] = (info["directory"], info["projectID"])
        if sid not in self.known:
            try:
                session = await self.rt.sessions.get(sid)
            except TaggedError:  # removed meanwhile: its events have no directory left to go to
                return None
            self.known[sid] = (session.location.directory, session.projectID)
        return self.known[sid]


async def bus_events(rt: Runtime, streams: Streams, *, directory: str | None, heartbeat: float) -> AsyncIterator[bytes]:
    """The V1 translation of the instance's live bus: one directory's events bare (`directory` given, `/event`),
    or every directory's in the global envelope (`directory` None, `/global/event`). An event of no session
    (`server.*`) goes to every stream, and in the global envelope names no directory."""
    subscription = rt.store.live.subscribe()
    stream = V1Stream(rt)
    places = _Places(rt)
    streams.open.add(stream)

    def encode(event: Event, place: tuple[str, str] | None) -> bytes:
        if directory is not None:
            return frame(event)
        envelope: dict[str, Any] = {"directory": place[0], "project": place[1]} if place else {}
        return frame({**envelope, "payload": event})

    try:
        yield encode(_server("server.connected"), None)
        while True:
            batch: list[Any] | None = None
            with anyio.move_on_after(heartbeat):
                batch = await subscription.next()
            if batch is None:
                yield encode(_server("server.heartbeat"), None)
                continue
            settled = [item.aggregate_id for item in batch if item.type in SETTLED]
            frames: list[bytes] = []
            for event in await stream.translate(batch):
                place = await places.of(event)
                if directory is None or "sessionID" not in event["properties"] or (
                        place is not None and place[0] == directory):
                    frames.append(encode(event, place))
            if frames:
                yield b"".join(frames)
            for sid in settled:  # resumed: the frames above were handed to the reader's connection
                stream.idle_delivered(sid)
    finally:
        streams.open.discard(stream)
