"""The reading commands as a user runs them: `ocs sessions`, `ocs show`, `ocs log` (also following), `ocs models`,
`ocs openapi`."""

from __future__ import annotations

import hashlib
import json
import signal
import subprocess

import anyio
import httpx2
import pytest

from opencode_session.client import OpenCodeClient, SessionExecutionFailedError
from tests.support import fake_openai as fake
from tests.support.cli import TIMEOUT, make_home
from tests.support.server import OCS, start_server

# each test starts `ocs` processes (and some a server): slow on a busy machine
pytestmark = [pytest.mark.anyio, pytest.mark.timeout(240)]


@pytest.fixture(scope="module")
def two_sessions(tmp_path_factory, loop_provider):
    """An older session that read a file, then a newer one whose turn failed (shared by this module's tests)."""
    home = make_home(tmp_path_factory.mktemp("inspect"))
    home.configure(loop_provider)
    loop_provider.title = "Reading the notes"
    loop_provider.enqueue(fake.completion(fake.tool_call_deltas(0, "c1", "read", '{"path": "notes.txt"}'),
                                          finish_reason="tool_calls", usage=fake.usage_block(100, 20)),
                          fake.completion(fake.text_deltas("They say **alpha**."), usage=fake.usage_block(150, 5)))
    assert home.run("run", "what do the notes say?").returncode == 0
    loop_provider.title = "Broken"
    loop_provider.enqueue(fake.error(400, "Bad things", type="invalid_request_error"))
    assert home.run("run", "second").returncode == 1
    loop_provider.title = "Scripted title"
    return home


def test_sessions_lists_newest_first_with_title_directory_cost_and_tokens(two_sessions):
    done = two_sessions.run("sessions")
    assert done.returncode == 0, done.stderr
    header, *rows = [line.split("\t") for line in done.stdout.splitlines()]
    assert header == ["id", "title", "directory", "updated", "cost", "tokens"]
    assert [r[1] for r in rows] == ["Broken", "Reading the notes"]
    assert all(r[2] == str(two_sessions.work.resolve()) for r in rows)
    assert rows[1][5] == "275" and rows[1][4].startswith("$")
    as_json = [json.loads(line) for line in two_sessions.run("sessions", "--format", "json").stdout.splitlines()]
    assert [s["id"] for s in as_json] == [r[0] for r in rows]


def test_show_prints_the_transcript(two_sessions):
    older = two_sessions.run("sessions").stdout.splitlines()[2].split("\t")[0]
    done = two_sessions.run("show", older)
    assert done.returncode == 0, done.stderr
    # a pipe gets the whole story on stdout, in order, the answer as written
    assert done.stdout == ("> what do the notes say?\n✓ read notes.txt\n  00001| alpha\n  00002| beta\n  \n"
                           "  (End of file: 2 lines)\nThey say **alpha**.\n")
    assert done.stderr == ""
    missing = two_sessions.run("show", "ses_nope")
    assert missing.returncode == 1 and "SessionNotFoundError" in missing.stderr


def test_show_context_prints_what_a_step_sent_and_what_changed(two_sessions):
    older = two_sessions.run("sessions").stdout.splitlines()[2].split("\t")[0]
    messages = [json.loads(line) for line in two_sessions.run("show", older, "--format", "json").stdout.splitlines()]
    first, second = [m["id"] for m in messages if m["type"] == "assistant"]
    # the session may be left out: it is found among this directory's sessions
    done = two_sessions.run("show", "--context", second)
    assert done.returncode == 0, done.stderr
    text = done.stdout
    assert text.startswith(f"Step {second} of {older}: agent build, model loop/fake-model, protocol chat\n")
    assert f"previous Step: {first}\n" in text
    # the tool call and its result entered the history since the first Step; the tools and baseline did not change
    assert f"+ {first}  assistant" in text and "== tools (" in text and "; +0 -0 ~0)" in text.split("== tools")[1]
    assert "== instructions (1; +0 -0 ~0)\n  baseline\n" in text
    assert "\nrequest body sent: " in text and " bytes, sha256 " in text
    as_json = json.loads(two_sessions.run("show", older, "--context", second, "--format", "json").stdout)
    assert as_json["messageID"] == second and as_json["previousMessageID"] == first
    body = as_json["request"]["body"]
    assert hashlib.sha256(body.encode()).hexdigest() == as_json["request"]["sha256"]
    assert json.loads(body)["messages"][-1]["role"] == "tool"  # the read's result, as sent
    missing = two_sessions.run("show", "--context", "msg_nope")
    assert missing.returncode == 1 and "MessageNotFoundError" in missing.stderr
    user = next(m["id"] for m in messages if m["type"] == "user")
    refused = two_sessions.run("show", older, "--context", user)
    assert refused.returncode == 1 and "InvalidRequestError" in refused.stderr


async def test_show_prints_why_an_execution_failed_before_its_first_step(tmp_path):
    home = make_home(tmp_path)  # no model configured: the execution fails before any Step
    srv = start_server(tmp_path, env=home.env, workdir=home.work, db=home.db, args=["--mkdir"])
    try:
        async with OpenCodeClient(srv.url) as client:
            sid = (await client.session.create()).id
            await client.session.prompt(sid, prompt={"text": "hello"})
            with anyio.fail_after(TIMEOUT), pytest.raises(SessionExecutionFailedError) as failed:
                await client.session.wait(sid, outcome=True)
    finally:
        assert srv.stop() == 0, "".join(srv.stderr_lines)
    assert failed.value.type == "provider.no-model"
    done = home.run("show", sid)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "> hello" and lines[1].startswith("✗ execution failed: provider.no-model: No model"), lines


def _index_in_order(lines: list[str], *expected: str) -> None:
    """Each expected line appears, after the one before it."""
    at = -1
    for text in expected:
        found = [i for i, line in enumerate(lines) if line == text and i > at]
        assert found, f"{text!r} not after line {at} in {lines}"
        at = found[0]


async def test_show_is_the_whole_transcript_in_order_and_json_is_the_projected_messages(tmp_path, provider):
    home = make_home(tmp_path)
    home.configure(provider)
    plan = home.work / "plan.md"
    plan.write_text("step one\n")
    provider.enqueue(fake.completion(fake.tool_call_deltas(0, "c1", "read", '{"path": "notes.txt"}'),
                                     finish_reason="tool_calls"),
                     fake.completion(fake.text_deltas("They say alpha.")),
                     fake.completion(fake.tool_call_deltas(0, "c2", "read", '{"path": "missing.txt"}'),
                                     finish_reason="tool_calls"),
                     fake.completion(fake.text_deltas("Done.")))
    srv = start_server(tmp_path, env=home.env, db=home.db, args=["--mkdir"])
    try:
        async with OpenCodeClient(srv.url) as client:
            sid = (await client.session.create()).id
            for prompt in ({"text": "what do the notes say?"},
                           {"text": "and the plan?", "files": [{"uri": plan.as_uri(), "name": "plan.md"}],
                            "agents": [{"name": "plan"}]}):
                await client.session.prompt(sid, prompt=prompt)
                with anyio.fail_after(TIMEOUT):
                    await client.session.wait(sid)
            await client.session.compact(sid)
            with anyio.fail_after(TIMEOUT):
                await client.session.wait(sid)
                await client.session.shell(sid, command="echo from the shell")  # the user's own command
        raw: list = []  # what GET /api/session/{id}/message answers, page after page
        async with httpx2.AsyncClient(base_url=srv.url) as http:
            page = (await http.get(f"/api/session/{sid}/message", params={"order": "asc", "limit": 2})).json()
            while page["data"]:
                raw += page["data"]
                page = (await http.get(f"/api/session/{sid}/message", params={"cursor": page["cursor"]["next"]})).json()
        attached = home.run("show", sid, "--attach", srv.url)
        attached_json = home.run("show", sid, "--format", "json", "--attach", srv.url)
    finally:
        assert srv.stop() == 0, "".join(srv.stderr_lines)
    local, local_json = home.run("show", sid), home.run("show", sid, "--format", "json")
    for done in (attached, attached_json, local, local_json):
        assert done.returncode == 0, done.stderr
    assert local.stdout == attached.stdout
    _index_in_order(local.stdout.splitlines(), "> what do the notes say?", "✓ read notes.txt", "  00001| alpha",
                    "They say alpha.", "> and the plan? [file plan.md] [agent plan]", "✗ read missing.txt", "Done.",
                    "[context compacted (manual)]", "> !echo from the shell", "  from the shell")
    assert len(raw) > 4 and [json.loads(line) for line in local_json.stdout.splitlines()] == raw
    assert local_json.stdout == attached_json.stdout


def test_log_prints_durable_events_after_a_sequence(two_sessions):
    newer = two_sessions.run("sessions").stdout.splitlines()[1].split("\t")[0]
    lines = two_sessions.run("log", newer).stdout.splitlines()
    assert all(line.split()[1].startswith("session.") for line in lines)
    failed = [line for line in lines if "session.execution.failed" in line]
    assert failed and "provider.invalid-request: Bad things" in failed[0]
    seqs = [int(line.split()[0]) for line in lines]
    assert seqs == sorted(seqs)
    later = two_sessions.run("log", newer, "--after", str(seqs[2]), "--format", "json").stdout.splitlines()
    assert [json.loads(line)["durable"]["seq"] for line in later] == seqs[3:]


def test_log_follow_prints_new_events_until_ctrl_c(tmp_path, home, provider):
    srv = start_server(tmp_path, env=home.env)
    try:
        provider.enqueue(fake.completion(fake.text_deltas("one")), fake.completion(fake.text_deltas("two")))
        assert home.run("run", "--attach", srv.url, "first").returncode == 0
        sid = home.run("sessions", "--attach", srv.url).stdout.splitlines()[1].split("\t")[0]
        follower = subprocess.Popen([OCS, "log", sid, "--follow", "--attach", srv.url], cwd=home.work,
                                    env=home.env, text=True, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE)
        try:
            assert follower.stdout is not None
            while "session.execution.succeeded" not in follower.stdout.readline():
                pass  # the replay of the first turn
            assert home.run("run", "--attach", srv.url, "--session", sid, "second").returncode == 0
            while "session.input.admitted" not in (line := follower.stdout.readline()):
                pass
            assert "steer: second" in line  # printed live, as another client prompted
            follower.send_signal(signal.SIGINT)
            assert follower.wait(timeout=TIMEOUT) == 130
            assert "Traceback" not in follower.communicate()[1]
        finally:
            follower.kill()
    finally:
        assert srv.stop() == 0, "".join(srv.stderr_lines)


def test_models_lists_the_catalog_and_which_providers_have_keys(tmp_path):
    home = make_home(tmp_path, LOCAL_API_KEY="k")
    home.configure(None, model="local/qwen", small_model="local/qwen", provider={
        "local": {"npm": "@ai-sdk/openai-compatible", "options": {"baseURL": "http://127.0.0.1:1/v1"},
                  "models": {"qwen": {"limit": {"context": 32768, "output": 8192}}}}})
    done = home.run("models")
    assert done.returncode == 0, done.stderr
    rows = [line.split("\t") for line in done.stdout.splitlines() if "\t" in line]
    assert rows[0] == ["model", "context", "output", "key", "status", "default"]  # a header, then the rows
    assert ["local/qwen", "32768", "8192", "LOCAL_API_KEY", "ready", "default, small"] in rows
    openai = [r for r in rows if r[0] == "openai/gpt-4.1"][0]  # the built-in provider lists its own models
    assert openai[3] == "none found" and "OPENAI_API_KEY" in openai[4] and openai[5] == ""
    # how to configure a model is said once, above the table, not on every row that is not ready
    assert done.stdout.count("To choose a model") == 1 and done.stdout.startswith("To choose a model")
    assert all("To choose a model" not in r[4] and len(r[4]) < 200 for r in rows)
    assert "default model: local/qwen" in done.stdout


def test_openapi_prints_the_document(tmp_path):
    done = make_home(tmp_path).run("openapi")
    document = json.loads(done.stdout)
    assert document["openapi"].startswith("3.1") and "/api/session/{sessionID}/log" in document["paths"]
