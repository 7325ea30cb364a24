"""The resume budget counts continuations, not the hosts that take a session over: of several hosts whose sweeps race
to take over the same lost executions, one takes each and continues it, spending one continuation; none records a
second one or fails the session as over budget. A takeover that finds no execution lost (its lease outlived it)
spends nothing and writes nothing. On a real PostgreSQL store, each host a Store, an Ownership, a coordinator and
its continuations, wired as the runtime wires them."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass

import anyio
import psycopg
import pytest

from opencode_session.core.execution.continuation import Continuations, ResumeBudget, on_settled, on_started
from opencode_session.core.execution.coordinator import SessionExecution
from opencode_session.core.execution.ownership import Ownership
from opencode_session.core.session.projector import project
from opencode_session.core.store import Lease, SessionFencedError, Store, current_fence
from opencode_session.core.store.postgres import PostgresBackend
from opencode_session.schema import events as ev
from opencode_session.schema.common import LocationRef
from opencode_session.schema.session import SessionTime, SessionV2Info

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(60)]

# (the tests expire leases themselves: the lifetime only needs to outlast a busy machine's stalls, or a taker loses
# its own lease and a second continuation would be over the budget)
TTL_MS = 3000
SESSIONS = [f"ses_{n}" for n in range(8)]


@dataclass
class Host:
    name: str
    store: Store
    ownership: Ownership
    execution: SessionExecution
    continuations: Continuations
    ran: list[tuple[str, Lease | None]]
    outcomes: list[str]
    settled: asyncio.Event  # set once a takeover's outcome is known (and what it released, released)


@contextlib.asynccontextmanager
async def _host(url: str, name: str, everyone_ran: asyncio.Queue[str]) -> AsyncIterator[Host]:
    async with Store(PostgresBackend(url, TTL_MS), project=project) as store:
        ran: list[tuple[str, Lease | None]] = []

        async def drain(sid: str, _force: bool) -> None:  # a continued execution: its Step, under its lease
            ran.append((sid, current_fence()))
            everyone_ran.put_nowait(sid)

        ownership = Ownership(store, name, TTL_MS)
        execution = SessionExecution(store, drain, on_started=on_started, on_settled=on_settled, ownership=ownership)
        host = Host(name, store, ownership, execution, Continuations(store, execution, ResumeBudget(1, 3600)), ran,
                    [], asyncio.Event())
        try:
            yield host
        finally:
            await ownership.stop()
            await execution.shutdown()


def _taken_over(host: Host, tasks: set[asyncio.Task]):
    """As `Runtime._taken_over`: continue (under the lease taken) what was lost; release what is left idle."""
    def take_over(lease: Lease, lost: bool) -> None:
        async def _continue() -> None:
            try:
                outcome = await host.continuations.continue_after_loss(lease.session_id, lease)
            except SessionFencedError:
                outcome = "fenced"
            if outcome in ("over-budget", "idle"):
                await host.store.write(lambda tx: tx.leases.release(lease))
            host.outcomes.append(outcome)
            host.settled.set()

        assert lost
        task = asyncio.ensure_future(_continue())
        tasks.add(task)
        task.add_done_callback(tasks.discard)

    return take_over


async def _lost(store: Store, owner: Ownership, url: str, sid: str, claimed: bool = True) -> None:
    """A session whose host died executing it (`claimed`), or after its execution ended (its lease left behind)."""
    info = SessionV2Info(id=sid, projectID="prj", title="t", location=LocationRef(directory="/w"),
                         time=SessionTime(created=1, updated=1), agent="build")
    await store.write(lambda tx: tx.append(ev.SessionCreated(sessionID=sid, info=info)))
    assert await owner.take(sid) is not None
    if claimed:
        await store.write(lambda tx: on_started(tx, sid))


def _expire_all(url: str) -> None:
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("UPDATE session_lease SET expires = 1 WHERE owner IS NOT NULL")


async def _types(store: Store, sid: str) -> list[str]:
    return [record.type for record in await store.read(lambda r: r.events.after(sid, 0, 1000))]


async def test_hosts_racing_to_take_over_lost_executions_continue_each_once_and_spend_one_continuation(url):
    ran: asyncio.Queue[str] = asyncio.Queue()
    tasks: set[asyncio.Task] = set()
    async with contextlib.AsyncExitStack() as stack:
        dead = await stack.enter_async_context(_host(url, "host-dead", ran))
        for sid in SESSIONS:
            await _lost(dead.store, dead.ownership, url, sid)
        hosts = [await stack.enter_async_context(_host(url, f"host-{n}", ran)) for n in range(3)]
        await asyncio.to_thread(_expire_all, url)  # the dead host's leases all expire at once
        for host in hosts:  # and every other host's sweep races for them
            host.ownership.sweep(_taken_over(host, tasks))
        with anyio.fail_after(20):
            continued = sorted([await ran.get() for _ in SESSIONS])
        assert continued == SESSIONS  # each continued once ...
        with anyio.fail_after(20):
            for host in hosts:
                for sid in SESSIONS:
                    await host.execution.wait(sid)
            while tasks:
                await asyncio.wait(set(tasks))
        runs = [(sid, lease) for host in hosts for sid, lease in host.ran]
        assert sorted(sid for sid, _ in runs) == SESSIONS  # ... on one host, under the lease that host took
        assert all(lease is not None and lease.epoch == 2 for _, lease in runs)
        assert sorted(o for host in hosts for o in host.outcomes) == ["continued"] * len(SESSIONS)
        for sid in SESSIONS:
            assert len(await dead.store.write(lambda tx, sid=sid: tx.continuation.continued(sid))) == 1
            types = await _types(dead.store, sid)
            assert "session.execution.failed" not in types  # nobody found the budget spent
            assert types[-2:] == ["session.execution.started", "session.execution.succeeded"]


async def test_a_takeover_that_finds_no_execution_lost_spends_nothing_and_writes_nothing(url):
    ran: asyncio.Queue[str] = asyncio.Queue()
    tasks: set[asyncio.Task] = set()
    async with _host(url, "host-dead", ran) as dead, _host(url, "host-b", ran) as taker:
        await _lost(dead.store, dead.ownership, url, "ses_idle", claimed=False)  # ended; its lease left behind
        before = await _types(dead.store, "ses_idle")
        await asyncio.to_thread(_expire_all, url)
        taker.ownership.sweep(_taken_over(taker, tasks))
        with anyio.fail_after(20):
            await taker.settled.wait()
        assert taker.outcomes == ["idle"]
        assert await _types(dead.store, "ses_idle") == before
        assert await dead.store.write(lambda tx: tx.continuation.continued("ses_idle")) == []
        assert await taker.ownership.holding("ses_idle") is None  # released: nobody executes it
        assert taker.ran == []
