"""Subagents end to end: `ocs serve` with a `researcher` subagent in its config, the model scripted through the real
Chat Completions adapter against a loopback server. A parent's `task` calls run in child sessions at once, and the
parent answers from their results; a child that fails is a failed call, not a failed parent; interrupting the parent
interrupts its children; a child's permission request is listed with the parent's; `task_id` continues a child; after a
hard crash the restarted host continues the child and runs the parent's call again, which waits on the same child."""

from __future__ import annotations

import json
import signal
from typing import Any

import anyio
import pytest

from opencode_session.client import OpenCodeClient
from tests.support import fake_openai as fake
from tests.support.e2e import durable_log, prompt_and_wait
from tests.support.server import isolated_env, start_configured, start_server

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(120)]

WAIT = 60


@pytest.fixture(scope="module")
def provider(loop_provider):
    return loop_provider


@pytest.fixture(scope="module")
def ocs(tmp_path_factory, provider):
    agents = {"researcher": {"mode": "subagent", "description": "Looks facts up and reports them."},
              "reviewer": {"mode": "primary", "description": "Not a subagent."}}
    config = provider.serve_config({"fake-model": {}}, model="loop/fake-model", agent=agents,
                                   permission={"bash": {"*": "allow", "ask-me*": "ask"}})
    srv, _work = start_configured(tmp_path_factory.mktemp("subagents"), config)
    yield srv
    assert srv.stop() == 0, "".join(srv.stderr_lines)


@pytest.fixture
async def client(ocs, provider):
    provider.requests.clear()
    async with OpenCodeClient(ocs.url) as c:
        yield c
    provider.release_held()
    assert provider.pending == 0, "a scripted provider response was never requested"


def tasks(*calls: dict[str, Any]) -> fake.StreamScript:
    """One parent Step calling `task` once per entry, all in the same response."""
    deltas = [d for i, call in enumerate(calls) for d in fake.tool_call_deltas(i, f"call_{i}", "task", json.dumps(
        {"description": call.get("description", f"task {i}"), "subagent_type": "researcher", **call}))]
    return fake.completion(deltas, finish_reason="tool_calls")


def asked(words: str):
    """Matches the first request of the child whose prompt says `words`."""
    return lambda payload: words in json.dumps(payload["messages"][-1])


def tool_messages(request) -> list[str]:
    return [m["content"] for m in request.json["messages"] if m["role"] == "tool"]


async def children(client, sid: str) -> list[Any]:
    return (await client.session.list(parent_id=sid)).items


async def test_a_parent_delegates_two_tasks_that_run_at_once_and_answers_from_their_results(client, provider):
    france = fake.completion(fake.text_deltas("The capital ", "of France is Paris."))
    italy = fake.completion(fake.text_deltas("The capital ", "of Italy is Rome."))
    france.hold_after = italy.hold_after = 1  # each child answers half, and waits for the other to have started
    provider.routes += [(asked("capital of France"), france), (asked("capital of Italy"), italy)]
    provider.enqueue(tasks({"prompt": "Find the capital of France.", "description": "France"},
                           {"prompt": "Find the capital of Italy.", "description": "Italy"}),
                     fake.completion(fake.text_deltas("Paris and Rome.")))
    sid = (await client.session.create()).id
    await client.session.prompt(sid, prompt={"text": "What are the two capitals?"})
    with anyio.fail_after(WAIT):
        # both children are answering at the same time: the two tasks run at once
        await anyio.to_thread.run_sync(france.held.wait)
        await anyio.to_thread.run_sync(italy.held.wait)
    france.release.set()
    italy.release.set()
    with anyio.fail_after(WAIT):
        await client.session.wait(sid)
    final = provider.requests[-1]
    results = tool_messages(final)
    assert len(results) == 2
    assert "of France is Paris." in results[0] and "of Italy is Rome." in results[1]
    kids = await children(client, sid)
    assert sorted(k.title for k in kids) == ["France (@researcher subagent)", "Italy (@researcher subagent)"]
    assert {k.agent for k in kids} == {"researcher"} and all(k.parentID == sid for k in kids)
    log = await durable_log(client, sid)
    success = [e.data for e in log if e.type == "session.tool.success"]
    assert sorted(s.structured["sessionID"] for s in success) == sorted(k.id for k in kids)
    assert log[-1].type == "session.execution.succeeded"
    for kid in kids:  # each child's work is in its own log
        kid_log = await durable_log(client, kid.id)
        assert [e.type for e in kid_log].count("session.text.ended") == 1
        assert kid_log[-1].type == "session.execution.succeeded"
    offered = [[t["function"]["name"] for t in r.json.get("tools", [])] for r in provider.requests]
    assert "task" in offered[0]
    assert all("task" not in names for names in offered[1:3])  # a child does not delegate further
    task_tool = next(t for t in provider.requests[0].json["tools"] if t["function"]["name"] == "task")
    assert "researcher: Looks facts up" in task_tool["function"]["description"]
    assert task_tool["function"]["parameters"]["properties"]["subagent_type"]["enum"] == ["researcher"]


async def test_a_child_that_fails_is_a_failed_call_and_the_parent_goes_on(client, provider):
    provider.routes.append((asked("doomed"), fake.error(400, "the request is bad", type="invalid_request_error")))
    provider.enqueue(tasks({"prompt": "This one is doomed."}), fake.completion(fake.text_deltas("It failed.")))
    sid = (await client.session.create()).id
    await prompt_and_wait(client, sid, "try it")
    log = await durable_log(client, sid)
    failed = [e.data for e in log if e.type == "session.tool.failed"]
    assert failed[0].error.type == "tool.execution" and "failed" in failed[0].error.message
    assert log[-1].type == "session.execution.succeeded"
    assert "It failed." in json.dumps([e.data.text for e in log if e.type == "session.text.ended"])


async def test_an_unknown_subagent_is_a_failed_call_and_no_child(client, provider):
    provider.enqueue(tasks({"prompt": "x", "subagent_type": "reviewer"}), fake.completion(fake.text_deltas("ok")))
    sid = (await client.session.create()).id
    await prompt_and_wait(client, sid, "try it")
    failed = [e.data for e in await durable_log(client, sid) if e.type == "session.tool.failed"]
    assert failed[0].error.type == "tool.invalid-input"  # the enum lists the subagents only
    assert await children(client, sid) == []


async def test_interrupting_the_parent_interrupts_its_running_child(client, provider):
    slow = fake.completion(fake.text_deltas("working", " on it"))
    slow.hold_after = 1
    provider.routes.append((asked("take your time"), slow))
    provider.enqueue(tasks({"prompt": "Please take your time."}))
    sid = (await client.session.create()).id
    await client.session.prompt(sid, prompt={"text": "go"})
    with anyio.fail_after(WAIT):
        await anyio.to_thread.run_sync(slow.held.wait)
    await client.session.interrupt(sid)
    with anyio.fail_after(WAIT):
        await client.session.wait(sid)
    kid = (await children(client, sid))[0]
    with anyio.fail_after(WAIT):
        await client.session.wait(kid.id)
    kid_log = await durable_log(client, kid.id)
    assert kid_log[-1].type == "session.execution.interrupted"
    assert (await durable_log(client, sid))[-1].type == "session.execution.interrupted"


async def test_a_childs_permission_request_is_listed_with_the_parents_and_answered_there(client, provider):
    provider.routes += [
        (asked("needs asking"), fake.completion(fake.tool_call_deltas(0, "c1", "bash", json.dumps(
            {"command": "ask-me twice"})), finish_reason="tool_calls")),
        (lambda p: p["messages"][-1].get("role") == "tool" and "ask-me" in json.dumps(p["messages"]),
         fake.completion(fake.text_deltas("asked and ran"))),
    ]
    provider.enqueue(tasks({"prompt": "This needs asking."}), fake.completion(fake.text_deltas("fine")))
    stream = client.event.subscribe()
    sid = None
    with anyio.fail_after(WAIT):
        async for item in stream:
            if item.type == "server.connected":
                sid = (await client.session.create()).id
                await client.session.prompt(sid, prompt={"text": "go"})
            elif item.type == "permission.v2.asked":
                break
    await stream.aclose()
    assert sid is not None
    pending = await client.session.permission_list(sid)
    kid = (await children(client, sid))[0]
    assert [(r.sessionID, r.action) for r in pending] == [(kid.id, "bash")]
    await client.session.permission_reply(kid.id, pending[0].id, reply="once")
    with anyio.fail_after(WAIT):
        await client.session.wait(sid)
    success = [e.data for e in await durable_log(client, sid) if e.type == "session.tool.success"]
    assert "asked and ran" in success[0].content[0].text


async def test_task_id_continues_the_same_child_with_what_it_knows(client, provider):
    provider.routes.append((asked("first question"), fake.completion(fake.text_deltas("first answer"))))
    provider.enqueue(tasks({"prompt": "The first question."}), fake.completion(fake.text_deltas("one")))
    sid = (await client.session.create()).id
    await prompt_and_wait(client, sid, "ask once")
    kid = (await children(client, sid))[0]
    provider.routes.append((asked("second question"), fake.completion(fake.text_deltas("second answer"))))
    provider.enqueue(tasks({"prompt": "The second question.", "task_id": kid.id}),
                     fake.completion(fake.text_deltas("two")))
    await prompt_and_wait(client, sid, "ask again")
    assert [k.id for k in await children(client, sid)] == [kid.id]
    second = next(r for r in provider.requests if "second question" in json.dumps(r.json["messages"][-1]))
    assert "first answer" in json.dumps(second.json["messages"])  # the child's own history came along


async def test_after_a_hard_crash_the_parents_call_runs_again_and_waits_on_the_same_child(tmp_path, provider):
    provider.requests.clear()
    config = provider.serve_config({"fake-model": {}}, model="loop/fake-model", agent={
        "researcher": {"mode": "subagent", "description": "Looks facts up and reports them."}})
    lost = fake.completion(fake.text_deltas("working", " on it"))
    lost.hold_after = 1
    provider.routes += [(asked("capital of Spain"), lost),
                        # the child's Step continued after the crash
                        (lambda p: "capital of Spain" in json.dumps(p["messages"])
                         and p["messages"][-1]["role"] != "tool", fake.completion(fake.text_deltas("Madrid.")))]
    provider.enqueue(tasks({"prompt": "Find the capital of Spain."}),
                     fake.completion(fake.text_deltas("It is Madrid.")))
    srv, work = start_configured(tmp_path, config)
    try:
        async with OpenCodeClient(srv.url) as client:
            sid = (await client.session.create()).id
            await client.session.prompt(sid, prompt={"text": "Which city is the Spanish capital?"})
            with anyio.fail_after(WAIT):
                await anyio.to_thread.run_sync(lost.held.wait)
            (kid,) = await children(client, sid)
        srv.stop(signal.SIGKILL)
        srv = start_server(tmp_path, env=isolated_env(tmp_path), workdir=work)  # the same database
        async with OpenCodeClient(srv.url) as client:
            with anyio.fail_after(WAIT):
                await client.session.wait(sid)
                await client.session.wait(kid.id)
            assert [k.id for k in await children(client, sid)] == [kid.id]  # no second child
            log = await durable_log(client, sid)
            settled = [e for e in log if e.type in ("session.tool.success", "session.tool.failed")]
            assert [e.type for e in settled] == ["session.tool.success"]  # the call run again, not `tool.stale`
            assert "Madrid." in settled[0].data.content[0].text
            assert log[-1].type == "session.execution.succeeded"
            kid_types = [e.type for e in await durable_log(client, kid.id)]
            assert kid_types.count("session.input.admitted") == 1 and kid_types[-1] == "session.execution.succeeded"
    finally:
        provider.release_held()
        srv.stop()
    assert provider.pending == 0
