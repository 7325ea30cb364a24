"""Item 2 of "Safe by default": tools stay inside the Location. `read` and `glob` resolve `..`, symlinks and
absolute paths before they judge a path; outside the Location a call needs the `external_directory` permission
(the user is asked; here they refuse, and the model reads the refusal), and `deny` rules from opencode.json are
always honoured. The model calls the tools through a loopback Chat Completions server."""

from __future__ import annotations

import json
import os

import pytest

from tests.security.conftest import one_tool_call, run_prompt, run_refused_prompt, settled, write_provider_config

pytestmark = pytest.mark.anyio

SECRET = "TOP-SECRET-7f3a9c"


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    root = tmp_path_factory.mktemp("authority")
    outside = root / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text(SECRET + "\n")
    (outside / "found-by-glob.txt").write_text(SECRET)
    work = root / "work"
    (work / "src").mkdir(parents=True)
    (work / "notes.txt").write_text("inside the location\n")
    (work / ".env").write_text(f"TOKEN={SECRET}\n")
    (work / "escape").symlink_to(outside / "secret.txt")
    (work / "escape-dir").symlink_to(outside, target_is_directory=True)
    return root


def _leaked(provider) -> bool:
    return any(SECRET in json.dumps(r.json) for r in provider.requests)


async def _call(client, provider, name: str, arguments: dict) -> tuple[object, list]:
    provider.requests.clear()
    _, log = await run_prompt(client, provider, *one_tool_call(name, arguments))
    return settled(log), log


REFUSAL = "do not leave the project"


async def _refused_call(client, provider, name: str, arguments: dict) -> tuple[object, list, dict]:
    """Like `_call` for a call that asks: the user refuses the one request it makes, with feedback."""
    provider.requests.clear()
    asked, log = await run_refused_prompt(client, provider, *one_tool_call(name, arguments), feedback=REFUSAL)
    return settled(log), log, asked


@pytest.mark.parametrize("path", ["../outside/secret.txt", "{root}/outside/secret.txt", "/etc/passwd", "/",
                                  "escape", "escape-dir/secret.txt", "src/../../outside/secret.txt",
                                  "~/../outside/secret.txt"])
async def test_read_outside_the_location_needs_external_directory(client, provider, root, path):
    result, log, asked = await _refused_call(client, provider, "read", {"path": path.format(root=root)})
    assert asked["action"] == "external_directory" and not asked["resources"][0].startswith(str(root / "work"))
    assert result.type == "session.tool.failed"
    assert result.data.error.type == "permission.rejected", result.data.error
    assert not _leaked(provider) and SECRET not in json.dumps([e.wire() for e in log])
    # the model is told, and the drain goes on
    assert REFUSAL in provider.requests[1].json["messages"][-1]["content"]
    assert log[-1].type == "session.execution.succeeded"


async def test_read_inside_the_location_still_works(client, provider):
    result, _ = await _call(client, provider, "read", {"path": "notes.txt"})
    assert result.type == "session.tool.success"
    assert "inside the location" in provider.requests[1].json["messages"][-1]["content"]


@pytest.mark.parametrize("arguments", [{"pattern": "../outside/*.txt"}, {"pattern": "{root}/outside/*"},
                                       {"pattern": "*.txt", "path": ".."}, {"pattern": "*", "path": "{root}/outside"},
                                       {"pattern": "*", "path": "escape-dir"}, {"pattern": "*", "path": "/"}])
async def test_glob_outside_the_location_needs_external_directory(client, provider, root, arguments):
    arguments = {k: v.format(root=root) for k, v in arguments.items()}
    result, _, asked = await _refused_call(client, provider, "glob", arguments)
    assert asked["action"] == "external_directory"
    assert result.type == "session.tool.failed"
    assert result.data.error.type == "permission.rejected", result.data.error
    assert "found-by-glob" not in json.dumps([r.json for r in provider.requests])


async def test_glob_inside_does_not_walk_into_symlinked_directories(client, provider):
    result, _ = await _call(client, provider, "glob", {"pattern": "**/*.txt"})
    assert result.type == "session.tool.success"
    found = provider.requests[1].json["messages"][-1]["content"]
    assert "notes.txt" in found and "found-by-glob" not in found


async def test_env_files_are_denied_by_default(client, provider):
    result, _ = await _call(client, provider, "read", {"path": ".env"})
    assert result.data.error.type == "permission.rejected"
    assert not _leaked(provider)


async def test_configured_deny_rules_are_honoured(client, provider, root):
    write_provider_config(root, provider, permission={"read": "deny"})
    result, _ = await _call(client, provider, "read", {"path": "notes.txt"})
    assert result.data.error.type == "permission.rejected" and "read" in result.data.error.message

    write_provider_config(root, provider, permission={"read": {"*": "allow", "*.txt": "deny"}})
    result, _ = await _call(client, provider, "read", {"path": "notes.txt"})
    assert result.data.error.type == "permission.rejected"

    # The agent's own rules come after the global ones, and the last matching rule wins.
    write_provider_config(root, provider, permission={"read": "allow"},
                          agent={"build": {"permission": {"read": {"notes.*": "deny"}}}})
    result, _ = await _call(client, provider, "read", {"path": "notes.txt"})
    assert result.data.error.type == "permission.rejected"

    write_provider_config(root, provider, permission={"glob": "deny"})
    result, _ = await _call(client, provider, "glob", {"pattern": "*.txt"})
    assert result.data.error.type == "permission.rejected"


async def test_external_directory_deny_and_allow(client, provider, root):
    outside = root / "outside"
    write_provider_config(root, provider, permission={"external_directory": "deny"})
    result, _ = await _call(client, provider, "read", {"path": str(outside / "secret.txt")})
    assert result.data.error.type == "permission.rejected"
    assert not _leaked(provider)

    write_provider_config(root, provider, permission={"external_directory": {f"{outside}/*": "allow"}})
    result, _ = await _call(client, provider, "read", {"path": "escape"})  # the symlink's real target
    assert result.type == "session.tool.success"
    assert SECRET in provider.requests[1].json["messages"][-1]["content"]

    # An allowed outside directory is still subject to the read rules.
    write_provider_config(root, provider, permission={"external_directory": {f"{outside}/*": "allow"},
                                                      "read": {f"{outside}/*": "deny"}})
    result, _ = await _call(client, provider, "read", {"path": str(outside / "secret.txt")})
    assert result.data.error.type == "permission.rejected"


async def test_a_fifo_is_refused_without_blocking(client, provider, root):
    fifo = root / "work" / "pipe"
    if not fifo.exists():
        os.mkfifo(fifo)
    result, _ = await _call(client, provider, "read", {"path": "pipe"})
    assert result.type == "session.tool.failed" and "regular file" in result.data.error.message
