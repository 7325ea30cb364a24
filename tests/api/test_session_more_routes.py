"""Upstream's later session routes beyond management: interrupt?resume=true, synthetic input, a user's shell
commands, resume and the session's shell environment. Each test runs against a real `ocs serve` on loopback and the
Embedded host, on SQLite and PostgreSQL, with the scripted loopback model (the fixtures of test_session_management)."""

from __future__ import annotations

import anyio
import pytest

from opencode_session.client import ConflictError, SessionBusyError, SessionNotFoundError
from tests.api import test_session_management as management
from tests.api.test_session_management import WAIT, _last_user_texts, log_types, raw, turn
from tests.support import fake_openai as fake

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(180)]

# the hosts of test_session_management: a served one and an embedded one, each on SQLite and PostgreSQL
host = management.host
provider = management.provider
sqlite_server = management.sqlite_server
postgres_server = management.postgres_server


async def _hold_a_step(host, provider, sid: str) -> fake.StreamScript:
    held = fake.completion(fake.text_deltas("busy"), hold_after=1)
    provider.enqueue(held)
    await host.client.session.prompt(sid, prompt={"text": "a long task"})
    with anyio.fail_after(WAIT):
        await anyio.to_thread.run_sync(held.held.wait)
    return held


# --- interrupt?resume=true -------------------------------------------------------------------------------


async def test_interrupt_with_resume_stops_the_step_and_delivers_the_steering_input(host, provider):
    sid = await host.session()
    assert (await host.client.session.interrupt(sid)).interrupted is False  # idle: nothing to stop

    await _hold_a_step(host, provider, sid)
    steer = await host.client.session.prompt(sid, prompt={"text": "change course"}, resume=False)
    provider.enqueue(fake.completion(fake.text_deltas("changed course")))
    answer = await host.client.session.interrupt(sid, resume=True)
    assert answer.interrupted is True
    with anyio.fail_after(WAIT):
        await host.client.session.wait(sid)
    assert await host.client.session.inbox_list(sid) == []
    assert "change course" in _last_user_texts(provider.requests[-1])
    types = await log_types(host, sid)
    assert types.count("session.execution.interrupted") == 1
    assert [t for t in types if t.startswith("session.execution.")][-1] == "session.execution.succeeded"
    assert steer.id in {m.id for m in (await host.client.session.messages(sid)).items}

    # without resume, the steer waits in the inbox (on a shared PostgreSQL database, input that waits with no
    # owner is taken over and run by design: docs/clustering.md)
    if not host.db.startswith("postgresql://"):
        await _hold_a_step(host, provider, sid)
        parked = await host.client.session.prompt(sid, prompt={"text": "not yet"}, resume=False)
        assert (await host.client.session.interrupt(sid)).interrupted is True
        with anyio.fail_after(WAIT):
            await host.client.session.wait(sid)
        assert [i.id for i in await host.client.session.inbox_list(sid)] == [parked.id]

    with pytest.raises(SessionNotFoundError):
        await host.client.session.interrupt("ses_doesnotexist", resume=True)
    async with raw(host) as http:
        bad = await http.post(f"/api/session/{sid}/interrupt", params={"resume": "yes"})
        assert bad.status_code == 400 and bad.json()["_tag"] == "InvalidRequestError"


# --- synthetic ------------------------------------------------------------------------------------------


async def test_synthetic_input_is_admitted_durably_executes_and_is_marked_synthetic(host, provider):
    sid = await host.session()
    parked = await host.client.session.synthetic(sid, id="msg_synthetic0001", text="the build failed",
                                                 description="CI result", metadata={"source": "ci"},
                                                 delivery="queue", resume=False)
    assert (parked.type, parked.text, parked.delivery, parked.metadata) == (
        "synthetic", "the build failed", "queue", {"source": "ci"})
    inbox = await host.client.session.inbox_list(sid)
    assert [(i.id, i.type) for i in inbox] == [("msg_synthetic0001", "synthetic")]
    # an exact retry answers the same item; the same ID with other content conflicts
    again = await host.client.session.synthetic(sid, id="msg_synthetic0001", text="the build failed",
                                                description="CI result", metadata={"source": "ci"},
                                                delivery="queue", resume=False)
    assert again.admittedSeq == parked.admittedSeq
    with pytest.raises(ConflictError):
        await host.client.session.synthetic(sid, id="msg_synthetic0001", text="something else", resume=False)

    provider.enqueue(fake.completion(fake.text_deltas("I will fix the build")))
    await host.client.session.resume(sid)  # delivers it, and answers once the turn settled
    messages = (await host.client.session.messages(sid, order="asc")).items
    assert [(m.type, getattr(m, "text", None)) for m in messages if m.type in ("synthetic", "user")] == [
        ("synthetic", "the build failed")]
    assert "the build failed" in _last_user_texts(provider.requests[-1])
    assert await host.client.session.inbox_list(sid) == []
    # delivered: a retry still answers the item it was, and nothing runs twice
    late = await host.client.session.synthetic(sid, id="msg_synthetic0001", text="the build failed",
                                               description="CI result", metadata={"source": "ci"},
                                               delivery="queue", resume=False)
    assert late.admittedSeq == parked.admittedSeq
    assert (await log_types(host, sid)).count("session.input.admitted") == 1

    with pytest.raises(SessionNotFoundError):
        await host.client.session.synthetic("ses_doesnotexist", text="x")
    async with raw(host) as http:
        bad = await http.post(f"/api/session/{sid}/synthetic", json={"description": "no text"})
        assert bad.status_code == 400 and bad.json()["_tag"] == "InvalidRequestError"


# --- shell and environment ------------------------------------------------------------------------------


async def test_shell_runs_in_the_location_with_the_session_environment_and_is_recorded(host, provider):
    sid = await host.session()
    await host.client.session.environment(sid, variables={"GREETING": "hello there"})
    await host.client.session.shell(sid, id="msg_shellcommand01",
                                    command='pwd; echo "$GREETING"; echo "[$OPENCODE_SERVER_PASSWORD]"; exit 3')
    shell = [m for m in (await host.client.session.messages(sid)).items if m.type == "shell"]
    assert len(shell) == 1 and shell[0].id == "msg_shellcommand01"
    lines = shell[0].output.splitlines()
    assert lines[0] == str(host.project.resolve()) and lines[1] == "hello there"
    assert lines[2] == "[]"  # the server's own secrets are not the shell's
    assert "Exit code 3." in shell[0].output and shell[0].time.completed is not None
    types = await log_types(host, sid)
    assert types.index("session.shell.started") < types.index("session.shell.ended")
    # a retry of the same ID runs nothing again; another command under it conflicts
    await host.client.session.shell(sid, id="msg_shellcommand01",
                                    command='pwd; echo "$GREETING"; echo "[$OPENCODE_SERVER_PASSWORD]"; exit 3')
    assert (await log_types(host, sid)).count("session.shell.started") == 1
    with pytest.raises(ConflictError):
        await host.client.session.shell(sid, id="msg_shellcommand01", command="true")

    # the model sees the command and its output in the next turn
    await turn(host, provider, sid, "what did it print?")
    assert any("hello there" in text for text in _last_user_texts(provider.requests[-1]))

    # the environment is replaced, not merged
    await host.client.session.environment(sid, variables={"OTHER": "1"})
    await host.client.session.shell(sid, command='echo "[$GREETING][$OTHER]"')
    outputs = [m.output for m in (await host.client.session.messages(sid, order="asc")).items if m.type == "shell"]
    assert outputs[-1].strip() == "[][1]"


async def test_shell_is_refused_by_a_deny_while_busy_and_for_bad_input(host, provider):
    denied = await host.session(permissions=[{"action": "bash", "resource": "rm *", "effect": "deny"}])
    (host.project / "keep.txt").write_text("x")
    async with raw(host) as http:
        answer = await http.post(f"/api/session/{denied}/shell", json={"command": "echo ok; rm keep.txt"})
        assert answer.status_code == 403 and answer.json()["_tag"] == "ForbiddenError"
        assert (host.project / "keep.txt").exists()
        assert "session.shell.started" not in await log_types(host, denied)

        for body in ({}, {"command": ""}, {"command": "   "}, {"command": "ls", "id": "ses_wrong"}):
            bad = await http.post(f"/api/session/{denied}/shell", json=body)
            assert bad.status_code == 400 and bad.json()["_tag"] == "InvalidRequestError", body
        bad = await http.put(f"/api/session/{denied}/environment", json={"variables": {"A=B": "1"}})
        assert bad.status_code == 400 and bad.json()["_tag"] == "InvalidRequestError"

    busy = await host.session()
    held = await _hold_a_step(host, provider, busy)
    with pytest.raises(SessionBusyError):
        await host.client.session.shell(busy, command="echo busy")
    held.release.set()
    with anyio.fail_after(WAIT):
        await host.client.session.wait(busy)

    with pytest.raises(SessionNotFoundError):
        await host.client.session.shell("ses_doesnotexist", command="true")
    with pytest.raises(SessionNotFoundError):
        await host.client.session.environment("ses_doesnotexist", variables={})


# --- resume ---------------------------------------------------------------------------------------------


async def test_resume_answers_history_that_awaits_a_reply_and_is_a_no_op_when_settled(host, provider):
    sid = await host.session()
    await host.client.session.prompt(sid, prompt={"text": "parked question"}, resume=False)
    provider.enqueue(fake.completion(fake.text_deltas("answered on resume")))
    await host.client.session.resume(sid)
    assistant = [m for m in (await host.client.session.messages(sid)).items if m.type == "assistant"]
    assert len(assistant) == 1
    count = len(provider.requests)
    await host.client.session.resume(sid)  # nothing awaits a reply: no model call
    assert len([r for r in provider.requests[count:] if "parked question" in str(r.json)]) == 0
    with pytest.raises(SessionNotFoundError):
        await host.client.session.resume("ses_doesnotexist")


# --- generate -------------------------------------------------------------------------------------------


async def test_generate_answers_with_the_session_context_and_changes_nothing(host, provider):
    sid = await host.session(title="Colours")  # titled: no background title call renames it meanwhile
    await turn(host, provider, sid, "my favourite colour is teal")
    before_log = await log_types(host, sid)
    before_messages = [m.id for m in (await host.client.session.messages(sid)).items]
    before_info = await host.client.session.get(sid)
    provider.enqueue(fake.completion(fake.text_deltas("Teal", " it is")))
    answer = await host.client.session.generate(sid, prompt="Which colour did I name?")
    assert answer.text == "Teal it is"
    sent = _last_user_texts(provider.requests[-1])
    assert "my favourite colour is teal" in sent[0] and sent[-1] == "Which colour did I name?"
    assert "tools" not in provider.requests[-1].json or not provider.requests[-1].json["tools"]
    # history, usage and the log are as they were
    assert await log_types(host, sid) == before_log
    assert [m.id for m in (await host.client.session.messages(sid)).items] == before_messages
    after_info = await host.client.session.get(sid)
    assert (after_info.cost, after_info.tokens) == (before_info.cost, before_info.tokens)

    # a failing model call is a 503 naming no key, and still changes nothing
    provider.enqueue(fake.error(400, "bad request", type="invalid_request_error"))
    async with raw(host) as http:
        failed = await http.post(f"/api/session/{sid}/generate", json={"prompt": "again"})
        assert failed.status_code == 503 and failed.json()["_tag"] == "ServiceUnavailableError"
        bad = await http.post(f"/api/session/{sid}/generate", json={"prompt": 3})
        assert bad.status_code == 400 and bad.json()["_tag"] == "InvalidRequestError"
    assert await log_types(host, sid) == before_log
    with pytest.raises(SessionNotFoundError):
        await host.client.session.generate("ses_doesnotexist", prompt="x")


# --- view -----------------------------------------------------------------------------------------------


async def test_view_marks_the_idle_transition_seen_for_the_other_viewers(host, provider):
    sid = await host.session(title="Watched")
    await turn(host, provider, sid, "tell me when done")
    info = await host.client.session.get(sid)
    idle = info.time.updated
    seen: list[int] = []
    async with anyio.create_task_group() as tg:
        subscribed = anyio.Event()

        async def watch() -> None:
            async for event in host.client.event.subscribe():
                if event.type == "server.connected":
                    subscribed.set()
                elif event.type == "session.viewed":
                    seen.append(event.data["idle"] if isinstance(event.data, dict) else event.data.idle)
                    return

        tg.start_soon(watch)
        with anyio.fail_after(WAIT):
            await subscribed.wait()
            await host.client.session.view(sid, idle=idle)
    assert seen == [idle]
    await host.client.session.view(sid, idle=idle)  # seen already: nothing more is recorded
    await host.client.session.view(sid, idle=idle - 1)
    assert (await log_types(host, sid)).count("session.viewed") == 1
    # a view is no change of the session: it does not move up in the list
    assert (await host.client.session.get(sid)).time.updated == idle

    with pytest.raises(SessionNotFoundError):
        await host.client.session.view("ses_doesnotexist", idle=idle)
    async with raw(host) as http:
        for body in ({}, {"idle": -1}, {"idle": "soon"}):
            bad = await http.post(f"/api/session/{sid}/view", json=body)
            assert bad.status_code == 400 and bad.json()["_tag"] == "InvalidRequestError", body
