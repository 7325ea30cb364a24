"""Basic auth when OPENCODE_SERVER_PASSWORD is set, SSE heartbeats, and dropping a slow live subscriber alone."""

from __future__ import annotations

import anyio
import httpx2
import pytest

from opencode_session.client import OpenCodeClient
from opencode_session.schema.errors import UnauthorizedError
from opencode_session.sdk import OpenCode
from tests.support.server import isolated_env, start_server

pytestmark = pytest.mark.anyio


@pytest.fixture(params=["server", "embedded"])
async def secured(request, tmp_path):
    """(base_url, transport-or-None, host-or-None) of an instance that requires the password 's3cret'."""
    env = isolated_env(tmp_path, OPENCODE_SERVER_PASSWORD="s3cret", OPENCODE_SERVER_USERNAME="alice")
    if request.param == "server":
        srv = start_server(tmp_path, env=env)
        try:
            yield lambda auth: OpenCodeClient(srv.url, auth=auth)
        finally:
            assert srv.stop() == 0
    else:
        workdir = tmp_path / "work"
        workdir.mkdir()
        async with OpenCode(db=tmp_path / "db.sqlite", directory=workdir, env=env) as host:
            transport = host._transport

            def make(auth):
                return OpenCodeClient("http://opencode.local", auth=auth, transport=transport)

            yield make


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
        http = host._client()
        async with http.stream("GET", host.base_url + "/api/event") as response:
            assert response.headers["content-type"].startswith("text/event-stream")
            assert response.headers["cache-control"].startswith("no-cache")
            lines = []
            with anyio.fail_after(10):
                async for line in response.aiter_lines():
                    lines.append(line)
                    if line.startswith(": heartbeat"):
                        break
        assert lines[0].startswith("data: ") and '"server.connected"' in lines[0]


async def test_slow_subscriber_is_dropped_alone(tmp_path):
    async with OpenCode(db=tmp_path / "db.sqlite", directory=tmp_path) as host:
        bus = host.runtime.store.live
        slow = bus.subscribe(maxsize=4)
        fast = host.event.subscribe()
        got_connected = anyio.Event()
        seen: list[str] = []

        async def read_fast():
            async for item in fast:
                seen.append(item.type)
                if item.type == "server.connected":
                    got_connected.set()
                if seen.count("session.agent.selected") == 10:
                    return

        with anyio.fail_after(15):
            async with anyio.create_task_group() as tg:
                tg.start_soon(read_fast)
                await got_connected.wait()
                sid = (await host.session.create()).id
                for i in range(10):
                    await host.session.switch_agent(sid, agent=f"a{i}")  # writers never wait on readers
        await fast.aclose()
        assert slow.dropped and await slow.get() is None
        assert seen.count("session.agent.selected") == 10
        assert bus.subscriber_count == 0


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
            while host._transport.running_tasks:
                await anyio.wait_all_tasks_blocked()
        assert not host._transport.running_tasks


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
        host.runtime
