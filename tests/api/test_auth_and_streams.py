"""Basic auth when OPENCODE_SERVER_PASSWORD is set, SSE heartbeats, cutting off a reader that stopped reading, and
how the instance stream and a session wait end when the server stops."""

from __future__ import annotations

import logging
import signal
from collections.abc import AsyncIterator

import anyio
import httpx2
import pytest

from opencode_session.client import ClientError, OpenCodeClient, ServiceUnavailableError, UnauthorizedError
from opencode_session.sdk import OpenCode
from tests.support.config import DECLARED, write_global_config
from tests.support.server import start_server

pytestmark = pytest.mark.anyio


async def test_every_route_requires_basic_auth_when_a_password_is_set(secured):
    for auth in (None, ("alice", "wrong"), ("opencode", "s3cret")):
        async with secured(auth) as client:
            with pytest.raises(UnauthorizedError):
                await client.health.get()
            with pytest.raises(UnauthorizedError):
                await client.session.create()
            with pytest.raises(UnauthorizedError):
                async for _ in client.event.subscribe():
                    pass
    async with secured(("alice", "s3cret")) as client:
        assert (await client.health.get()).healthy
        sid = (await client.session.create()).id
        assert (await client.session.get(sid)).id == sid


async def test_instance_stream_sends_comment_heartbeats_when_quiet(tmp_path):
    async with OpenCode(db=tmp_path / "db.sqlite", directory=tmp_path, heartbeat=0.05) as host:
        async with httpx2.AsyncClient(transport=host.transport) as http, \
                http.stream("GET", host.base_url + "/api/event") as response:
            assert response.headers["content-type"].startswith("text/event-stream")
            assert response.headers["cache-control"].startswith("no-cache")
            lines = []
            with anyio.fail_after(10):
                async for line in response.aiter_lines():
                    lines.append(line)
                    if line.startswith(": heartbeat"):
                        break
        assert lines[0].startswith("data: ") and '"server.connected"' in lines[0]


class _Cuts(logging.Handler):
    """Sets `seen` when the server logs that it cut off a stream."""

    def __init__(self) -> None:
        super().__init__()
        self.seen = anyio.Event()

    def emit(self, record: logging.LogRecord) -> None:
        if "cut off an event stream" in record.getMessage():
            self.seen.set()


async def test_a_reader_that_stops_reading_is_cut_off_visibly_without_slowing_the_others(tmp_path):
    cuts = _Cuts()
    logging.getLogger("opencode_session.server.sse").addHandler(cuts)
    try:
        async with OpenCode(db=tmp_path / "db.sqlite", directory=tmp_path, stall_timeout=0.5) as host:
            stalled = host.event.subscribe()
            assert (await stalled.__anext__()).type == "server.connected"  # and then it stops reading
            fast = host.event.subscribe()
            seen: list[str] = []

            async def read_fast() -> None:
                async for item in fast:
                    seen.append(item.type)
                    if seen.count("session.agent.selected") == 100:
                        return

            with anyio.fail_after(30):
                assert (await fast.__anext__()).type == "server.connected"
                async with anyio.create_task_group() as tg:
                    tg.start_soon(read_fast)
                    sid = (await host.session.create()).id
                    for i in range(100):
                        await host.session.switch_agent(sid, agent=("build", "plan")[i % 2])  # writers never wait
                await cuts.seen.wait()
            await fast.aclose()
            # the stalled reader gets what was already on its way, then an error: never a clean end
            with pytest.raises(ClientError) as cut:
                async for _ in stalled:
                    pass
            assert cut.value.reason == "Transport"
            assert seen.count("session.agent.selected") == 100
    finally:
        logging.getLogger("opencode_session.server.sse").removeHandler(cuts)


async def test_a_lost_subscription_ends_the_stream_as_a_failure(tmp_path):
    # the bus ends a subscription for a reader too far behind (see test_live_bus); closing it does the same to all
    async with OpenCode(db=tmp_path / "db.sqlite", directory=tmp_path) as host:
        stream = host.event.subscribe()
        assert (await stream.__anext__()).type == "server.connected"
        host.runtime.store.live.close()
        with anyio.fail_after(10), pytest.raises(ClientError) as lost:
            async for _ in stream:
                pass
        assert lost.value.reason == "Transport"


async def test_server_shutdown_says_so_before_the_instance_stream_ends(tmp_path):
    srv = start_server(tmp_path)
    got: list[str] = []
    async with OpenCodeClient(srv.url) as client:
        stream = client.event.subscribe()
        got.append((await stream.__anext__()).type)
        srv.proc.send_signal(signal.SIGTERM)
        with anyio.fail_after(30), pytest.raises(ClientError) as ended:
            async for item in stream:
                got.append(item.type)
    assert srv.stop() == 0, "".join(srv.stderr_lines)
    assert got == ["server.connected", "global.disposed"] and ended.value.reason == "Transport"


class Unanswered:
    """A provider whose answer never comes: the session stays busy."""

    async def stream(self, request: object) -> AsyncIterator[object]:
        await anyio.sleep_forever()
        yield request


async def test_a_wait_in_flight_when_the_server_stops_is_told_so(tmp_path):
    write_global_config(config={**DECLARED, "model": "p/m"})
    async with OpenCode(db=tmp_path / "db.sqlite", directory=tmp_path, provider=lambda _model: Unanswered()) as host:
        sid = (await host.session.create()).id
        await host.session.prompt(sid, prompt={"text": "hi"})
        outcome: list[Exception] = []

        async def wait() -> None:
            try:
                await host.session.wait(sid)
            except Exception as exc:
                outcome.append(exc)

        with anyio.fail_after(30):
            async with anyio.create_task_group() as tg:
                tg.start_soon(wait)
                await anyio.wait_all_tasks_blocked()  # in process: the wait is inside its handler now
                assert outcome == [] and sid in await host.session.active()
                host._app.state.ocs.shutdown.set()  # what stopping the server does first
    assert len(outcome) == 1 and isinstance(outcome[0], ServiceUnavailableError), outcome


async def test_closing_a_stream_releases_the_server_side(tmp_path):
    async with OpenCode(db=tmp_path / "db.sqlite", directory=tmp_path) as host:
        sid = (await host.session.create()).id
        stream = host.session.log(sid, follow=True)
        with anyio.fail_after(10):
            async for item in stream:
                if item.type == "log.synced":
                    break
        await stream.aclose()
        with anyio.fail_after(10):
            while host.transport.running_tasks:
                await anyio.wait_all_tasks_blocked()
        assert not host.transport.running_tasks


async def test_closing_the_embedded_host_releases_the_database_and_every_task(tmp_path):
    import asyncio
    import sqlite3

    db = tmp_path / "db.sqlite"
    before = asyncio.all_tasks()
    async with OpenCode(db=db, directory=tmp_path) as host:
        sid = (await host.session.create()).id
        follower = host.session.log(sid, follow=True)
        async for item in follower:
            if item.type == "log.synced":
                break  # left open on purpose: closing the host must end it
        await host.session.prompt(sid, prompt={"text": "no model configured"})
    assert asyncio.all_tasks() - before == set()
    conn = sqlite3.connect(db, timeout=0)
    conn.execute("BEGIN EXCLUSIVE")  # no other connection still holds the file
    conn.rollback()
    conn.close()
    with pytest.raises(RuntimeError):
        _ = host.runtime


async def test_the_embedded_host_answers_only_while_it_is_open(tmp_path):
    host = OpenCode(db=tmp_path / "db.sqlite", directory=tmp_path)
    with pytest.raises(ClientError) as early:
        await host.health.get()
    assert early.value.reason == "Transport" and "not open" in str(early.value)
    async with host, OpenCodeClient(host.base_url, transport=host.transport) as other:
        assert (await other.health.get()).healthy
        await host.aclose()
        with pytest.raises(ClientError) as late:
            await other.health.get()
        assert late.value.reason == "Transport" and "not open" in str(late.value)
