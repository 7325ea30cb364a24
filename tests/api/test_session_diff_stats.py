"""What a turn changed on disk (`session.diff`) and usage statistics (`experimental.session.stats`) over the API,
against a real `ocs serve` on loopback and the Embedded host, each on SQLite and PostgreSQL (the fixtures of
test_session_management): a scripted model drives real tools that write, edit and delete files in a git project."""

from __future__ import annotations

import datetime as dt
import json
import subprocess
import time
import zoneinfo
from typing import Any

import anyio
import pytest

from opencode_session.client import InvalidRequestError, MessageNotFoundError, SessionNotFoundError
from tests.api import test_session_management as management
from tests.support import fake_openai as fake

# the hosts this module runs on: test_session_management's (a served and an embedded one, on SQLite and PostgreSQL)
host, provider = management.host, management.provider
sqlite_server, postgres_server = management.sqlite_server, management.postgres_server
WAIT, raw, turn = management.WAIT, management.raw, management.turn

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(180)]


def call(index: int, call_id: str, name: str, arguments: dict[str, Any]) -> list[dict[str, Any]]:
    return fake.tool_call_deltas(index, call_id, name, json.dumps(arguments))


def _git(project) -> None:
    subprocess.run(["git", "init", "-q", str(project)], check=True)
    (project / "notes.txt").write_text("alpha\nbeta\n")
    (project / "old.txt").write_text("going away\n")


def _by_path(diffs) -> dict[str, tuple[str, int, int]]:
    return {d.path: (d.status, d.additions, d.deletions) for d in diffs}


async def test_diff_of_a_turn_and_of_a_range_from_the_steps_snapshots(host, provider, tmp_path):
    _git(host.project)
    sid = await host.session()
    first = await turn(host, provider, sid, "change the files", fake.completion(
        call(0, "c1", "write", {"path": "new.txt", "content": "one\ntwo\n"}),
        call(1, "c2", "edit", {"path": "notes.txt", "oldString": "beta", "newString": "BETA"}),
        call(2, "c3", "bash", {"command": "rm old.txt", "description": "remove"}),
        finish_reason="tool_calls"), fake.completion(fake.text_deltas("changed")))
    second = await turn(host, provider, sid, "shout", fake.completion(
        call(0, "c1", "edit", {"path": "notes.txt", "oldString": "alpha", "newString": "ALPHA"}),
        finish_reason="tool_calls"), fake.completion(fake.text_deltas("done")))
    await turn(host, provider, sid, "just talk")  # a turn without tools changed nothing

    # the newest turn by default: nothing; then each turn, and both together
    assert await host.client.session.diff(sid) == []
    assert _by_path(await host.client.session.diff(sid, from_=second)) == {"notes.txt": ("modified", 1, 1)}
    one = await host.client.session.diff(sid, from_=first)
    assert _by_path(one) == {"new.txt": ("added", 2, 0), "notes.txt": ("modified", 1, 1),
                             "old.txt": ("deleted", 0, 1)}
    notes = next(d for d in one if d.path == "notes.txt")
    assert notes.patch.splitlines()[2:] == ["@@ -1,2 +1,2 @@", " alpha", "-beta", "+BETA"]  # the whole file
    both = await host.client.session.diff(sid, from_=first, to=second)
    assert _by_path(both) == {"new.txt": ("added", 2, 0), "notes.txt": ("modified", 2, 2),
                              "old.txt": ("deleted", 0, 1)}
    narrow = await host.client.session.diff(sid, from_=second, context=0)
    assert next(d for d in narrow if d.path == "notes.txt").patch.splitlines()[2:] == [
        "@@ -1 +1 @@", "-alpha", "+ALPHA"]

    async with raw(host) as http:  # the wire form, as curl sees it
        answer = await http.get(f"/api/session/{sid}/diff", params={"from": first, "to": second, "context": "1"})
        assert answer.status_code == 200
        assert {f["path"]: f["additions"] for f in answer.json()["data"]} == {"new.txt": 2, "notes.txt": 2,
                                                                             "old.txt": 0}
        backwards = await http.get(f"/api/session/{sid}/diff", params={"from": second, "to": first})
        assert backwards.status_code == 400 and backwards.json()["_tag"] == "InvalidRequestError"
        gone = await http.get("/api/session/ses_doesnotexist/diff")
        assert gone.status_code == 404 and gone.json()["_tag"] == "SessionNotFoundError"
    with pytest.raises(MessageNotFoundError):
        await host.client.session.diff(sid, from_="msg_doesnotexist")
    other = await host.session()
    with pytest.raises(MessageNotFoundError):  # another session's message
        await host.client.session.diff(other, from_=first)
    with pytest.raises(SessionNotFoundError):
        await host.client.session.diff("ses_doesnotexist")

    # moved to another project, a turn there: a range across the move is refused, each side is answered
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    subprocess.run(["git", "init", "-q", str(elsewhere)], check=True)
    await host.client.session.move(sid, location={"directory": str(elsewhere)})
    third = await turn(host, provider, sid, "write there", fake.completion(
        call(0, "c1", "write", {"path": "there.txt", "content": "x\n"}), finish_reason="tool_calls"),
        fake.completion(fake.text_deltas("written")))
    assert _by_path(await host.client.session.diff(sid, from_=third)) == {"there.txt": ("added", 1, 0)}
    with pytest.raises(InvalidRequestError):
        await host.client.session.diff(sid, from_=first, to=third)
    assert _by_path(await host.client.session.diff(sid, from_=first, to=second))["notes.txt"] == ("modified", 2, 2)


async def test_a_running_step_is_compared_with_the_working_copy(host, provider):
    _git(host.project)
    sid = await host.session()
    # the Step writes a file, then its bash call runs until the test lets it end
    provider.enqueue(fake.completion(
        call(0, "c1", "write", {"path": "draft.txt", "content": "a\n"}),
        call(1, "c2", "bash", {"command": "until [ -e go ]; do sleep 0.05; done", "description": "wait"}),
        finish_reason="tool_calls"), fake.completion(fake.text_deltas("done")))
    admitted = await host.client.session.prompt(sid, prompt={"text": "draft"})
    seen: set[tuple[str, str]] = set()
    with anyio.fail_after(WAIT):
        async for event in host.client.session.log(sid, follow=True):
            if event.type == "log.synced":
                continue
            data = event.data if isinstance(event.data, dict) else event.data.wire()
            seen.add((event.type, data.get("callID", "")))
            if {("session.tool.success", "c1"), ("session.tool.called", "c2")} <= seen:
                break
    (host.project / "notes.txt").write_text("alpha\nbeta\ngamma\n")  # changed while the Step runs
    assert _by_path(await host.client.session.diff(sid, from_=str(admitted.id))) == {
        "draft.txt": ("added", 1, 0), "notes.txt": ("modified", 1, 0)}
    (host.project / "go").write_text("")
    with anyio.fail_after(WAIT):
        await host.client.session.wait(sid)
    assert "go" in _by_path(await host.client.session.diff(sid, from_=str(admitted.id)))  # now the Step's end


async def test_stats_count_the_scripted_turns_exactly(host, provider):
    began = int(time.time() * 1000)
    sid = await host.session()
    await turn(host, provider, sid, "look around", fake.completion(
        call(0, "c1", "read", {"path": "missing.txt"}),
        call(1, "c2", "bash", {"command": "echo hi", "description": "greet"}),
        finish_reason="tool_calls", usage=fake.usage_block(100, 30, cached_tokens=40, reasoning_tokens=10)),
        fake.completion(fake.text_deltas("looked"), usage=fake.usage_block(200, 10)))
    await turn(host, provider, sid, "again", fake.completion(fake.text_deltas("sure"), usage=fake.usage_block(5, 1)))
    ended = int(time.time() * 1000) + 1
    project = (await host.client.session.get(sid)).projectID
    zone = "Asia/Kathmandu"  # +05:45: a day boundary no whole-hour zone has
    stats = await host.client.experimental.session_stats(from_=began, to=ended, project=project, timezone=zone)
    total = stats.total
    assert (stats.created, total.sessions, total.prompts, total.steps, total.failed) == (1, 1, 2, 3, 0)
    tokens = total.tokens
    assert (tokens.input, tokens.output, tokens.reasoning, tokens.cache.read, tokens.cache.write) == (
        60 + 200 + 5, 20 + 10 + 1, 10, 40, 0)
    assert [(m.providerID, m.modelID, m.steps) for m in stats.models] == [("loop", "fake-model", 3)]
    assert [(a.agent, a.steps) for a in stats.agents] == [("build", 3)]
    local = {dt.datetime.fromtimestamp(t / 1000, zoneinfo.ZoneInfo(zone)).date().isoformat() for t in (began, ended)}
    assert {d.day for d in stats.days} <= local and sum(d.steps for d in stats.days) == 3
    assert [(t.tool, t.calls, t.failures) for t in stats.tools or ()] == [("bash", 1, 0), ("read", 1, 1)]

    async with raw(host) as http:
        answer = await http.get("/api/experimental/session/stats",
                                params={"from": str(began), "to": str(ended), "project": project, "tools": "false"})
        assert answer.status_code == 200
        body = answer.json()["data"]
        assert body["total"]["steps"] == 3 and "tools" not in body and body["range"]["timezone"] == "UTC"
        for params in ({"timezone": "Mars/Olympus"}, {"from": "10", "to": "5"}):
            refused = await http.get("/api/experimental/session/stats", params=params)
            assert refused.status_code == 400 and refused.json()["_tag"] == "InvalidRequestError", params
