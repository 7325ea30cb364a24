"""Hosts racing for the same sessions on one PostgreSQL database: taking a lease is one decision of the database, so
of several hosts that try at once exactly one wins each session (free, or expired) and the others simply lose, with
no error anywhere. Each host is a Store of its own (its own writer connection), as each `ocs serve` is."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator

import psycopg
import pytest

from opencode_session.core.execution.ownership import Ownership
from opencode_session.core.session.projector import project
from opencode_session.core.store import Lease, Store
from opencode_session.core.store.postgres import PostgresBackend

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(120)]

TTL_MS = 3000
HOSTS = 4
SESSIONS = 40


@contextlib.asynccontextmanager
async def _hosts(url: str, count: int) -> AsyncIterator[list[Ownership]]:
    async with contextlib.AsyncExitStack() as stack:
        stores = [await stack.enter_async_context(Store(PostgresBackend(url), project=project))
                  for _ in range(count)]
        yield [Ownership(store, f"host-{n}", TTL_MS) for n, store in enumerate(stores)]


def _expire_all(url: str) -> None:
    """Every lease's holder stopped renewing (dead, paused): each expired a moment ago."""
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("UPDATE session_lease SET expires = 1 WHERE owner IS NOT NULL")


async def _race(hosts: list[Ownership], sids: list[str],
                holders: dict[str, str] | None = None) -> dict[str, list[Lease]]:
    """Every host (but the session's holder in `holders`: it stopped) tries to take every session at the same time;
    the leases each session was granted."""
    takes = [host.take(sid) for sid in sids for host in hosts if (holders or {}).get(sid) != host.host]
    granted = await asyncio.gather(*takes)  # a lost race is None, never an error
    won: dict[str, list[Lease]] = {sid: [] for sid in sids}
    for lease in granted:
        if lease is not None:
            won[lease.session_id].append(lease)
    return won


async def test_of_hosts_racing_for_a_session_exactly_one_takes_it_and_the_others_lose_quietly(url, caplog):
    caplog.set_level(logging.WARNING)
    sids = [f"ses_{n:03d}" for n in range(SESSIONS)]
    async with _hosts(url, HOSTS) as hosts:
        won = await _race(hosts, sids)  # nobody held them: the first lease of each
        assert all(len(leases) == 1 for leases in won.values()), won
        assert {leases[0].epoch for leases in won.values()} == {1}
        for round_ in range(2, 5):  # their holders stop renewing: everyone races to take them over
            await asyncio.to_thread(_expire_all, url)
            before = {sid: leases[0] for sid, leases in won.items()}
            won = await _race(hosts, sids, {sid: lease.owner for sid, lease in before.items()})
            for sid, leases in won.items():
                assert len(leases) == 1, (sid, leases)  # one new owner
                assert leases[0].epoch == before[sid].epoch + 1 == round_  # of one newer epoch
                holder = await hosts[0].holding(sid)
                assert holder == leases[0]  # the one the database holds
        # a live lease is not taken by anyone else, and its holder extends it under the same epoch
        again = await _race(hosts, sids)
        assert all(len(leases) == 1 and leases[0] == won[sid][0]._replace(expires=leases[0].expires)
                   for sid, leases in again.items())
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING] == []
