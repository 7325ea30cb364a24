"""Two real `ocs serve` hosts on one PostgreSQL schema: a client following `GET /api/event` on the host that does not
execute a session sees the same live-only events of it (reasoning and text deltas, the tool input as it streams,
`todo.updated`) as a client on the host that does, in the same order, each within a loopback delay."""

from __future__ import annotations

import json
import statistics
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import anyio
import pytest

from opencode_session.client import OpenCodeClient
from tests.support.postgres import fresh_schema
from tests.support.server import ServerProcess, isolated_env, start_server
from tests.support.stream_model import TODOS, StreamModel, expected_text
from tests.support.tool_model import config

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(180)]

LIVE = ("session.reasoning.delta", "session.text.delta", "session.tool.input.delta", "todo.updated")


@pytest.fixture
def hosts(tmp_path: Path) -> Iterator[tuple[StreamModel, ServerProcess, ServerProcess]]:
    with fresh_schema() as url:
        model = StreamModel(deltas=300, reasoning=30, pieces=40)
        model.start()
        env = isolated_env(tmp_path)
        (tmp_path / "config" / "opencode").mkdir(parents=True, exist_ok=True)
        (tmp_path / "config" / "opencode" / "opencode.json").write_text(json.dumps(config(model.base_url)))
        work = tmp_path / "work"
        work.mkdir()
        started: list[ServerProcess] = []
        try:
            for _ in range(2):
                started.append(start_server(tmp_path, env=env, db=url, workdir=work))
            yield model, started[0], started[1]
        finally:
            for host in started:
                host.stop(timeout=15)
            model.stop()


Seen = list[tuple[float, str, str, dict]]  # (arrival, event id, type, data)


async def _follow(client: OpenCodeClient, sid: str, ready: anyio.Event, seen: Seen, done: anyio.Event,
                  each: Callable[[], None] = lambda: None) -> None:
    """Keep what the stream carries of the session until cancelled; `done` once its execution succeeded, `each`
    called after every event kept."""
    stream = client.event.subscribe()
    try:
        async for item in stream:
            if item.type == "server.connected":
                ready.set()
            elif item.data.get("sessionID") == sid:
                seen.append((time.perf_counter(), item.id, item.type, item.data))
                if item.type == "session.execution.succeeded":
                    done.set()
                each()
    finally:
        await stream.aclose()


def _live_ids(seen: Seen) -> set[str]:
    return {event_id for _, event_id, kind, _ in seen if kind in LIVE}


def _from_prompt(seen: Seen) -> list[str]:
    """The durable events a stream carried, from the prompt's admission on. The session's creation was committed on
    the first host before either stream opened: the second host may hear that commit only after its stream opened,
    and then carries it (a stream replays nothing older than itself), while the first host's stream cannot."""
    durable = [(event_id, kind) for _, event_id, kind, _ in seen if kind not in LIVE]
    kinds = [kind for _, kind in durable]
    return [event_id for event_id, _ in durable[kinds.index("session.input.admitted"):]]


def _percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


async def test_a_subscriber_on_another_host_sees_the_owners_live_events_in_order(hosts):
    _, first, second = hosts
    a, b = OpenCodeClient(first.url), OpenCodeClient(second.url)
    sid = (await a.session.create()).id
    on_a: Seen = []
    on_b: Seen = []
    with anyio.fail_after(120):
        async with anyio.create_task_group() as tg:
            ready_a, ready_b, done_a, done_b = anyio.Event(), anyio.Event(), anyio.Event(), anyio.Event()
            complete = anyio.Event()

            def check() -> None:  # b has every live event a had once a's execution ended
                if done_a.is_set() and _live_ids(on_a) <= _live_ids(on_b):
                    complete.set()

            tg.start_soon(_follow, a, sid, ready_a, on_a, done_a, check)
            tg.start_soon(_follow, b, sid, ready_b, on_b, done_b, check)
            await ready_a.wait()
            await ready_b.wait()
            await a.session.prompt(sid, prompt={"text": "stream it"})  # woken on the first host: it executes there
            await done_a.wait()
            await done_b.wait()
            # a live event may reach the other host just after a durable event that followed it (docs/clustering.md)
            with anyio.move_on_after(10):
                await complete.wait()
            tg.cancel_scope.cancel()
    assert (await b.session.owner(sid)).host is None  # idle again; the first host ran it (its log says so below)

    live_a = [(event_id, kind, data) for _, event_id, kind, data in on_a if kind in LIVE]
    live_b = [(event_id, kind, data) for _, event_id, kind, data in on_b if kind in LIVE]
    kinds = {kind for _, kind, _ in live_a}
    assert kinds == set(LIVE), kinds  # every kind of live event was produced
    assert live_b == live_a  # the same live events, whole, in the same order
    text = "".join(data["delta"] for _, kind, data in live_b if kind == "session.text.delta")
    assert text == expected_text(300) + "done"  # the first Step's text, then the answer to the tool's result
    assert [data["todos"] for _, kind, data in live_b if kind == "todo.updated"] == [TODOS]
    # every durable event of the session from its prompt on too, in one order on both hosts
    assert _from_prompt(on_b) == _from_prompt(on_a)
    # a live event never arrives on the other host before a durable event that came before it on its own host
    order_b = {event_id: n for n, (_, event_id, _, _) in enumerate(on_b)}
    last_durable = None
    for _, event_id, kind, _ in on_a:
        if kind not in LIVE:
            last_durable = event_id
        elif last_durable is not None:
            assert order_b[event_id] > order_b[last_durable], (kind, event_id)

    # the other direction is best effort (docs/clustering.md): count the live events that reached the other host
    # after a durable event that followed them on their own
    late, following, kinds_of = [], None, {event_id: kind for _, event_id, kind, _ in on_a}
    for _, event_id, kind, _ in reversed(on_a):
        if kind not in LIVE:
            following = event_id
        elif following is not None and order_b[event_id] > order_b[following]:
            late.append(f"{kind} before {kinds_of[following]}")
    print(f"\nlive events after a later durable event on the other host: {len(late)} of {len(live_a)} {late}")

    arrival_a = {event_id: at for at, event_id, kind, _ in on_a if kind in LIVE}
    delays = [(at - arrival_a[event_id]) * 1000 for at, event_id, kind, _ in on_b if kind in LIVE]
    median, p99 = statistics.median(delays), _percentile(delays, 0.99)
    print(f"\n{len(delays)} live events; on the other host later by median {median:.1f} ms, p99 {p99:.1f} ms, "
          f"max {max(delays):.1f} ms")
    # the target is 100 ms at p99 on loopback; asserted loosely, the machine running the suite is shared
    assert median <= 100 and p99 <= 500, (median, p99)
    types = [e.type async for e in a.session.log(sid, follow=False)
             if e.type not in ("log.synced", "session.renamed", "session.title.updated")]
    assert types.count("session.tool.success") == 1 and types[-1] == "session.execution.succeeded"
    await a.aclose()
    await b.aclose()
