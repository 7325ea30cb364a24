"""A repository can ship its `AGENTS.md` as a symlink (git keeps them) to a file outside it, `~/.ssh/id_rsa` say,
so that the file's text joins the model's instructions and goes to its provider. In a project the user has not
trusted (a repository with no configuration included), a project `AGENTS.md` that resolves outside the project
root is not read, ambient or nearby; once the user trusts the project it is, and an `AGENTS.md` inside the
repository is read either way."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from opencode_session.core.location import resolve_location
from tests.support.scripted import text, tool_call
from tests.test_instructions_runner import _prompt, harness

pytestmark = pytest.mark.anyio


def _secret(tmp_path: Path) -> Path:
    key = tmp_path / "home" / ".ssh" / "id_rsa"
    key.parent.mkdir(parents=True, exist_ok=True)
    key.write_text("LINKED-KEY-SECRET\n")
    return key


def _seen(rt, index: int) -> str:
    """Everything request `index` carried: its system text and its messages."""
    request = rt.provider.requests[index]
    return "\n".join(request.system) + "\n" + repr(request.messages)


async def test_an_untrusted_projects_agents_md_linked_outside_is_not_read_until_it_is_trusted(tmp_path):
    key = _secret(tmp_path)
    async with harness(tmp_path) as rt:  # its environment does not trust every Location
        (rt.project / "AGENTS.md").symlink_to(key)
        (rt.project / "opencode.json").write_text(json.dumps({"snapshot": False}))  # something to trust
        rt.provider.push(text("ok"), text("ok"))
        untrusted = (await rt.sessions.create()).id
        await _prompt(rt, untrusted, "first")
        assert "LINKED-KEY-SECRET" not in _seen(rt, 0)
        rt.runtime.trust.grant(resolve_location(rt.project))  # what `ocs trust` does
        trusted = (await rt.sessions.create()).id
        await _prompt(rt, trusted, "second")
        assert "LINKED-KEY-SECRET" in _seen(rt, 1)  # a user may link their AGENTS.md out on purpose


async def test_a_repository_without_configuration_reads_no_agents_md_linked_outside(tmp_path):
    key = _secret(tmp_path)
    async with harness(tmp_path) as rt:
        (rt.project / "AGENTS.md").symlink_to(key)
        pkg = rt.project / "pkg"
        pkg.mkdir()
        (pkg / "AGENTS.md").symlink_to(key)  # a nearby one, read after the model reads a file beside it
        (pkg / "code.py").write_text("print(1)\n")
        (rt.project / "docs").mkdir()
        (rt.project / "docs" / "rules.md").write_text("IN-REPO-RULES\n")
        (rt.project / "docs" / "AGENTS.md").symlink_to(rt.project / "docs" / "rules.md")  # a link inside: read
        rt.provider.push(tool_call("c1", "read", {"path": "pkg/code.py"}),
                         tool_call("c2", "read", {"path": "docs/rules.md"}), text("done"))
        sid = (await rt.sessions.create()).id
        await _prompt(rt, sid, "read them")
        assert all("LINKED-KEY-SECRET" not in _seen(rt, index) for index in range(len(rt.provider.requests)))
        synthetic = [m for m in await rt.sessions.context(sid) if m.type == "synthetic"]
        assert any("IN-REPO-RULES" in m.text for m in synthetic)


async def test_an_untrusted_projects_own_agents_md_is_still_read(tmp_path):
    async with harness(tmp_path) as rt:
        (rt.project / "AGENTS.md").write_text("AMBIENT-RULES\n")
        (rt.project / "opencode.json").write_text(json.dumps({"snapshot": False}))
        rt.provider.push(text("ok"))
        sid = (await rt.sessions.create()).id
        await _prompt(rt, sid, "first")
        assert "AMBIENT-RULES" in _seen(rt, 0)
