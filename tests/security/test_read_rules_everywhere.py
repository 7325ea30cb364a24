"""Items 4 and 5 of "Safe by default, round three": every tool that returns a file's content obeys `read`'s rules
(grep's lines, glob's and the files API's names of denied files, the context edit and apply_patch match against),
and a search never blocks on a FIFO, ripgrep or not."""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path

import pytest

from opencode_session.core.tools.builtin.grep import _python_grep, find_ripgrep
from tests.security.conftest import one_tool_call, run_prompt, settled

pytestmark = pytest.mark.anyio

SECRET = "ENV-SECRET-4b8e22"


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    root = tmp_path_factory.mktemp("read-rules")
    work = root / "work"
    work.mkdir()
    (work / ".env").write_text(f"TOKEN={SECRET}\n")
    (work / "prod.env").write_text(f"TOKEN={SECRET}\n")
    (work / "notes.txt").write_text("TOKEN=not-a-secret\n")
    os.mkfifo(work / "pipe")
    os.mkfifo(work / "pipe.env.txt")
    return root


def _leaked(provider, log) -> bool:
    return SECRET in json.dumps([r.json for r in provider.requests]) + json.dumps([e.wire() for e in log])


@pytest.mark.parametrize("arguments", [{"pattern": "TOKEN"}, {"pattern": "TOKEN", "include": "*.env"},
                                       {"pattern": "SECRET", "path": ".env"}])
async def test_grep_returns_no_line_read_may_not_see(client, provider, arguments):
    _, log = await run_prompt(client, provider, *one_tool_call("grep", arguments), timeout=60)
    result = settled(log)
    assert not _leaked(provider, log)
    if result.type == "session.tool.success":
        answer = provider.requests[1].json["messages"][-1]["content"]
        assert "left out" in answer, answer
        if "path" not in arguments and "include" not in arguments:
            assert "not-a-secret" in answer  # what may be read is still found (and the FIFOs did not block it)


async def test_glob_does_not_name_denied_files(client, provider):
    _, log = await run_prompt(client, provider, *one_tool_call("glob", {"pattern": "*"}))
    answer = provider.requests[1].json["messages"][-1]["content"]
    assert settled(log).type == "session.tool.success" and "notes.txt" in answer
    assert ".env" not in answer and "prod.env" not in answer


@pytest.mark.parametrize("tool, arguments", [
    ("edit", {"path": ".env", "oldString": "TOKEN=ENV", "newString": "x"}),  # else a match/no-match oracle
    ("edit", {"path": "prod.env", "oldString": "TOKEN=guess", "newString": "x"}),
    ("apply_patch", {"patchText": "*** Begin Patch\n*** Update File: .env\n@@\n-TOKEN=guess\n+TOKEN=x\n*** End Patch"}),
])
async def test_edits_by_content_are_refused_where_read_is(client, provider, root, tool, arguments):
    _, log = await run_prompt(client, provider, *one_tool_call(tool, arguments))
    result = settled(log)
    assert result.type == "session.tool.failed" and result.data.error.type == "permission.rejected", result.data
    assert not _leaked(provider, log)
    assert (root / "work" / ".env").read_text() == f"TOKEN={SECRET}\n"


async def test_the_files_api_does_not_name_denied_files(client):
    listed = [e.path for e in (await client.fs.list()).data]
    assert "notes.txt" in listed and ".env" not in listed and "prod.env" not in listed
    found = [e.path for e in (await client.fs.find(query="env")).data]
    assert ".env" not in found and "prod.env" not in found


def test_the_python_search_skips_fifos(root):
    # a FIFO nobody writes to: opening it for reading the ordinary way would block this thread for ever
    found = _python_grep("TOKEN", root / "work", None, dict(os.environ), threading.Event())
    assert {Path(m.path).name for m in found.matches} == {".env", "prod.env", "notes.txt"}
    assert not _python_grep("x", root / "work" / "pipe", None, dict(os.environ), threading.Event()).matches


def test_ripgrep_is_found_next_to_the_interpreter_without_path():
    found = find_ripgrep({"PATH": ""})
    assert found is not None and Path(found).name == "rg", "ripgrep is a dependency: it is installed with the package"
