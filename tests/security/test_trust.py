"""Item 8 of "Safe by default, round four": opening a cloned repository runs none of its commands until the user
trusts its Location, with the content its configuration has then. Before that its content is read (an agent's
prompt) but its authority is not: no SessionStart hook at creation, no UserPromptSubmit hook and no MCP server at the
first prompt, and `GET /api/experimental/trust` and the log say what is left out. After `ocs trust` (or `POST
/api/experimental/trust`) they run; after a change to the configuration they stop until it is trusted again. The
user's own (global) configuration stays trusted throughout."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys

import pytest
import requests

from opencode_session.client import OpenCodeClient
from tests.security.conftest import TIMEOUT, serve, write_provider_config
from tests.support import fake_openai as fake
from tests.support.mcp_harness import local
from tests.support.server import OCS, isolated_env

pytestmark = pytest.mark.anyio

AGENT_PROMPT = "You review this repository's pull requests."


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    root = tmp_path_factory.mktemp("trust")
    work = root / "work"
    work.mkdir()
    subprocess.run(["git", "init", "-q", str(work)], check=True)
    (work / "opencode.json").write_text(json.dumps(_repository(root)))
    return root


def _mark(root, name: str) -> str:
    return shlex.join([sys.executable, "-c", f"open({str(root / name)!r}, 'a').write('x')"])


def _repository(root) -> dict:
    """A cloned repository's opencode.json: commands at creation and at each prompt, an MCP server, a prompt."""
    return {"hooks": {"SessionStart": [{"hooks": [{"type": "command", "command": _mark(root, "session-start")}]}],
                      "UserPromptSubmit": [{"hooks": [{"type": "command", "command": _mark(root, "prompt-submit")}]}]},
            "mcp": {"probe": local("probe")},
            "permission": {"bash": "allow"},
            "agent": {"build": {"prompt": AGENT_PROMPT}}}


@pytest.fixture(scope="module")
def ocs(root, provider):
    srv = serve(root, provider=provider, OCS_TRUST_ALL="")  # this suite trusts everything; the user here does not
    yield srv
    assert srv.stop() == 0, "".join(srv.stderr_lines)


@pytest.fixture
async def client(ocs, root, provider):
    write_provider_config(root, provider, permission={"bash": "ask"})  # the user's own: always in effect
    provider.requests.clear()
    async with OpenCodeClient(ocs.url) as c:
        yield c


def _ran(root) -> list[str]:
    found = [name for name in ("session-start", "prompt-submit") if (root / name).exists()]
    for name in found:
        (root / name).unlink()
    return found


async def _turn(client, provider) -> dict:
    """Create a session, prompt it (the model answers at once), wait: the model's request."""
    provider.enqueue(fake.completion(fake.text_deltas("ok")))
    sid = (await client.session.create()).id
    await client.session.prompt(sid, prompt={"text": "hello"})
    await client.session.wait(sid)
    # the turn's request (a background title's, if one was asked for, offers no tools)
    return [r.json for r in provider.requests if r.json.get("tools")][-1]


def _offered(request: dict) -> set[str]:
    return {tool["function"]["name"] for tool in request.get("tools") or []}


def _trust(http, url: str, **body) -> requests.Response:
    return http.post(f"{url}/api/experimental/trust", json=body, timeout=TIMEOUT)


async def test_an_untrusted_repository_runs_nothing_until_trusted_and_again_after_a_change(client, provider, root,
                                                                                          ocs, http):
    # untrusted: the content is read (the agent's prompt), nothing runs, and the API and the log say so
    request = await _turn(client, provider)
    assert AGENT_PROMPT in json.dumps(request["messages"])
    assert _ran(root) == []
    assert not any("echo" in name for name in _offered(request)), _offered(request)
    info = http.get(f"{ocs.url}/api/experimental/trust", timeout=TIMEOUT).json()
    assert info["trusted"] is False and info["files"] == [str(root / "work" / "opencode.json")]
    assert {"hooks", "mcp", "permission rules other than deny"} <= set(info["ignored"]), info
    assert ocs.wait_for_stderr("is not trusted", 10), "".join(ocs.stderr_lines)
    # the user trusts it from the command line: from the next session on, all of it runs
    env = isolated_env(root, OCS_TRUST_ALL="")
    shown = subprocess.run([OCS, "trust", str(root / "work")], env=env, capture_output=True, text=True,
                           timeout=TIMEOUT)
    assert shown.returncode == 0 and "trusted" in shown.stdout, shown
    request = await _turn(client, provider)
    assert _ran(root) == ["session-start", "prompt-submit"]
    assert any("echo" in name for name in _offered(request)), _offered(request)
    assert http.get(f"{ocs.url}/api/experimental/trust", timeout=TIMEOUT).json()["trusted"] is True
    # the configuration changes (by anyone): its authority is gone until it is trusted again
    config = root / "work" / "opencode.json"
    config.write_text(json.dumps({**_repository(root), "model": "loop/fake-model"}))
    request = await _turn(client, provider)
    assert _ran(root) == []
    assert not any("echo" in name for name in _offered(request)), _offered(request)
    info = http.get(f"{ocs.url}/api/experimental/trust", timeout=TIMEOUT).json()
    assert info["trusted"] is False and info["changed"] is True, info
    # trusting through the API names the content the user was shown: a different one is refused
    stale = _trust(http, ocs.url, digest="sha256:" + "0" * 64)
    assert stale.status_code == 409 and stale.json()["_tag"] == "ConflictError", stale.text
    granted = _trust(http, ocs.url, digest=info["digest"])
    assert granted.status_code == 200 and granted.json()["trusted"] is True, granted.text
    request = await _turn(client, provider)
    assert _ran(root) == ["session-start", "prompt-submit"]
    assert any("echo" in name for name in _offered(request)), _offered(request)


async def test_a_trust_request_is_refused_naming_its_field(ocs, http):
    refused = _trust(http, ocs.url, digest=5)
    assert refused.status_code == 400 and refused.json()["field"] == "digest", refused.text


async def test_trust_is_kept_in_the_users_data_directory_private_to_them(ocs, root, http):
    # trust is kept in the user's data directory, never in the repository, and is private to the user
    info = http.get(f"{ocs.url}/api/experimental/trust", timeout=TIMEOUT).json()
    kept = root / "data" / "opencode-session" / "trust.json"
    assert kept.exists() and (kept.stat().st_mode & 0o077) == 0
    assert not list((root / "work").rglob("trust.json")), info


def test_an_untrusted_projects_rules_only_ever_narrow(tmp_path):
    # in-process: what the rules say at an untrusted Location, where a merge would let a project's rule replace the
    # user's (`"bash": "ask"` replaced by an object holding one deny would allow every other command)
    from opencode_session.core.agents import resolve_agent
    from opencode_session.core.config import ConfigSource
    from opencode_session.core.location import resolve_location
    from opencode_session.core.permission import evaluate

    env = {"HOME": str(tmp_path / "home"), "XDG_CONFIG_HOME": str(tmp_path / "config"),
           "XDG_DATA_HOME": str(tmp_path / "data"), "SECRET_VAR": "s3cr3t"}
    (tmp_path / "config" / "opencode").mkdir(parents=True)
    (tmp_path / "config" / "opencode" / "opencode.json").write_text(json.dumps({"permission": {"bash": "ask"}}))
    work = tmp_path / "work"
    work.mkdir()
    (work / "opencode.json").write_text(json.dumps({
        "permission": {"bash": {"rm *": "deny", "ls *": "allow"}, "edit": "allow", "webfetch": "deny"},
        "agent": {"plan": {"prompt": "key {env:SECRET_VAR}", "permission": {"edit": "allow"},
                           "tools": {"bash": True, "webfetch": False}}}}))
    config = ConfigSource(env).at_sync(resolve_location(work))
    build, plan = resolve_agent(config, "build"), resolve_agent(config, "plan")
    rules = build.rules(config.permission, env)
    assert [evaluate(rules, "bash", c) for c in ("ls -la", "rm -rf x", "id")] == ["ask", "deny", "ask"]
    assert evaluate(rules, "webfetch", "https://example.com") == "deny"  # its denies apply
    plan_rules = plan.rules(config.permission, env)
    assert evaluate(plan_rules, "edit", "x.py") == "deny"  # the built-in plan agent stays read-only
    assert evaluate(plan_rules, "webfetch", "https://example.com") == "deny"
    assert plan.prompt == "key " and "s3cr3t" not in json.dumps(config.model_dump())  # no placeholder is read
