"""User hooks end to end: `ocs serve` with `hooks` in its opencode.json runs real shell hooks around a session driven
over HTTP, the model scripted through the real Chat Completions adapter against a loopback server. A PreToolUse hook
refuses matching `bash` calls (the model reads why) or rewrites them, a UserPromptSubmit hook rejects a prompt with
a typed 400 (nothing admitted), a Stop hook sends the agent on (at most three times), a PostToolUse hook's context
reaches the model, and a hook that fails is a `session.hook.failed` event that decides nothing."""

from __future__ import annotations

import json
import shlex
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import anyio
import pytest

from opencode_session.client import InvalidRequestError, OpenCodeClient
from opencode_session.core.userhooks import parse_hooks
from tests.support import fake_openai as fake
from tests.support.cli import make_home
from tests.support.e2e import durable_log, prompt_and_wait
from tests.support.server import start_configured

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(120)]

# One hook program for every event; what it does depends on its mode (argv[2]) and what it is shown.
HOOK = r'''
import json, os, sys
log, mode = sys.argv[1], sys.argv[2]
event = json.load(sys.stdin)
with open(log, "a") as out:
    out.write(json.dumps({"mode": mode, **event}) + "\n")
command = (event.get("tool_input") or {}).get("command", "")
if mode == "guard" and "rm -rf" in command:
    print("rm -rf is not allowed here: delete files one by one", file=sys.stderr)
    sys.exit(2)
if mode == "guard" and command.startswith("echo please-rewrite"):
    print(json.dumps({"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "allow",
                                             "updatedInput": {"command": "echo rewritten-by-hook"}}}))
if mode == "prompt" and "forbidden" in event["prompt"]:
    print("prompts may not say forbidden", file=sys.stderr)
    sys.exit(2)
if mode == "stop" and os.path.exists("stop-armed"):
    if not event["stop_hook_active"]:
        print("You are not done: also write CHANGES.md", file=sys.stderr)
        sys.exit(2)
    os.remove("stop-armed")
if mode == "stop" and os.path.exists("stop-forever"):
    print("keep going", file=sys.stderr)
    sys.exit(2)
if mode == "post" and "lint-me" in command:
    context = {"hookEventName": "PostToolUse", "additionalContext": "Run the linter next."}
    print(json.dumps({"hookSpecificOutput": context}))
if mode == "slow" and "slow-hook" in command:
    import time
    time.sleep(60)
if mode == "broken" and "break-hook" in command:
    print("the hook itself is broken", file=sys.stderr)
    sys.exit(1)
'''


@pytest.fixture(scope="module")
def provider(loop_provider):
    return loop_provider


class _Policy(BaseHTTPRequestHandler):
    """An HTTP hook: refuses `curl` commands with a JSON decision, and keeps what it was sent."""

    received: list[dict] = []

    def do_POST(self) -> None:  # noqa: N802 - the stdlib's name
        event = json.loads(self.rfile.read(int(self.headers["content-length"])))
        _Policy.received.append({"auth": self.headers.get("x-policy"), **event})
        command = event.get("tool_input", {}).get("command", "")
        answer = {"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "deny",
                                         "permissionDecisionReason": "no network from here"}} \
            if command.startswith("curl") else {}
        body = json.dumps(answer).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *_args) -> None:
        pass


@pytest.fixture(scope="module")
def policy():
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Policy)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/hook"
    server.shutdown()
    thread.join(10)


@pytest.fixture(scope="module")
def setup(tmp_path_factory, provider, policy):
    root = tmp_path_factory.mktemp("hooks")
    script = root / "hook.py"
    script.write_text(HOOK)
    log = root / "hooks.log"

    def command(mode: str) -> dict:
        return {"type": "command", "command": shlex.join([sys.executable, str(script), str(log), mode]),
                "timeout": 30}

    hooks = {
        "PreToolUse": [{"matcher": "bash", "hooks": [command("guard")]},
                       {"matcher": "bash", "hooks": [command("broken"), {**command("slow"), "timeout": 1}]},
                       {"matcher": "bash|webfetch", "hooks": [{"type": "http", "url": policy,
                                                              "headers": {"x-policy": "p1"}}]}],
        "PostToolUse": [{"matcher": "ba.*", "hooks": [command("post")]}],
        "UserPromptSubmit": [{"hooks": [command("prompt")]}],
        "Stop": [{"hooks": [command("stop")]}],
        "SessionStart": [{"hooks": [command("start")]}],
    }
    config = provider.serve_config({"fake-model": {}}, model="loop/fake-model", hooks=hooks,
                                   permission={"bash": "allow"})
    srv, work = start_configured(root, config)
    yield srv, work, log
    assert srv.stop() == 0, "".join(srv.stderr_lines)


@pytest.fixture
async def client(setup, provider):
    provider.requests.clear()
    async with OpenCodeClient(setup[0].url) as c:
        yield c
    assert provider.pending == 0, "a scripted provider response was never requested"


def calls_bash(provider, command: str, answer: str = "done") -> None:
    provider.enqueue(fake.completion(fake.tool_call_deltas(0, "call_1", "bash", json.dumps({"command": command})),
                                     finish_reason="tool_calls"),
                     fake.completion(fake.text_deltas(answer)))


def seen(log: Path, mode: str) -> list[dict]:
    return [e for e in map(json.loads, log.read_text().splitlines()) if e["mode"] == mode] if log.exists() else []


async def _session(client) -> str:
    return (await client.session.create()).id


async def test_a_pre_tool_use_hook_blocks_a_matching_bash_call_and_the_model_reads_why(client, provider, setup):
    _srv, work, log = setup
    (work / "build").mkdir(exist_ok=True)
    calls_bash(provider, "rm -rf build", "I will delete them one by one.")
    sid = await _session(client)
    await prompt_and_wait(client, sid, "clean up")
    assert (work / "build").is_dir(), "the refused command ran anyway"
    failed = [e for e in await durable_log(client, sid) if e.type == "session.tool.failed"]
    assert failed[0].data.error.type == "hook.blocked"
    assert "delete files one by one" in failed[0].data.error.message
    tool_message = provider.requests[1].json["messages"][-1]
    assert tool_message["role"] == "tool" and "delete files one by one" in tool_message["content"]
    shown = [e for e in seen(log, "guard") if e["session_id"] == sid]
    assert shown[0]["hook_event_name"] == "PreToolUse" and shown[0]["tool_name"] == "bash"
    assert shown[0]["tool_input"] == {"command": "rm -rf build"} and shown[0]["cwd"] == str(work)


async def test_an_allowed_call_runs_and_a_rewritten_one_runs_as_the_hook_said(client, provider):
    calls_bash(provider, "echo please-rewrite me")
    sid = await _session(client)
    await prompt_and_wait(client, sid, "say it")
    success = [e for e in await durable_log(client, sid) if e.type == "session.tool.success"]
    assert success[0].data.content[0].text.strip() == "rewritten-by-hook"


async def test_a_post_tool_use_hooks_context_reaches_the_model_with_the_output(client, provider):
    calls_bash(provider, "echo lint-me")
    sid = await _session(client)
    await prompt_and_wait(client, sid, "go")
    tool_message = provider.requests[1].json["messages"][-1]
    assert "lint-me" in tool_message["content"] and "Run the linter next." in tool_message["content"]


async def test_a_hook_that_fails_is_an_event_and_decides_nothing(client, provider):
    calls_bash(provider, "echo break-hook")
    sid = await _session(client)
    await prompt_and_wait(client, sid, "go")
    log = await durable_log(client, sid)
    failures = [e.data for e in log if e.type == "session.hook.failed"]
    assert len(failures) == 1 and failures[0].hook == "PreToolUse"
    assert "exited 1" in failures[0].message and "the hook itself is broken" in failures[0].message
    success = [e for e in log if e.type == "session.tool.success"]
    assert success[0].data.content[0].text.strip() == "break-hook"


async def test_an_http_hook_refuses_by_its_json_answer(client, provider):
    calls_bash(provider, "curl https://example.com", "No network then.")
    sid = await _session(client)
    await prompt_and_wait(client, sid, "fetch it")
    failed = [e for e in await durable_log(client, sid) if e.type == "session.tool.failed"]
    assert (failed[0].data.error.type, failed[0].data.error.message) == ("hook.blocked", "no network from here")
    sent = [e for e in _Policy.received if e["session_id"] == sid]
    assert sent[0]["auth"] == "p1" and sent[0]["tool_input"] == {"command": "curl https://example.com"}


async def test_a_hook_past_its_timeout_is_killed_recorded_and_the_call_runs(client, provider):
    calls_bash(provider, "echo slow-hook")
    sid = await _session(client)
    with anyio.fail_after(30):
        await prompt_and_wait(client, sid, "go")
    log = await durable_log(client, sid)
    failures = [e.data for e in log if e.type == "session.hook.failed"]
    assert [(f.hook, f.message) for f in failures] == [("PreToolUse", "timed out after 1 s")]
    assert [e.data.content[0].text.strip() for e in log if e.type == "session.tool.success"] == ["slow-hook"]


async def test_a_user_prompt_submit_hook_rejects_a_prompt_and_nothing_is_admitted(client, provider, setup):
    sid = await _session(client)
    with pytest.raises(InvalidRequestError) as refused:
        await client.session.prompt(sid, prompt={"text": "this is forbidden"})
    assert "prompts may not say forbidden" in str(refused.value)
    log = await durable_log(client, sid)
    assert "session.input.admitted" not in [e.type for e in log]
    assert provider.requests == []
    # a prompt the hook lets through is admitted and answered
    provider.enqueue(fake.completion(fake.text_deltas("hi")))
    await prompt_and_wait(client, sid, "hello")
    assert [e["prompt"] for e in seen(setup[2], "prompt") if e["session_id"] == sid] == ["this is forbidden", "hello"]


async def test_a_stop_hook_sends_the_agent_on_with_its_reason_once(client, provider, setup):
    work = setup[1]
    (work / "stop-armed").touch()
    provider.enqueue(fake.completion(fake.text_deltas("All done.")), fake.completion(fake.text_deltas("Wrote it.")))
    sid = await _session(client)
    await prompt_and_wait(client, sid, "fix it")
    assert len(provider.requests) == 2
    second = provider.requests[1].json["messages"]
    assert "also write CHANGES.md" in json.dumps(second[-1])
    stops = [e for e in seen(setup[2], "stop") if e["session_id"] == sid]
    assert [e["stop_hook_active"] for e in stops] == [False, True]
    assert not (work / "stop-armed").exists()


async def test_a_stop_hook_that_always_blocks_sends_the_agent_on_three_times_at_most(client, provider, setup):
    work = setup[1]
    (work / "stop-forever").touch()
    try:
        provider.enqueue(*(fake.completion(fake.text_deltas(f"answer {n}")) for n in range(4)))
        sid = await _session(client)
        await prompt_and_wait(client, sid, "go")
    finally:
        (work / "stop-forever").unlink()
    assert len(provider.requests) == 4
    info = await client.session.get(sid)
    assert info.id == sid


async def test_session_start_hooks_hear_of_a_new_session(client, setup):
    sid = await _session(client)
    starts = [e for e in seen(setup[2], "start") if e["session_id"] == sid]  # it ran before create answered
    assert starts and starts[0]["hook_event_name"] == "SessionStart" and starts[0]["source"] == "startup"


def test_entries_that_cannot_be_read_are_problems_and_are_not_run():
    settings = parse_hooks({
        "PreToolUse": [{"matcher": "(", "hooks": [{"type": "command", "command": "x"}]},
                       {"matcher": "bash", "hooks": [{"type": "command", "command": "ok", "timeout": 5}]},
                       {"hooks": [{"type": "http", "url": "ftp://nope"}]}],
        "BeforeEverything": [],
        "Stop": [{"hooks": [{"type": "command", "command": "x", "timeout": 0}]}],
    })
    assert [h.target for h in settings.handlers("PreToolUse", "bash")] == ["ok"]
    assert settings.handlers("PreToolUse", "edit") == [] and settings.handlers("Stop") == []
    assert len(settings.problems) == 4
    assert any("BeforeEverything" in p for p in settings.problems)


async def test_hooks_a_project_file_gains_while_the_server_runs_are_not_run_until_a_restart(client, provider, setup):
    """Hooks run commands: like MCP servers, a project file written while the server runs (the model may have
    written it) brings none until a person restarts it."""
    _srv, work, _log = setup
    mark = work.parent / "planted-hook-ran"
    touch = {"type": "command", "command": f"touch {shlex.quote(str(mark))}"}
    planted = {"hooks": {"PreToolUse": [{"hooks": [touch]}]}}
    (work / "opencode.json").write_text(json.dumps(planted))
    try:
        calls_bash(provider, "echo hello")
        sid = await _session(client)
        await prompt_and_wait(client, sid, "go")
    finally:
        (work / "opencode.json").unlink()
    assert [e.type for e in await durable_log(client, sid)].count("session.tool.success") == 1
    assert not mark.exists(), "a hook the project file gained at run time ran"


def test_ocs_hooks_lists_what_runs_here_and_what_cannot(tmp_path):
    home = make_home(tmp_path)
    home.configure(None, hooks={
        "PreToolUse": [{"matcher": "bash", "hooks": [{"type": "command", "command": "./check.sh", "timeout": 5}]}],
        "Stop": [{"hooks": [{"type": "http", "url": "http://127.0.0.1:9/stop"}]}, {"hooks": []}],
    })
    listed = home.run("hooks")
    assert listed.returncode == 0, listed.stderr
    assert listed.stdout.splitlines() == [
        "PreToolUse  bash  command ./check.sh  (timeout 5 s)",
        "Stop  *  http http://127.0.0.1:9/stop  (timeout 60 s)",
        "not run: hooks.Stop[1].hooks: expected a non-empty list of handlers",
    ]
    rows = [json.loads(line) for line in home.run("hooks", "--format", "json").stdout.splitlines()]
    assert rows[0] == {"event": "PreToolUse", "matcher": "bash", "type": "command", "target": "./check.sh",
                       "timeout": 5.0}
    assert home.run("hooks", cwd=tmp_path).returncode == 0
