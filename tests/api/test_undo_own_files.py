"""Revert where the runtime's own files live inside the project (the README's `OpenCode(db="sessions.db")` run in a
project): no snapshot includes the database, its side files, tool output or the snapshot store, so staging and
clearing are inverse on the user's files byte for byte (modes too), with the database inside the project, outside
it and in an ignored folder; a snapshot that cannot be read refuses the stage with a typed error, touching nothing.
Against the Embedded host, a scripted model on loopback and real tools."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import anyio
import pytest

from opencode_session.client import ConflictError
from opencode_session.sdk import OpenCode
from tests.security.conftest import write_provider_config
from tests.support import fake_openai as fake
from tests.support.git import STARTING
from tests.support.git import git_project as new_git_project
from tests.support.server import isolated_env

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(120)]

WAIT = 60
BINARY = bytes(range(256)) * 4  # every byte value, NULs included


def git_project(root: Path) -> Path:
    return new_git_project(root / "project", {".gitignore": "ignored/\n", **STARTING, "data.bin": BINARY})


RUNTIME = ("sessions.db", "snapshot", "tool-output", "credentials.json")


def user_files(project: Path) -> dict[str, tuple[bytes, int]]:
    """Every file of the user's (outside `.git`, the ignored folder and the runtime's own files): bytes and mode."""
    out = {}
    for path in sorted(project.rglob("*")):
        rel = path.relative_to(project)
        if rel.parts[0] in (".git", "ignored") or rel.parts[0].startswith(RUNTIME):
            continue
        if path.is_file():
            out[rel.as_posix()] = (path.read_bytes(), path.stat().st_mode)
    return out


def call(index: int, call_id: str, name: str, arguments: dict[str, Any]) -> list[dict[str, Any]]:
    return fake.tool_call_deltas(index, call_id, name, json.dumps(arguments))


def file_changing_turn() -> list[fake.Script]:
    return [fake.completion(call(0, "c1", "write", {"path": "new.txt", "content": "created\n"}),
                            call(1, "c2", "edit", {"path": "notes.txt", "oldString": "beta", "newString": "BETA"}),
                            call(2, "c3", "bash", {"command": "rm old.txt && chmod +x run.sh && "
                                                              "printf 'x\\000y' >> data.bin",
                                                   "description": "tidy up"}),
                            finish_reason="tool_calls"),
            fake.completion(fake.text_deltas("changed the files"))]


async def turn(oc: OpenCode, provider: fake.FakeOpenAI, sid: str, text: str, *scripts: fake.Script) -> str:
    provider.enqueue(*(scripts or (fake.completion(fake.text_deltas(f"answer to {text}")),)))
    admitted = await oc.session.prompt(sid, prompt={"text": text})
    with anyio.fail_after(WAIT):
        await oc.session.wait(sid)
    return str(admitted.id)


def database_at(tmp_path: Path, project: Path, where: str) -> Path:
    return {"inside": project / "sessions.db", "outside": tmp_path / "elsewhere" / "sessions.db",
            "ignored": project / "ignored" / "sessions.db"}[where]


def snapshot_listing(data: Path, commit: str) -> list[str]:
    """The files a snapshot commit holds, read from its shadow repository with git itself."""
    (repo,) = [p for p in (data / "snapshot").iterdir() if p.is_dir()]
    out = subprocess.run(["git", "--git-dir", str(repo), "ls-tree", "-r", "--name-only", commit],
                         capture_output=True, check=True, text=True).stdout
    return sorted(out.split())


@pytest.mark.parametrize("where", ["inside", "outside", "ignored"])
async def test_stage_and_clear_are_inverse_byte_for_byte_wherever_the_database_is(tmp_path, provider, where):
    project = git_project(tmp_path)
    db = database_at(tmp_path, project, where)
    root = tmp_path / "host"
    write_provider_config(root, provider)
    async with OpenCode(db=db, directory=project, env=isolated_env(root)) as oc:
        sid = (await oc.session.create(location={"directory": str(project)})).id
        before = user_files(project)
        boundary = await turn(oc, provider, sid, "change the files", *file_changing_turn())
        after = user_files(project)
        assert set(after) == {".gitignore", "data.bin", "new.txt", "notes.txt", "run.sh"}
        assert after["data.bin"][0] == BINARY + b"x\0y" and after["run.sh"][1] & 0o111

        state = await oc.session.revert_stage(sid, message_id=boundary)
        assert {f.path: f.status for f in state.files} == {"new.txt": "deleted", "notes.txt": "modified",
                                                           "old.txt": "added", "run.sh": "modified",
                                                           "data.bin": "modified"}
        assert state.notice is None
        assert user_files(project) == before
        # the snapshot holds the user's files only, never the database, its side files or the snapshot store
        assert snapshot_listing(db.parent, state.snapshot) == [".gitignore", "data.bin", "new.txt", "notes.txt",
                                                               "run.sh"]

        await oc.session.revert_clear(sid)
        assert user_files(project) == after
        # and again: the round trip holds however often it is made
        await oc.session.revert_stage(sid, message_id=boundary)
        assert user_files(project) == before
        await oc.session.revert_clear(sid)
        assert user_files(project) == after

        # the database was never touched by a restore: the session goes on
        await turn(oc, provider, sid, "still there?")
        page = await oc.session.messages(sid, order="asc", limit=50)
        assert [m.text for m in page.items if m.type == "user"] == ["change the files", "still there?"]


async def test_a_snapshot_that_cannot_be_read_refuses_the_stage_and_touches_nothing(tmp_path, provider):
    project = git_project(tmp_path)
    db = project / "sessions.db"
    root = tmp_path / "host"
    write_provider_config(root, provider)
    async with OpenCode(db=db, directory=project, env=isolated_env(root)) as oc:
        sid = (await oc.session.create(location={"directory": str(project)})).id
        boundary = await turn(oc, provider, sid, "change the files", *file_changing_turn())
        after = user_files(project)
        shutil.rmtree(project / "snapshot")  # the Step's snapshots are gone (a damaged or removed store)

        with pytest.raises(ConflictError) as refused:
            await oc.session.revert_stage(sid, message_id=boundary)
        assert refused.value.body()["_tag"] == "ConflictError" and refused.value.resource == "snapshot"
        assert refused.value.message.startswith("No files were restored: ")
        assert user_files(project) == after
        assert (await oc.session.get(sid)).revert is None
