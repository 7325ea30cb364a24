"""Live-only events across hosts over PostgreSQL's NOTIFY: a bounded outbox and its sender task (dropping and
counting under overload, never making the publisher wait), the numbered pieces a message is cut into under the
payload limit, and their reassembly per origin host."""

from __future__ import annotations

import asyncio
import collections
import json
import logging
from collections.abc import Callable

import psycopg

from ....schema import jsontext
from ....schema.events import DEFINITIONS, EventRecord

log = logging.getLogger(__name__)

# PostgreSQL refuses a notification payload of 8000 bytes or more; what a piece carries stays below this, its
# header included.
PAYLOAD_LIMIT = 7900
# Events waiting to be sent at most: past it the newest are dropped (and counted) rather than the publisher wait.
OUTBOX = 10_000
# Bytes of encoded events one message (one transaction of notifications) carries at most.
MESSAGE_BYTES = 64_000

# Hands a received live event to the store, with the newest durable position its origin host had published before
# it (the store holds it until it announced that position too).
LiveIn = Callable[[EventRecord, int], None]


def encode(record: EventRecord, after: int) -> str:
    """One live event as a line of JSON text that always encodes to UTF-8 (JSON escapes every newline in it)."""
    return jsontext.encode([after, record.id, record.created, record.type, record.aggregate_id,
                            record.data.wire()])[1]


def decode(line: str) -> tuple[EventRecord, int] | None:
    """A line `encode` wrote as the event and its `after`; None for a type this host does not know."""
    after, event_id, created, type_, aggregate_id, data = json.loads(line)
    definition = DEFINITIONS.get(type_)
    if definition is None or definition.durable:
        return None
    return EventRecord(id=event_id, created=created, data=definition.data.model_validate(data),
                       aggregate_id=aggregate_id), int(after)


def pieces(origin: str, number: int, text: str, limit: int = PAYLOAD_LIMIT) -> list[str]:
    """`text` as the numbered payloads `origin:number:index:count:body`, each under `limit` UTF-8 bytes; a body
    is cut only between characters, so every piece is valid text on its own."""
    data = text.encode("utf-8")
    # the header's own size, with the largest index and count this message could need
    room = limit - len(f"{origin}:{number}:{len(data)}:{len(data)}:".encode())
    if room < 4:
        raise ValueError("the payload limit leaves no room for a body")
    bodies: list[bytes] = []
    start = 0
    while start < len(data) or not bodies:
        end = min(start + room, len(data))
        while end < len(data) and data[end] & 0xC0 == 0x80:  # a continuation byte: cut before its character
            end -= 1
        bodies.append(data[start:end])
        start = end
    count = len(bodies)
    return [f"{origin}:{number}:{index}:{count}:{body.decode('utf-8')}" for index, body in enumerate(bodies)]


class Reassembly:
    """Pieces back into messages, per origin host. A piece out of its message's order (one lost in between, or a
    message begun again) discards the partial message and counts it in `lost`."""

    def __init__(self, own: str) -> None:
        self.own = own
        self.lost = 0
        self._partial: dict[str, tuple[str, int, list[str]]] = {}  # origin -> (number, count, bodies so far)

    def add(self, payload: str) -> str | None:
        """The whole message once its last piece arrived; None before, and for this host's own pieces."""
        try:
            origin, number, index_text, count_text, body = payload.split(":", 4)
            index, count = int(index_text), int(count_text)
        except ValueError:
            self.lost += 1
            log.warning("an unreadable live event piece from another host was dropped")
            return None
        if origin == self.own:
            return None
        partial = self._partial.pop(origin, None)
        if index == 0:
            if partial is not None:
                self.lost += 1  # its remaining pieces never came
            partial = (number, count, [])
        elif partial is None or partial[0] != number or partial[1] != count or len(partial[2]) != index:
            self.lost += 1
            return None
        partial[2].append(body)
        if index + 1 == count:
            return "".join(partial[2])
        self._partial[origin] = partial
        return None


class LiveSender:
    """The outbox of this host's live events and the task that sends them, on a connection of its own, in the order
    they were put. `put` never waits: a full outbox drops the event (`dropped` counts them, as it counts the events
    of a message the database refused); a lost connection is made again."""

    def __init__(self, url: str, origin: str, channel: Callable[[], str], *, outbox: int = OUTBOX) -> None:
        self._url = url
        self._origin = origin
        self._channel = channel
        self._outbox: collections.deque[tuple[EventRecord, int]] = collections.deque()
        self._limit = outbox
        self._ready = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._number = 0
        self.sent = 0
        self.dropped = 0
        self.server_pid: int | None = None  # the database's process serving the current connection

    def start(self) -> None:
        self._task = asyncio.create_task(self._serve(), name="ocs-pg-live-sender")

    def put(self, record: EventRecord, after: int) -> None:
        if len(self._outbox) >= self._limit:
            if not self.dropped % 1000:
                log.warning("live events are published faster than they reach the other hosts: dropping some "
                            "(%d so far)", self.dropped + 1)
            self.dropped += 1
            return
        self._outbox.append((record, after))
        self._ready.set()

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass
            self._task = None

    def _message(self) -> tuple[str, int]:
        """The next message from the outbox: as many events as fit its size, oldest first, and their count."""
        lines: list[str] = []
        size = 0
        while self._outbox and size < MESSAGE_BYTES:
            line = encode(*self._outbox.popleft())
            lines.append(line)
            size += len(line) + 1
        return "\n".join(lines), len(lines)

    async def _serve(self) -> None:
        delay = 0.1
        while True:
            try:
                async with await psycopg.AsyncConnection.connect(self._url, autocommit=True) as conn:
                    # a live event that is lost is what a subscriber accepts already: no flush to disk per message
                    await conn.execute("SET synchronous_commit = off")
                    self.server_pid = conn.info.backend_pid
                    delay = 0.1
                    while True:
                        if not self._outbox:
                            self._ready.clear()
                            await self._ready.wait()
                        text, count = self._message()
                        self._number += 1
                        payloads = pieces(self._origin, self._number, text)
                        try:
                            await conn.execute("SELECT count(pg_notify(%s, p)) FROM unnest(%s::text[]) AS p",
                                               (self._channel(), payloads))
                        except psycopg.Error:
                            self.dropped += count
                            raise
                        self.sent += count
            except asyncio.CancelledError:
                raise
            except psycopg.Error as failed:
                log.warning("lost the PostgreSQL connection sending live events (%s); reconnecting", failed)
                await asyncio.sleep(delay)
                delay = min(delay * 2, 5.0)


def receive(reassembly: Reassembly, payload: str, deliver: LiveIn | None) -> None:
    """Hand the events of a message whose last piece `payload` is to `deliver`, in their order."""
    message = reassembly.add(payload)
    if message is None or deliver is None:
        return
    for line in message.split("\n"):
        try:
            decoded = decode(line)
        except (ValueError, TypeError) as bad:
            reassembly.lost += 1
            log.warning("a live event from another host could not be read: %s", bad)
            continue
        if decoded is not None:
            deliver(*decoded)

