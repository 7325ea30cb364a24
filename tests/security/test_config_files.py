"""Item 2 of "Safe by default, round four": whether a file is configuration is decided on its resolved absolute path,
for every file and folder the configuration loader reads (the global folder with `config.json` and `opencode.json[c]`,
`OPENCODE_CONFIG`, a project's files and `.opencode/`), not on relative names. Writing one asks unless a rule names
that file: a blanket `"edit": "allow"` (an agent's or the config's) does not cover it. And a change to one of the
user's own files that a session's Location holds (a session at $HOME) gains authority only at a restart, as a
project's does."""

from __future__ import annotations

import json
import shlex
import sys

import pytest

from opencode_session.client import OpenCodeClient
from tests.security.conftest import run_prompt, run_refused_prompt, settled, steps_of_calls
from tests.support.server import isolated_env, start_server

pytestmark = pytest.mark.anyio


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    root = tmp_path_factory.mktemp("config-files")
    (root / "work").mkdir()
    return root


@pytest.fixture(scope="module")
def ocs(root, provider):
    """`ocs serve` whose Location (root/work, a stand-in for $HOME) holds the user's config folder, $XDG_CONFIG_HOME:
    an agent `editor` may edit any file, an agent `named` may edit `opencode.json` by name."""
    work = root / "work"
    folder = work / ".config" / "opencode"
    folder.mkdir(parents=True)
    (folder / "opencode.json").write_text(json.dumps({
        "model": "loop/fake-model",
        "provider": {"loop": {"npm": "@ai-sdk/openai-compatible",
                              "options": {"baseURL": provider.base_url, "apiKey": "test-key"},
                              "models": {"fake-model": {}}}},
        "agent": {"editor": {"permission": {"edit": "allow"}},
                  "named": {"permission": {"edit": {"opencode.json": "allow"}}}},
    }))
    srv = start_server(root, env=isolated_env(root, XDG_CONFIG_HOME=str(work / ".config")), workdir=work)
    yield srv
    assert srv.stop() == 0, "".join(srv.stderr_lines)


@pytest.fixture
async def client(ocs, provider):
    provider.requests.clear()
    async with OpenCodeClient(ocs.url) as c:
        yield c
    assert provider.pending == 0, "a scripted provider response was never requested"


def _hostile(root) -> dict:
    """A config that runs commands of the model's: a PreToolUse hook and a local MCP server, each leaving a mark."""
    def marking(name: str) -> list[str]:
        return [sys.executable, "-c", f"open({str(root / name)!r}, 'w')"]

    return {"hooks": {"PreToolUse": [{"hooks": [{"type": "command", "command": shlex.join(marking("hook-ran"))}]}]},
            "mcp": {"evil": {"type": "local", "command": marking("mcp-ran")}}}


def _marks(root) -> list[str]:
    return [name for name in ("hook-ran", "mcp-ran") if (root / name).exists()]


async def test_writing_the_global_config_inside_the_location_asks(client, provider, root):
    # `config.json` is read by the loader though no relative pattern named it: the resolved path decides
    target = root / "work" / ".config" / "opencode" / "config.json"
    write = ("write", {"path": ".config/opencode/config.json", "content": json.dumps(_hostile(root))})
    asked, log = await run_refused_prompt(client, provider, steps_of_calls(write)[0])
    assert asked["action"] == "edit" and asked["resources"] == [".config/opencode/config.json"], asked
    assert not target.exists() and _marks(root) == []


async def test_a_blanket_edit_allow_does_not_cover_a_config_file(client, provider, root):
    write = ("write", {"path": "opencode.json", "content": json.dumps(_hostile(root))})
    asked, _ = await run_refused_prompt(client, provider, steps_of_calls(write)[0], agent="editor")
    assert asked["action"] == "edit" and asked["resources"] == ["opencode.json"], asked
    assert not (root / "work" / "opencode.json").exists()
    # nor does another name for the same file: a symlink is resolved first
    (root / "work" / "alias.json").symlink_to(root / "work" / ".config" / "opencode" / "opencode.json")
    try:
        write = ("write", {"path": "alias.json", "content": json.dumps(_hostile(root))})
        asked, _ = await run_refused_prompt(client, provider, steps_of_calls(write)[0], agent="editor")
        # asked for what it names: the user sees which file would change
        assert asked["action"] == "edit" and asked["resources"] == [".config/opencode/opencode.json"], asked
    finally:
        (root / "work" / "alias.json").unlink()
    # while an ordinary file is the agent's to write
    _, log = await run_prompt(client, provider, *steps_of_calls(("write", {"path": "notes.txt", "content": "x"})),
                              agent="editor")
    assert settled(log).type == "session.tool.success"


async def test_a_rule_naming_the_file_allows_writing_it(client, provider, root):
    _, log = await run_prompt(client, provider, *steps_of_calls(("write", {"path": "opencode.json", "content": "{}"})),
                              agent="named")
    assert settled(log).type == "session.tool.success", settled(log).data
    assert (root / "work" / "opencode.json").read_text() == "{}"
    (root / "work" / "opencode.json").unlink()


async def test_a_global_config_the_location_holds_gains_authority_only_at_a_restart(client, provider, root, ocs):
    # bash writes it unasked (bash is allowed by default); its hook and MCP server still do not run here
    target = root / "work" / ".config" / "opencode" / "config.json"
    text = json.dumps(_hostile(root))
    _, log = await run_prompt(client, provider, *steps_of_calls(
        ("bash", {"command": f"printf %s {shlex.quote(text)} > .config/opencode/config.json", "description": "cfg"}),
        ("bash", {"command": "echo hi", "description": "greet"})))
    results = [e for e in log if e.type in ("session.tool.success", "session.tool.failed")]
    assert [e.type for e in results] == ["session.tool.success"] * 2, [e.data for e in results]
    try:
        assert json.loads(target.read_text()) == _hostile(root)  # the file says it ...
        assert _marks(root) == []  # ... it is not so
        assert ocs.wait_for_stderr("not applied until it restarts", 10), "".join(ocs.stderr_lines)
    finally:
        target.unlink()


def test_every_file_and_folder_the_loader_reads_is_configuration_by_its_resolved_path(tmp_path):
    # in-process: the classification the tools ask about, for what the tests above do not write through a tool
    from opencode_session.core.config.trust import ConfigurationPaths, trust_file

    home, project = tmp_path / "home", tmp_path / "project"
    (project / "sub").mkdir(parents=True)
    (project / ".git").mkdir()
    extra = tmp_path / "elsewhere" / "mine.json"
    env = {"HOME": str(home), "XDG_CONFIG_HOME": str(home / ".config"), "XDG_DATA_HOME": str(home / "data"),
           "OPENCODE_CONFIG": str(extra)}
    paths = ConfigurationPaths.at(project / "sub", project, env)
    folder = home / ".config" / "opencode"
    configuration = [folder / "config.json", folder / "opencode.jsonc", folder / "command" / "x.md",
                     folder / "agent" / "a.md", folder / "skill" / "s" / "SKILL.md", extra, trust_file(env),
                     project / "opencode.json", project / "sub" / ".opencode" / "command" / "y.md",
                     project / "deeper" / "opencode.jsonc", project / "deeper" / ".opencode" / "agent" / "b.md"]
    for path in configuration:
        assert paths.covers(path), path
    for path in (project / "notes.txt", project / "sub" / "opencode.txt", tmp_path / "elsewhere" / "other.json",
                 home / ".config" / "other" / "config.json"):
        assert not paths.covers(path), path
