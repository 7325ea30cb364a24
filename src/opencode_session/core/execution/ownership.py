"""Which host executes a session when several share one database: session leases taken at drain start, renewed
while the drain runs and released with its terminal event, and trusted by the drain only as long as its own clock
says they cannot have expired (`LeaseTenure`); what reaches a host that does not own a session forwarded to the
owner by a database signal; and a sweeper that takes over the sessions of a host that died."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import logging
import math
import os
import secrets
import socket
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Literal

from ..cancellation import TaskScope
from ..store import Lease, LeaseLapsedError, Reader, Store, StoreError, Tx, now_ms
from ..telemetry import hooks

log = logging.getLogger(__name__)

# How long a lease lasts unless renewed; the owner renews it every third of that. A host that stops renewing (dead,
# paused, cut off) loses its sessions to another host this long after its last renewal.
DEFAULT_TTL_MS = 10_000
# A renewal is trusted for the lifetime less this share of it (by the renewing host's monotonic clock, from the moment
# the renewal was sent): what is left covers clock drift between hosts and the time a request takes to leave.
MARGIN_SHARE = 1 / 3
SWEEP_LATE_S = 0.002  # how long after a lease's expiry the sweep looks (`expired` is strictly past)
_SIGNAL = "session"  # the signal kind: {"kind": "session", "to": host, "session": id, "do": ..., ...}
_ANY = "*"  # `to` of a signal every host but its sender (`from`) hears

# what this host does with an action another host forwarded to it: (session ID, the signal as sent)
ForwardedAction = Callable[[str, dict[str, Any]], None]


def host_name() -> str:
    """This process's identity as a lease owner: its machine, process and a random part (a restarted process on
    the same machine and pid is still another owner)."""
    return f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(3)}"


class InvalidLeaseTtl(ValueError):
    """`OCS_LEASE_TTL_MS` set to something other than a whole number of milliseconds, at least 300."""


def lease_ttl_ms(env: Mapping[str, str]) -> int:
    """`$OCS_LEASE_TTL_MS` when set (InvalidLeaseTtl unless it is a whole number of at least 300), else 10 s."""
    raw = env.get("OCS_LEASE_TTL_MS")
    if raw is None:
        return DEFAULT_TTL_MS
    if not raw.strip().isdigit() or int(raw) < 300:
        raise InvalidLeaseTtl(f"OCS_LEASE_TTL_MS={raw!r} is not a lease lifetime: a whole number of milliseconds,"
                              " at least 300 (the default is 10000)")
    return int(raw)


class LeaseTenure:
    """A drain's hold on its session's lease as this process's monotonic clock sees it: trusted until the lifetime
    less a margin (`MARGIN_SHARE`) has passed since the last renewal was sent. `confirm` (what a provider request or
    a tool run asks first, through `store.confirm_lease`) renews an untrusted one before answering; a renewal that
    finds the lease changed hands, or that cannot be made before the lease surely expired, loses it: `lost` is called
    once and nothing more is sent."""

    def __init__(self, ownership: Ownership, lease: Lease, renewed: float, lost: Callable[[], None]) -> None:
        self.ownership = ownership
        self.lease = lease
        self.renewed = renewed  # monotonic seconds when the write behind the lease's current expiry was sent
        self.state: Literal["held", "lost", "released"] = "held"
        self._lost = lost
        self._renewal: asyncio.Future[None] | None = None

    def trusted(self) -> bool:
        """Held, and renewed recently enough that it cannot have expired (margin included)."""
        return self.state == "held" and self.ownership.clock() < self.renewed + self.ownership.trusted_s

    async def confirm(self) -> None:
        if self.state == "released":  # the execution ended and let it go: what it started may still finish
            return
        if not self.trusted():
            await self.renew()
            if not self.trusted():
                raise LeaseLapsedError(self.lease)

    async def renew(self, within: float | None = None) -> None:
        """Renew the lease now (one renewal at a time, however many ask); wait for it at most `within` seconds (the
        renewal goes on: a database that answers late may still extend the lease)."""
        if self.state != "held":
            return
        renewal = self._renewal
        if renewal is None or renewal.done():
            renewal = self._renewal = asyncio.ensure_future(self._renew())
        if within is None:
            await asyncio.shield(renewal)
            return
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.shield(renewal), max(within, 0.0))

    async def _renew(self) -> None:
        own = self.ownership
        sent = own.clock()
        try:
            kept = await own.store.renew_lease(self.lease, now_ms() + own.ttl_ms)
        except StoreError as failed:
            log.warning("could not renew the lease of session %s: %s", self.lease.session_id, failed)
            if own.clock() >= self.renewed + own.ttl_ms / 1000:
                self.lose(unconfirmed=True)  # by this host's own clock the lease has expired: someone may take it
            return
        if kept:
            self.renewed = max(self.renewed, sent)
        else:
            self.lose()

    def fence(self) -> Lease | None:
        """The lease to write under while the execution holds it (None once it released it); LeaseLapsedError once
        it was lost."""
        if self.state == "lost":
            raise LeaseLapsedError(self.lease)
        return self.lease if self.state == "held" else None

    def lose(self, unconfirmed: bool = False) -> None:
        """The lease changed hands (a renewal or a fenced write found a newer epoch), or may have expired
        (`unconfirmed`: no renewal could be made while it was surely held): the execution stops; `lost` is called
        once."""
        if self.state == "held":
            self.state = "lost"
            if unconfirmed:
                log.warning("session %s: lease epoch %d could not be renewed in time (another host may take it);"
                            " this host stops executing it", self.lease.session_id, self.lease.epoch)
            else:
                log.warning("session %s was taken over by another host (lease epoch %d lost); this host stops"
                            " executing it", self.lease.session_id, self.lease.epoch)
            self._lost()

    def end(self, lost: bool) -> None:
        """The execution ended: it released the lease (or found it lost)."""
        if self.state == "held":
            self.state = "lost" if lost else "released"


class Ownership:
    """This host's side of session leases on a shared database."""

    def __init__(self, store: Store, host: str, ttl_ms: int = DEFAULT_TTL_MS,
                 clock: Callable[[], float] = time.monotonic,
                 on_forwarded: Mapping[str, ForwardedAction] | None = None) -> None:
        self.store = store
        self.host = host
        self.ttl_ms = ttl_ms
        self.clock = clock
        self.trusted_s = ttl_ms * (1 - MARGIN_SHARE) / 1000  # how long a renewal is trusted, by `clock`
        self.on_forwarded = dict(on_forwarded or {})  # what to do with a forwarded action, by its name ("wake", ...)
        self._sweeper = TaskScope("the lease ownership")
        self._taken: dict[tuple[str, int], float] = {}  # when the write that took a lease was sent, until its tenure
        self._tenures: dict[tuple[str, int], LeaseTenure] = {}  # this host's tenures, by (session, epoch)
        store.signals.append(self._signalled)

    # --- leases ------------------------------------------------------------------------------------------

    async def take(self, session_id: str) -> Lease | None:
        """The session's lease for this host; None while another host's lease is live."""
        sent, now = self.clock(), now_ms()
        lease = await self.store.write(lambda tx: tx.leases.take(session_id, self.host, now, now + self.ttl_ms))
        if lease is not None:
            self._taken[(session_id, lease.epoch)] = sent
        return lease

    def tenure(self, lease: Lease, lost: Callable[[], None]) -> LeaseTenure:
        """The tenure of a lease this host took (one it did not take here starts untrusted: renewed on first use)."""
        stale = self.clock() - self.ttl_ms / 1000
        for key in [key for key, sent in self._taken.items() if sent < stale]:  # taken, never executed here
            del self._taken[key]
        for key in [key for key, held in self._tenures.items() if held.state != "held"]:
            del self._tenures[key]
        key = (lease.session_id, lease.epoch)
        tenure = self._tenures[key] = LeaseTenure(self, lease, self._taken.pop(key, float("-inf")), lost)
        return tenure

    def _still_ours(self) -> set[tuple[str, int]]:
        """(session, epoch) of the leases an execution of this host still holds, expired or not: its renewal is only
        late (a starved or paused process), and its tenure either renews the lease or stops the execution."""
        return {key for key, held in self._tenures.items() if held.state == "held"}

    async def holder(self, session_id: str) -> Lease | None:
        """The live lease of another host on the session, if any (an expired one is nobody's)."""
        lease = await self.store.read(lambda r: r.leases.holder(session_id))
        if lease is None or lease.owner == self.host or lease.expires < now_ms():
            return None
        return lease

    async def holding(self, session_id: str) -> Lease | None:
        """The session's lease as stored, whoever holds it (expired or not)."""
        return await self.store.read(lambda r: r.leases.holder(session_id))

    async def keep(self, tenure: LeaseTenure) -> None:
        """Renew the tenure's lease every third of its lifetime until cancelled or lost (its `lost` is called when
        it changed hands). A renewal that fails is tried again soon; when none succeeded by the time the tenure can no
        longer be trusted (the lifetime less its margin since the last one was sent: the database is cut off, or its
        calls time out), the execution stops then, before the lease can have expired and another host take it."""
        period = self.ttl_ms / 3000
        # how long a renewal may answer even once the tenure is past trusting (the host was paused, and its loop did
        # not run): a lease nobody took meanwhile is kept, and the rest of the margin still covers the wait
        grace = self.ttl_ms / 10_000
        wait = period
        while tenure.state == "held":
            await asyncio.sleep(wait)  # a timer: the renewal period (or a retry's), not a synchronisation
            before = tenure.renewed
            # (a lease this host did not take here was never renewed by it: a period for its first renewal)
            left = before + self.trusted_s - self.clock() if before > -math.inf else period
            await tenure.renew(within=max(left, grace))
            if tenure.state != "held":
                return
            if tenure.renewed > before:
                wait = period
            elif not tenure.trusted():
                tenure.lose(unconfirmed=True)
                return
            else:  # failed, or still unanswered: again soon, while the lease is still surely held
                wait = max(min(period / 4, tenure.renewed + self.trusted_s - self.clock()), 0.01)

    # --- forwarding ----------------------------------------------------------------------------------------

    async def forward(self, lease: Lease, action: str, **data: Any) -> None:
        """Ask the host holding `lease` to do `action` on its session (its `on_forwarded` does it)."""
        await self.store.signal(json.dumps({"kind": _SIGNAL, "to": lease.owner, "session": lease.session_id,
                                            "do": action, **data}))

    async def offer(self, session_id: str) -> None:
        """Ask every other host to wake the session: the first whose drain takes its lease runs it (the others' wakes
        are forwarded to that one, as any wake of a session another host holds)."""
        await self.store.signal(json.dumps({"kind": _SIGNAL, "to": _ANY, "from": self.host, "session": session_id,
                                            "do": "wake"}))

    async def started_anywhere(self, session_id: str, within_s: float) -> bool:
        """Whether, within `within_s`, some host holds the session's live lease or no input of it waits for promotion
        any more (an offered session was taken, and maybe already run to its end)."""
        def taken(reader: Reader) -> bool:
            lease = reader.leases.holder(session_id)
            return (lease is not None and lease.expires >= now_ms()) or not reader.pending.any_promotable(session_id)

        deadline = self.clock() + within_s
        while not await self.store.read(taken):
            if self.clock() >= deadline:
                return False
            await asyncio.sleep(0.02)  # a poll of the lease row (its take writes no event to wait on), bounded
        return True

    def _signalled(self, payload: str) -> None:
        try:
            note = json.loads(payload)
        except ValueError:
            return
        if not isinstance(note, dict) or note.get("kind") != _SIGNAL:
            return
        to = note.get("to")
        if to != self.host and not (to == _ANY and note.get("from") != self.host):
            return
        act = self.on_forwarded.get(str(note.get("do")))
        if act is not None:
            act(str(note.get("session")), note)

    async def released(self, session_id: str, until_idle: Callable[[], Awaitable[None]]) -> None:
        """Return once no host holds the session's lease (an expired one is still held: its session is about to be
        taken over and continued) and no input waits for promotion (a host that admitted it is about to take the
        lease, or the sweep will). `until_idle` waits for the session's next commit, after which both are read
        again, as they are at least once per sweep period."""
        def busy(reader: Reader) -> bool:
            return reader.leases.holder(session_id) is not None or reader.pending.any_promotable(session_id)

        while await self.store.read(busy):
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(until_idle(), self.ttl_ms / 4000)

    # --- takeover -----------------------------------------------------------------------------------------

    def sweep(self, take_over: Callable[[Lease, bool], None]) -> None:
        """Start looking (ten times per lease lifetime, and just after another host's lease is due to expire) for
        sessions whose owner stopped renewing, and for sessions whose admitted input waited a lease lifetime with no
        owner (the admitting host died before it woke them): they are taken over together, each with a fresh lease
        (a newer epoch fences an old owner), and handed to `take_over` with whether an execution was lost (True) or
        only input waited (False)."""
        self._sweeper.start_soon(lambda: self._sweep(take_over), "the lease sweep", lasting=True)

    def _claim(self, tx: Tx, ours: set[tuple[str, int]]) -> list[tuple[Lease, Lease]]:
        now = now_ms()  # (the sweep records when it sent this write: the leases' tenures count from then)
        claimed = []
        for sid in tx.pending.unowned(now - self.ttl_ms, limit=500):  # admitted, but its host died before waking
            if (lease := tx.leases.take(sid, self.host, now, now + self.ttl_ms)) is not None:
                claimed.append((Lease(sid, "", 0, 0), lease))
        for stale in tx.leases.claimable(now, limit=500):
            if stale.owner == self.host and (stale.session_id, stale.epoch) in ours:
                # this host still executes it, only its renewal is late: taking it over would stop that execution
                # and spend a continuation of the session's resume budget on nothing; its tenure renews it (a lease
                # nobody took meanwhile is kept) or stops it, and another host may take it as from any late owner
                continue
            lease = tx.leases.take(stale.session_id, self.host, now, now + self.ttl_ms)
            if lease is not None and lease.epoch > stale.epoch:
                claimed.append((stale, lease))
        return claimed

    def _look(self, reader: Reader) -> tuple[bool, float | None]:
        """Whether anything is to be claimed now, and in how many seconds the next lease of another host expires."""
        now = now_ms()
        due = bool(reader.leases.expired(now, limit=1) or reader.pending.unowned(now - self.ttl_ms, limit=1))
        upcoming = reader.leases.next_expiry(now, self.host)
        return due, None if upcoming is None else (upcoming - now) / 1000

    async def _sweep(self, take_over: Callable[[Lease, bool], None]) -> None:
        """The sweep's loop. Nothing but closing the ownership ends it: a failed look or claim (the database cut off,
        a statement timed out, a defect) is logged once, when the sweep starts failing, and the next period looks
        again; a takeover that fails to start is logged with its session and the others are still handed over."""
        period = max(self.ttl_ms / 10_000, 0.1)
        failing: str | None = None  # what the sweep last failed with, until it succeeds again
        while True:
            wait = period
            try:
                due, upcoming = await self.store.read(self._look)
                if due:
                    sent = self.clock()
                    for stale, lease in await self.store.write(functools.partial(self._claim, ours=self._still_ours())):
                        self._taken[(lease.session_id, lease.epoch)] = sent
                        log.warning("taking over session %s from %s", stale.session_id,
                                    stale.owner or "nobody (its input waited unowned)")
                        hooks.lease_taken_over()
                        try:
                            take_over(lease, bool(stale.owner))
                        except Exception:
                            log.exception("could not continue session %s after taking it over", lease.session_id)
                if upcoming is not None:  # look again just after it expires (unless it was renewed by then)
                    wait = min(period, upcoming + SWEEP_LATE_S)
                if failing is not None:
                    log.warning("the lease sweep works again")
                    failing = None
            except Exception as failed:  # (a cancellation is the ownership closing: it ends the loop)
                described = f"{type(failed).__name__}: {failed}"
                if described != failing:
                    log.warning("the lease sweep failed (it goes on every %.2f s): %s", period, described,
                                exc_info=not isinstance(failed, StoreError))
                    failing = described
            await asyncio.sleep(wait)  # a timer: the sweep period, or the next expiry when sooner

    async def stop(self) -> None:
        await self._sweeper.aclose()
