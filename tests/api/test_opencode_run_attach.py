"""OpenCode's own CLI against `ocs serve`: `opencode run --attach URL "…"` (OpenCode 1.18.33, which speaks the V1
API) creates or continues a session, streams the answer to stdout, shows tool calls, auto-rejects what asks for
permission, and with `--format json` prints events that parse. The CLI is installed from npm into a cache directory
when node and npm are at hand."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import httpx2
import pytest

from tests.support import fake_openai as fake
from tests.support.server import ServerProcess, start_configured

CLI_VERSION = "1.18.33"  # the OpenCode release whose V1 API the compatibility layer follows

pytestmark = pytest.mark.timeout(300)  # the first run installs the CLI


def _cache_root() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "ocs-tests"


def _skip(reason: str) -> None:
    print(reason)
    pytest.skip(reason)


def _runnable(binary: Path) -> bool:
    try:
        return subprocess.run([str(binary), "--version"], capture_output=True, text=True,
                              timeout=60).stdout.strip() == CLI_VERSION
    except (OSError, subprocess.TimeoutExpired):
        return False


@pytest.fixture(scope="module")
def opencode() -> Path:
    """The `opencode` binary of `opencode-ai@1.18.33` (installed once per version into the cache)."""
    npm = shutil.which("npm")
    if npm is None or shutil.which("node") is None:
        _skip(f"node and npm are needed to install OpenCode's CLI (node: {shutil.which('node')}, npm: {npm})")
    target = _cache_root() / f"opencode-cli-{CLI_VERSION}"
    if not (target / "node_modules" / "opencode-ai" / "package.json").exists():
        target.parent.mkdir(parents=True, exist_ok=True)
        scratch = Path(tempfile.mkdtemp(prefix="opencode-cli-", dir=target.parent))
        # the platform's binary comes as an optional dependency; the wrapper's install script is not needed
        done = subprocess.run([str(npm), "install", "--no-audit", "--no-fund", "--ignore-scripts", "--prefix",
                               str(scratch), f"opencode-ai@{CLI_VERSION}"], capture_output=True, text=True,
                              timeout=240)
        if done.returncode != 0:
            shutil.rmtree(scratch, ignore_errors=True)
            _skip(f"npm could not install opencode-ai@{CLI_VERSION}: {done.stderr.strip()[-400:]}")
        try:
            scratch.rename(target)  # whole or not at all: a half-finished install is never taken for one
        except OSError:  # another run installed it meanwhile
            shutil.rmtree(scratch, ignore_errors=True)
    for binary in sorted((target / "node_modules").glob("opencode-*/bin/opencode")):
        if _runnable(binary):
            return binary
    _skip(f"no binary of opencode-ai@{CLI_VERSION} runs on this machine")
    raise AssertionError("unreachable")


def _serve(root: Path, provider: fake.FakeOpenAI, **extra) -> tuple[ServerProcess, Path]:
    return start_configured(root, provider.serve_config({"fake-model": {}}, model="loop/fake-model", **extra))


@pytest.fixture(scope="module")
def served(tmp_path_factory, loop_provider):
    proc, work = _serve(tmp_path_factory.mktemp("ocs-v1"), loop_provider)
    yield proc, work
    assert proc.stop() == 0, "".join(proc.stderr_lines)


@pytest.fixture
def provider(loop_provider):
    loop_provider.requests.clear()
    yield loop_provider
    assert loop_provider.pending == 0, "a scripted provider answer was never requested"


def _client_env(root: Path) -> dict[str, str]:
    """A scratch HOME for the CLI: nothing of the machine's own OpenCode set-up reaches it."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENCODE_", "OPENAI_", "ANTHROPIC_"))}
    for name in ("home", "config", "data", "cache", "state"):
        (root / name).mkdir(parents=True, exist_ok=True)
    env.update(HOME=str(root / "home"), XDG_CONFIG_HOME=str(root / "config"), XDG_DATA_HOME=str(root / "data"),
               XDG_CACHE_HOME=str(root / "cache"), XDG_STATE_HOME=str(root / "state"))
    return env


def run_attach(opencode: Path, url: str, cwd: Path, message: str, *args: str,
               env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    scratch = Path(tempfile.mkdtemp(prefix="opencode-client-"))
    try:
        return subprocess.run([str(opencode), "run", "--attach", url, *args, message], cwd=cwd,
                              env=env or _client_env(scratch), capture_output=True, text=True, timeout=120,
                              stdin=subprocess.DEVNULL)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _sessions(url: str) -> list[dict]:
    return httpx2.get(f"{url}/api/session", timeout=10).json()["data"]


def _said(request: fake.RecordedRequest) -> str:
    return json.dumps(request.json["messages"])


def test_a_new_session_is_created_and_its_answer_printed(opencode, served, provider):
    proc, work = served
    before = {s["id"] for s in _sessions(proc.url)}
    provider.enqueue(fake.completion(fake.text_deltas("Hello ", "from ocs")))
    done = run_attach(opencode, proc.url, work, "say hello")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "Hello from ocs"
    assert "build · fake-model" in done.stderr
    created = [s for s in _sessions(proc.url) if s["id"] not in before]
    assert len(created) == 1 and created[0]["location"]["directory"] == str(work)
    # the CLI's own rules: nothing that would wait on a person (the question tool is not offered)
    assert {"action": "question", "resource": "*", "effect": "deny"} in created[0]["permissions"]
    assert "question" not in json.dumps(provider.requests[-1].json.get("tools", []))
    assert "say hello" in _said(provider.requests[-1])


def test_dir_agent_and_model_choose_the_sessions_location_agent_and_model(opencode, served, provider, tmp_path):
    proc, work = served
    project = tmp_path / "project"
    project.mkdir()
    before = {s["id"] for s in _sessions(proc.url)}
    provider.enqueue(fake.completion(fake.text_deltas("planned")))
    done = run_attach(opencode, proc.url, work, "make a plan", "--dir", str(project), "--agent", "plan",
                      "--model", "loop/fake-model")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "planned" and "plan · fake-model" in done.stderr
    (created,) = [s for s in _sessions(proc.url) if s["id"] not in before]
    assert created["location"]["directory"] == str(project)
    assert created["agent"] == "plan" and created["model"]["id"] == "fake-model"
    provider.enqueue(fake.completion(fake.text_deltas("built")))
    unknown = run_attach(opencode, proc.url, work, "hello", "--agent", "no-such-agent")
    assert 'agent "no-such-agent" not found' in unknown.stderr  # the CLI falls back to the default agent
    assert unknown.returncode == 0 and unknown.stdout.strip() == "built"


def test_format_json_prints_one_parsable_event_per_line(opencode, served, provider):
    proc, work = served
    provider.enqueue(fake.completion(fake.text_deltas("json ", "answer")))
    done = run_attach(opencode, proc.url, work, "answer in json", "--format", "json")
    assert done.returncode == 0, done.stderr
    events = [json.loads(line) for line in done.stdout.splitlines() if line.strip()]
    assert [e["type"] for e in events] == ["step_start", "text", "step_finish"]
    assert len({e["sessionID"] for e in events}) == 1
    text = events[1]["part"]
    assert text["text"] == "json answer" and text["time"]["end"] >= text["time"]["start"]
    assert events[2]["part"]["reason"] == "stop"


def test_continue_and_session_prompt_the_same_session(opencode, tmp_path, loop_provider, provider):
    proc, work = _serve(tmp_path, loop_provider)  # its own server: --continue takes the newest session
    try:
        provider.enqueue(fake.completion(fake.text_deltas("first answer")),
                         fake.completion(fake.text_deltas("second answer")),
                         fake.completion(fake.text_deltas("third answer")))
        assert run_attach(opencode, proc.url, work, "first question").stdout.strip() == "first answer"
        (session,) = _sessions(proc.url)
        again = run_attach(opencode, proc.url, work, "second question", "--continue")
        assert again.returncode == 0, again.stderr
        assert again.stdout.strip() == "second answer"  # the earlier answer is not printed again
        assert "first answer" in _said(provider.requests[-1])  # the model saw the session's history
        named = run_attach(opencode, proc.url, work, "third question", "--session", session["id"])
        assert named.returncode == 0 and named.stdout.strip() == "third answer"
        assert "second answer" in _said(provider.requests[-1])
        assert [s["id"] for s in _sessions(proc.url)] == [session["id"]]
        provider.enqueue(fake.completion(fake.text_deltas("forked answer")))
        forked = run_attach(opencode, proc.url, work, "fourth question", "--session", session["id"], "--fork")
        assert forked.returncode == 0 and forked.stdout.strip() == "forked answer", forked.stderr
        assert "third answer" in _said(provider.requests[-1])  # the fork carries the history
        assert len(_sessions(proc.url)) == 2
        assert "forked answer" not in json.dumps(httpx2.get(f"{proc.url}/session/{session['id']}/message",
                                                            timeout=10).json())
        missing = run_attach(opencode, proc.url, work, "anyone?", "--session", "ses_nosuchsession")
        assert missing.returncode == 1 and "Session not found" in missing.stderr
    finally:
        assert proc.stop() == 0, "".join(proc.stderr_lines)


def test_a_tool_call_is_shown_with_its_output(opencode, served, provider):
    proc, work = served
    call = {"command": "echo tool-said-hi", "description": "Say hi"}
    provider.enqueue(fake.completion(fake.tool_call_deltas(0, "call_1", "bash", json.dumps(call)),
                                     finish_reason="tool_calls"),
                     fake.completion(fake.text_deltas("The tool ran.")))
    done = run_attach(opencode, proc.url, work, "run the tool")
    assert done.returncode == 0, done.stderr
    assert "echo tool-said-hi" in done.stderr and "tool-said-hi\n" in done.stderr
    assert done.stdout.strip() == "The tool ran."
    json_run = None
    provider.enqueue(fake.completion(fake.tool_call_deltas(0, "call_2", "bash", json.dumps(call)),
                                     finish_reason="tool_calls"),
                     fake.completion(fake.text_deltas("Again.")))
    json_run = run_attach(opencode, proc.url, work, "run it again", "--format", "json")
    tools = [e["part"] for e in map(json.loads, json_run.stdout.splitlines()) if e["type"] == "tool_use"]
    assert len(tools) == 1 and tools[0]["tool"] == "bash" and tools[0]["state"]["status"] == "completed"
    assert tools[0]["state"]["input"]["command"] == "echo tool-said-hi"
    assert "tool-said-hi" in tools[0]["state"]["output"]


def test_a_permission_request_is_auto_rejected_unless_skipped(opencode, tmp_path, loop_provider, provider):
    proc, work = _serve(tmp_path, loop_provider, permission={"bash": "ask"})
    try:
        call = {"command": "touch made-by-tool.txt", "description": "Make a file"}
        provider.enqueue(fake.completion(fake.tool_call_deltas(0, "call_1", "bash", json.dumps(call)),
                                         finish_reason="tool_calls"))
        done = run_attach(opencode, proc.url, work, "make the file")
        assert done.returncode == 0, done.stderr
        assert "permission requested: bash (touch made-by-tool.txt); auto-rejecting" in done.stderr
        assert not (work / "made-by-tool.txt").exists()
        assert httpx2.get(f"{proc.url}/permission", timeout=10).json() == []  # nothing left waiting
        provider.enqueue(fake.completion(fake.tool_call_deltas(0, "call_2", "bash", json.dumps(call)),
                                         finish_reason="tool_calls"),
                         fake.completion(fake.text_deltas("Made it.")))
        allowed = run_attach(opencode, proc.url, work, "make the file", "--dangerously-skip-permissions")
        assert allowed.returncode == 0, allowed.stderr
        assert (work / "made-by-tool.txt").exists() and allowed.stdout.strip() == "Made it."
    finally:
        assert proc.stop() == 0, "".join(proc.stderr_lines)


def test_a_failed_turn_is_reported(opencode, served, provider):
    proc, work = served
    provider.enqueue(fake.error(400, "the model refuses this request", type="invalid_request_error"))
    done = run_attach(opencode, proc.url, work, "fail please")
    assert "the model refuses this request" in done.stderr
    assert done.stdout.strip() == ""


# --- the V1 routes over plain HTTP (no node needed) -----------------------------------------------


@pytest.fixture
def http(served):
    proc, _work = served
    with httpx2.Client(base_url=proc.url, timeout=10) as client:
        yield client


def test_v1_session_shapes(http, served):
    _proc, work = served
    created = http.post("/session", json={"title": "From V1"}, headers={"x-opencode-directory": str(work)})
    assert created.status_code == 200
    info = created.json()
    assert info["id"].startswith("ses_") and info["title"] == "From V1" and info["directory"] == str(work)
    assert {"slug", "projectID", "version", "time"} <= info.keys()
    assert http.get(f"/session/{info['id']}").json()["id"] == info["id"]
    assert info["id"] in [s["id"] for s in http.get("/session").json()]
    assert http.get(f"/session/{info['id']}/message").json() == []
    assert http.get("/session/status").json() == {}  # nothing runs
    assert http.get("/global/health").json()["healthy"] is True
    assert http.get("/path", params={"directory": str(work)}).json()["directory"] == str(work)
    assert http.get("/config").json()["model"] == "loop/fake-model"
    assert "build" in [a["name"] for a in http.get("/agent").json()]
    providers = http.get("/config/providers").json()
    assert providers["default"] == {"loop": "fake-model"}
    (loop,) = providers["providers"]
    assert loop["id"] == "loop" and loop["options"] == {} and list(loop["models"]) == ["fake-model"]
    assert http.get("/provider").json()["connected"] == ["loop"]
    renamed = http.patch(f"/session/{info['id']}", json={"title": "Renamed"})
    assert renamed.status_code == 200 and renamed.json()["title"] == "Renamed"
    assert http.delete(f"/session/{info['id']}").json() is True
    assert http.get(f"/session/{info['id']}").status_code == 404


def test_v1_refusals_are_typed(http):
    missing = http.get("/session/ses_nosuchsession")
    assert missing.status_code == 404 and missing.json()["_tag"] == "SessionNotFoundError"
    assert http.post("/session/ses_nosuchsession/message", json={"parts": [{"type": "text", "text": "x"}]}
                     ).status_code == 404
    sid = http.post("/session", json={}).json()["id"]
    no_parts = http.post(f"/session/{sid}/message", json={})
    assert no_parts.status_code == 400 and no_parts.json()["field"] == "parts"
    bad_reply = http.post("/permission/per_nosuch/reply", json={"reply": "maybe"})
    assert bad_reply.status_code == 400 and bad_reply.json()["field"] == "reply"
    unknown = http.post("/permission/per_nosuch/reply", json={"reply": "once"})
    assert unknown.status_code == 404 and unknown.json()["_tag"] == "PermissionNotFoundError"
    bad_rules = http.post("/session", json={"permission": [{"permission": "bash", "action": "maybe"}]})
    assert bad_rules.status_code == 400 and bad_rules.json()["field"] == "permission.0.pattern"
    elsewhere = http.post("/session", json={}, params={"directory": "/no/such/directory"})
    assert elsewhere.status_code == 400


def test_v1_routes_keep_the_password(tmp_path, loop_provider):
    root = tmp_path
    proc, _work = start_configured(root, loop_provider.serve_config({"fake-model": {}}),
                                   OPENCODE_SERVER_PASSWORD="s3cret")
    try:
        assert httpx2.post(f"{proc.url}/session", json={}, timeout=10).status_code == 401
        assert httpx2.get(f"{proc.url}/event", timeout=10).status_code == 401
        assert httpx2.post(f"{proc.url}/session", json={}, auth=("opencode", "s3cret"), timeout=10).status_code == 200
    finally:
        assert proc.stop() == 0, "".join(proc.stderr_lines)


def _v1_events(lines):
    for line in lines:
        if line.startswith("data: "):
            yield json.loads(line.removeprefix("data: "))


@contextlib.contextmanager
def _released(answer: fake.StreamScript):
    try:
        yield
    finally:
        answer.release.set()  # a held answer never outlives the test


def test_v1_bus_streams_a_turn_as_opencode_does(served, provider):
    proc, _work = served
    answer = fake.completion(fake.text_deltas("Hel", "lo ", "the", "re"), hold_after=3)
    provider.enqueue(answer)
    with (httpx2.Client(base_url=proc.url, timeout=30) as http, http.stream("GET", "/event") as stream,
          _released(answer)):
        events = _v1_events(stream.iter_lines())
        assert next(events)["type"] == "server.connected"
        sid = http.post("/session", json={}).json()["id"]
        assert http.post(f"/session/{sid}/prompt_async", json={"parts": [{"type": "text", "text": "hi"}]}
                         ).status_code == 204
        seen: list[dict] = []
        for event in events:
            if event["properties"].get("sessionID") != sid:
                continue
            seen.append(event)
            if event["type"] == "message.part.delta":
                answer.release.set()  # some text travelled while the model was still writing
            if event["type"] == "session.idle":
                break
    kinds = [e["type"] for e in seen]
    assert kinds[0] == "session.created" and seen[0]["properties"]["info"]["id"] == sid
    assert kinds.index("session.status") < kinds.index("message.part.delta") < kinds.index("session.idle")
    statuses = [e["properties"]["status"]["type"] for e in seen if e["type"] == "session.status"]
    assert statuses == ["busy", "idle"]
    roles = [e["properties"]["info"]["role"] for e in seen if e["type"] == "message.updated"]
    assert roles[0] == "user" and "assistant" in roles
    text_parts = [e["properties"]["part"] for e in seen
                  if e["type"] == "message.part.updated" and e["properties"]["part"]["type"] == "text"]
    deltas = "".join(e["properties"]["delta"] for e in seen if e["type"] == "message.part.delta")
    assert text_parts[-1]["text"] == "Hello there" and "end" in text_parts[-1]["time"]
    assert deltas and "Hello there".startswith(deltas)
    assert kinds.index("session.idle") == len(kinds) - 1


def test_the_blocking_prompt_answers_the_assistant_message(http, provider):
    provider.enqueue(fake.completion(fake.text_deltas("blocking ", "answer")))
    sid = http.post("/session", json={}).json()["id"]
    answered = http.post(f"/session/{sid}/message", json={"parts": [{"type": "text", "text": "hi"}]}, timeout=60)
    assert answered.status_code == 200
    message = answered.json()
    assert message["info"]["role"] == "assistant" and message["info"]["finish"] == "stop"
    assert message["info"]["time"]["completed"] >= message["info"]["time"]["created"]
    assert [p["type"] for p in message["parts"]] == ["step-start", "text", "step-finish"]
    assert message["parts"][1]["text"] == "blocking answer"
    listed = http.get(f"/session/{sid}/message").json()
    assert [m["info"]["role"] for m in listed] == ["user", "assistant"]
    assert listed[0]["parts"][0]["text"] == "hi" and message["info"]["parentID"] == listed[0]["info"]["id"]
    assert listed[1] == message
