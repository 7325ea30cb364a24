"""The worked example plugin (examples/ocs-example-plugin), installed with pip into a directory on PYTHONPATH as a
user installs a plugin, and used through `ocs`: `ocs plugins` lists it and what it contributes, `ocs run` offers and
runs its tool, sends its instructions, and its hooks redact a tool's output and audit requests and events; plugins
that cannot load are listed with why, and `ocs serve` names them at start."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support import fake_openai as fake
from tests.support.cli import Home, session_state
from tests.support.server import start_server

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(240)]

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "ocs-example-plugin"
KEY = "sk-" + "A1b2C3d4E5f6G7h8I9j0"  # looks like an API key; is none


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Path:
    """The example plugin installed (offline, from its directory) into a directory of its own."""
    target = tmp_path_factory.mktemp("site")
    done = subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "--no-index", "--quiet",
                           "--disable-pip-version-check", "--target", str(target), str(EXAMPLE)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert (target / "ocs_example_plugin-0.1.0.dist-info" / "entry_points.txt").is_file()
    return target


@pytest.fixture
def user(home: Home, installed: Path) -> Home:
    """A user with the example plugin installed (and this repository importable, for the test plugins)."""
    home.env["PYTHONPATH"] = os.pathsep.join([str(installed), str(ROOT)])
    home.env["OCS_EXAMPLE_AUDIT"] = str(home.root / "audit.jsonl")
    return home


def test_ocs_plugins_lists_the_installed_plugin_and_what_it_contributes(user):
    listed = user.run("plugins")
    assert listed.returncode == 0, listed.stderr
    assert listed.stdout.splitlines() == [
        "example  loaded  ocs-example-plugin 0.1.0, entry point example = ocs_example_plugin:plugin",
        "    tools: count_words; instructions: plugin/example/count-words (plugins); hooks: before-request,"
        " after-tool-result, on-event"]
    as_json = user.run("plugins", "--format", "json")
    assert as_json.returncode == 0, as_json.stderr
    [described] = [json.loads(line) for line in as_json.stdout.splitlines()]
    assert described == {"name": "example", "kind": "entry-point", "status": "loaded", "error": None,
                         "origin": "ocs-example-plugin 0.1.0, entry point example = ocs_example_plugin:plugin",
                         "contributes": {"tools": ["count_words"], "tool_sources": [],
                                         "instructions": ["plugin/example/count-words (plugins)"], "adapters": [],
                                         "hooks": ["before-request", "after-tool-result", "on-event"]}}
    assert user.run("plugins", "--format", "xml").returncode == 2


async def test_a_session_runs_the_plugins_tool_with_its_instructions_and_hooks(user, provider):
    (user.work / "secret.txt").write_text(f"token={KEY}\n")
    provider.enqueue(
        fake.completion(fake.tool_call_deltas(0, "call_1", "count_words", '{"path": "notes.txt"}')
                        + fake.tool_call_deltas(1, "call_2", "read", '{"path": "secret.txt"}'),
                        finish_reason="tool_calls"),
        fake.completion(fake.text_deltas("Two words.")))
    done = user.run("run", "count the words of notes.txt")
    assert done.returncode == 0, done.stderr
    assert "Two words." in done.stdout and "count_words" in done.stderr
    _sessions, events, _messages = await session_state(user.db)
    results = {e.data.callID: "".join(part.text for part in e.data.content) for e in events
               if e.type == "session.tool.success"}
    assert results["call_1"] == "notes.txt: 2 lines, 2 words, 11 characters"
    assert "token=[redacted]" in results["call_2"] and KEY not in results["call_2"]  # the hook's redaction
    first, second = provider.requests[0].json, provider.requests[1].json
    assert "count_words" in [tool["function"]["name"] for tool in first["tools"]]
    system = json.dumps(first["messages"][0])
    assert "call the count_words tool instead of running wc" in system  # the plugin's Instruction Source
    assert KEY not in json.dumps(second)  # what the model read was redacted too
    audit = [json.loads(line) for line in (user.root / "audit.jsonl").read_text().splitlines()]
    requests = [entry for entry in audit if "request" in entry]
    assert [r["request"] for r in requests] == ["loop/fake-model"] * 2 and "count_words" in requests[0]["tools"]
    audited = [entry["event"] for entry in audit if "event" in entry and entry["session"] == events[0].data.sessionID]
    assert audited[0] == "session.created" and "session.execution.succeeded" in audited  # up to the last event


def test_plugins_that_cannot_load_are_listed_with_why_and_run_goes_on(user, provider):
    (user.work / "opencode.json").write_text(json.dumps({"plugin": [
        "opencode-wakatime", "python:tests.support.no_such_module", "python:tests.support.plugins:broken"]}))
    listed = user.run("plugins")
    assert listed.returncode == 0, listed.stderr
    lines = listed.stdout.splitlines()
    assert lines[0].startswith("example  loaded  ")
    assert "opencode-wakatime  skipped  " in listed.stdout and "a JavaScript (OpenCode) plugin" in listed.stdout
    assert ("tests.support.no_such_module  failed  " in listed.stdout
            and "cannot import tests.support.no_such_module: ModuleNotFoundError" in listed.stdout)
    assert "broken  failed  " in listed.stdout
    assert "RuntimeError: the plugin's settings file is missing" in listed.stdout
    assert "Traceback" not in listed.stderr
    provider.enqueue(fake.completion(fake.text_deltas("hi")))
    done = user.run("run", "hello")
    assert done.returncode == 0, done.stderr
    assert "warning: plugin broken (" in done.stderr and "is not loaded: its setup failed" in done.stderr
    assert "warning: plugin opencode-wakatime (" in done.stderr


def test_ocs_serve_names_its_plugins_at_start(user, tmp_path):
    server = start_server(tmp_path, env=user.env, workdir=user.work)
    try:
        assert server.wait_for_stderr("plugin        example  loaded  ocs-example-plugin 0.1.0", timeout=30), \
            server.stderr_lines
    finally:
        assert server.stop() == 0
    assert any("tools: count_words" in line for line in server.stderr_lines)
