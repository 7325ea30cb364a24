"""OpenCode's V1 bus and the V1 routes its web app reads, over real HTTP, against what OpenCode 1.18.33's own
`opencode serve` answered (recorded below): `/event` tells one directory's events, `/global/event` every directory's
in an envelope, both open with `server.connected` and replay nothing, and quiet streams say `server.heartbeat`;
`/question` lists, answers and rejects what the question tool asks, with the V1 question events."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2
import pytest

from tests.support import fake_openai as fake
from tests.support.server import start_configured

# Recorded off OpenCode 1.18.33's `opencode serve` (scratch HOME, a loopback provider):
# the first frame of `GET /global/event`, and the envelope of a session's event on it
OPENCODE_GLOBAL_CONNECTED_KEYS = {"payload"}
OPENCODE_GLOBAL_ENVELOPE_KEYS = {"directory", "project", "payload"}
OPENCODE_EVENT_KEYS = {"id", "type", "properties"}
# `POST /question/que_x/reply` and `/reject` for a question that is not pending: 404 with this tag
OPENCODE_QUESTION_MISSING = "QuestionNotFoundError"

pytestmark = pytest.mark.timeout(90)


@pytest.fixture(scope="module")
def served(tmp_path_factory, loop_provider):
    root = tmp_path_factory.mktemp("ocs-v1-bus")
    proc, work = start_configured(root, loop_provider.serve_config({"fake-model": {}}, model="loop/fake-model"))
    (root / "other").mkdir()
    yield proc, work, root / "other"
    assert proc.stop() == 0, "".join(proc.stderr_lines)


@pytest.fixture
def provider(loop_provider):
    loop_provider.requests.clear()
    yield loop_provider
    loop_provider.release_held()
    assert loop_provider.pending == 0, "a scripted provider answer was never requested"


def _frames(lines: Iterator[str]) -> Iterator[dict[str, Any]]:
    for line in lines:
        if line.startswith("data: "):
            yield json.loads(line.removeprefix("data: "))


def _until(frames: Iterator[dict[str, Any]], kind: str, key=lambda f: f) -> list[dict[str, Any]]:
    seen = []
    for item in frames:
        seen.append(item)
        if key(item)["type"] == kind:
            return seen
    raise AssertionError(f"the stream ended before {kind}")


def _create(http: httpx2.Client, directory: Path) -> str:
    return http.post("/session", json={}, params={"directory": str(directory)}).json()["id"]


def test_event_tells_only_its_directorys_sessions_and_global_event_tells_all_in_an_envelope(served):
    proc, work, other = served
    with httpx2.Client(base_url=proc.url, timeout=30) as http:
        earlier = _create(http, work)  # made before the streams opened: not replayed
        with (http.stream("GET", "/event", params={"directory": str(other)}) as scoped,
              http.stream("GET", "/event") as default, http.stream("GET", "/global/event") as every):
            scoped_frames, default_frames = _frames(scoped.iter_lines()), _frames(default.iter_lines())
            global_frames = _frames(every.iter_lines())
            first = next(global_frames)
            assert first.keys() == OPENCODE_GLOBAL_CONNECTED_KEYS and first["payload"]["type"] == "server.connected"
            assert next(scoped_frames)["type"] == next(default_frames)["type"] == "server.connected"
            in_work = _create(http, work)
            in_other = _create(http, other)
            told = _until(global_frames, "session.created",
                          key=lambda f: {"type": f["payload"]["type"]
                                         if f["payload"]["properties"].get("sessionID") == in_other else ""})
            # the server's own directory (no `directory` given) sees the session made there, and only that
            default_seen = _until(default_frames, "session.created")
            scoped_seen = _until(scoped_frames, "session.created")
    assert default_seen[-1]["properties"]["sessionID"] == in_work
    assert scoped_seen[-1]["properties"]["sessionID"] == in_other
    assert all(f["properties"].get("sessionID") in (None, in_other) for f in scoped_seen)
    assert all(f.keys() == OPENCODE_EVENT_KEYS for f in scoped_seen + default_seen)
    created = {f["payload"]["properties"]["sessionID"]: f for f in told if f["payload"]["type"] == "session.created"}
    assert set(created) == {in_work, in_other}  # every directory's, and nothing from before it opened
    assert earlier not in json.dumps(told)
    for sid, directory in ((in_work, work), (in_other, other)):
        envelope = created[sid]
        assert envelope.keys() == OPENCODE_GLOBAL_ENVELOPE_KEYS and envelope["directory"] == str(directory)
        assert envelope["project"] == envelope["payload"]["properties"]["info"]["projectID"]
        assert envelope["payload"].keys() == OPENCODE_EVENT_KEYS


def test_a_quiet_stream_says_server_heartbeat(served):
    proc, _work, other = served
    with (httpx2.Client(base_url=proc.url, timeout=30) as http,
          http.stream("GET", "/event", params={"directory": str(other)}) as stream):
        frames = _frames(stream.iter_lines())
        assert next(frames)["type"] == "server.connected"
        beat = next(frames)  # nothing happens in that directory: the next frame is the heartbeat
    assert beat.keys() == OPENCODE_EVENT_KEYS and beat["type"] == "server.heartbeat" and beat["properties"] == {}


def _ask(provider: fake.FakeOpenAI, call_id: str, *, answered: bool = True) -> None:
    question = {"questions": [{"question": "Which colour?", "header": "Colour",
                               "options": [{"label": "Red", "description": "warm"},
                                           {"label": "Blue", "description": "cool"}]}]}
    provider.enqueue(fake.completion(fake.tool_call_deltas(0, call_id, "question", json.dumps(question)),
                                     finish_reason="tool_calls"))
    if answered:  # a rejected question ends the turn
        provider.enqueue(fake.completion(fake.text_deltas("Noted.")))


def test_a_question_is_listed_answered_and_told_on_the_bus(served, provider):
    proc, work, other = served
    _ask(provider, "call_q1")
    with (httpx2.Client(base_url=proc.url, timeout=30) as http, http.stream("GET", "/event") as stream):
        frames = _frames(stream.iter_lines())
        next(frames)
        sid = _create(http, work)
        assert http.post(f"/session/{sid}/prompt_async",
                         json={"parts": [{"type": "text", "text": "ask me"}]}).status_code == 204
        asked = _until(frames, "question.asked")[-1]["properties"]
        assert asked["id"].startswith("que") and asked["sessionID"] == sid
        assert asked["questions"][0]["header"] == "Colour" and asked["tool"]["callID"]
        listed = http.get("/question").json()
        assert [q["id"] for q in listed] == [asked["id"]] and listed[0]["questions"] == asked["questions"]
        assert http.get("/question", params={"directory": str(other)}).json() == []  # another directory's
        bad = http.post(f"/question/{asked['id']}/reply", json={"answers": "Red"})
        assert bad.status_code == 400 and bad.json()["field"] == "answers"
        assert http.post(f"/question/{asked['id']}/reply", json={"answers": [["Blue"]]}).json() is True
        replied = _until(frames, "question.replied")[-1]["properties"]
        _until(frames, "session.idle")
        assert http.get("/question").json() == []
    assert replied == {"sessionID": sid, "requestID": asked["id"], "answers": [["Blue"]]}
    assert "Blue" in json.dumps(provider.requests[-1].json["messages"])  # the model was given the answer


def test_a_rejected_question_is_told_and_an_unknown_one_is_not_found(served, provider):
    proc, work, _other = served
    _ask(provider, "call_q2", answered=False)
    with (httpx2.Client(base_url=proc.url, timeout=30) as http, http.stream("GET", "/event") as stream):
        frames = _frames(stream.iter_lines())
        next(frames)
        sid = _create(http, work)
        http.post(f"/session/{sid}/prompt_async", json={"parts": [{"type": "text", "text": "ask me"}]})
        asked = _until(frames, "question.asked")[-1]["properties"]
        assert http.post(f"/question/{asked['id']}/reject").json() is True
        rejected = _until(frames, "question.rejected")[-1]["properties"]
        _until(frames, "session.idle")
        for path in (f"/question/{asked['id']}/reject", "/question/que_nosuch/reply"):
            missing = http.post(path, json={"answers": [["Red"]]})
            assert missing.status_code == 404 and missing.json()["_tag"] == OPENCODE_QUESTION_MISSING
    assert rejected == {"sessionID": sid, "requestID": asked["id"]}


def test_the_routes_the_web_app_reads_answer_in_v1_shapes(served, provider):
    proc, work, other = served
    with httpx2.Client(base_url=proc.url, timeout=30) as http:
        config = http.get("/global/config").json()
        assert config["model"] == "loop/fake-model" and "test-key" not in json.dumps(config)  # no credentials
        (project,) = http.get("/project").json()
        current = http.get("/project/current", params={"directory": str(work)}).json()
        assert project["id"] == current["id"] and project["worktree"] == str(work)
        assert http.get("/vcs", params={"directory": str(work)}).json() == {}  # not a git repository
        assert http.get("/lsp", params={"directory": str(work)}).json() == []
        assert http.get("/mcp", params={"directory": str(work)}).json() == {}
        assert http.get("/experimental/resource", params={"directory": str(work)}).json() == {}
        commands = http.get("/command", params={"directory": str(work)}).json()
        assert all({"name", "template", "hints"} <= c.keys() for c in commands)
        assert http.get("/lsp", params={"directory": "/no/such/directory"}).status_code == 400
        sid = _create(http, work)
        assert http.get(f"/session/{sid}").json()["path"] == ""  # the project's root
        assert http.get(f"/session/{sid}/todo").json() == []
        todos = {"todos": [{"content": "write the test", "status": "in_progress", "priority": "high"}]}
        provider.enqueue(fake.completion(fake.tool_call_deltas(0, "call_t", "todowrite", json.dumps(todos)),
                                         finish_reason="tool_calls"),
                         fake.completion(fake.text_deltas("Planned.")))
        given = "msg_0000000000000000clientmade1"
        answered = http.post(f"/session/{sid}/message", timeout=60,
                             json={"messageID": given, "parts": [{"type": "text", "text": "plan it"}]})
        assert answered.status_code == 200 and answered.json()["info"]["parentID"] == given  # the client's ID
        assert http.get(f"/session/{sid}/todo").json() == todos["todos"]
