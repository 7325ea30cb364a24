"""First-run clarity of `ocs serve`: what it says at start, a line per failed execution, and one line (no
traceback) with the fix when it cannot start."""

from __future__ import annotations

import json
import socket
import subprocess

import anyio
import pytest

from opencode_session.client import OpenCodeClient
from tests.support import fake_openai as fake
from tests.support.cli import TIMEOUT, assert_ignored_keys_named_once, configure_ignored_keys, make_home
from tests.support.server import OCS, start_server

# each test starts `ocs` processes (and some a server): slow on a busy machine
pytestmark = [pytest.mark.anyio, pytest.mark.timeout(240)]


def one_line_refusal(done, *expected: str) -> None:
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("ocs serve: "), done.stderr
    for text in expected:
        assert text in lines[0]


async def test_start_says_model_config_auth_and_document_then_logs_failed_executions(tmp_path, loop_provider):
    home = make_home(tmp_path, OPENCODE_SERVER_PASSWORD="pw")
    home.configure(loop_provider, provders={})
    config = tmp_path / "config" / "opencode" / "opencode.json"
    srv = start_server(tmp_path, env=home.env)
    try:
        assert srv.wait_for_stderr("auth", TIMEOUT)
        said = "".join(srv.stderr_lines)
        assert f"API document  {srv.url}/doc" in said
        assert "model         loop/fake-model" in said
        assert f"config        {config}" in said
        assert "auth          on (HTTP basic, user opencode)" in said
        assert f"warning: {config}:1: unknown key 'provders' (did you mean 'provider'?)" in said
        loop_provider.enqueue(fake.error(401, "Incorrect API key provided", type="invalid_request_error"))
        async with OpenCodeClient(srv.url, auth=("opencode", "pw")) as client:
            sid = (await client.session.create()).id
            await client.session.prompt(sid, prompt={"text": "hi"})
            with anyio.fail_after(TIMEOUT):
                await client.session.wait(sid)
        assert srv.wait_for_stderr(f"session {sid} failed: provider.auth: Incorrect API key provided", TIMEOUT)
    finally:
        assert srv.stop() == 0, "".join(srv.stderr_lines)
    assert not any("Traceback" in line for line in srv.stderr_lines)


async def test_start_names_each_config_key_it_does_not_act_on_once(tmp_path, loop_provider):
    home = make_home(tmp_path)
    global_file, project = configure_ignored_keys(home, loop_provider)
    srv = start_server(tmp_path, env=home.env)
    try:
        assert srv.wait_for_stderr("auth", TIMEOUT)
    finally:
        assert srv.stop() == 0, "".join(srv.stderr_lines)
    assert_ignored_keys_named_once("".join(srv.stderr_lines), global_file, project)


async def test_no_model_is_said_at_start(tmp_path):
    srv = start_server(tmp_path, env=make_home(tmp_path).env)
    try:
        assert srv.wait_for_stderr("auth          off", TIMEOUT)
    finally:
        assert srv.stop() == 0
    # one short line that says how to configure a model (not the whole paragraph `ocs run` prints)
    line = next(line for line in srv.stderr_lines if line.startswith("  model "))
    assert line.strip() == ('model         none: No model is configured; every prompt will fail until opencode.json'
                            ' sets "model": "provider/model" (`ocs models` lists the models and what each needs)')


def test_port_in_use(tmp_path):
    home = make_home(tmp_path)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = home.run("serve", "--port", str(port), "--db", str(tmp_path / "db.sqlite"))
    one_line_refusal(done, f"port {port} on 127.0.0.1 is already in use", "--port 0")


def test_unwritable_database(tmp_path):
    home = make_home(tmp_path)
    blocker = tmp_path / "not-a-directory"
    blocker.write_text("")
    done = home.run("serve", "--port", "0", "--db", str(blocker / "sessions.db"))
    one_line_refusal(done, f"cannot open the database {blocker / 'sessions.db'}", "--db")


def test_missing_directory(tmp_path):
    done = make_home(tmp_path).run("serve", "--port", "0", "--directory", str(tmp_path / "nowhere"))
    one_line_refusal(done, f"the directory {tmp_path / 'nowhere'} does not exist")


def test_bad_config_refuses_with_file_and_line(tmp_path):
    home = make_home(tmp_path)
    bad = home.work / "opencode.jsonc"
    bad.write_text('{\n  // a comment\n  "model": "a/b"\n  "small_model": "a/c"\n}\n')
    done = home.run("serve", "--port", "0", "--db", str(tmp_path / "db.sqlite"))
    one_line_refusal(done, f"Invalid config {bad}:4:3: Expecting ',' delimiter")


@pytest.mark.parametrize("command", ["serve", "ui"])
def test_start_says_when_the_directorys_project_configuration_is_not_trusted_and_how_to_trust_it(tmp_path, command):
    # a user who did not opt out of trust (the suite trusts everything) serves a cloned repository
    home = make_home(tmp_path, OCS_TRUST_ALL="", BROWSER="/nonexistent-browser %s")
    subprocess.run(["git", "init", "-q", str(home.work)], check=True)
    (home.work / "opencode.json").write_text(json.dumps({
        "hooks": {"SessionStart": [{"hooks": [{"type": "command", "command": "true"}]}]},
        "mcp": {"probe": {"type": "local", "command": ["true"]}}, "permission": {"bash": "allow"}}))
    program = (OCS, command)

    def trust_line() -> str:
        srv = start_server(tmp_path, env=home.env, program=program)
        try:
            assert srv.wait_for_stderr("  trust ", TIMEOUT), "".join(srv.stderr_lines)
        finally:
            assert srv.stop() == 0, "".join(srv.stderr_lines)
        return next(line for line in srv.stderr_lines if line.startswith("  trust ")).strip()

    directory = home.work.resolve()
    assert trust_line() == (f"trust         NOT TRUSTED: this directory's project configuration has its hooks, MCP "
                            f"servers and permissions that widen turned off; `ocs trust {directory}` turns them on")
    trusted = subprocess.run([OCS, "trust", str(directory)], env=home.env, capture_output=True, text=True,
                             timeout=TIMEOUT)
    assert trusted.returncode == 0, trusted
    assert trust_line() == "trust         this directory's project configuration is trusted"
    (home.work / "opencode.json").write_text(json.dumps({"hooks": {}, "permission": {"bash": "allow"}}))
    assert trust_line() == ("trust         NOT TRUSTED, it changed since you trusted it: this directory's project "
                            f"configuration has its permissions that widen turned off; `ocs trust {directory}` turns "
                            "them on")
