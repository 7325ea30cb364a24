"""Reverts across hard crashes of real `ocs serve` processes on one database and data directory: a server killed
(SIGKILL) between staging and committing comes back with the staged revert, the files as staged and the snapshots
to clear it with; a Step killed while its tool ran, so it never recorded what it changed, is still reverted."""

from __future__ import annotations

import json
import os
import signal
import subprocess
from pathlib import Path

import anyio
import pytest

from opencode_session.client import OpenCodeClient
from tests.api.test_undo import AFTER, BEFORE, Host, call, file_changing_turn, git_project, tree, turn
from tests.security.conftest import write_provider_config
from tests.support import fake_openai as fake
from tests.support.server import ServerProcess, isolated_env, start_server

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(120)]

WAIT = 60


@pytest.fixture
def provider(loop_provider):
    loop_provider.requests.clear()
    yield loop_provider
    assert loop_provider.pending == 0, "a scripted provider response was never requested"


@pytest.fixture
def root(tmp_path, provider) -> tuple[Path, dict[str, str], Path]:
    env = isolated_env(tmp_path)
    write_provider_config(tmp_path, provider)
    return tmp_path, env, git_project(tmp_path)


def serve(root: tuple[Path, dict[str, str], Path], **env_extra: str) -> ServerProcess:
    path, env, project = root
    return start_server(path, env={**env, **env_extra}, workdir=project)


async def test_a_server_killed_between_stage_and_commit_comes_back_with_files_and_state_agreeing(root, provider):
    first = serve(root)
    async with OpenCodeClient(first.url) as client:
        sid = (await client.session.create()).id
        boundary = await turn(Host(client, root[2]), provider, sid, "change the files", *file_changing_turn())
        staged = await client.session.revert_stage(sid, message_id=boundary)
    first.stop(signal.SIGKILL)
    assert tree(root[2]) == BEFORE

    second = serve(root)
    try:
        async with OpenCodeClient(second.url) as client:
            assert (await client.session.get(sid)).revert == staged  # durable, and what the files show
            await client.session.revert_clear(sid)  # the snapshots survived the crash
            assert tree(root[2]) == AFTER
            await client.session.revert_stage(sid, message_id=boundary)
        second.stop(signal.SIGKILL)
        assert tree(root[2]) == BEFORE
        third = serve(root)
        async with OpenCodeClient(third.url) as client:
            await client.session.revert_commit(sid)
            messages = (await client.session.messages(sid, order="asc")).items
            assert messages == [] and (await client.session.get(sid)).revert is None
        assert third.stop() == 0
    finally:
        second.stop(signal.SIGKILL)
    assert tree(root[2]) == BEFORE


async def test_a_step_killed_mid_tool_is_reverted_from_the_snapshot_it_started_on(root, provider):
    project = root[2]
    server = serve(root)
    shell = None
    try:
        async with OpenCodeClient(server.url) as client:
            sid = (await client.session.create()).id
            command = "echo x > made.txt && echo $$ > shell.pid && echo written && sleep 60"
            provider.enqueue(fake.completion(call(0, "c1", "bash", {"command": command, "description": "work"}),
                                             finish_reason="tool_calls"))
            events = client.event.subscribe()
            with anyio.fail_after(WAIT):
                assert (await anext(events)).type == "server.connected"  # subscribed before the prompt
            admitted = await client.session.prompt(sid, prompt={"text": "work for a minute"})
            with anyio.fail_after(WAIT):
                async for event in events:  # the command's live output: the file is written by now
                    if event.type == "session.tool.progress" and "written" in json.dumps(event.data):
                        break
            await events.aclose()
        shell = int((project / "shell.pid").read_text())
        server.stop(signal.SIGKILL)  # the Step never ends: no record of what it changed
    finally:
        if shell is not None:
            os.killpg(shell, signal.SIGKILL)  # the orphaned command
        server.stop(signal.SIGKILL)
    assert (project / "made.txt").exists()

    again = serve(root, OCS_RESUME_BUDGET="0/1")  # not continued: the killed turn is what the user reverts
    try:
        async with OpenCodeClient(again.url) as client:
            state = await client.session.revert_stage(sid, message_id=admitted.id)
            assert {f.path: f.status for f in state.files} == {"made.txt": "deleted", "shell.pid": "deleted"}
            assert tree(project) == BEFORE
    finally:
        assert again.stop() == 0
    assert subprocess.run(["git", "-C", str(project), "status", "--porcelain"], capture_output=True, text=True,
                          check=True).stdout.count("\n") == 3  # the user's repository: three untracked files, as before
