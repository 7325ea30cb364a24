"""The Store: durable events appended with their projections in one transaction on a backend, sequence numbers the
backend allocates, and readers told in commit order (the per-session doorbells, the session tails and the live bus),
with live events published behind the writes queued before them (other hosts' behind the durable events their host
had announced before them)."""

from __future__ import annotations

import asyncio
import collections
import contextlib
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TypeVar

import anyio

from ...schema import jsontext
from ...schema.base import Struct
from ...schema.common import LocationRef
from ...schema.events import EventRecord, definition_of
from ...schema.ids import event_id
from ..redaction import Redactor
from ..telemetry import hooks
from .backend import Backend
from .backends import open_backend
from .feed import DurableFeed, LiveBus
from .fencing import SessionFencedError, current_fence, current_tenure
from .rows import (
    ContextWrites,
    ContinuationWrites,
    EventWrites,
    InstructionWrites,
    Lease,
    LeaseWrites,
    LifecycleWrites,
    MessageWrites,
    PendingWrites,
    PermissionWrites,
    Reader,
    SessionWrites,
    StatsReads,
    SuspensionWrites,
    Writer,
)
from .tail import Tails

T = TypeVar("T")
# Other hosts' live events held at most while they wait for a durable position (see `Store._foreign_live`).
_FOREIGN_WAITING = 10_000
Projector = Callable[["Tx", EventRecord], None]
CommitHook = Callable[["Tx", EventRecord], None]


def now_ms() -> int:
    return int(time.time() * 1000)


def live_event(data: Struct, aggregate_id: str) -> EventRecord:
    """A live-only event: no sequence, published once and never stored."""
    return EventRecord(id=event_id(), created=now_ms(), data=data, aggregate_id=aggregate_id)


class Tx:
    """One open write transaction: the backend's operations (it is a `Reader` that sees its own writes), plus
    `append`, which takes the next sequence from the backend, runs the projections and the optional commit hook."""

    def __init__(self, store: Store, rows: Writer) -> None:
        self.store = store
        self.rows = rows
        self.events: EventWrites = rows.events
        self.sessions: SessionWrites = rows.sessions
        self.messages: MessageWrites = rows.messages
        self.pending: PendingWrites = rows.pending
        self.instructions: InstructionWrites = rows.instructions
        self.contexts: ContextWrites = rows.contexts
        self.permissions: PermissionWrites = rows.permissions
        self.suspension: SuspensionWrites = rows.suspension
        self.leases: LeaseWrites = rows.leases
        self.continuation: ContinuationWrites = rows.continuation
        self.lifecycle: LifecycleWrites = rows.lifecycle
        self.stats: StatsReads = rows.stats
        self.appended: list[EventRecord] = []
        self.live: list[EventRecord] = []

    def latest_seq(self, aggregate_id: str) -> int:
        return self.events.latest_seq(aggregate_id)

    def append(
        self,
        data: Struct,
        *,
        location: LocationRef | None = None,
        commit_hook: CommitHook | None = None,
        id: str | None = None,
        created: int | None = None,
    ) -> EventRecord:
        definition = definition_of(data)
        if not definition.durable:
            raise ValueError(f"{definition.type} is live-only; publish it with publish_live")
        wire = data.wire()
        aggregate_id: str = wire["sessionID"]  # every durable event belongs to a session
        clean, text = jsontext.encode(wire)
        redactor = self.store.redactor
        if redactor.active and redactor.found(text):  # a secret echoed (by the model, a tool) is never stored
            clean = redactor.value(clean)
            clean, text = jsontext.encode(clean)
        if clean is not wire:  # text from outside (a provider, a tool) that JSON cannot carry is never stored as is
            data = type(data).model_validate(clean)
        record = EventRecord(
            id=id or event_id(), created=created or now_ms(), data=data, aggregate_id=aggregate_id,
            seq=self.events.allocate_seq(aggregate_id), location=location,
        )
        self.store.project(self, record)
        if commit_hook is not None:
            commit_hook(self, record)
        self.events.insert(record, text)
        self.appended.append(record)
        return record

    def publish_live(self, data: Struct, aggregate_id: str) -> None:
        """Queue a live-only event to be published after this transaction commits."""
        self.live.append(live_event(self.store.redacted(data), aggregate_id))


class Store:
    """Owns one database through its backend (`database` is a path, `:memory:`, or a backend's address)."""

    def __init__(self, database: str | Path | Backend, project: Projector | None = None,
                 live_capacity: int = 4096, redactor: Redactor | None = None, lease_ms: int | None = None) -> None:
        # the secrets no event may carry, durable or live (the runtime adds the ones its configuration names)
        self.redactor = redactor if redactor is not None else Redactor()
        self.backend: Backend = (open_backend(database, lease_ms=lease_ms) if isinstance(database, (str, Path))
                                 else database)
        self.path = self.backend.description
        self._projector = project
        # the live events published since the newest write not yet settled: they wait for it, so none overtakes it
        self._held: list[EventRecord] | None = None
        self._tails = Tails()
        self.durable = DurableFeed()
        self.live = LiveBus(self._events_from, capacity=live_capacity)
        self.signals: list[Callable[[str], None]] = []  # who hears other hosts' signals (see `Backend.signal`)
        # where other hosts read this database: each live event also goes to them (`Backend.broadcast`)
        self._broadcast = self.backend.broadcast if self.backend.shared else None
        # other hosts' live events waiting for the durable position their host had announced before them
        self._waiting: collections.deque[tuple[int, EventRecord]] = collections.deque()
        self.backend.listen(self._announce_foreign, self._signalled, self._foreign_live)

    # --- lifecycle ---------------------------------------------------------------------------------

    async def open(self) -> Store:
        """Open (and migrate) the database; raises StoreError (DatabaseInUseError while another process holds a
        database that admits one)."""
        await self.backend.open()
        return self

    async def close(self) -> None:
        await self.backend.close()
        self.live.close()

    async def __aenter__(self) -> Store:
        return await self.open()

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # --- projection ----------------------------------------------------------------------------------

    def project(self, tx: Tx, record: EventRecord) -> None:
        if self._projector is not None:
            self._projector(tx, record)

    # --- transactions ----------------------------------------------------------------------------------

    def submit(self, fn: Callable[[Tx], T], *, lazy: bool = False) -> asyncio.Future[T]:
        """Queue `fn` to run in a write transaction without waiting for it. Under a fence (`fencing.set_fence`) the
        write is refused with SessionFencedError once that lease changed hands, or the execution gave it up here
        (LeaseLapsedError: not renewed in time). It commits together with whatever else
        is queued (each write rolls back alone if it raises); readers are notified in commit order, before the
        returned future resolves. Writes commit in submission order, and live events published after this call
        reach readers after its events. A `lazy` write waits for the next one that is not, a live event that must
        follow it, or `kick`, to share their commit. The caller must await the future (or it loses the write's
        error), after a `kick` if it was lazy."""
        held: list[EventRecord] = []
        self._held = held
        tx_of: list[Tx] = []
        fence = current_fence()
        tenure = current_tenure() if fence is not None else None

        def _run(rows: Writer) -> T:
            if tenure is not None:
                # LeaseLapsedError once the execution gave its lease up here (lost, or not renewed in time), even
                # while the row still names it: its next owner settles what it left open, as after a crash
                tenure.fence()
            if fence is not None and not rows.leases.holds(fence):
                hooks.write_fenced()
                raise SessionFencedError(fence)
            tx = Tx(self, rows)
            result = fn(tx)
            tx_of[:] = [tx]  # a backend may run a write again (its first transaction rolled back): the last counts
            return result

        def _settle(_result: object, error: BaseException | None, positions: list[int]) -> None:
            if error is None:
                self._announce(tx_of[0], positions)
            elif tenure is not None and isinstance(error, SessionFencedError):
                tenure.lose()  # a newer epoch holds the session: its execution here stops, sending nothing more
            for record in held:
                self._publish_live(record)
            if self._held is held:
                self._held = None

        return self.backend.submit(_run, _settle, lazy=lazy)

    def kick(self) -> None:
        """Commit the lazy writes queued so far, without waiting for a write that is not."""
        self.backend.kick()

    async def renew_lease(self, lease: Lease, expires: int) -> bool:
        """Extend a lease still held as `lease` to `expires`, at once (not behind the queued writes); False when it
        changed hands. StoreError when the database did not answer."""
        return await self.backend.renew_lease(lease, expires)

    async def write(self, fn: Callable[[Tx], T]) -> T:
        """Run `fn` inside a write transaction (see `submit`) and return its result once it is durable. Once
        submitted the write runs to its end (and is announced) even if the caller is cancelled meanwhile; the caller
        then still waits for it before seeing the cancellation."""
        future = self.submit(fn)
        try:
            return await asyncio.shield(future)
        except asyncio.CancelledError:
            # shielded from a cancel scope too: its cancellation is delivered again and again, and would cancel the
            # write's future itself
            with anyio.CancelScope(shield=True), contextlib.suppress(Exception):
                await future
            raise

    async def append(self, data: Struct) -> EventRecord:
        """Commit one durable event, and what it projects, in a transaction of its own."""
        return await self.write(lambda tx: tx.append(data))

    def _announce(self, tx: Tx, positions: list[int]) -> None:
        for position, record in zip(positions, tx.appended, strict=True):
            self._tails.add(record)
            self.durable.notify(record.aggregate_id)
            self.live.publish(record, position)
            if self._waiting:
                self._release_foreign_live()
        for record in tx.live:
            self._publish_live(record)

    def _announce_foreign(self, committed: list[tuple[int, EventRecord]]) -> None:
        """Events another host committed, in commit order with this host's own: to the doorbells and the bus."""
        for position, record in committed:
            self.durable.notify(record.aggregate_id)
            self.live.publish(record, position)
            if self._waiting:
                self._release_foreign_live()

    def _publish_live(self, record: EventRecord) -> None:
        """A live-only event of this host: to the bus, and to the other hosts after the same durable position."""
        self.live.publish(record)
        if self._broadcast is not None:
            self._broadcast(record, self.live.position)

    def _foreign_live(self, record: EventRecord, after: int) -> None:
        """A live-only event another host published once it had announced the durable event at `after`: to the bus
        once this host announced that one too, so it never overtakes a durable event that came before it there."""
        if self._waiting or after > self.live.position:
            if len(self._waiting) >= _FOREIGN_WAITING:
                self._waiting.popleft()  # nothing announces the position they wait for: the oldest give way
            self._waiting.append((after, record))
        else:
            self.live.publish(record)

    def _release_foreign_live(self) -> None:
        waiting, position = self._waiting, self.live.position
        while waiting and waiting[0][0] <= position:
            self.live.publish(waiting.popleft()[1])

    def _signalled(self, payload: str) -> None:
        for hear in list(self.signals):
            hear(payload)

    async def signal(self, payload: str) -> None:
        """Send a short text to every host on the database (see `Backend.signal`)."""
        await self.backend.signal(payload)

    def redacted(self, data: Struct) -> Struct:
        """A live event without the redactor's secrets: a streamed delta is cut with the text before it in mind."""
        redactor = self.redactor
        if not redactor.active:
            return data
        delta = getattr(data, "delta", None)
        if isinstance(delta, str):
            stream = (type(data).__name__, getattr(data, "sessionID", None), getattr(data, "stepID", None),
                      getattr(data, "ordinal", None), getattr(data, "callID", None))
            cleaned = redactor.delta(stream, delta)
            return data if cleaned == delta else data.model_copy(update={"delta": cleaned})
        wire = data.wire()
        clean = redactor.value(wire)
        return data if clean is wire else type(data).model_validate(clean)

    def publish_live(self, data: Struct, aggregate_id: str) -> None:
        record = live_event(self.redacted(data), aggregate_id)
        if self._held is not None:
            self._held.append(record)  # after the write queued before it, which must commit now
            self.backend.kick()
        else:
            self._publish_live(record)

    def read(self, fn: Callable[[Reader], T]) -> Awaitable[T]:
        """Run a read-only function on the backend's read handle; it sees every write already settled."""
        return self.backend.read(fn)

    # --- the log -------------------------------------------------------------------------------------

    async def events_after(self, aggregate_id: str, after: int, limit: int = 100) -> list[EventRecord]:
        """At most `limit` events of the session after seq `after`; a follower that keeps pace gets them from the
        session's in-memory tail, unless other hosts write the database too (the tail would lag their commits)."""
        recent = None if self.backend.shared else self._tails.after(aggregate_id, after, limit)
        if recent is not None:
            return recent
        return await self.read(lambda reader: reader.events.after(aggregate_id, after, limit))

    async def _events_from(self, position: int, limit: int) -> list[tuple[int, EventRecord]]:
        """Durable events committed after a store position (commit-ordered by the backend), oldest first."""
        return await self.read(lambda reader: reader.events.from_position(position, limit))

    async def latest_seq(self, aggregate_id: str) -> int:
        return await self.read(lambda reader: reader.events.latest_seq(aggregate_id))

    async def rebuild_projections(self) -> None:
        """Clear the projections and replay every stored event through the projector, in one transaction. The
        state beside them reads the same afterwards; replay publishes nothing."""

        def _rebuild(tx: Tx) -> None:
            def replay() -> None:
                for record in tx.events.every():
                    self.project(tx, record)

            tx.rows.replace_projections(replay)
            tx.live.clear()  # the usage of old Steps is no news to live readers

        await self.write(_rebuild)
