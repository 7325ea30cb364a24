"""The check every provider request and tool run of an execution on a shared database makes first: a lease renewed
recently enough (by the host's own monotonic clock) lets it through, an older one is renewed first, and one that
changed hands stops it (nothing is sent). On a real PostgreSQL store, with the host's clock stepped by the test."""

from __future__ import annotations

import asyncio

import pytest

from opencode_session.core.execution.ownership import Ownership
from opencode_session.core.session.projector import project
from opencode_session.core.store import LeaseLapsedError, Store, confirm_lease, now_ms, set_fence
from opencode_session.core.store.postgres import PostgresBackend
from opencode_session.schema import events as ev
from opencode_session.schema.common import LocationRef
from opencode_session.schema.session import SessionTime, SessionV2Info

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(60)]

TTL_MS = 3000


class Clock:
    """A monotonic clock the test moves on."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


class Provider:
    """Counts the requests that reached it; each is sent only after the check, as a Step sends one."""

    def __init__(self) -> None:
        self.sent = 0

    async def send(self) -> None:
        await confirm_lease()
        self.sent += 1


async def _session(store: Store, sid: str) -> None:
    info = SessionV2Info(id=sid, projectID="prj", title="t", location=LocationRef(directory="/w"),
                         time=SessionTime(created=1, updated=1), agent="build")
    await store.write(lambda tx: tx.append(ev.SessionCreated(sessionID=sid, info=info)))


async def _expires(store: Store, sid: str) -> int:
    lease = await store.read(lambda r: r.leases.holder(sid))
    assert lease is not None
    return lease.expires


async def _executing(url: str, body) -> None:
    """Run `body(store, ownership, clock, tenure, lost)` inside an execution of `ses_t` holding its lease."""
    async with Store(PostgresBackend(url), project=project) as store:
        await _session(store, "ses_t")
        clock = Clock()
        ownership = Ownership(store, "host-a", TTL_MS, clock=clock)
        lease = await ownership.take("ses_t")
        assert lease is not None
        lost: list[bool] = []
        tenure = ownership.tenure(lease, lambda: lost.append(True))

        async def execution() -> None:
            set_fence(lease, tenure)  # as a drain does for its task
            await body(store, ownership, clock, tenure, lost)

        await asyncio.create_task(execution())


async def test_a_recent_renewal_lets_the_request_through_without_a_write(url):
    async def body(store, _ownership, clock, tenure, lost):
        before = await _expires(store, "ses_t")
        clock.now += TTL_MS / 1000 * 0.6  # inside the lifetime less its margin
        provider = Provider()
        await provider.send()
        assert provider.sent == 1 and not lost
        assert await _expires(store, "ses_t") == before  # nothing was renewed for it

    await _executing(url, body)


async def test_an_old_renewal_is_renewed_before_the_request_leaves(url):
    async def body(store, _ownership, clock, tenure, lost):
        before = await _expires(store, "ses_t")
        clock.now += TTL_MS / 1000 * 0.7  # past the lifetime less its margin: not trusted any more
        assert not tenure.trusted()
        provider = Provider()
        await asyncio.gather(provider.send(), provider.send())  # both wait for one renewal
        assert provider.sent == 2 and not lost
        assert await _expires(store, "ses_t") > before
        assert tenure.trusted() and tenure.renewed == clock.now

    await _executing(url, body)


async def test_a_lease_that_changed_hands_stops_the_execution_before_anything_is_sent(url):
    async def body(store, _ownership, clock, tenure, lost):
        clock.now += TTL_MS / 1000 * 2  # paused past its expiry: another host took the session over meanwhile
        now = now_ms()
        set_fence(None)
        await store.write(lambda tx: tx.leases.take("ses_t", "host-b", now, now + TTL_MS, steal=True))
        set_fence(tenure.lease, tenure)
        provider = Provider()
        with pytest.raises(LeaseLapsedError):
            await provider.send()
        assert provider.sent == 0  # stopped without sending
        assert lost == [True] and tenure.state == "lost"
        with pytest.raises(LeaseLapsedError):
            await provider.send()  # and it stays stopped
        assert provider.sent == 0 and lost == [True]
        holder = await store.read(lambda r: r.leases.holder("ses_t"))
        assert holder is not None and holder.owner == "host-b"  # the new owner's lease is untouched

    await _executing(url, body)


async def test_without_a_lease_nothing_is_checked():
    provider = Provider()
    await provider.send()  # one host (SQLite): no tenure, no store access
    assert provider.sent == 1


async def _keeping(store, ownership, tenure, clock, renewal) -> None:
    """Run the drain's renewal loop once the host's clock jumped past trusting its tenure (a pause shorter than the
    lease), with `renewal` standing in for the store's renewal; return once the loop acted on it."""
    renew = store.renew_lease

    async def renewing(lease, expires):
        return await renewal(renew, lease, expires)

    store.renew_lease = renewing
    clock.now += TTL_MS / 1000 * 0.8  # paused: past the lifetime less its margin, not past the lifetime
    keeping = asyncio.create_task(ownership.keep(tenure))
    try:
        await asyncio.wait_for(asyncio.shield(keeping), TTL_MS / 1000)  # (a guard: it returns once lost)
    except TimeoutError:
        pass
    finally:
        keeping.cancel()
        store.renew_lease = renew


async def test_a_host_paused_shorter_than_its_lease_keeps_it_when_the_renewal_answers(url):
    async def body(store, ownership, clock, tenure, lost):
        renewed = asyncio.Event()
        renew = tenure.renew

        async def renewing(within=None):
            await renew(within)
            renewed.set()  # the loop's renewal returned: it is about to act on what it found

        async def answered(renew, lease, expires):
            return await renew(lease, expires)

        tenure.renew = renewing
        keeping = asyncio.create_task(_keeping(store, ownership, tenure, clock, answered))
        await asyncio.wait_for(renewed.wait(), 10)
        assert tenure.state == "held" and not lost and tenure.trusted()
        assert tenure.renewed == clock.now  # renewed as sent after the pause
        keeping.cancel()

    await _executing(url, body)


async def test_a_renewal_that_never_answers_stops_the_execution_before_the_lease_can_expire(url):
    async def body(store, ownership, clock, tenure, lost):
        async def unanswered(_renew, _lease, _expires):
            await asyncio.Event().wait()  # the database is cut off: no answer, no error

        await _keeping(store, ownership, tenure, clock, unanswered)
        assert lost == [True] and tenure.state == "lost"
        assert clock.now < tenure.renewed + TTL_MS / 1000  # (by its clock, before the lease could have expired)
        provider = Provider()
        with pytest.raises(LeaseLapsedError):
            await provider.send()
        assert provider.sent == 0

    await _executing(url, body)


async def test_once_it_gave_up_a_lease_it_could_not_renew_the_execution_writes_nothing_more(url):
    # (nobody took the lease meanwhile, so the row still names this host and epoch: the execution's own word that it
    # stopped is what refuses the write; its next owner, maybe this host again, settles what it left open, as after
    # a crash, instead of this host recording an interruption nobody asked for)
    async def body(store, ownership, clock, tenure, lost):
        async def unanswered(_renew, _lease, _expires):
            await asyncio.Event().wait()

        await _keeping(store, ownership, tenure, clock, unanswered)
        assert lost == [True]
        holder = await store.read(lambda r: r.leases.holder("ses_t"))
        assert holder is not None and (holder.owner, holder.epoch) == ("host-a", tenure.lease.epoch)
        before = await store.read(lambda r: r.events.latest_seq("ses_t"))
        with pytest.raises(LeaseLapsedError):
            await store.write(lambda tx: tx.append(ev.Renamed(sessionID="ses_t", title="after")))
        assert await store.read(lambda r: r.events.latest_seq("ses_t")) == before

    await _executing(url, body)
