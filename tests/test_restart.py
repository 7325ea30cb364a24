"""Managed restart continuation across real `ocs serve` processes on one database: a graceful stop suspends the
active session and the next server resumes it exactly once; a hard kill suspends nothing (what follows it is
continuation after a hard crash: test_continuation.py)."""

from __future__ import annotations

import signal

import anyio
import pytest

from opencode_session.client import OpenCodeClient
from tests.support import fake_openai as fake
from tests.support.server import configured_home, start_server

pytestmark = pytest.mark.anyio


@pytest.fixture
def root(tmp_path, provider):
    return tmp_path, configured_home(tmp_path, provider)


async def _start_held_prompt(root, provider):
    path, env = root
    held = fake.completion(fake.text_deltas("working on it"), hold_after=2)
    provider.enqueue(held)
    srv = start_server(path, env=env)
    client = OpenCodeClient(srv.url)
    sid = (await client.session.create()).id
    await client.session.prompt(sid, prompt={"text": "do the thing"})
    with anyio.fail_after(20):
        await anyio.to_thread.run_sync(held.held.wait)
        # the provider has sent text; wait until the server has made it durable
        async for event in client.session.log(sid, follow=True):
            if event.type == "session.text.started":
                break
    assert sid in await client.session.active()
    return srv, client, sid, held


async def _log(url: str, sid: str):
    """The session's execution history: without the sync marker and the background title, which lands any time."""
    async with OpenCodeClient(url) as client:
        return [e async for e in client.session.log(sid, follow=False)
                if e.type not in ("log.synced", "session.renamed")]


async def test_graceful_restart_resumes_the_session_once(root, provider):
    path, env = root
    srv, client, sid, held = await _start_held_prompt(root, provider)
    await client.aclose()
    assert srv.stop(signal.SIGTERM) == 0
    held.release.set()
    types = [e.type for e in await _restart_and_finish(path, env, sid, provider)]
    # the first server recorded the interruption; the second resumed and finished the work
    assert types.count("session.execution.started") == 2
    interrupted = types.index("session.execution.interrupted")
    assert types[interrupted + 1] == "session.execution.started" and types[-1] == "session.execution.succeeded"


async def _restart_and_finish(path, env, sid, provider):
    """Start the second server with one answer scripted, wait for the resumed drain, then a third server that
    must not resume again."""
    provider.enqueue(fake.completion(fake.text_deltas("done after restart")))
    second = start_server(path, env=env)
    async with OpenCodeClient(second.url) as client:
        with anyio.fail_after(20):
            while True:  # the resume is scheduled at start-up; wait until it has run to completion
                log = await _log(second.url, sid)
                if log and log[-1].type in ("session.execution.succeeded", "session.execution.failed"):
                    break
                await client.session.wait(sid)
        history = await client.session.context(sid)
    assert second.stop() == 0
    assert [c.text for m in history if m.type == "assistant" for c in m.content][-1] == "done after restart"
    third = start_server(path, env=env)
    try:
        async with OpenCodeClient(third.url) as client:
            assert await client.session.active() == {}
        log = await _log(third.url, sid)
    finally:
        assert third.stop() == 0
    assert provider.pending == 0 and len(provider.requests) == 2  # resumed exactly once
    return log


async def test_hard_kill_suspends_nothing_and_without_a_resume_budget_waits_for_a_prompt(root, provider):
    """A hard kill leaves no suspension; with automatic continuation turned off (a zero budget) the next server
    reconciles the lost Step, records `host.lost` and runs nothing until prompted (test_continuation.py covers the
    default budget, which continues)."""
    path, env = root
    srv, client, sid, held = await _start_held_prompt(root, provider)
    await client.aclose()
    srv.stop(signal.SIGKILL)
    held.release.set()
    second = start_server(path, env={**env, "OCS_RESUME_BUDGET": "0/1"})
    try:
        async with OpenCodeClient(second.url) as client:
            assert await client.session.active() == {}  # nothing resumed automatically
            provider.enqueue(fake.completion(fake.text_deltas("answer")))
            await client.session.prompt(sid, prompt={"text": "again"})
            with anyio.fail_after(20):
                await client.session.wait(sid)
            log = await _log(second.url, sid)
    finally:
        assert second.stop() == 0
    types = [e.type for e in log]
    killed_step = [e for e in log if e.type == "session.step.failed"]
    assert killed_step and killed_step[0].data.error.type == "host.lost"  # closed by reconciliation, not re-run
    lost = [e for e in log if e.type == "session.execution.failed"]
    assert len(lost) == 1 and lost[0].data.error.type == "host.lost"
    assert types.index("session.execution.failed") < types.index("session.input.admitted", 1)
    assert types.count("session.execution.started") == 2 and types[-1] == "session.execution.succeeded"
    assert "session.execution.interrupted" not in types  # a hard kill records nothing
    assert len(provider.requests) == 2
