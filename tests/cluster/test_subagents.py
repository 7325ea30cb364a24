"""Subagents on several `ocs serve` hosts sharing one PostgreSQL database, the model scripted over the real Chat
Completions wire: a parent's child is started on the other host, and the parent answers from its result; when the
parent's host is killed mid-child, the other host takes the parent over and its `task` call, run again, waits on the
same child (admitted and requested once); when the child's host is killed, the parent's host takes the child over and
the parent's wait still gets its answer. Interrupting the parent interrupts its child on the other host; with no other
host answering the offer, the child starts on the parent's host."""

from __future__ import annotations

import json
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from opencode_session.client import OpenCodeClient
from tests.support import fake_openai as fake
from tests.support.e2e import durable_log
from tests.support.postgres import fresh_schema
from tests.support.server import ServerProcess, isolated_env, start_server

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(180)]

TTL_MS = 3000
WAIT = 60
CHILD_PROMPT = "Find the capital of France."


class Hosts:
    """Two hosts on one schema, configured with a `researcher` subagent served by the loopback provider."""

    def __init__(self, root: Path, url: str, provider: fake.FakeOpenAI) -> None:
        self.env = isolated_env(root, OCS_LEASE_TTL_MS=str(TTL_MS), OCS_RETRY_BASE_DELAY_MS="50")
        config = provider.serve_config({"fake-model": {}}, model="loop/fake-model", agent={
            "researcher": {"mode": "subagent", "description": "Looks facts up and reports them."}})
        (root / "config" / "opencode").mkdir(parents=True, exist_ok=True)
        (root / "config" / "opencode" / "opencode.json").write_text(json.dumps(config))
        work = root / "work"
        work.mkdir(exist_ok=True)
        self.hosts: list[ServerProcess] = [start_server(root, env=self.env, db=url, workdir=work) for _ in range(2)]

    def stop(self) -> None:
        for host in self.hosts:
            try:
                host.stop(timeout=15)
            except subprocess.TimeoutExpired:
                host.stop(signal.SIGKILL)


@pytest.fixture
def hosts(tmp_path, provider) -> Iterator[Hosts]:
    with fresh_schema() as url:
        made = Hosts(tmp_path, url, provider)
        try:
            yield made
        finally:
            provider.release_held()
            made.stop()


def delegate() -> fake.StreamScript:
    """The parent's first Step: one `task` call to the researcher."""
    return fake.completion(fake.tool_call_deltas(0, "call_0", "task", json.dumps(
        {"description": "France", "prompt": CHILD_PROMPT, "subagent_type": "researcher"})), finish_reason="tool_calls")


def child_first(payload: Any) -> bool:
    """The child's first request: its prompt is the last message."""
    return CHILD_PROMPT in json.dumps(payload["messages"][-1])


def child_requests(provider: fake.FakeOpenAI) -> list[Any]:
    return [r for r in provider.requests if r.json["messages"][-1].get("role") != "tool"
            and CHILD_PROMPT in json.dumps(r.json["messages"])]


def tool_messages(request: Any) -> list[str]:
    return [m["content"] for m in request.json["messages"] if m["role"] == "tool"]


async def held_child(provider: fake.FakeOpenAI, client: OpenCodeClient, parent: str,
                     answer: fake.StreamScript) -> str:
    """Wait until the parent's child is answering (held after its first frame); returns the child's ID."""
    with anyio.fail_after(WAIT):
        await anyio.to_thread.run_sync(answer.held.wait)
    (child,) = (await client.session.list(parent_id=parent)).items
    return child.id


async def types(client: OpenCodeClient, sid: str) -> list[str]:
    return [e.type for e in await durable_log(client, sid)]


async def test_a_parents_child_runs_on_the_other_host_and_the_parent_answers_from_it(hosts, provider):
    a, b = (OpenCodeClient(h.url) for h in hosts.hosts)
    answer = fake.completion(fake.text_deltas("The capital ", "of France is Paris."))
    answer.hold_after = 1
    provider.routes.append((child_first, answer))
    provider.enqueue(delegate(), fake.completion(fake.text_deltas("It is Paris.")))
    parent = (await a.session.create()).id
    await a.session.prompt(parent, prompt={"text": "Which city is the French capital?"})
    child = await held_child(provider, a, parent, answer)
    assert (await a.session.owner(parent)).local  # the parent executes where it was prompted
    owner = await a.session.owner(child)
    assert owner.host is not None and not owner.local and (await b.session.owner(child)).local  # the child on b
    answer.release.set()
    with anyio.fail_after(WAIT):
        await a.session.wait(parent)
    assert "of France is Paris." in tool_messages(provider.requests[-1])[0]
    assert (await types(a, parent))[-1] == "session.execution.succeeded"
    assert (await types(a, child))[-1] == "session.execution.succeeded"
    assert len(child_requests(provider)) == 1
    await a.aclose()
    await b.aclose()


async def test_the_parents_host_killed_mid_child_the_other_host_waits_on_the_same_child(hosts, provider):
    first, second = hosts.hosts
    a, b = OpenCodeClient(first.url), OpenCodeClient(second.url)
    answer = fake.completion(fake.text_deltas("The capital ", "of France is Paris."))
    answer.hold_after = 1
    provider.routes.append((child_first, answer))
    provider.enqueue(delegate(), fake.completion(fake.text_deltas("It is Paris.")))
    parent = (await a.session.create()).id
    await a.session.prompt(parent, prompt={"text": "Which city is the French capital?"})
    child = await held_child(provider, a, parent, answer)
    assert (await b.session.owner(child)).local  # the child runs on b, the parent on a
    stream = b.event.subscribe()
    assert (await stream.__anext__()).type == "server.connected"
    first.stop(signal.SIGKILL)
    with anyio.fail_after(WAIT):
        # b takes the parent over once a's lease expired and runs its `task` call again, which shows that it waits
        # on the same child (a progress event after the takeover is b's: a is gone)
        async for item in stream:
            if item.type == "session.tool.progress" and item.data.get("sessionID") == parent \
                    and second.wait_for_stderr(f"taking over session {parent}", 0):
                assert item.data["structured"]["sessionID"] == child
                break
    await stream.aclose()
    answer.release.set()  # only now does the child answer
    with anyio.fail_after(WAIT):
        await b.session.wait(parent)
    assert [k.id for k in (await b.session.list(parent_id=parent)).items] == [child]  # no second child
    child_types = await types(b, child)
    assert child_types.count("session.input.admitted") == 1 and child_types.count("session.input.promoted") == 1
    assert child_types.count("session.execution.started") == 1 and child_types[-1] == "session.execution.succeeded"
    assert len(child_requests(provider)) == 1  # the child's request was sent once
    log = await durable_log(b, parent)
    settled = [e.data for e in log if e.type in ("session.tool.success", "session.tool.failed")]
    assert [e.type for e in log if e.type in ("session.tool.success", "session.tool.failed")] == [
        "session.tool.success"]  # the call run again is the call's one settlement: the child's answer
    assert settled[0].structured["sessionID"] == child
    assert "of France is Paris." in tool_messages(provider.requests[-1])[0]
    assert [e.data.error.type for e in log if e.type == "session.step.failed"] == ["host.lost"]
    assert log[-1].type == "session.execution.succeeded"
    await a.aclose()
    await b.aclose()


async def test_the_childs_host_killed_mid_child_the_child_continues_and_the_parent_gets_its_answer(hosts, provider):
    first, second = hosts.hosts
    a, b = OpenCodeClient(first.url), OpenCodeClient(second.url)
    lost = fake.completion(fake.text_deltas("The capital ", "of France is Paris."))
    lost.hold_after = 1
    provider.routes += [(child_first, lost),
                        # the continued child's Step, on a: its history still ends with its prompt
                        (lambda p: CHILD_PROMPT in json.dumps(p["messages"]) and p["messages"][-1]["role"] != "tool",
                         fake.completion(fake.text_deltas("Paris, after a restart.")))]
    provider.enqueue(delegate(), fake.completion(fake.text_deltas("It is Paris.")))
    parent = (await a.session.create()).id
    await a.session.prompt(parent, prompt={"text": "Which city is the French capital?"})
    child = await held_child(provider, a, parent, lost)
    assert (await b.session.owner(child)).local and (await a.session.owner(parent)).local
    second.stop(signal.SIGKILL)
    with anyio.fail_after(WAIT):
        await a.session.wait(parent)  # a took the child over and continued it; the parent's wait got its answer
    assert "Paris, after a restart." in tool_messages(provider.requests[-1])[0]
    child_types = await types(a, child)
    assert child_types.count("session.input.promoted") == 1 and child_types[-1] == "session.execution.succeeded"
    assert len(child_requests(provider)) == 2  # the lost Step's request, and the continued Step's
    log = await durable_log(a, parent)
    assert [e.type for e in log].count("session.tool.success") == 1 and log[-1].type == "session.execution.succeeded"
    assert "session.step.failed" not in [e.type for e in log]  # the parent itself never lost its host
    await a.aclose()
    await b.aclose()


async def test_interrupting_the_parent_interrupts_its_child_on_the_other_host(hosts, provider):
    a, b = (OpenCodeClient(h.url) for h in hosts.hosts)
    slow = fake.completion(fake.text_deltas("working", " on it"))
    slow.hold_after = 1
    provider.routes.append((child_first, slow))
    provider.enqueue(delegate())
    parent = (await a.session.create()).id
    await a.session.prompt(parent, prompt={"text": "Which city is the French capital?"})
    child = await held_child(provider, a, parent, slow)
    assert (await b.session.owner(child)).local
    await a.session.interrupt(parent)  # forwarded to b for the child, which stops before the parent's call ends
    with anyio.fail_after(WAIT):
        await a.session.wait(parent)
        await a.session.wait(child)
    assert (await types(a, child))[-1] == "session.execution.interrupted"
    assert (await types(a, parent))[-1] == "session.execution.interrupted"
    assert (await a.session.owner(child)).host is None
    await a.aclose()
    await b.aclose()


async def test_with_the_other_host_paused_the_child_starts_on_the_parents_host(hosts, provider):
    first, second = hosts.hosts
    a = OpenCodeClient(first.url)
    answer = fake.completion(fake.text_deltas("The capital ", "of France is Paris."))
    answer.hold_after = 1
    provider.routes.append((child_first, answer))
    provider.enqueue(delegate(), fake.completion(fake.text_deltas("It is Paris.")))
    second.proc.send_signal(signal.SIGSTOP)  # b hears the offer only once it wakes up
    try:
        parent = (await a.session.create()).id
        await a.session.prompt(parent, prompt={"text": "Which city is the French capital?"})
        child = await held_child(provider, a, parent, answer)
        assert (await a.session.owner(child)).local  # nobody else took it within a sweep period: a runs it
        answer.release.set()
        with anyio.fail_after(WAIT):
            await a.session.wait(parent)
    finally:
        second.proc.send_signal(signal.SIGCONT)
    assert "of France is Paris." in tool_messages(provider.requests[-1])[0]
    assert len(child_requests(provider)) == 1 and (await types(a, child)).count("session.execution.started") == 1
    await a.aclose()
