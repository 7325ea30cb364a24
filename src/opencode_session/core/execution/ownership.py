"""Which host executes a session when several share one database: session leases taken at drain start, renewed
while the drain runs and released with its terminal event; what reaches a host that does not own a session
forwarded to the owner by a database signal; and a sweeper that takes over the sessions of a host that died."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import secrets
import socket
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from ..store import Lease, Reader, Store, StoreError, Tx, now_ms
from ..telemetry import hooks

log = logging.getLogger(__name__)

# How long a lease lasts unless renewed; the owner renews it every third of that. A host that stops renewing (dead,
# paused, cut off) loses its sessions to another host this long after its last renewal.
DEFAULT_TTL_MS = 10_000
_SIGNAL = "session"  # the signal kind: {"kind": "session", "to": host, "session": id, "do": ..., ...}

Heard = Callable[[str, dict[str, Any]], None]


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


class Ownership:
    """This host's side of session leases on a shared database."""

    def __init__(self, store: Store, host: str, ttl_ms: int = DEFAULT_TTL_MS) -> None:
        self.store = store
        self.host = host
        self.ttl_ms = ttl_ms
        self.heard: dict[str, Heard] = {}  # what to do with a forwarded action, by its name ("wake", ...)
        self._sweeper: asyncio.Task[None] | None = None
        store.signals.append(self._signalled)

    # --- leases ------------------------------------------------------------------------------------------

    async def take(self, session_id: str) -> Lease | None:
        """The session's lease for this host; None while another host's lease is live."""
        now = now_ms()
        return await self.store.write(lambda tx: tx.leases.take(session_id, self.host, now, now + self.ttl_ms))

    async def holder(self, session_id: str) -> Lease | None:
        """The live lease of another host on the session, if any (an expired one is nobody's)."""
        lease = await self.store.read(lambda r: r.leases.holder(session_id))
        if lease is None or lease.owner == self.host or lease.expires < now_ms():
            return None
        return lease

    async def holding(self, session_id: str) -> Lease | None:
        """The session's lease as stored, whoever holds it (expired or not)."""
        return await self.store.read(lambda r: r.leases.holder(session_id))

    async def keep(self, lease: Lease, lost: Callable[[], None]) -> None:
        """Renew `lease` every third of its lifetime until cancelled; call `lost` (once) when it changed hands or
        could not be renewed before it expired."""
        expires = lease.expires
        while True:
            await asyncio.sleep(self.ttl_ms / 3000)  # a timer: the renewal period, not a synchronisation
            until = now_ms() + self.ttl_ms
            try:
                kept = await self._renew(lease, until)
            except StoreError as failed:
                log.warning("could not renew the lease of session %s: %s", lease.session_id, failed)
                kept = now_ms() < expires
            else:
                expires = until if kept else 0
            if not kept:
                log.warning("session %s: lease epoch %d lost to another host", lease.session_id, lease.epoch)
                lost()
                return

    async def _renew(self, lease: Lease, until: int) -> bool:
        return await self.store.write(lambda tx: tx.leases.renew(lease, until))

    # --- forwarding ----------------------------------------------------------------------------------------

    async def forward(self, lease: Lease, action: str, **data: Any) -> None:
        """Ask the host holding `lease` to do `action` on its session (it hears it through `heard`)."""
        await self.store.signal(json.dumps({"kind": _SIGNAL, "to": lease.owner, "session": lease.session_id,
                                            "do": action, **data}))

    def _signalled(self, payload: str) -> None:
        try:
            note = json.loads(payload)
        except ValueError:
            return
        if not isinstance(note, dict) or note.get("kind") != _SIGNAL or note.get("to") != self.host:
            return
        hear = self.heard.get(str(note.get("do")))
        if hear is not None:
            hear(str(note.get("session")), note)

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
        """Start looking (ten times per lease lifetime) for sessions whose owner stopped renewing, and for sessions
        whose admitted input waited a lease lifetime with no owner (the admitting host died before it woke them):
        they are taken over together, each with a fresh lease (a newer epoch fences an old owner), and handed to
        `take_over` with whether an execution was lost (True) or only input waited (False)."""
        self._sweeper = asyncio.create_task(self._sweep(take_over), name="lease-sweeper")

    def _claim(self, tx: Tx) -> list[tuple[Lease, Lease]]:
        now = now_ms()
        claimed = []
        for sid in tx.pending.unowned(now - self.ttl_ms, limit=500):  # admitted, but its host died before waking
            if (lease := tx.leases.take(sid, self.host, now, now + self.ttl_ms)) is not None:
                claimed.append((Lease(sid, "", 0, 0), lease))
        for stale in tx.leases.expired(now, limit=500):
            lease = tx.leases.take(stale.session_id, self.host, now, now + self.ttl_ms)
            if lease is not None and lease.epoch > stale.epoch:
                claimed.append((stale, lease))
        return claimed

    def _anything_to_claim(self, reader: Reader) -> bool:
        now = now_ms()
        return bool(reader.leases.expired(now, limit=1) or reader.pending.unowned(now - self.ttl_ms, limit=1))

    async def _sweep(self, take_over: Callable[[Lease, bool], None]) -> None:
        period = max(self.ttl_ms / 10_000, 0.1)
        while True:
            try:
                if await self.store.read(self._anything_to_claim):
                    for stale, lease in await self.store.write(self._claim):
                        log.warning("taking over session %s from %s", stale.session_id,
                                    stale.owner or "nobody (its input waited unowned)")
                        hooks.lease_taken_over()
                        take_over(lease, bool(stale.owner))
            except StoreError as failed:
                log.warning("the lease sweep failed: %s", failed)
            await asyncio.sleep(period)  # a timer: the sweep period

    async def stop(self) -> None:
        if self._sweeper is not None:
            self._sweeper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._sweeper
            self._sweeper = None
