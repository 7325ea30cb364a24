"""Every V1 route's answers hold to the type its row declares (`server/v1/wire.py`), as the V2 routes' hold to the
endpoint table: one turn through OpenCode's V1 paths on an embedded host (a session with rules, a prompt that writes a
todo list, a fork, a rename, a removal) answers each JSON route at least once, the bus streams open as OpenCode's do,
and each route that reads a body takes the body its row declares and refuses one of another shape with the 400 the V2
routes answer."""

from __future__ import annotations

import json
import typing
from typing import Any

import httpx2
import pytest
from pydantic import TypeAdapter

from opencode_session.sdk import OpenCode
from opencode_session.server.v1.routes import V1_ROUTES
from opencode_session.server.v1.wire import PromptBody
from tests.support import fake_openai as fake
from tests.support.config import write_global_config

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(60)]

ROWS = {(r.method, r.path): r for r in V1_ROUTES}
# answered only for a pending permission or question (a turn that waits on a person): here their 404 is checked
NOT_FOUND_HERE = {("POST", "/permission/{requestID}/reply"), ("POST", "/question/{requestID}/reply"),
                  ("POST", "/question/{requestID}/reject")}


@pytest.fixture
async def v1(tmp_path, provider):
    write_global_config(config=provider.serve_config({"fake-model": {}}, model="loop/fake-model"))
    work = tmp_path / "work"
    work.mkdir()
    async with (OpenCode(db=tmp_path / "db.sqlite", directory=work, heartbeat=0.2) as host,
                httpx2.AsyncClient(base_url=host.base_url, transport=host.transport, timeout=30) as http):
        yield http, work


class _Checked:
    def __init__(self, http: httpx2.AsyncClient) -> None:
        self.http = http
        self.answered: set[tuple[str, str]] = set()

    async def __call__(self, method: str, template: str, url: str | None = None, **kwargs: Any) -> Any:
        row = ROWS[(method, template)]
        response = await self.http.request(method, url or template, **kwargs)
        assert response.status_code in (200, 204), (method, url or template, response.text)
        if row.answer is None:
            return None
        self.answered.add((method, template))
        return TypeAdapter(row.answer).validate_python(response.json())


async def test_every_v1_answer_holds_to_its_declared_type(v1, provider):
    http, work = v1
    call = _Checked(http)
    where = {"directory": str(work)}
    rules = [{"permission": "question", "pattern": "*", "action": "deny"}]
    session = await call("POST", "/session", json={"title": "Contract", "permission": rules}, params=where)
    sid = session["id"]
    todos = {"todos": [{"content": "check the answers", "status": "in_progress", "priority": "high"}]}
    provider.enqueue(fake.completion(fake.tool_call_deltas(0, "call_t", "todowrite", json.dumps(todos)),
                                     finish_reason="tool_calls"),
                     fake.completion(fake.text_deltas("Checked.")))
    answered = await call("POST", "/session/{sessionID}/message", f"/session/{sid}/message",
                          json={"parts": [{"type": "text", "text": "plan it"}],
                                "model": {"providerID": "loop", "modelID": "fake-model"}, "agent": "build"})
    assert answered["info"]["role"] == "assistant"
    messages = await call("GET", "/session/{sessionID}/message", f"/session/{sid}/message")
    assert {p["type"] for m in messages for p in m["parts"]} >= {"text", "tool", "step-start", "step-finish"}
    assert await call("GET", "/session/{sessionID}/todo", f"/session/{sid}/todo") == todos["todos"]
    provider.enqueue(fake.completion(fake.text_deltas("Later.")))
    await call("POST", "/session/{sessionID}/prompt_async", f"/session/{sid}/prompt_async",
               json={"parts": [{"type": "text", "text": "again"}]})
    await call("POST", "/session/{sessionID}/abort", f"/session/{sid}/abort")
    for template in ("/session/{sessionID}", "/session/{sessionID}/children", "/session/{sessionID}/diff"):
        await call("GET", template, template.replace("{sessionID}", sid))
    fork = await call("POST", "/session/{sessionID}/fork", f"/session/{sid}/fork", json={})
    await call("PATCH", "/session/{sessionID}", f"/session/{fork['id']}", json={"title": "Renamed"})
    for method, template in ROWS:
        if method == "GET" and "{" not in template and ROWS[(method, template)].answer is not None:
            await call(method, template, params=where)
    await call("DELETE", "/session/{sessionID}", f"/session/{fork['id']}")
    for method, template in NOT_FOUND_HERE:
        missing = await http.request(method, template.replace("{requestID}", "per_nosuch"),
                                      json={"reply": "once", "answers": [["Red"]]})
        assert missing.status_code == 404 and missing.json()["_tag"].endswith("NotFoundError")
    declared = {key for key, row in ROWS.items() if row.answer is not None}
    assert declared - NOT_FOUND_HERE - call.answered == set()


async def test_the_bus_streams_open_with_server_connected(v1):
    http, work = v1
    for path, unwrap in (("/event", lambda f: f), ("/global/event", lambda f: f["payload"])):
        async with http.stream("GET", path, params={"directory": str(work)}) as stream:
            assert stream.status_code == 200 and stream.headers["content-type"].startswith("text/event-stream")
            line = await anext(x async for x in stream.aiter_lines() if x.startswith("data: "))
            first = unwrap(json.loads(line.removeprefix("data: ")))
            assert first["type"] == "server.connected" and first.keys() == {"id", "type", "properties"}


@pytest.mark.parametrize("key", [k for k, r in ROWS.items() if r.body is not None], ids=" ".join)
async def test_a_body_of_another_shape_is_the_typed_400(v1, key):
    http, _work = v1
    method, template = key
    url = template.replace("{sessionID}", "ses_nosuchsession").replace("{requestID}", "per_nosuch")
    for bad in ([1], {"parts": "hi", "permission": "all", "title": 1, "messageID": 2, "reply": "maybe",
                      "answers": "Red"}):
        refused = await http.request(method, url, json=bad)
        assert refused.status_code == 400, (key, bad, refused.text)
        assert refused.json()["_tag"] == "InvalidRequestError" and refused.json()["kind"] == "body"


def test_a_client_message_id_must_be_one():
    with pytest.raises(ValueError, match="not a message ID"):
        PromptBody.model_validate({"parts": [{"type": "text", "text": "x"}], "messageID": "ses_1"})


@pytest.mark.parametrize("key", list(ROWS), ids=" ".join)
def test_a_handler_takes_the_body_its_row_declares(key):
    row = ROWS[key]
    hints = typing.get_type_hints(row.handler)
    assert hints.get("body") is row.body, f"{key} takes {hints.get('body')}, its row says {row.body}"
