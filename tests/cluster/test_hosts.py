"""Several real `ocs serve` processes on one PostgreSQL database: sessions prompted through any host run once, on
one host, with every host serving the same log; a killed owner's busy sessions are continued by another host
soon after each lease's expiry; a paused former owner that wakes up writes nothing."""

from __future__ import annotations

import asyncio
import collections
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest

from opencode_session.client import OpenCodeClient, PermissionNotFoundError
from tests.support.cluster import Cluster, durable_log
from tests.support.postgres import fresh_schema
from tests.support.server import ServerProcess
from tests.support.tool_model import ToolModel

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(300)]

TTL_MS = 3000


@pytest.fixture
def cluster(tmp_path) -> Iterator[Cluster]:
    with fresh_schema() as url:
        model = ToolModel()
        model.start()
        made = Cluster(tmp_path, url, model, TTL_MS)
        try:
            yield made
        finally:
            made.stop()
            model.stop()


async def _types(client: OpenCodeClient, sid: str) -> list[str]:
    return [kind for _, _, kind in await durable_log(client, sid) if kind != "session.title.updated"]


async def test_sessions_prompted_through_any_host_run_once_and_read_the_same_everywhere(cluster):
    # (a lease long enough that a host starved of CPU by a loaded machine keeps its sessions: takeovers have tests
    # of their own; should one happen here all the same, its session is held to what a takeover promises)
    cluster.env["OCS_LEASE_TTL_MS"] = "15000"
    hosts = [cluster.start() for _ in range(3)]
    clients = [OpenCodeClient(h.url) for h in hosts]
    count = 200
    gate = asyncio.Semaphore(40)

    async def one(n: int) -> str:
        async with gate:
            sid = (await clients[n % 3].session.create()).id
            await clients[(n + 1) % 3].session.prompt(sid, prompt={"text": f"run m{n}"})
            await clients[(n + 2) % 3].session.wait(sid)
            return sid

    with anyio.fail_after(240):
        sids = await asyncio.gather(*(one(n) for n in range(count)))
    runs = cluster.runs()
    lost = set()  # the markers of sessions a host lost (its lease lapsed) while executing them
    for n, sid in enumerate(sids):
        # what each session's Step ran is its own prompt's marker: were it another's, the runtime would have sent a
        # Step another session's history (a runs.log count that is off with these right is the test's own doing)
        commands = [e.data.input.get("command", "") async for e in clients[0].session.log(sid, follow=False)
                    if e.type == "session.tool.called"]
        assert all(f"echo m{n} >>" in c for c in commands), (n, sid, commands)
        logs = [await durable_log(client, sid) for client in clients]
        assert logs[0] == logs[1] == logs[2]  # the same log from every host
        types = [kind for _, _, kind in logs[0]]
        owner = await clients[0].session.owner(sid)
        assert owner.host is None  # idle: nobody executes it
        if "session.step.failed" in types or "session.execution.failed" in types:
            lost.add(f"m{n}")  # its Step failed as host.lost; its call, if it had started, settled as tool.stale
            continue
        retried = types.count("session.retry.scheduled")  # (a provider request that failed under load, sent again)
        assert types.count("session.step.started") == 2 + retried, (n, types)
        assert types.count("session.tool.success") == 1, (n, types)
        assert types.count("session.execution.succeeded") >= 1
    warnings = [line for h in hosts for line in h.stderr_lines]  # what the hosts said, for a failure to show
    # every tool ran exactly once; one a lost host had started may have run again where the model chose to
    expected = collections.Counter({f"m{n}": 1 for n in range(count) if f"m{n}" not in lost})
    once = collections.Counter({marker: c for marker, c in runs.items() if marker not in lost})
    assert once == expected, (once - expected, expected - once, warnings[-20:])
    assert all(runs[marker] <= 2 for marker in lost), ({m: runs[m] for m in lost}, warnings[-20:])
    assert len(lost) <= count // 20, (sorted(lost), warnings[-20:])  # a lapse is rare, not how sessions run
    for client in clients:
        await client.aclose()


async def _busy(cluster: Cluster, owner: OpenCodeClient, count: int) -> list[str]:
    """`count` sessions prompted through `owner`, each held in its first model answer."""
    cluster.model.holding.set()
    sids = [(await owner.session.create()).id for _ in range(count)]
    for n, sid in enumerate(sids):
        await owner.session.prompt(sid, prompt={"text": f"run b{n}"})
    with anyio.fail_after(60):
        for _ in sids:
            await anyio.to_thread.run_sync(cluster.model.held.acquire)
    cluster.model.holding.clear()  # answers from now on (the new owner's) are not held
    return sids


async def test_a_killed_owners_busy_sessions_continue_on_another_host_within_the_lease(cluster):
    first, second = cluster.start(), cluster.start()
    a, b = OpenCodeClient(first.url), OpenCodeClient(second.url)
    sids = await _busy(cluster, a, 20)
    owners = {(await b.session.owner(sid)).host for sid in sids}
    assert len(owners) == 1 and None not in owners  # every one of them executing on the first host
    first.stop(signal.SIGKILL)
    killed = time.time() * 1000
    expiry = {sid: (await b.session.owner(sid)).expires for sid in sids}  # as the dead host last renewed them
    assert all(expires is not None and expires <= killed + TTL_MS for expires in expiry.values())
    with anyio.fail_after(120):
        for sid in sids:
            await b.session.wait(sid)  # returns once b took the session over and ran it to idle
    assert cluster.runs() == collections.Counter({f"b{n}": 1 for n in range(20)})  # no tool ran twice
    delays = []
    for sid in sids:
        events = [e async for e in b.session.log(sid, follow=False) if e.type not in ("log.synced", "session.renamed")]
        types = [e.type for e in events]
        # the continued execution called the tool once and answered; every Step started was closed
        continued = (types.count("session.tool.success") == 1 and types[-1] == "session.execution.succeeded"
                     and types.count("session.step.ended") == 2
                     and types.count("session.step.started") == 2 + types.count("session.step.failed")
                     and types.count("session.input.promoted") == 1)  # the admitted prompt, promoted once
        assert continued, await cluster.diagnosis(b, [sid])
        resumed = [e.created for e in events if e.type == "session.execution.started" and e.created > killed]
        delays.append((resumed[0] - expiry[sid]) / 1000)
    # each continued soon after its lease expired: the sweep looks just after the expiry, and 20 continuations share
    # one host (on a quiet 2-core machine within 0.4 s, with two more busy processes within 1.2 s)
    assert max(delays) <= 1.5, sorted(delays)
    await a.aclose()
    await b.aclose()


async def test_a_paused_former_owner_writes_nothing_when_it_resumes(cluster):
    first, second = cluster.start(), cluster.start()
    a, b = OpenCodeClient(first.url), OpenCodeClient(second.url)
    (sid,) = await _busy(cluster, a, 1)
    first.proc.send_signal(signal.SIGSTOP)
    with anyio.fail_after(60):
        await b.session.wait(sid)  # b took it over once a's lease expired, and finished it
    before = await durable_log(b, sid)
    assert cluster.runs() == collections.Counter({"b0": 1})
    first.proc.send_signal(signal.SIGCONT)
    cluster.model.release.set()  # the answer a was waiting for arrives: it would call the tool again
    with anyio.fail_after(30):
        await anyio.to_thread.run_sync(first.wait_for_stderr, "taken over by another host", 30)
    assert await durable_log(b, sid) == before == await durable_log(a, sid)
    assert cluster.runs() == collections.Counter({"b0": 1})
    await a.aclose()
    await b.aclose()


async def test_a_prompt_and_an_interrupt_through_another_host_reach_the_owner(cluster):
    first, second = cluster.start(), cluster.start()
    a, b = OpenCodeClient(first.url), OpenCodeClient(second.url)
    (sid,) = await _busy(cluster, a, 1)
    owner = await b.session.owner(sid)
    assert owner.host is not None and not owner.local and (await a.session.owner(sid)).local
    await b.session.prompt(sid, prompt={"text": "run queued"}, delivery="queue")  # admitted by b, run by a
    cluster.model.release.set()
    with anyio.fail_after(60):
        await b.session.wait(sid)
    assert cluster.runs() == collections.Counter({"b0": 1, "queued": 1})
    types = [kind for _, _, kind in await durable_log(a, sid)]
    assert types.count("session.execution.started") == 1  # one busy period on the owner took both prompts
    assert sid not in await b.session.active()

    cluster.model.release.clear()
    (held,) = await _busy(cluster, a, 1)
    await b.session.interrupt(held)  # returns once the owner recorded the interruption
    types = [kind for _, _, kind in await durable_log(b, held)]
    assert types[-1] == "session.execution.interrupted"
    assert (await b.session.owner(held)).host is None
    assert cluster.runs() == collections.Counter({"b0": 1, "queued": 1})  # the interrupted call never ran
    await a.aclose()
    await b.aclose()


async def test_a_permission_reply_through_another_host_reaches_the_host_that_asked(cluster):
    cluster.configure(bash="ask")
    first, second = cluster.start(), cluster.start()
    a, b = OpenCodeClient(first.url), OpenCodeClient(second.url)
    sid = (await a.session.create()).id
    stream = a.event.subscribe()  # the ask is a live event of the host that asked
    assert (await stream.__anext__()).type == "server.connected"
    await a.session.prompt(sid, prompt={"text": "run asked"})
    with anyio.fail_after(30):
        async for item in stream:
            if item.type == "permission.v2.asked" and item.data.get("sessionID") == sid:
                break
    await stream.aclose()
    asked = await a.session.permission_list(sid)  # listed by the host that asked
    assert len(asked) == 1
    assert await b.session.permission_list(sid) == []  # pending requests are live: the owner's alone
    await b.session.permission_reply(sid, asked[0].id, reply="once")  # forwarded to the owner
    with anyio.fail_after(30):
        await b.session.wait(sid)
    assert cluster.runs() == collections.Counter({"asked": 1})
    with pytest.raises(PermissionNotFoundError):  # nobody executes the session now: unknown, as on one host
        await b.session.permission_reply(sid, "per_missing", reply="once")
    await a.aclose()
    await b.aclose()


async def test_over_its_resume_budget_a_taken_over_session_waits_idle_with_host_lost(cluster):
    cluster.env["OCS_RESUME_BUDGET"] = "0/1"
    first, second = cluster.start(), cluster.start()
    a, b = OpenCodeClient(first.url), OpenCodeClient(second.url)
    (sid,) = await _busy(cluster, a, 1)
    first.stop(signal.SIGKILL)
    with anyio.fail_after(60):
        await b.session.wait(sid)  # b took the lease, found no budget left, recorded the loss and let it go
    events = [e async for e in b.session.log(sid, follow=False) if e.type != "log.synced"]
    failed = [e for e in events if e.type == "session.execution.failed"]
    assert failed and failed[-1].data.error.type == "host.lost"
    assert cluster.runs() == collections.Counter()  # nothing ran again
    assert (await b.session.owner(sid)).host is None
    await b.session.prompt(sid, prompt={"text": "run later"})  # the next prompt continues it as usual
    with anyio.fail_after(60):
        await b.session.wait(sid)
    assert cluster.runs() == collections.Counter({"later": 1})
    await a.aclose()
    await b.aclose()



def _lines(path: Path) -> int:
    return len(path.read_text().split()) if path.exists() else 0


async def _started(cluster: Cluster, count: int, observer: OpenCodeClient, sids: list[str]) -> None:
    """Wait until `count` tool calls have started (each notes its start, then waits for its hold file)."""
    with anyio.move_on_after(60):  # (a guard: past it, the failure says why)
        while _lines(cluster.work / "started.log") < count:
            await anyio.sleep(0.02)  # polling a file the tools write: the condition waited on
    if _lines(cluster.work / "started.log") < count:
        raise AssertionError(f"{_lines(cluster.work / 'started.log')} of {count} tool calls started:"
                             f" {await cluster.diagnosis(observer, sids)}")


def _stderr_count(host: ServerProcess, text: str, count: int, timeout: float, unless: str | None = None) -> bool:
    def seen() -> int:
        return sum(text in line and (unless is None or unless not in line) for line in host.stderr_lines)

    with host.stderr_changed:
        return host.stderr_changed.wait_for(lambda: seen() >= count, timeout)


async def test_a_paused_owner_mid_tool_sends_nothing_and_runs_nothing_once_taken_over(cluster):
    # (This test once timed out under load waiting for the takeovers: the SIGSTOP landed while the owner's writer had
    # a transaction open, a lease renewal's row lock held, and the other host's takeover of that row waited for ever.
    # The server now ends a stopped host's transaction a third of a lease after its last statement
    # (idle_in_transaction_session_timeout); test_sweep.py leaves such a transaction open on purpose.)
    # (under load the taker may itself lose a lease it cannot renew in time and continue the session again: the
    # budget allows that here; test_over_its_resume_budget... covers the budget)
    cluster.env["OCS_RESUME_BUDGET"] = "10/3600"
    first, second = cluster.start(), cluster.start()
    a, b = OpenCodeClient(first.url), OpenCodeClient(second.url)
    cluster.model.tool_hold = "released"
    count = 10
    sids = [(await a.session.create()).id for _ in range(count)]
    for n, sid in enumerate(sids):
        await a.session.prompt(sid, prompt={"text": f"run p{n}"})
    await _started(cluster, count, b, sids)  # every session's tool runs on the first host, held mid-tool
    first.proc.send_signal(signal.SIGSTOP)
    # the second host takes each over once the lease expired: the call is stale, the model makes it again there
    await _started(cluster, 2 * count, b, sids)
    first.proc.send_signal(signal.SIGCONT)
    # the resumed host finds its leases gone at its first renewal and stops its drains (and the tools they run); the
    # drains' own lines come once each has ended (the lease's "(lease epoch N lost)" line comes before its tools stop)
    stopped = await anyio.to_thread.run_sync(_stderr_count, first, "taken over by another host", count, 60,
                                             "lease epoch")
    (cluster.work / "released").touch()  # whatever tool is still running ends now
    with anyio.fail_after(120):
        for sid in sids:
            await b.session.wait(sid)
    received = collections.Counter(cluster.model.received)
    assert [m for m, n in received.items() if n > 1] == []  # no provider request was sent twice
    titles = [m for m in cluster.model.received if "write the title of a conversation" in m]
    assert len(titles) == count  # one title request per session, from the host that ran its first Step to its end
    assert cluster.runs() == collections.Counter({f"p{n}": 1 for n in range(count)})  # no tool ran twice
    assert stopped
    await a.aclose()
    await b.aclose()
