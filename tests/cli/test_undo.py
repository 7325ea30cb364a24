"""Undo from the command line, as a user runs it in a git project: `ocs revert` (stage, list the files, confirm,
commit; declining or no terminal puts the files back), `ocs fork`, and interactive mode's `/undo` and `/redo`."""

from __future__ import annotations

import pytest

from tests.api.test_undo import AFTER, BEFORE, file_changing_turn, tree
from tests.cli.test_terminal import finish
from tests.support import fake_openai as fake
from tests.support.cli import Home, session_state
from tests.support.git import git_project

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(240)]


@pytest.fixture
def project(home: Home) -> Home:
    """The home's work directory as a git project with the files `file_changing_turn` changes."""
    git_project(home.work)
    assert tree(home.work) == BEFORE
    return home


def changed(home: Home, provider: fake.FakeOpenAI) -> str:
    """Run the file-changing turn with `ocs run`; returns the session's ID."""
    provider.enqueue(*file_changing_turn())
    done = home.run("run", "change the files")
    assert done.returncode == 0, done.stderr
    assert tree(home.work) == AFTER
    return home.run("sessions").stdout.splitlines()[1].split("\t")[0]  # the newest, under the header


async def test_revert_with_yes_restores_the_files_lists_them_and_commits(project, provider):
    sid = changed(project, provider)
    done = project.run("revert", sid, "--yes")
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[1:] == ["  removed new.txt  +0 -1", "  restored notes.txt  +1 -1",
                                            "  restored old.txt  +1 -0", "  restored run.sh",
                                            "Committed: the session goes on from before that message."]
    assert tree(project.work) == BEFORE
    _, events, messages = await session_state(project.db, sid)
    assert messages == [] and "session.revert.committed" in [e.type for e in events]


async def test_revert_without_a_terminal_to_confirm_on_puts_the_files_back(project, provider):
    sid = changed(project, provider)
    done = project.run("revert", sid)
    assert done.returncode == 1 and "pass --yes" in done.stderr
    assert tree(project.work) == AFTER
    _, events, messages = await session_state(project.db, sid)
    assert [m.type for m in messages if m.type == "user"] == ["user"]
    assert [e.type for e in events][-2:] == ["session.revert.staged", "session.revert.cleared"]


async def test_revert_asks_on_a_terminal(project, provider):
    sid = changed(project, provider)
    child = project.spawn("revert", sid)
    child.expect("removed new.txt")
    child.expect(r"everything after it from the session\? \[y/N\]")
    assert tree(project.work) == BEFORE  # staged while it asks
    child.sendline("n")
    assert finish(child) == 1
    assert tree(project.work) == AFTER
    child = project.spawn("revert", sid)
    child.expect(r"\[y/N\]")
    child.sendline("y")
    child.expect("Committed")
    assert finish(child) == 0
    assert tree(project.work) == BEFORE


async def test_fork_prints_the_new_session(project, provider):
    sid = changed(project, provider)
    done = project.run("fork", sid)
    assert done.returncode == 0, done.stderr
    fork = done.stdout.strip()
    assert fork.startswith("ses") and fork != sid and f"ocs run --session {fork}" in done.stderr
    shown = project.run("show", fork)
    assert shown.returncode == 0 and shown.stdout.startswith("> change the files\n")
    assert project.run("fork", "ses_nope").returncode == 1


async def test_undo_and_redo_in_interactive_mode(project, provider):
    provider.enqueue(fake.completion(fake.text_deltas("Hello there.")), *file_changing_turn())
    child = project.spawn("run", "-i", "hello")
    child.expect("Hello there.")
    child.expect("Enter sends")
    child.send("change the files\r")
    child.expect("changed the files")
    child.expect("Enter sends")
    child.send("/undo\r")
    child.expect("removed new.txt")
    assert tree(project.work) == BEFORE
    child.send("/undo\r")  # one prompt further back: "hello" changed no files
    child.expect("undid from “hello”")
    child.send("/redo\r")
    child.expect("redid up to “change the files”")
    child.send("/redo\r")
    child.expect("everything is back as the agent left it")
    assert tree(project.work) == AFTER
    child.send("/redo\r")
    child.expect("nothing to redo")
    child.send("/undo\r")
    child.expect("removed new.txt")
    provider.enqueue(fake.completion(fake.text_deltas("Starting over.")))
    child.send("something else\r")  # the next message commits the undo
    child.expect("Starting over.")
    child.expect("Enter sends")
    child.send("\x04")
    assert finish(child) == 0
    _, _, messages = await session_state(project.db)
    assert [m.text for m in messages if m.type == "user"] == ["hello", "something else"]
    assert tree(project.work) == BEFORE
