"""Revert, fork and move over the API, against a real `ocs serve` on loopback and against the Embedded host: a
scripted model (a loopback Chat Completions server) drives real tools that create, modify, delete and chmod files in
a git project, and each route's success and refusals are checked on the files, the session, its messages, its
durable log and the next provider request."""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import pytest

from opencode_session.client import (
    ConflictError,
    InvalidRequestError,
    MessageNotFoundError,
    OpenCodeClient,
    SessionBusyError,
    SessionNotFoundError,
)
from opencode_session.sdk import OpenCode
from tests.security.conftest import write_provider_config
from tests.support import fake_openai as fake
from tests.support.e2e import durable_log, types
from tests.support.git import git_project as new_git_project
from tests.support.server import isolated_env, start_configured

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(120)]

WAIT = 60  # seconds: the machine may be busy


@dataclass
class Host:
    client: Any  # OpenCodeClient, or the Embedded host (the same API)
    project: Path

    async def session(self, location: Path | None = None) -> str:
        return (await self.client.session.create(location={"directory": str(location or self.project)})).id


def git_project(root: Path) -> Path:
    return new_git_project(root / "project")


def tree(project: Path) -> dict[str, tuple[str, bool]]:
    """Every file outside `.git`: its text and whether it is executable."""
    out = {}
    for path in sorted(project.rglob("*")):
        if path.is_file() and ".git" not in path.relative_to(project).parts:
            out[path.relative_to(project).as_posix()] = (path.read_text(), os.access(path, os.X_OK))
    return out


BEFORE = {"notes.txt": ("alpha\nbeta\n", False), "old.txt": ("going away\n", False), "run.sh": ("echo hi\n", False)}
AFTER = {"new.txt": ("created\n", False), "notes.txt": ("alpha\nBETA\n", False), "run.sh": ("echo hi\n", True)}


def call(index: int, call_id: str, name: str, arguments: dict[str, Any]) -> list[dict[str, Any]]:
    return fake.tool_call_deltas(index, call_id, name, json.dumps(arguments))


def file_changing_turn() -> list[fake.Script]:
    """One Step whose tools create new.txt, edit notes.txt, delete old.txt and chmod run.sh; then an answer."""
    return [fake.completion(call(0, "c1", "write", {"path": "new.txt", "content": "created\n"}),
                            call(1, "c2", "edit", {"path": "notes.txt", "oldString": "beta", "newString": "BETA"}),
                            call(2, "c3", "bash", {"command": "rm old.txt && chmod +x run.sh",
                                                   "description": "tidy up"}),
                            finish_reason="tool_calls"),
            fake.completion(fake.text_deltas("changed the files"))]


async def turn(host: Host, provider: fake.FakeOpenAI, sid: str, text: str, *scripts: fake.Script) -> str:
    """Prompt, let the scripted model answer, wait for idle; returns the prompt's message ID."""
    provider.enqueue(*(scripts or (fake.completion(fake.text_deltas(f"answer to {text}")),)))
    admitted = await host.client.session.prompt(sid, prompt={"text": text})
    with anyio.fail_after(WAIT):
        await host.client.session.wait(sid)
    return str(admitted.id)


async def user_texts(host: Host, sid: str) -> list[str]:
    page = await host.client.session.messages(sid, order="asc", limit=200)
    return [m.text for m in page.items if m.type == "user"]


@pytest.fixture(scope="module")
def provider(loop_provider):
    return loop_provider


@pytest.fixture(scope="module")
def server(tmp_path_factory, provider):
    srv, _work = start_configured(tmp_path_factory.mktemp("undo"), provider.serve_config({"fake-model": {}},
                                                                                       model="loop/fake-model"))
    yield srv
    assert srv.stop() == 0, "".join(srv.stderr_lines)


@pytest.fixture(params=["server", "embedded"])
async def host(request, tmp_path, provider) -> AsyncIterator[Host]:
    provider.requests.clear()
    project = git_project(tmp_path)
    if request.param == "server":
        async with OpenCodeClient(request.getfixturevalue("server").url) as client:
            yield Host(client, project)
    else:
        root = tmp_path / "host"
        write_provider_config(root, provider)
        async with OpenCode(db=tmp_path / "db.sqlite", directory=project, env=isolated_env(root)) as oc:
            yield Host(oc, project)
    provider.release_held()
    assert provider.pending == 0, "a scripted provider response was never requested"


async def held_turn(host: Host, provider: fake.FakeOpenAI, sid: str) -> fake.StreamScript:
    """Start a turn whose model answer holds after its first text: the session executes until it is released."""
    held = fake.completion(fake.text_deltas("working", " on it"), hold_after=2)
    provider.enqueue(held)
    synced = [e async for e in host.client.session.log(sid, follow=False)][-1]
    await host.client.session.prompt(sid, prompt={"text": "take a while"})
    with anyio.fail_after(WAIT):
        await anyio.to_thread.run_sync(held.held.wait)
        async for event in host.client.session.log(sid, after=synced.seq, follow=True):
            if event.type == "session.text.started":
                break
    return held


# --- revert ----------------------------------------------------------------------------------------------------


async def test_stage_clear_and_commit_a_turn_that_created_modified_deleted_and_chmoded_files(host, provider):
    sid = await host.session()
    await turn(host, provider, sid, "hello")
    boundary = await turn(host, provider, sid, "change the files", *file_changing_turn())
    assert tree(host.project) == AFTER
    log = await durable_log(host.client, sid)
    started = [e for e in log if e.type == "session.step.started"]
    ended = [e for e in log if e.type == "session.step.ended"]
    assert started[-2].data.snapshot and ended[-2].data.files == ["new.txt", "notes.txt", "old.txt", "run.sh"]
    assert ended[-1].data.files is None  # the answering Step ran no tools

    state = await host.client.session.revert_stage(sid, message_id=boundary)
    assert state.messageID == boundary and state.snapshot and state.notice is None
    assert {f.path: f.status for f in state.files} == {"new.txt": "deleted", "notes.txt": "modified",
                                                       "old.txt": "added", "run.sh": "modified"}
    notes = next(f for f in state.files if f.path == "notes.txt")
    assert (notes.additions, notes.deletions) == (1, 1) and "-BETA\n+beta\n" in notes.patch
    assert tree(host.project) == BEFORE
    assert (await host.client.session.get(sid)).revert == state
    assert await user_texts(host, sid) == ["hello", "change the files"]  # staged: history is still all there

    await host.client.session.revert_clear(sid)
    assert tree(host.project) == AFTER and (await host.client.session.get(sid)).revert is None

    await host.client.session.revert_stage(sid, message_id=boundary)
    await host.client.session.revert_commit(sid)
    assert tree(host.project) == BEFORE  # the files stay as staged
    info = await host.client.session.get(sid)
    assert info.revert is None
    assert await user_texts(host, sid) == ["hello"]
    log = await durable_log(host.client, sid)
    assert types(log).count("session.revert.staged") == 2 and "session.revert.cleared" in types(log)
    committed = [e for e in log if e.type == "session.revert.committed"]
    assert [e.data.to for e in committed] == [boundary]
    # the log keeps what the projection no longer shows
    assert any(e.type == "session.input.promoted" and e.data.inputID == boundary for e in log)

    # the instruction checkpoint was reset: new instructions are in a fresh baseline, not an Instruction Update
    (host.project / "AGENTS.md").write_text("Project rules, written after the revert.\n")
    await turn(host, provider, sid, "what now?")
    messages = provider.requests[-1].json["messages"]
    sent = json.dumps(messages)
    assert "what now?" in sent and "hello" in sent
    assert "change the files" not in sent and "tool_calls" not in sent and "changed the files" not in sent
    assert messages[0]["role"] == "system" and "Project rules, written after the revert." in messages[0]["content"]
    after = types(await durable_log(host.client, sid))
    assert "session.instructions.updated" not in after[after.index("session.revert.committed"):]


async def test_staging_again_moves_the_boundary(host, provider):
    sid = await host.session()
    first = await turn(host, provider, sid, "create one", fake.completion(
        call(0, "c1", "write", {"path": "one.txt", "content": "1\n"}), finish_reason="tool_calls"),
        fake.completion(fake.text_deltas("made one")))
    second = await turn(host, provider, sid, "create two", fake.completion(
        call(0, "c1", "write", {"path": "two.txt", "content": "2\n"}), finish_reason="tool_calls"),
        fake.completion(fake.text_deltas("made two")))
    later = await host.client.session.revert_stage(sid, message_id=second)
    assert [f.path for f in later.files] == ["two.txt"]
    assert (host.project / "one.txt").exists() and not (host.project / "two.txt").exists()
    earlier = await host.client.session.revert_stage(sid, message_id=first)
    assert [f.path for f in earlier.files] == ["one.txt", "two.txt"] and earlier.snapshot == later.snapshot
    assert not (host.project / "one.txt").exists()
    back = await host.client.session.revert_stage(sid, message_id=second)  # and forward again
    assert [f.path for f in back.files] == ["two.txt"] and (host.project / "one.txt").read_text() == "1\n"
    await host.client.session.revert_clear(sid)
    assert (host.project / "two.txt").read_text() == "2\n"


async def test_unknown_and_foreign_messages_are_not_found_and_stage_nothing(host, provider):
    sid = await host.session()
    await turn(host, provider, sid, "mine")
    other = await host.session()
    foreign = await turn(host, provider, other, "theirs")
    for message in ("msg_nosuchmessage", foreign):
        with pytest.raises(MessageNotFoundError) as caught:
            await host.client.session.revert_stage(sid, message_id=message)
        assert caught.value.body() == {"_tag": "MessageNotFoundError", "message": f"Message not found: {message}",
                                       "sessionID": sid, "messageID": message}  # nothing about the other session
    with pytest.raises(SessionNotFoundError):
        await host.client.session.revert_stage("ses_nosuchsession", message_id=foreign)
    for route in (host.client.session.revert_clear, host.client.session.revert_commit):
        with pytest.raises(SessionNotFoundError):
            await route("ses_nosuchsession")
        await route(sid)  # nothing staged: nothing to do
    assert (await host.client.session.get(sid)).revert is None
    assert not {"session.revert.staged", "session.revert.committed", "session.revert.cleared"} & set(
        types(await durable_log(host.client, sid)))
    assert await user_texts(host, sid) == ["mine"] and await user_texts(host, other) == ["theirs"]


async def test_staging_or_committing_while_the_session_executes_is_busy_and_changes_nothing(host, provider):
    sid = await host.session()
    boundary = await turn(host, provider, sid, "change the files", *file_changing_turn())
    held = await held_turn(host, provider, sid)
    try:
        with pytest.raises(SessionBusyError) as caught:
            await host.client.session.revert_stage(sid, message_id=boundary)
        assert caught.value.body() == {"_tag": "SessionBusyError", "sessionID": sid,
                                       "message": f"Session is busy: {sid}"}
        for route in (host.client.session.revert_commit, host.client.session.revert_clear):
            with pytest.raises(SessionBusyError):
                await route(sid)
        assert tree(host.project) == AFTER and (await host.client.session.get(sid)).revert is None
    finally:
        held.release.set()
    with anyio.fail_after(WAIT):
        await host.client.session.wait(sid)
    assert "session.revert.staged" not in types(await durable_log(host.client, sid))
    staged = await host.client.session.revert_stage(sid, message_id=boundary)  # idle again: allowed
    assert len(staged.files) == 4


async def test_a_prompt_sent_while_a_revert_is_staged_commits_it_first(host, provider):
    sid = await host.session()
    await turn(host, provider, sid, "hello")
    boundary = await turn(host, provider, sid, "change the files", *file_changing_turn())
    await host.client.session.revert_stage(sid, message_id=boundary)
    await turn(host, provider, sid, "try something else")
    assert await user_texts(host, sid) == ["hello", "try something else"]
    assert tree(host.project) == BEFORE and (await host.client.session.get(sid)).revert is None
    log = types(await durable_log(host.client, sid))
    committed = log.index("session.revert.committed")
    assert log[committed + 1] == "session.input.admitted"  # in the prompt's own transaction, just before it
    assert "change the files" not in json.dumps(provider.requests[-1].json["messages"])


async def test_with_snapshots_off_a_revert_restores_nothing_and_says_so(host, provider):
    (host.project / "opencode.json").write_text(json.dumps({"snapshot": False}))
    sid = await host.session()
    boundary = await turn(host, provider, sid, "change the files", *file_changing_turn())
    log = await durable_log(host.client, sid)
    assert all(e.data.snapshot is None for e in log if e.type.startswith("session.step."))
    state = await host.client.session.revert_stage(sid, message_id=boundary)
    assert state.files == [] and state.snapshot is None
    assert state.notice is not None and '"snapshot": false' in state.notice
    assert {**AFTER, "opencode.json": ('{"snapshot": false}', False)} == tree(host.project)
    await host.client.session.revert_commit(sid)
    assert await user_texts(host, sid) == []


# --- fork ------------------------------------------------------------------------------------------------------


async def test_fork_copies_history_up_to_a_message_into_a_session_of_its_own(host, provider):
    sid = await host.session()
    first = await turn(host, provider, sid, "first")
    await turn(host, provider, sid, "second")
    whole = await host.client.session.fork(sid)
    parent = await host.client.session.get(sid)
    assert whole.parentID == sid and whole.location == parent.location and whole.id != sid
    assert whole.title == f"{parent.title} (fork #1)"
    assert await user_texts(host, whole.id) == ["first", "second"]
    part = await host.client.session.fork(sid, message_id=first)
    assert await user_texts(host, part.id) == ["first"]
    page = await host.client.session.messages(part.id, order="asc")
    assert [m.type for m in page.items] == ["user"]  # up to and including the message
    log = [e async for e in host.client.session.log(part.id, follow=False)]
    assert log[0].type == "session.forked" and log[0].durable.seq == 0
    assert log[0].data.parentID == sid and log[0].data.from_ == first
    forked_again = await host.client.session.fork(whole.id)
    assert forked_again.title == f"{parent.title} (fork #2)"

    await turn(host, provider, part.id, "only in the fork")
    sent = json.dumps(provider.requests[-1].json["messages"])
    assert "first" in sent and "second" not in sent and "only in the fork" in sent
    assert await user_texts(host, sid) == ["first", "second"]  # the original is untouched
    with pytest.raises(MessageNotFoundError):
        await host.client.session.fork(sid, message_id="msg_nosuchmessage")
    with pytest.raises(SessionNotFoundError):
        await host.client.session.fork("ses_nosuchsession")


async def test_fork_while_the_source_executes_copies_only_settled_history(host, provider):
    sid = await host.session()
    await turn(host, provider, sid, "settled")
    held = await held_turn(host, provider, sid)
    try:
        fork = await host.client.session.fork(sid)
    finally:
        held.release.set()
    with anyio.fail_after(WAIT):
        await host.client.session.wait(sid)
    copied = (await host.client.session.messages(fork.id, order="asc")).items
    assert [m.type for m in copied] == ["user", "assistant", "user"]  # the running Step is not history yet
    assert all(m.time.completed for m in copied if m.type == "assistant")
    original = (await host.client.session.messages(sid, order="asc")).items
    assert [m.type for m in original] == ["user", "assistant", "user", "assistant"]


# --- move ------------------------------------------------------------------------------------------------------


async def test_move_runs_the_next_step_in_the_new_location(host, provider, tmp_path):
    (host.project / "AGENTS.md").write_text("Rules of the first place.\n")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "AGENTS.md").write_text("Rules of the second place.\n")
    sid = await host.session()
    await turn(host, provider, sid, "here")
    assert "Rules of the first place." in json.dumps(provider.requests[-1].json["messages"])
    moved = await host.client.session.move(sid, location={"directory": str(elsewhere)})
    assert moved.location.directory == str(elsewhere.resolve())
    assert (await host.client.session.get(sid)).location == moved.location
    assert "session.moved" in types(await durable_log(host.client, sid))
    await turn(host, provider, sid, "there")
    sent = json.dumps(provider.requests[-1].json["messages"])
    assert "Rules of the second place." in sent and "Rules of the first place." not in sent


async def test_move_is_refused_while_busy_to_a_missing_directory_and_with_a_staged_revert(host, provider, tmp_path):
    sid = await host.session()
    boundary = await turn(host, provider, sid, "change the files", *file_changing_turn())
    with pytest.raises(InvalidRequestError) as missing:
        await host.client.session.move(sid, location={"directory": str(tmp_path / "nowhere")})
    assert missing.value.body()["field"] == "location.directory"
    held = await held_turn(host, provider, sid)
    try:
        with pytest.raises(SessionBusyError):
            await host.client.session.move(sid, location={"directory": str(tmp_path)})
    finally:
        held.release.set()
    with anyio.fail_after(WAIT):
        await host.client.session.wait(sid)
    await host.client.session.revert_stage(sid, message_id=boundary)
    with pytest.raises(ConflictError):
        await host.client.session.move(sid, location={"directory": str(tmp_path)})
    with pytest.raises(SessionNotFoundError):
        await host.client.session.move("ses_nosuchsession", location={"directory": str(tmp_path)})
    assert (await host.client.session.get(sid)).location.directory == str(host.project.resolve())
    assert "session.moved" not in types(await durable_log(host.client, sid))
