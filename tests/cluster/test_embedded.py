"""Two embedded hosts (`OpenCode(db="postgresql://...")`) on one database: a session made on one is prompted
through the other, runs once, and both serve the same log."""

from __future__ import annotations

import anyio
import pytest

from opencode_session.sdk import OpenCode
from tests.support.postgres import fresh_schema
from tests.support.scripted import ScriptedProvider, text
from tests.test_runner import config

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(60)]


async def test_two_embedded_hosts_share_sessions_through_postgres(tmp_path):
    provider = ScriptedProvider()
    provider.fallback = lambda _request: text("answered")
    env = config(tmp_path)
    with fresh_schema() as url:
        async with OpenCode(db=url, directory=tmp_path, env=env, provider=lambda _m: provider) as one, \
                OpenCode(db=url, directory=tmp_path, env=env, provider=lambda _m: provider) as two:
            sid = (await one.session.create()).id
            await two.session.prompt(sid, prompt={"text": "hello"})
            with anyio.fail_after(30):
                await one.session.wait(sid)
            logs = [[(e.durable.seq, e.type) async for e in host.session.log(sid, follow=False)
                     if e.type != "log.synced"] for host in (one, two)]
            assert logs[0] == logs[1]
            assert [kind for _, kind in logs[0]].count("session.step.ended") == 1
            assert (await two.session.get(sid)).id == sid
