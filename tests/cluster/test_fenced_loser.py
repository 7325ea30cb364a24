"""A host whose lease on a session was superseded writes nothing more for it and sends nothing more for it, whatever
it was doing: a write of its execution (a failure or a settlement too) is refused in the transaction that checks the
epoch, the refusal stops the execution at once (no provider request after it, even with a lease its own clock still
trusts), and a host that took a session over but was overtaken before it continued it records neither the
continuation nor a failure. On a real PostgreSQL store, each host an Ownership of its own."""

from __future__ import annotations

import asyncio

import anyio
import psycopg
import pytest

from opencode_session.core.execution.continuation import Continuations, ResumeBudget, on_settled, on_started
from opencode_session.core.execution.coordinator import SessionExecution
from opencode_session.core.execution.ownership import Ownership
from opencode_session.core.session.projector import project
from opencode_session.core.store import (
    Lease,
    LeaseLapsedError,
    SessionFencedError,
    Store,
    confirm_lease,
    current_fence,
    set_fence,
)
from opencode_session.core.store.postgres import PostgresBackend
from opencode_session.schema import events as ev
from opencode_session.schema import session_errors
from opencode_session.schema.common import LocationRef, SessionErrorInfo
from opencode_session.schema.session import SessionTime, SessionV2Info

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(60)]

TTL_MS = 3000


async def _session(store: Store, sid: str) -> None:
    info = SessionV2Info(id=sid, projectID="prj", title="t", location=LocationRef(directory="/w"),
                         time=SessionTime(created=1, updated=1), agent="build")
    await store.write(lambda tx: tx.append(ev.SessionCreated(sessionID=sid, info=info)))


async def _types(store: Store, sid: str) -> list[str]:
    return [record.type for record in await store.read(lambda r: r.events.after(sid, 0, 1000))]


def _expire(url: str, sid: str) -> None:
    """The session's holder stopped renewing (paused, cut off): its lease expired a moment ago."""
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("UPDATE session_lease SET expires = 1 WHERE session_id = %s", (sid,))


async def test_a_write_that_finds_a_newer_epoch_stops_the_execution_before_anything_more_is_sent(url):
    async with Store(PostgresBackend(url), project=project) as store:
        await _session(store, "ses_f")
        ownership = Ownership(store, "host-a", TTL_MS)
        lease = await ownership.take("ses_f")
        assert lease is not None
        lost: list[bool] = []
        tenure = ownership.tenure(lease, lambda: lost.append(True))
        before = await _types(store, "ses_f")
        sent: list[str] = []

        async def execution() -> None:
            set_fence(lease, tenure)  # as a drain does for its task
            assert tenure.trusted()  # renewed a moment ago: by its own clock nothing is wrong
            # another host takes the session over meanwhile (this host's lease expired while it was paused)
            set_fence(None)
            await asyncio.to_thread(_expire, url, "ses_f")
            taker = Ownership(store, "host-b", TTL_MS)
            assert (await taker.take("ses_f")) is not None
            set_fence(lease, tenure)
            failure = ev.ExecutionFailed(sessionID="ses_f", error=SessionErrorInfo(
                type=session_errors.HOST_LOST, message="a failure it would record"))
            with pytest.raises(SessionFencedError):
                await store.write(lambda tx: tx.append(failure))
            with pytest.raises(LeaseLapsedError):
                await confirm_lease()  # the provider request it was about to send
                sent.append("request")

        await asyncio.create_task(execution())
        assert sent == []
        assert lost == [True] and tenure.state == "lost"
        assert await _types(store, "ses_f") == before  # neither the failure nor anything else landed
        holder = await store.read(lambda r: r.leases.holder("ses_f"))
        assert holder is not None and holder.owner == "host-b" and holder.epoch == lease.epoch + 1


class Drains:
    """The drains a coordinator ran: each with the lease it wrote under."""

    def __init__(self) -> None:
        self.ran: list[Lease | None] = []
        self.done = asyncio.Event()

    async def __call__(self, _sid: str, _force: bool) -> None:
        self.ran.append(current_fence())
        self.done.set()


async def test_a_taker_overtaken_before_it_continued_the_session_records_nothing_and_spends_no_budget(url):
    async with Store(PostgresBackend(url), project=project) as store:
        await _session(store, "ses_c")
        owner = Ownership(store, "host-a", TTL_MS)
        lost_lease = await owner.take("ses_c")
        assert lost_lease is not None
        await store.write(lambda tx: on_started(tx, "ses_c"))  # an execution was running there when it was lost
        await asyncio.to_thread(_expire, url, "ses_c")
        hosts = {}
        for name in ("host-b", "host-c"):
            ownership = Ownership(store, name, TTL_MS)
            drains = Drains()
            execution = SessionExecution(store, drains, on_started=on_started, on_settled=on_settled,
                                         ownership=ownership)
            hosts[name] = (ownership, drains, execution, Continuations(store, execution, ResumeBudget(1, 3600)))
        b_lease = await hosts["host-b"][0].take("ses_c")  # b's sweep took it over ...
        assert b_lease is not None
        await asyncio.to_thread(_expire, url, "ses_c")  # ... and b was paused before it continued it
        c_lease = await hosts["host-c"][0].take("ses_c")  # c took it over from b
        assert c_lease is not None and c_lease.epoch == b_lease.epoch + 1
        before = await _types(store, "ses_c")

        with pytest.raises(SessionFencedError):  # b resumes: its continuation is refused, whole
            await asyncio.create_task(hosts["host-b"][3].continue_after_loss("ses_c", b_lease))
        assert await _types(store, "ses_c") == before  # no failure, no settlement, nothing
        assert await store.write(lambda tx: tx.continuation.continued("ses_c")) == []  # and no budget spent
        assert hosts["host-b"][1].ran == []  # no drain started there

        # c continues it: within the budget (b spent none of it), its drain executing under c's lease
        assert await asyncio.create_task(hosts["host-c"][3].continue_after_loss("ses_c", c_lease)) == "continued"
        with anyio.fail_after(10):
            await hosts["host-c"][2].wait("ses_c")  # its execution ended
        assert hosts["host-c"][1].ran == [c_lease]
        types = await _types(store, "ses_c")
        assert types[len(before):] == ["session.execution.started", "session.execution.succeeded"]
        assert len(await store.write(lambda tx: tx.continuation.continued("ses_c"))) == 1
        assert await store.read(lambda r: r.leases.holder("ses_c")) is None  # released with its terminal event
        for _, _, execution, _ in hosts.values():
            await execution.shutdown()
