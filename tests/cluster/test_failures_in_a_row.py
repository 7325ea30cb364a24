"""Failures in a row, on real `ocs serve` hosts sharing one PostgreSQL database, with sessions in the middle of loops
of `bash` calls: an owner is killed (SIGKILL) and another host is started in its place, then another owner is
paused (SIGSTOP) for longer than the lease and resumed (SIGCONT). Whatever the seed (which host, how many sessions,
when): every session of each lost owner is continued by another host within the lease plus two seconds, each tool
call is settled exactly once, no event comes from a host after its epoch was superseded (the log never contradicts
itself: nothing of a Step or a call after it ended, no Step beside another), and every host serves the same logs.

Each session may be lost twice here (killed, then paused), so the resume budget allows more than the default one
continuation an hour. `bench/bench_failures_in_a_row.py` runs the same sequence over many seeds."""

from __future__ import annotations

import collections
import os
import random
import signal
import time
from collections.abc import Iterator
from typing import Any

import anyio
import pytest

from opencode_session.client import OpenCodeClient
from tests.support.cluster import Cluster, durable_log
from tests.support.postgres import fresh_schema
from tests.support.server import ServerProcess
from tests.support.tool_model import ToolModel

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(120)]

TTL_MS = 2000
# the seeds a run tries: five by default (about 10 s each); OCS_SEQUENCE_SEEDS=FIRST-LAST for more (the bench's loop)
_FIRST, _, _LAST = os.environ.get("OCS_SEQUENCE_SEEDS", "1-5").partition("-")
SEEDS = list(range(int(_FIRST), int(_LAST or _FIRST) + 1))
STEP_TYPES = ("session.step.", "session.tool.", "session.text.", "session.reasoning.")
SETTLED = ("session.tool.success", "session.tool.failed")


@pytest.fixture
def cluster(tmp_path) -> Iterator[Cluster]:
    with fresh_schema() as url:
        model = ToolModel()
        model.loop_s = 0.1
        model.start()
        made = Cluster(tmp_path, url, model, TTL_MS, OCS_RESUME_BUDGET="10/3600")
        try:
            yield made
        finally:
            made.stop()
            model.stop()


def contradictions(events: list[Any]) -> list[str]:
    """What a log says that cannot all be true: an event of a Step or a call after it ended, a Step started beside
    another, a call settled twice or never, a Step never ended."""
    problems: list[str] = []
    open_steps: set[str] = set()
    ended_steps: set[str] = set()
    calls: set[tuple[str, str]] = set()
    settled: collections.Counter[tuple[str, str]] = collections.Counter()
    for event in events:
        if not event.type.startswith(STEP_TYPES):
            continue
        step = event.data.assistantMessageID
        if step in ended_steps:
            problems.append(f"{event.type} (seq {event.durable.seq}) of step {step} after it ended")
        if event.type == "session.step.started":
            if open_steps:
                problems.append(f"step {step} started while {sorted(open_steps)} had not ended")
            open_steps.add(step)
        elif event.type in ("session.step.ended", "session.step.failed"):
            open_steps.discard(step)
            ended_steps.add(step)
        elif event.type.startswith("session.tool."):
            call = (step, event.data.callID)
            calls.add(call)
            if settled[call]:
                problems.append(f"{event.type} (seq {event.durable.seq}) of call {call} after it was settled")
            if event.type in SETTLED:
                settled[call] += 1
    problems += [f"call {call} never settled" for call in calls if not settled[call]]
    problems += [f"step {step} never ended" for step in open_steps]
    return problems


async def _continued_after(client: OpenCodeClient, sid: str, since: float) -> float:
    """When (ms) the session's execution was next started after `since`, as its log says (followed live)."""
    async for event in client.session.log(sid, follow=True):
        if event.type == "session.execution.started" and event.created > since:
            return event.created
    raise AssertionError(f"the log of {sid} ended")


async def _mid_loop(cluster: Cluster, observer: OpenCodeClient, sids: list[str], rounds: int) -> None:
    """Wait until each session's loop has run `rounds` more calls (each appends to runs.log as it runs)."""
    def counts() -> collections.Counter[str]:
        return collections.Counter(marker.split(".")[0] for marker in cluster.runs().elements())

    def behind() -> list[str]:
        now = counts()
        return [sid for n, sid in enumerate(sids) if now[f"s{n}"] < start[f"s{n}"] + rounds]

    start = counts()
    with anyio.move_on_after(60):  # (a guard: past it, the failure below says why)
        while behind():
            await anyio.sleep(0.05)  # polling a file the tools write: the condition waited on
    if behind():
        raise AssertionError(f"loops that did not go on: {await cluster.diagnosis(observer, behind())}")


def _pid(owner: str | None) -> int | None:
    """The process of a lease owner (named `machine:pid:random`)."""
    return int(owner.split(":")[-2]) if owner else None


async def _owned_by(client: OpenCodeClient, sids: list[str], host: ServerProcess) -> list[str]:
    """The sessions whose live lease `host` holds now (whichever host it was prompted through: under load a host
    may already have lost one to another, safely, before the test does anything)."""
    return [sid for sid in sids if _pid((await client.session.owner(sid)).host) == host.proc.pid]


async def _lost_and_continued(observer: OpenCodeClient, sids: list[str], since: float,
                              cluster: Cluster) -> list[float]:
    """Each session's delay (s) from `since` to its continuation on another host. Past the guard it fails saying
    which sessions were not continued, who holds their leases, and what each host said last."""
    started: dict[str, float] = {}

    async def one(sid: str) -> None:
        started[sid] = await _continued_after(observer, sid, since)

    with anyio.move_on_after(TTL_MS / 1000 + 30):  # (a guard: the delays are asserted below)
        async with anyio.create_task_group() as tg:
            for sid in sids:
                tg.start_soon(one, sid)
    if len(started) < len(sids):
        waiting = [sid for sid in sids if sid not in started]
        raise AssertionError(f"not continued: {await cluster.diagnosis(observer, waiting)}")
    return [(started[sid] - since) / 1000 for sid in sids]


def _said(host: ServerProcess, text: str, count: int, timeout: float) -> bool:
    with host.stderr_changed:
        return host.stderr_changed.wait_for(lambda: sum(text in line for line in host.stderr_lines) >= count, timeout)


@pytest.mark.parametrize("seed", SEEDS)
async def test_a_kill_a_restart_and_a_pause_in_a_row_lose_no_session_and_leave_onestory(cluster, seed):
    rng = random.Random(seed)
    t0 = time.monotonic()

    def mark(what: str) -> None:
        if os.environ.get("OCS_TRACE_SEQUENCE"):
            print(f"{time.monotonic() - t0:6.2f} {what}", flush=True)
    hosts = [cluster.start() for _ in range(3)]
    clients = {id(h): OpenCodeClient(h.url) for h in hosts}
    count = rng.randint(10, 14)
    sids = []
    for n in range(count):  # prompted through (so executing on) one of the hosts
        through = clients[id(hosts[rng.randrange(3) if n >= 3 else n])]
        sid = (await through.session.create()).id
        await through.session.prompt(sid, prompt={"text": f"loop s{n}"})
        sids.append(sid)
    mark("hosts started, prompted")
    await _mid_loop(cluster, clients[id(hosts[0])], sids, 1 + rng.randrange(3))

    mark("mid-loop")
    # 1. an owner is killed, and another host started
    killed = hosts[rng.randrange(3)]
    survivors = [h for h in hosts if h is not killed]
    observer = clients[id(survivors[0])]
    lost = await _owned_by(observer, sids, killed)
    assert lost
    killed.stop(signal.SIGKILL)
    at = time.time() * 1000
    mark("killed")
    first = await _lost_and_continued(observer, lost, at, cluster)
    mark("continued after kill")
    restarted = cluster.start()
    clients[id(restarted)] = OpenCodeClient(restarted.url)
    mark("restarted")
    await _mid_loop(cluster, observer, sids, 1 + rng.randrange(2))

    mark("mid-loop again")
    # 2. the surviving host that owns the most sessions now is paused beyond its lease, then resumed
    owned = {id(h): await _owned_by(observer, sids, h) for h in survivors}
    paused = max(survivors, key=lambda h: len(owned[id(h)]))
    lost = owned[id(paused)]
    assert lost, owned
    watcher = clients[id(next(h for h in [*survivors, restarted] if h is not paused))]
    paused.proc.send_signal(signal.SIGSTOP)
    at = time.time() * 1000
    mark("paused")
    try:
        second = await _lost_and_continued(watcher, lost, at, cluster)
        await anyio.sleep(rng.uniform(0, 0.5))  # a timer: how much longer the pause lasts
    finally:
        paused.proc.send_signal(signal.SIGCONT)
    mark("resumed")
    # once resumed it finds every lease it held gone (or too old to trust) and stops those drains, writing nothing
    stopped = await anyio.to_thread.run_sync(_said, paused, "lease epoch", len(lost), 30)
    assert stopped, paused.stderr_lines[-20:]

    mark("stopped its drains")
    cluster.model.finish.set()  # the loops end at their next request
    live = [h for h in hosts if h is not killed] + [restarted]
    with anyio.fail_after(60):
        for sid in sids:
            await clients[id(live[0])].session.wait(sid)

    mark("all idle")
    limit = TTL_MS / 1000 + 2
    assert max(first) <= limit, ("after the kill", sorted(first))
    assert max(second) <= limit, ("after the pause", sorted(second))
    for sid in sids:
        logs = [await durable_log(clients[id(h)], sid) for h in live]
        assert all(log == logs[0] for log in logs), sid  # the same log from every host
        events = [e async for e in clients[id(live[0])].session.log(sid, follow=False) if e.type != "log.synced"]
        problems = contradictions(events)
        assert not problems and events[-1].type == "session.execution.succeeded", (
            f"{problems}: {await cluster.diagnosis(clients[id(live[0])], [sid])}")
    for client in clients.values():
        await client.aclose()
