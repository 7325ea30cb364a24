"""A host cut off from PostgreSQL (a loopback proxy between it and the database stops forwarding, both ways, without
closing anything) while it executes busy sessions: it stops executing them before their leases can have expired (its
tools are stopped), the other host takes each over and continues it within the lease plus two seconds of the cut
(the cut-off host's open transaction holds no lock long enough to stop it), and once the proxy forwards again the
cut-off host writes nothing more for any of them."""

from __future__ import annotations

import collections
import json
import time
from collections.abc import Iterator
from datetime import datetime

import anyio
import pytest

from opencode_session.client import OpenCodeClient
from tests.support.cluster import Cluster, durable_log
from tests.support.polling import until
from tests.support.postgres import fresh_schema
from tests.support.server import ServerProcess
from tests.support.tool_model import ToolModel

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(180)]

TTL_MS = 3000
COUNT = 6


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


def _said(host: ServerProcess, text: str, count: int, timeout: float) -> float | None:
    """Wait until `count` lines of the host's stderr contain `text`; the wall clock then (ms), or None."""
    with host.stderr_changed:
        if not host.stderr_changed.wait_for(lambda: sum(text in line for line in host.stderr_lines) >= count,
                                            timeout):
            return None
    return time.time() * 1000


async def test_a_host_cut_off_from_the_database_stops_its_sessions_in_time_and_writes_nothing_after(cluster):
    proxy = cluster.proxy()
    # (its log lines carry the time each was written: when it stopped, not when this test got to read it)
    cut_off, other = cluster.start(proxy, args=("--log-format", "json")), cluster.start()
    a, b = OpenCodeClient(cut_off.url), OpenCodeClient(other.url)
    cluster.model.tool_hold = "released"
    sids = [(await a.session.create()).id for _ in range(COUNT)]
    for n, sid in enumerate(sids):
        await a.session.prompt(sid, prompt={"text": f"run p{n}"})
    await until(lambda: cluster.started() >= COUNT, "every tool started on the first host", 60)
    assert {(await b.session.owner(sid)).host for sid in sids} == {(await a.session.owner(sids[0])).host}

    proxy.cut()
    cut = time.time() * 1000
    expiry = {sid: (await b.session.owner(sid)).expires for sid in sids}  # as last renewed before the cut
    # the cut-off host stops executing each of them (and its tool) before that session's lease can have expired
    stopping = "could not be renewed in time"
    assert await anyio.to_thread.run_sync(_said, cut_off, stopping, COUNT, 30), cut_off.stderr_lines[-20:]
    stopped = {}
    for line in cut_off.stderr_lines:
        if stopping in line:
            entry = json.loads(line)
            sid = next(sid for sid in sids if sid in entry["message"])
            stopped[sid] = datetime.fromisoformat(entry["time"]).timestamp() * 1000
    assert stopped.keys() == set(sids)
    late = {sid: (stopped[sid] - cut, expires - cut) for sid, expires in expiry.items()
            if expires is not None and stopped[sid] >= expires}
    assert not late, late  # (ms after the cut: when it stopped, when its lease expired)
    # the other host takes each over and the model makes its call again there
    await until(lambda: cluster.started() >= 2 * COUNT, "every session's call made again on the other host", 60)
    (cluster.work / "released").touch()
    with anyio.fail_after(60):
        for sid in sids:
            await b.session.wait(sid)
    delays = []
    for sid in sids:
        events = [e async for e in b.session.log(sid, follow=False) if e.type != "log.synced"]
        continued = [e.created for e in events if e.type == "session.execution.started" and e.created > cut]
        assert continued, [e.type for e in events]
        delays.append((continued[0] - cut) / 1000)
        types = [e.type for e in events]
        assert types[-1] == "session.execution.succeeded", types
        settled = [(e.data.assistantMessageID, e.data.callID) for e in events
                   if e.type in ("session.tool.success", "session.tool.failed")]
        assert len(settled) == len(set(settled)) == 2, types  # the lost call settled stale once, the new one ran
    assert max(delays) <= TTL_MS / 1000 + 2, sorted(delays)
    assert cluster.runs() == collections.Counter({f"p{n}": 1 for n in range(COUNT)})  # the cut-off host's never ended
    before = {sid: await durable_log(b, sid) for sid in sids}

    proxy.heal()  # what the cut-off host sent meanwhile arrives now; it works with the database again
    with anyio.fail_after(60):
        probe = (await a.session.create()).id  # a write of its own, through the healed link
        await a.session.prompt(probe, prompt={"text": "say hello"})
        await a.session.wait(probe)
    for sid in sids:
        assert await durable_log(b, sid) == before[sid] == await durable_log(a, sid)  # nothing more from it
    assert cluster.runs() == collections.Counter({f"p{n}": 1 for n in range(COUNT)})
    await a.aclose()
    await b.aclose()
