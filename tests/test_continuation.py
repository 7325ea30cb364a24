"""Continuation after a hard crash, across real server processes on one SQLite database killed with SIGKILL: the
restarted host reconciles what the lost one left open and continues the session as a new Step, re-running only a
tool call that declares itself idempotent, within the resume budget. The tool tests run the server `ocs serve` runs
with two extra test tools (`tests/support/crash_host.py`) that append a line to a file each time they run."""

from __future__ import annotations

import json
import signal
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest

from opencode_session.client import OpenCodeClient
from opencode_session.core.execution.continuation import InvalidResumeBudget, ResumeBudget
from opencode_session.core.execution.orphans import LOST_CALL
from opencode_session.core.runtime import Runtime, RuntimeOptions
from opencode_session.schema.errors import SessionNotFoundError
from tests.support import fake_openai as fake
from tests.support.polling import until
from tests.support.server import ServerProcess, configured_home, start_server

pytestmark = pytest.mark.anyio

REPO = Path(__file__).resolve().parents[1]
CRASH_HOST = (sys.executable, "-m", "tests.support.crash_host")
TERMINALS = ("session.execution.succeeded", "session.execution.failed", "session.execution.interrupted")
DEADLINE = 30  # seconds: a guard against hangs, never a synchronisation device


@pytest.fixture
def root(tmp_path, provider):
    return tmp_path, configured_home(tmp_path, provider, PYTHONPATH=str(REPO))


def _runs(path: Path) -> int:
    return len(path.read_text().splitlines()) if path.exists() else 0


async def _log(url: str, sid: str) -> list[Any]:
    """The session's durable log without the sync marker and the background title, which lands any time."""
    async with OpenCodeClient(url) as client:
        return [e async for e in client.session.log(sid, follow=False)
                if e.type not in ("log.synced", "session.renamed")]


async def _settled_log(url: str, sid: str) -> list[Any]:
    """The log once the host's continuation (scheduled before it printed its URL) has settled."""
    async with OpenCodeClient(url) as client:
        with anyio.fail_after(DEADLINE):
            await client.session.wait(sid)
    log = await _log(url, sid)
    assert log[-1].type in TERMINALS, [e.type for e in log]
    return log


def _assert_no_step_twice(log: list[Any]) -> None:
    started = [e.data.assistantMessageID for e in log if e.type == "session.step.started"]
    assert len(started) == len(set(started)), "a Step was started twice"
    settled = [(e.data.assistantMessageID, e.data.callID) for e in log
               if e.type in ("session.tool.success", "session.tool.failed")]
    assert len(settled) == len(set(settled)), "a tool call was settled twice"


def _tool_results(request: fake.RecordedRequest) -> dict[str, str]:
    return {m["tool_call_id"]: m["content"] for m in request.json["messages"] if m["role"] == "tool"}


def _calling(tool: str, call_id: str = "call_1") -> fake.StreamScript:
    return fake.completion(fake.tool_call_deltas(0, call_id, tool, json.dumps({"note": call_id})),
                           finish_reason="tool_calls")


async def _start_tool_call(path: Path, env: dict[str, str], provider: fake.FakeOpenAI,
                           tool: str) -> tuple[ServerProcess, str]:
    """A crash host whose session is running `tool` (held): its first run is recorded on disk."""
    work = path / "work"
    work.mkdir(exist_ok=True)
    (work / f"{tool}.hold").touch()
    provider.enqueue(_calling(tool))
    srv = start_server(path, env=env, program=CRASH_HOST)
    async with OpenCodeClient(srv.url) as client:
        sid = (await client.session.create()).id
        await client.session.prompt(sid, prompt={"text": f"use {tool}"})
        await until(lambda: _runs(work / f"{tool}.log") == 1, f"{tool} ran", DEADLINE)
        assert sid in await client.session.active()
    return srv, sid


async def test_a_session_killed_mid_step_continues_on_restart_and_its_admitted_input_runs(root, provider):
    path, env = root
    held = fake.completion(fake.text_deltas("working on it"), hold_after=2)
    provider.enqueue(held)
    srv = start_server(path, env=env)
    async with OpenCodeClient(srv.url) as client:
        sid = (await client.session.create()).id
        await client.session.prompt(sid, prompt={"text": "do the thing"})
        with anyio.fail_after(DEADLINE):
            await anyio.to_thread.run_sync(held.held.wait)
            async for event in client.session.log(sid, follow=True):
                if event.type == "session.text.started":  # durable output of the Step the kill cuts short
                    break
        later = await client.session.prompt(sid, prompt={"text": "and then this"}, delivery="queue")
        assert later.promotedSeq is None  # admitted, not yet promoted when the host dies
    assert srv.stop(signal.SIGKILL) == -signal.SIGKILL
    held.release.set()
    provider.enqueue(fake.completion(fake.text_deltas("both done")))
    second = start_server(path, env=env)  # no prompt: the restarted host continues by itself
    try:
        log = await _settled_log(second.url, sid)
        async with OpenCodeClient(second.url) as client:
            history = await client.session.context(sid)
    finally:
        assert second.stop() == 0
    types = [e.type for e in log]
    assert types[-1] == "session.execution.succeeded" and "session.execution.interrupted" not in types
    killed = [e for e in log if e.type == "session.step.failed"]
    assert len(killed) == 1 and killed[0].data.error.type == "host.lost"
    assert any(e.type == "session.input.promoted" and e.data.inputID == later.id for e in log)
    _assert_no_step_twice(log)
    # the continued Step is a new one over durable history, with the admitted prompt: the text the lost Step had
    # streamed was live only (its block never ended), so it is not in history and not sent
    assert len(provider.requests) == 2 and provider.pending == 0
    sent = json.dumps(provider.requests[1].json["messages"])
    assert "do the thing" in sent and "and then this" in sent and "working on it" not in sent
    assert [c.text for m in history if m.type == "assistant" for c in m.content][-1] == "both done"


async def _killed_mid_call_then_continued(root: tuple[Path, dict[str, str]], provider: fake.FakeOpenAI,
                                          tool: str) -> list[Any]:
    """Kill a crash host while `tool` runs, restart it (the continued Step answers with text) and return the log
    once the continuation settled; the continuation succeeded as one new Step after the lost one."""
    path, env = root
    srv, sid = await _start_tool_call(path, env, provider, tool)
    srv.stop(signal.SIGKILL)
    (path / "work" / f"{tool}.hold").unlink()
    provider.enqueue(fake.completion(fake.text_deltas("carrying on")))
    second = start_server(path, env=env, program=CRASH_HOST)
    try:
        log = await _settled_log(second.url, sid)
    finally:
        assert second.stop() == 0
    assert [e.data.error.type for e in log if e.type == "session.step.failed"] == ["host.lost"]
    assert [e.type for e in log][-1] == "session.execution.succeeded"
    _assert_no_step_twice(log)
    assert len(provider.requests) == 2 and provider.pending == 0
    return log


async def test_an_idempotent_tool_the_host_was_lost_during_runs_again_exactly_once(root, provider):
    log = await _killed_mid_call_then_continued(root, provider, "tally")
    assert _runs(root[0] / "work" / "tally.log") == 2  # the lost run and one re-run
    assert [e.data.callID for e in log if e.type == "session.tool.success"] == ["call_1"]
    assert _tool_results(provider.requests[1]) == {"call_1": "tally run 2 done"}


async def test_a_non_idempotent_tool_is_not_run_again_and_the_model_is_told(root, provider):
    log = await _killed_mid_call_then_continued(root, provider, "ledger")
    assert _runs(root[0] / "work" / "ledger.log") == 1  # never run again
    failed = [e for e in log if e.type == "session.tool.failed"]
    assert [(e.data.callID, e.data.error.type) for e in failed] == [("call_1", "tool.stale")]
    assert _tool_results(provider.requests[1]) == {"call_1": LOST_CALL.format(name="ledger")}


async def test_over_budget_a_lost_session_stays_idle_with_a_host_lost_error(root, provider):
    path, env = root
    srv, sid = await _start_tool_call(path, env, provider, "ledger")
    srv.stop(signal.SIGKILL)
    # the continuation calls the tool again, which holds again: the second host is lost the same way
    provider.enqueue(_calling("ledger", "call_2"))
    second = start_server(path, env=env, program=CRASH_HOST)
    await until(lambda: _runs(path / "work" / "ledger.log") == 2, "the continued Step ran ledger", DEADLINE)
    second.stop(signal.SIGKILL)
    (path / "work" / "ledger.hold").unlink()
    third = start_server(path, env=env, program=CRASH_HOST)  # the default budget: one per hour, spent
    try:
        log = await _settled_log(third.url, sid)
        async with OpenCodeClient(third.url) as client:
            assert await client.session.active() == {}
            assert len(provider.requests) == 2  # nothing was sent for the third host
            provider.enqueue(fake.completion(fake.text_deltas("carrying on as asked")))
            await client.session.prompt(sid, prompt={"text": "go on"})  # the session waits for a prompt
            with anyio.fail_after(DEADLINE):
                await client.session.wait(sid)
        after = await _log(third.url, sid)
    finally:
        assert third.stop() == 0
    last = log[-1]
    assert last.type == "session.execution.failed" and last.data.error.type == "host.lost"
    assert "1 per 3600 s" in last.data.error.message
    assert third.wait_for_stderr("its automatic continuations (1 per 3600 s) are spent", DEADLINE)
    assert _runs(path / "work" / "ledger.log") == 2  # each run was the model's own call, none a re-run
    assert [e.data.error.type for e in log if e.type == "session.step.failed"] == ["host.lost", "host.lost"]
    _assert_no_step_twice(after)
    assert after[-1].type == "session.execution.succeeded" and len(provider.requests) == 3


async def test_a_host_killed_during_several_busy_sessions_continues_every_one(root, provider):
    path, env = root
    work, count = path / "work", 8
    work.mkdir(exist_ok=True)
    (work / "ledger.hold").touch()
    provider.enqueue(*(_calling("ledger", f"call_{n}") for n in range(count)))
    srv = start_server(path, env=env, program=CRASH_HOST)
    async with OpenCodeClient(srv.url) as client:
        sids = [(await client.session.create()).id for _ in range(count)]
        for sid in sids:
            await client.session.prompt(sid, prompt={"text": "use ledger"})
        await until(lambda: _runs(work / "ledger.log") == count, "every session runs ledger", DEADLINE)
        assert sorted(await client.session.active()) == sorted(sids)
    srv.stop(signal.SIGKILL)
    (work / "ledger.hold").unlink()
    provider.enqueue(*(fake.completion(fake.text_deltas("carrying on")) for _ in range(count)))
    second = start_server(path, env=env, program=CRASH_HOST)
    try:
        logs = [await _settled_log(second.url, sid) for sid in sids]
    finally:
        assert second.stop() == 0
    for log in logs:
        assert [e.type for e in log][-1] == "session.execution.succeeded"
        assert [e.data.error.type for e in log if e.type == "session.tool.failed"] == ["tool.stale"]
        _assert_no_step_twice(log)
    assert _runs(work / "ledger.log") == count  # no call ran twice
    assert len(provider.requests) == 2 * count and provider.pending == 0


async def test_a_malformed_resume_budget_refuses_to_start(root):
    path, env = root
    with pytest.raises(RuntimeError, match="OCS_RESUME_BUDGET='often' is not COUNT/SECONDS"):
        start_server(path, env={**env, "OCS_RESUME_BUDGET": "often"})


# --- the budget and the entry point, in process over a real SQLite file -------------------------------------------


@pytest.mark.parametrize(("text", "budget"), [("1/3600", (1, 3600.0)), (" 3/600 ", (3, 600.0)), ("0/1", (0, 1.0)),
                                              ("2/0.5", (2, 0.5))])
def test_a_resume_budget_reads_count_per_seconds(text, budget):
    parsed = ResumeBudget.parse(text)
    assert (parsed.count, parsed.window_s) == budget


@pytest.mark.parametrize("text", ["", "1", "often", "-1/60", "1/0", "1/-5", "1/inf", "1.5/60", "/60"])
def test_a_malformed_resume_budget_is_a_typed_error(text):
    with pytest.raises(InvalidResumeBudget, match="is not COUNT/SECONDS"):
        ResumeBudget.parse(text)


def test_the_budget_counts_continuations_within_its_window():
    budget = ResumeBudget(2, 10)
    assert budget.spend([], 1_000) == [1_000]
    assert budget.spend([1_000], 2_000) == [1_000, 2_000]
    assert budget.spend([1_000, 2_000], 10_999) is None  # two within the last 10 s
    assert budget.spend([1_000, 2_000], 11_000) == [2_000, 11_000]  # the first left the window
    assert ResumeBudget.of({}) == ResumeBudget(1, 3600) and ResumeBudget(0, 1).spend([], 5) is None


async def test_continue_after_loss_spends_the_budget_then_leaves_the_session_idle(tmp_path):
    now = [1_000_000]
    async with Runtime(RuntimeOptions(db_path=tmp_path / "db.sqlite", directory=tmp_path, env={},
                                      resume_budget=ResumeBudget(2, 60))) as rt:
        assert rt.continuations is not None and rt.execution is not None
        rt.continuations.clock = lambda: now[0]
        sid = (await rt.sessions.create()).id
        with pytest.raises(SessionNotFoundError):
            await rt.continuations.continue_after_loss("ses_unknown")
        outcomes = []
        for _ in range(3):
            outcomes.append(await rt.continuations.continue_after_loss(sid))
            await rt.execution.wait(sid)
            now[0] += 1_000
        assert outcomes == ["continued", "continued", "over-budget"]
        now[0] += 60_000  # a window later the budget is back
        assert await rt.continuations.continue_after_loss(sid) == "continued"
        await rt.execution.wait(sid)
        failed = [r for r in await _records(rt, sid) if r.type == "session.execution.failed"]
        assert [f.data.error.type for f in failed] == ["host.lost"]
        assert await rt.lost_sessions() == []  # every continuation's execution settled: no claim is left


async def _records(rt: Runtime, sid: str) -> list[Any]:
    return await rt.store.read(lambda reader: reader.events.after(sid, -1, 1000))
