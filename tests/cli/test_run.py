"""`ocs run` driven as a subprocess with its output piped: what it prints, how it exits, and what it leaves in the
database; `--attach` against a real `ocs serve`."""

from __future__ import annotations

import json
import signal
import subprocess
from pathlib import Path

import pytest

from tests.support import fake_openai as fake
from tests.support.cli import (
    TIMEOUT,
    assert_ignored_keys_named_once,
    configure_ignored_keys,
    make_home,
    session_state,
    types,
)
from tests.support.server import OCS, start_server

# each test starts `ocs` processes (and some a server): slow on a busy machine
pytestmark = [pytest.mark.anyio, pytest.mark.timeout(240)]


def read_then_answer(answer: str = "The notes say alpha and beta.") -> list[fake.Script]:
    return [fake.completion(fake.text_deltas("Let me look."),
                            fake.tool_call_deltas(0, "call_1", "read", '{"path":', ' "notes.txt"}'),
                            finish_reason="tool_calls"),
            fake.completion(fake.text_deltas(*answer.split(" "))[:1] + fake.text_deltas(
                *[" " + w for w in answer.split(" ")[1:]]))]


async def test_piped_run_streams_plain_text_and_shows_the_tool_call(home, provider):
    provider.enqueue(*read_then_answer())
    done = home.run("run", "what", "is", "in", "notes.txt?")
    assert done.returncode == 0, done.stderr
    assert done.stdout == "Let me look.\n\nThe notes say alpha and beta.\n"
    assert "✓ read notes.txt" in done.stderr and "00001| alpha" in done.stderr
    assert "\x1b" not in done.stdout + done.stderr  # no escape codes in a pipe
    sessions, events, messages = await session_state(home.db)
    assert len(sessions) == 1 and sessions[0].location.directory == str(home.work.resolve())
    assert types(events)[-1] in ("session.execution.succeeded", "session.renamed")
    assert [m.type for m in messages] == ["user", "assistant", "assistant"]
    assert messages[0].text == "what is in notes.txt?"
    assert provider.requests[0].json["messages"][-1] == {"role": "user", "content": "what is in notes.txt?"}


async def test_json_format_prints_one_session_event_per_line(home, provider):
    provider.enqueue(*read_then_answer("ok"))
    done = home.run("run", "--format", "json", "go")
    assert done.returncode == 0, done.stderr
    events = [json.loads(line) for line in done.stdout.splitlines()]
    kinds = [e["type"] for e in events]
    assert all(e["data"]["sessionID"] == events[0]["data"]["sessionID"] for e in events)
    assert kinds[0] == "session.input.admitted" and kinds[-1] == "session.execution.succeeded"
    assert "session.text.delta" in kinds  # the live pieces too, for scripts that stream
    durable = [e for e in events if "durable" in e]
    assert [e["durable"]["seq"] for e in durable] == sorted(e["durable"]["seq"] for e in durable)
    assert kinds.index("session.tool.called") < kinds.index("session.tool.success")
    _, logged, _ = await session_state(home.db)
    # every durable event of the turn, in order, as the log has them (the background title lands any time)
    printed = [e["type"] for e in durable if e["type"] != "session.renamed"]
    assert printed == [t for t in types(logged) if t != "session.renamed"][:len(printed)]


async def test_failed_turn_exits_non_zero_with_the_typed_error(home, provider):
    provider.enqueue(fake.error(401, "Incorrect API key provided", type="invalid_request_error",
                                code="invalid_api_key"))
    done = home.run("run", "hi")
    assert done.returncode == 1
    assert "error: provider.auth: Incorrect API key provided" in done.stderr
    _, events, _ = await session_state(home.db)
    assert "session.execution.failed" in types(events)


async def test_continue_and_session_carry_on_the_same_session(home, provider):
    provider.enqueue(fake.completion(fake.text_deltas("first answer")))
    assert home.run("run", "first").returncode == 0
    provider.enqueue(fake.completion(fake.text_deltas("second answer")))
    done = home.run("run", "--continue", "second")
    assert done.returncode == 0, done.stderr
    sessions, _, messages = await session_state(home.db)
    assert len(sessions) == 1
    sent = provider.requests[-1].json["messages"]
    assert [m["content"] for m in sent if m["role"] in ("user", "assistant")] == ["first", "first answer", "second"]
    provider.enqueue(fake.completion(fake.text_deltas("third answer")))
    assert home.run("run", "--session", sessions[0].id, "third").stdout == "third answer\n"
    missing = home.run("run", "--session", "ses_doesnotexist", "x")
    assert missing.returncode == 1 and "error: SessionNotFoundError" in missing.stderr


async def test_model_agent_and_queue_flags(home, provider):
    provider.enqueue(fake.completion(fake.text_deltas("planned")))
    done = home.run("run", "--model", "loop/other-model", "--agent", "plan", "--queue", "make a plan")
    assert done.returncode == 0, done.stderr
    sent = provider.requests[0].json
    assert sent["model"] == "other-model" and "planning agent" in sent["messages"][0]["content"]
    sessions, events, _ = await session_state(home.db)
    assert sessions[0].agent == "plan" and sessions[0].model.id == "other-model"
    admitted = [e for e in events if e.type == "session.input.admitted"]
    assert admitted[0].data.input.delivery == "queue"
    bad = home.run("run", "--model", "no-slash", "x")
    assert bad.returncode == 1 and "provider/model" in bad.stderr


async def test_message_from_standard_input(home, provider):
    provider.enqueue(fake.completion(fake.text_deltas("piped in")))
    done = home.run("run", stdin="a question from a pipe\n")
    assert done.returncode == 0 and done.stdout == "piped in\n"
    assert provider.requests[0].json["messages"][-1]["content"] == "a question from a pipe"


async def test_no_model_configured_says_how_and_creates_nothing(tmp_path, provider):
    home = make_home(tmp_path)
    done = home.run("run", "hello")
    assert done.returncode == 1
    for hint in ("No model is configured", "OPENAI_API_KEY", "opencode.json", '"baseURL"', "_API_KEY"):
        assert hint in done.stderr, hint
    assert done.stderr.count("\n") == 1  # one message, no traceback
    assert not home.db.exists() or (await session_state_count(home.db)) == 0


async def session_state_count(db) -> int:
    from opencode_session.sdk import OpenCode

    async with OpenCode(db=db, env={}) as oc:
        return len((await oc.session.list()).items)


async def test_a_run_that_fails_before_any_step_leaves_no_session_behind(tmp_path):
    home = make_home(tmp_path)  # the attached server has no model: the execution fails before its first Step
    srv = start_server(tmp_path, env=home.env, workdir=home.work)
    try:
        done = home.run("run", "--attach", srv.url, "hello")
        listed = home.run("sessions", "--attach", srv.url, "--format", "json")
    finally:
        assert srv.stop() == 0, "".join(srv.stderr_lines)
    assert done.returncode == 1, done.stderr
    assert "error: provider.no-model: No model is configured" in done.stderr
    assert "removed: it holds nothing but the prompt" in done.stderr
    assert listed.returncode == 0 and listed.stdout == "", listed.stdout  # no empty session left behind


async def test_bad_config_names_file_and_line(tmp_path, provider):
    home = make_home(tmp_path)
    project = home.work / "opencode.json"
    project.write_text('{\n  "modle": "loop/fake-model",\n  "model": 42\n}\n')
    done = home.run("run", "hello")
    assert done.returncode == 1
    assert f"warning: {project}:2: unknown key 'modle' (did you mean 'model'?)" in done.stderr
    assert f"Invalid config {project}:3: model: Input should be a valid string" in done.stderr
    assert "Traceback" not in done.stderr


async def test_run_names_each_config_key_it_does_not_act_on_once(tmp_path, provider):
    home = make_home(tmp_path)
    global_file, project = configure_ignored_keys(home, provider)
    provider.enqueue(fake.completion(fake.text_deltas("hello")))
    done = home.run("run", "hi")
    assert done.returncode == 0, done.stderr
    assert done.stdout == "hello\n"
    assert_ignored_keys_named_once(done.stderr, global_file, project)


async def test_unreachable_provider_names_its_url_and_ctrl_c_ends_the_wait(tmp_path, provider):
    home = make_home(tmp_path)
    home.configure(None, model="gone/m", provider={"gone": {"npm": "@ai-sdk/openai-compatible",
                                                             "options": {"baseURL": "http://127.0.0.1:9/v1"},
                                                             "models": {"m": {}}}})
    proc = subprocess.Popen([OCS, "run", "--format", "json", "hello"], cwd=home.work, env=home.env,
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        for line in proc.stdout:  # the first failed attempt is followed by a scheduled retry
            event = json.loads(line)
            if event["type"] == "session.retry.scheduled":
                break
        error = event["data"]["error"]
        assert error["type"] == "provider.transport"
        assert error["message"].startswith("Could not reach the provider at http://127.0.0.1:9/v1 (Connect")
        proc.send_signal(signal.SIGINT)  # the user gives up waiting for the retries
        assert proc.wait(timeout=TIMEOUT) == 130
    finally:
        proc.kill()
        proc.communicate()
    _, events, _ = await session_state(home.db)
    assert types(events)[-1] == "session.execution.interrupted"


async def test_attach_runs_through_a_running_server(tmp_path, provider):
    home = make_home(tmp_path)
    home.configure(provider)
    elsewhere = tmp_path / "server-dir"
    srv = start_server(tmp_path, env=home.env, workdir=elsewhere)
    try:
        provider.enqueue(*read_then_answer("attached answer"))
        done = home.run("run", "--attach", srv.url, "read the notes")
        assert done.returncode == 0, done.stderr
        assert done.stdout.endswith("attached answer\n") and "✓ read notes.txt" in done.stderr
        listed = home.run("sessions", "--attach", srv.url)
        assert str(home.work.resolve()) in listed.stdout  # the session works where `ocs run` was started
        gone = home.run("run", "--attach", "http://127.0.0.1:9", "x")
        assert gone.returncode == 1 and "cannot reach ocs serve at http://127.0.0.1:9" in gone.stderr
    finally:
        assert srv.stop() == 0, "".join(srv.stderr_lines)


def test_opencode_session_is_the_same_command(tmp_path):
    home = make_home(tmp_path)
    alias = subprocess.run([str(Path(OCS).with_name("opencode-session")), "openapi"], capture_output=True,
                           text=True, timeout=TIMEOUT, env=home.env)
    assert alias.returncode == 0 and alias.stdout == home.run("openapi").stdout


def _greet_command(home) -> None:
    folder = home.work / ".opencode" / "command"
    folder.mkdir(parents=True)
    (folder / "greet.md").write_text("---\ndescription: Greet someone\n---\nSay hello to $1 from $2.\n")


async def test_run_command_expands_a_custom_command_with_its_arguments(home, provider):
    _greet_command(home)
    provider.enqueue(fake.completion(fake.text_deltas("Hello Ada!")))
    done = home.run("run", "--command", "greet", "Ada", "the whole team")
    assert done.returncode == 0, done.stderr
    assert done.stdout == "Hello Ada!\n"
    sent = provider.requests[0].json["messages"][-1]
    assert sent == {"role": "user", "content": "Say hello to Ada from the whole team."}
    missing = home.run("run", "--command", "nope", "x")
    assert missing.returncode == 1
    assert "no command named 'nope' (commands: /greet)" in missing.stderr
