"""The lease sweep of a host keeps taking sessions over, failover after failover, whatever happens between them: a
look that fails with a defect or a database error, a host joining (a restart) and sweeping beside it. Each failover
hands every session over once, to one host, under a newer epoch, soon after its lease expired. On a real PostgreSQL
store, each host a Store and an Ownership of its own; an owner dies by closing its store (it renews nothing)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator

import anyio
import psycopg
import pytest

from opencode_session.core.execution.ownership import Ownership
from opencode_session.core.session.projector import project
from opencode_session.core.store import Lease, Store, StoreError, now_ms
from opencode_session.core.store.postgres import PostgresBackend

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(120)]

TTL_MS = 600  # the dying hosts' leases: they expire soon after each host dies
# The sweeping hosts' own leases last longer: a taken lease nobody renews (the test runs no execution) stays the
# taker's while the test checks it, however slowly a loaded machine runs it. Their sweeps still look just after the
# dying hosts' leases expire.
TAKER_TTL_MS = 3_000  # (their sweeps look every 0.3 s, and just after another lease expires)
SESSIONS = [f"ses_{n}" for n in range(6)]


class Takeovers:
    """What a host's sweep handed over, as it happened."""

    def __init__(self, host: str) -> None:
        self.host = host
        self.taken: list[tuple[Lease, bool, int]] = []  # (lease, lost, when: ms)
        self.changed = asyncio.Event()

    def __call__(self, lease: Lease, lost: bool) -> None:
        self.taken.append((lease, lost, now_ms()))
        self.changed.set()


async def _all_taken(sweepers: list[Takeovers], since: list[int], count: int) -> list[tuple[Lease, bool, int]]:
    """Wait (on the sweeps' own takeovers) until `count` more were handed over in all."""
    with anyio.fail_after(20):
        while sum(len(s.taken) - n for s, n in zip(sweepers, since, strict=True)) < count:
            waits = [asyncio.ensure_future(s.changed.wait()) for s in sweepers]
            try:
                await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
            finally:
                for w in waits:
                    w.cancel()
            for s in sweepers:
                s.changed.clear()
    return [t for s, n in zip(sweepers, since, strict=True) for t in s.taken[n:]]


@contextlib.asynccontextmanager
async def _owner(url: str, name: str, ttl_ms: int = TTL_MS) -> AsyncIterator[tuple[Store, Ownership]]:
    async with Store(PostgresBackend(url, ttl_ms), project=project) as store:  # (its time limits: of this lease)
        yield store, Ownership(store, name, ttl_ms)


class Failing:
    """Makes a store's next reads fail, with a defect and then a database error, before they work again."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.read = store.read
        self.left = [RuntimeError("a defect in the sweep's look"), StoreError("canceling statement due to timeout")]
        store.read = self._read  # type: ignore[method-assign]

    async def _read(self, fn):
        if self.left:
            raise self.left.pop(0)
        return await self.read(fn)


async def test_a_hosts_sweep_takes_over_a_second_and_a_third_failover_after_the_first(url, caplog):
    caplog.set_level(logging.WARNING)
    async with contextlib.AsyncExitStack() as stack:
        store, sweeper = await stack.enter_async_context(_owner(url, "host-s", TAKER_TTL_MS))
        mine = Takeovers("host-s")
        sweeper.sweep(mine)
        stack.push_async_callback(sweeper.stop)
        sweepers, epochs = [mine], dict.fromkeys(SESSIONS, 0)
        for failover in (1, 2, 3):
            # a host starts executing every session ... and dies (its store closed: nothing renews its leases)
            async with _owner(url, f"host-x{failover}") as (_, dying):
                leases = [await dying.take(sid) for sid in SESSIONS]
            assert all(lease is not None for lease in leases)
            expires = {lease.session_id: lease.expires for lease in leases if lease is not None}
            if failover == 2:
                Failing(store)  # the surviving sweep's next looks fail before this failover
            if failover == 3:  # another host starts (a restart) and sweeps beside it
                joined_store, joined = await stack.enter_async_context(_owner(url, "host-r", TAKER_TTL_MS))
                sweepers.append(Takeovers("host-r"))
                joined.sweep(sweepers[-1])
                stack.push_async_callback(joined.stop)
            since = [len(s.taken) for s in sweepers]
            taken = await _all_taken(sweepers, since, len(SESSIONS))
            # each session handed over once, to one host, under the next epoch, as an execution lost
            assert sorted(lease.session_id for lease, _, _ in taken) == SESSIONS, (failover, taken)
            for lease, lost, when in taken:
                epochs[lease.session_id] += 2  # (the dying host's epoch, then the taker's)
                assert lease.epoch == epochs[lease.session_id] and lost
                assert when - expires[lease.session_id] <= 1500, (failover, when - expires[lease.session_id])
                holder = await (sweeper if lease.owner == "host-s" else joined).holding(lease.session_id)
                assert holder == lease
                # the taker's execution ends (released with its terminal event), before the next host takes it
                await (store if lease.owner == "host-s" else joined_store).write(
                    lambda tx, lease=lease: tx.leases.release(lease))
    failures = [r.getMessage() for r in caplog.records if "the lease sweep failed" in r.getMessage()]
    assert len(failures) == 2, failures  # each failure logged once, and the sweep went on


async def test_a_paused_hosts_open_transaction_does_not_hold_the_sweep_back(url):
    """A host stopped (SIGSTOP) between two statements of a write holds that transaction's row locks (here: the
    lease rows its renewals updated) until the server ends it: no later than a third of a lease after its last
    statement, so the takeover, which must update those rows, is not held back behind it."""
    async with _owner(url, "host-s") as (_, sweeper), _owner(url, "host-p") as (paused_store, paused):
        mine = Takeovers("host-s")
        sweeper.sweep(mine)
        try:
            leases = [await paused.take(sid) for sid in SESSIONS]
            assert all(lease is not None for lease in leases)
            backend = paused_store.backend
            assert isinstance(backend, PostgresBackend)
            stopped = await asyncio.to_thread(psycopg.connect, backend.conninfo)  # the paused writer's connection
            try:
                await asyncio.to_thread(stopped.execute, "UPDATE session_lease SET expires = expires"
                                        " WHERE owner = %s", ("host-p",))  # ... and no commit: it stopped here
                expires = {lease.session_id: lease.expires for lease in leases if lease is not None}
                taken = await _all_taken([mine], [0], len(SESSIONS))
            finally:
                await asyncio.to_thread(stopped.close)
        finally:
            await sweeper.stop()
    assert sorted(lease.session_id for lease, _, _ in taken) == SESSIONS
    assert max(when - expires[lease.session_id] for lease, _, when in taken) <= 1000


async def test_a_lease_row_another_transaction_holds_does_not_hold_back_the_takeover_of_the_others(url):
    """One expired lease's row is locked by a transaction the database does not end soon (a connection without the
    hosts' time limits: an operator's psql, a stuck job): the sweep takes every other session over when its lease
    expires, and that one once the lock goes, rather than failing the whole takeover behind one row."""
    async with _owner(url, "host-s") as (_, sweeper), _owner(url, "host-d") as (_, dying):
        leases = [await dying.take(sid) for sid in SESSIONS]  # (and it dies: nothing renews them)
        expires = {lease.session_id: lease.expires for lease in leases if lease is not None}
        holding = await asyncio.to_thread(psycopg.connect, url)
        try:
            await asyncio.to_thread(holding.execute, "SELECT 1 FROM session_lease WHERE session_id = %s FOR SHARE",
                                    (SESSIONS[0],))
            mine = Takeovers("host-s")
            sweeper.sweep(mine)
            others = await _all_taken([mine], [0], len(SESSIONS) - 1)
            assert sorted(lease.session_id for lease, _, _ in others) == SESSIONS[1:]
            assert max(when - expires[lease.session_id] for lease, _, when in others) <= 1000
            await asyncio.to_thread(holding.rollback)
            last = await _all_taken([mine], [len(others)], 1)
            assert [lease.session_id for lease, _, _ in last] == SESSIONS[:1]
        finally:
            await asyncio.to_thread(holding.close)
            await sweeper.stop()


async def test_a_host_that_stopped_its_own_execution_continues_it_when_nobody_else_does(url):
    """A host's drain could not renew its lease in time (the host was starved of CPU) and stopped; no other host
    runs (or they are all paused). Once that lease expires the host's own sweep takes the session over like any
    other lost one, under a newer epoch (fencing whatever its old drain still tries), instead of renewing the
    stale lease for ever with nobody executing the session."""
    async with _owner(url, "host-s") as (_, sweeper):
        lease = await sweeper.take(SESSIONS[0])  # its drain's lease, then nothing renews it
        assert lease is not None
        mine = Takeovers("host-s")
        sweeper.sweep(mine)
        try:
            taken = await _all_taken([mine], [0], 1)
        finally:
            await sweeper.stop()
    [(again, lost, when)] = taken
    assert (again.session_id, again.owner, again.epoch, lost) == (SESSIONS[0], "host-s", lease.epoch + 1, True)
    assert when - lease.expires <= 1000


async def test_a_hosts_sweep_leaves_alone_a_session_it_still_executes_whose_renewal_is_late(url):
    """A host took over many sessions at once and, starved of CPU, renews one lease late: it expired, but the
    host's execution of it still holds its tenure. The host's own sweep does not take it over (that would stop the
    execution and spend a continuation of the session's resume budget on nothing): the late renewal keeps it. Once the
    tenure is lost (it could not be renewed in time after all), the sweep takes the session over as any other."""
    async with _owner(url, "host-s") as (_, sweeper):
        lease = await sweeper.take(SESSIONS[0])
        assert lease is not None
        tenure = sweeper.tenure(lease, lambda: None)  # an execution holds it, and renews nothing for now
        looked: list[int] = []  # when each claim the sweep made began (in the store's writer: another thread)
        claimed, loop, claim = asyncio.Event(), asyncio.get_running_loop(), sweeper._claim

        def counted(tx, *rest, **named):
            looked.append(now_ms())
            try:
                return claim(tx, *rest, **named)
            finally:
                loop.call_soon_threadsafe(claimed.set)

        sweeper._claim = counted  # type: ignore[method-assign]
        mine = Takeovers("host-s")
        sweeper.sweep(mine)
        try:
            with anyio.fail_after(20):
                while not any(when > lease.expires for when in looked):  # a claim after the lease expired
                    claimed.clear()
                    await claimed.wait()
            assert mine.taken == [] and tenure.state == "held"
            await tenure.renew()  # late, but nobody took it meanwhile: kept, under the same epoch
            held = await sweeper.holding(lease.session_id)
            assert tenure.state == "held" and held is not None
            assert (held.owner, held.epoch) == ("host-s", lease.epoch) and held.expires > lease.expires
            tenure.lose(unconfirmed=True)  # and now it could not be renewed in time: the execution stops
            [(again, lost, _)] = await _all_taken([mine], [0], 1)
        finally:
            await sweeper.stop()
    assert (again.session_id, again.owner, again.epoch, lost) == (SESSIONS[0], "host-s", lease.epoch + 1, True)
