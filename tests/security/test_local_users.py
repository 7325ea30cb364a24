"""Round four of "Safe by default": another local user gains nothing through the runtime's own files. An in-memory
host keeps them in a fresh private directory (not a shared name in /tmp anyone can compute), and a shadow git
repository someone planted where the runtime keeps its snapshots runs no command of theirs: git is run with its
file-system monitor and hooks off whatever a config says, and a folder another user owns (or may write in) is not
used at all. The Embedded host with a scripted model (a loopback Chat Completions server) writes a file in a git
project, which takes a snapshot."""

from __future__ import annotations

import hashlib
import json
import os
import stat
import subprocess
import tempfile
from pathlib import Path

import anyio
import pytest

from opencode_session.core.snapshot.service import SNAPSHOT_DIRECTORY
from opencode_session.sdk import OpenCode
from tests.support import fake_openai as fake
from tests.support.server import configured_home

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(90)]

WAIT = 60


def _git(*args: str, **env: str) -> None:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    subprocess.run(["git", *args], check=True, capture_output=True, env={**clean, **env})


@pytest.fixture
def project(tmp_path: Path) -> Path:
    work = tmp_path / "work"
    work.mkdir()
    _git("init", "--quiet", str(work))
    (work / "readme.txt").write_text("hello\n")
    return work


def plant(data: Path, project: Path, marker: Path) -> Path:
    """A shadow git repository for `project` where the runtime would make its own, whose config runs a script (as
    its file-system monitor and as hooks) that leaves `marker`."""
    repo = data / SNAPSHOT_DIRECTORY / hashlib.sha256(str(project.resolve()).encode()).hexdigest()[:20]
    repo.mkdir(parents=True)
    script = data.parent / "planted.sh"
    script.write_text(f"#!/bin/sh\ntouch {marker}\nexit 0\n")
    script.chmod(0o755)
    _git("init", "--quiet", GIT_DIR=str(repo), GIT_WORK_TREE=str(project))
    _git("config", "core.fsmonitor", str(script), GIT_DIR=str(repo))
    for hook in ("pre-commit", "post-commit", "post-checkout", "post-index-change", "reference-transaction"):
        (repo / "hooks" / hook).write_text(script.read_text())
        (repo / "hooks" / hook).chmod(0o755)
    return repo


async def write_a_file(host: OpenCode, provider: fake.FakeOpenAI) -> None:
    """One turn whose Step writes a file in the project (the Step's snapshots are taken around it)."""
    provider.enqueue(
        fake.completion(fake.tool_call_deltas(0, "call_1", "write", json.dumps({"path": "new.txt",
                                                                              "content": "written\n"})),
                        finish_reason="tool_calls"),
        fake.completion(fake.text_deltas("done")))
    sid = (await host.session.create()).id
    await host.session.prompt(sid, prompt={"text": "write it"})
    with anyio.fail_after(WAIT):
        await host.session.wait(sid)


async def test_an_in_memory_host_keeps_its_files_in_a_fresh_private_directory(tmp_path, project, loop_provider,
                                                                             monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # where /tmp would be
    env = configured_home(tmp_path, loop_provider)
    async with OpenCode(directory=project, env=env) as first, OpenCode(directory=project, env=env) as second:
        folders = [first.runtime.snapshots.root.parent, second.runtime.snapshots.root.parent]
        await write_a_file(first, loop_provider)
        assert (project / "new.txt").exists() and (folders[0] / SNAPSHOT_DIRECTORY).is_dir()
        for folder in folders:
            info = folder.stat()
            assert info.st_uid == os.geteuid() and stat.S_IMODE(info.st_mode) == 0o700
            assert folder.parent == tmp_path
        assert folders[0] != folders[1]  # one each: no name another user could have made first
        assert not (tmp_path / f"opencode-session-{os.environ.get('USER', '')}").exists()
    assert not any(folder.exists() for folder in folders)  # gone with the in-memory database


async def test_a_planted_shadow_repository_runs_nothing(tmp_path, project, loop_provider):
    data = tmp_path / "data"
    marker = tmp_path / "PLANTED-RAN"
    plant(data, project, marker)
    async with OpenCode(db=data / "db.sqlite", directory=project, env=configured_home(tmp_path, loop_provider)) as host:
        await write_a_file(host, loop_provider)
    assert (project / "new.txt").read_text() == "written\n"
    assert not marker.exists(), "the planted repository's command ran"


@pytest.mark.parametrize("how", ["writable by others", "another user's"])
async def test_a_shadow_repository_folder_that_is_not_the_users_alone_is_not_used(tmp_path, project, loop_provider,
                                                                                 how):
    data = tmp_path / "data"
    marker = tmp_path / "PLANTED-RAN"
    repo = plant(data, project, marker)
    if how == "writable by others":
        repo.chmod(0o777)
    else:
        if os.geteuid() != 0:
            pytest.skip("only root can give a folder to another user here")
        os.chown(repo, 65534, 65534)
    before = sorted(p.name for p in repo.iterdir())
    async with OpenCode(db=data / "db.sqlite", directory=project, env=configured_home(tmp_path, loop_provider)) as host:
        await write_a_file(host, loop_provider)  # the turn goes on without a snapshot
    assert (project / "new.txt").read_text() == "written\n"
    assert not marker.exists(), "the planted repository's command ran"
    assert sorted(p.name for p in repo.iterdir()) == before  # nothing written into it
