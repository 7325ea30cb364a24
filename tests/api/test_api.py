"""The V2 API as a user sees it, through the generated client, against `ocs serve` and the Embedded host."""

from __future__ import annotations

import anyio
import pytest

from opencode_session.client import (
    ConflictError,
    InvalidCursorError,
    InvalidRequestError,
    MessageNotFoundError,
    SessionExecutionFailedError,
    SessionNotFoundError,
)
from tests.api.conftest import raw_http

pytestmark = pytest.mark.anyio


async def _events_until(stream, predicate, limit: float = 10):
    got = []
    with anyio.fail_after(limit):
        async for item in stream:
            got.append(item)
            if predicate(item, got):
                break
    await stream.aclose()
    return got


async def test_health_location_and_doc(api, tmp_path):
    assert (await api.health.get()).healthy is True
    default = await api.location.get()
    assert default.directory and default.project.id
    other = tmp_path / "elsewhere"
    other.mkdir()
    chosen = await api.location.get(location={"directory": str(other)})
    assert chosen.directory == str(other.resolve())
    with pytest.raises(InvalidRequestError):
        await api.location.get(location={"directory": str(tmp_path / "missing")})
    async with raw_http(api) as http:
        doc = (await http.get("/doc")).json()
    ops = {op["operationId"] for path in doc["paths"].values() for op in path.values()}
    assert {"v2.session.create", "v2.session.log", "v2.event.subscribe"} <= ops


async def test_create_get_adopt_and_not_found(api, tmp_path):
    created = await api.session.create(agent="build", model={"id": "m", "providerID": "p"},
                                       location={"directory": str(tmp_path)})
    assert created.location.directory == str(tmp_path.resolve()) and created.agent == "build"
    assert (await api.session.get(created.id)) == created
    adopted = await api.session.create(id=created.id, agent="plan")
    assert adopted.id == created.id and adopted.agent == "build"
    with pytest.raises(SessionNotFoundError) as info:
        await api.session.get("ses_unknown")
    assert info.value.sessionID == "ses_unknown"
    with pytest.raises(InvalidRequestError):
        await api.session.get("not-a-session-id")
    with pytest.raises(InvalidRequestError):
        await api.session.create(id="bad")


async def test_list_pages_with_opaque_cursors(api, tmp_path):
    ids = [(await api.session.create(location={"directory": str(tmp_path)})).id for _ in range(3)]
    first = await api.session.list(directory=str(tmp_path), limit=2)
    assert [s.id for s in first.items] == ids[::-1][:2] and first.next
    second = await api.session.list(cursor=first.next)
    assert [s.id for s in second.items] == ids[::-1][2:] and second.previous
    asc = await api.session.list(directory=str(tmp_path), order="asc")
    assert [s.id for s in asc.items] == ids
    with pytest.raises(InvalidCursorError):
        await api.session.list(cursor="garbage")
    with pytest.raises(InvalidCursorError):
        await api.session.list(cursor=first.next, order="asc")
    with pytest.raises(InvalidRequestError):
        await api.session.list(limit=0)


async def test_page_cursors_are_both_present_on_every_page_and_null_on_an_empty_one(api, tmp_path):
    # OpenCode 1.18.33's wire: a non-empty page links both ways, even at an edge (the page beyond is then empty);
    # an empty page has null for both. Session list and messages alike.
    ids = [(await api.session.create(location={"directory": str(tmp_path)})).id for _ in range(3)]
    for name in ("build", "plan", "build"):  # a switch is refused unless the agent is configured
        await api.session.switch_agent(ids[0], agent=name)
    lists = {"/api/session": {"directory": str(tmp_path), "limit": "2"},
             f"/api/session/{ids[0]}/message": {"limit": "2"}}
    async with raw_http(api) as http:
        schemas = (await http.get("/doc")).json()["components"]["schemas"]
        for path, query in lists.items():
            first = (await http.get(path, params=query)).json()
            assert set(first["cursor"]) == {"previous", "next"}, first["cursor"]
            assert all(isinstance(c, str) for c in first["cursor"].values())
            last = (await http.get(path, params={"cursor": first["cursor"]["next"]})).json()
            assert len(last["data"]) == 1 and all(isinstance(c, str) for c in last["cursor"].values()), last
            for beyond in (first["cursor"]["previous"], last["cursor"]["next"]):
                empty = (await http.get(path, params={"cursor": beyond})).json()
                assert empty == {"data": [], "cursor": {"previous": None, "next": None}}
            back = (await http.get(path, params={"cursor": last["cursor"]["previous"]})).json()
            assert back["data"] == first["data"]
        nothing = (await http.get("/api/session", params={"directory": str(tmp_path / "none")})).json()
        assert nothing == {"data": [], "cursor": {"previous": None, "next": None}}
    # the document says so, and the generated client reads it
    links = schemas["CursorLinks"]
    assert sorted(links["required"]) == ["next", "previous"]
    assert all(prop["type"] == ["string", "null"] for prop in links["properties"].values())
    edge = await api.session.list(directory=str(tmp_path), order="asc", limit=3)
    assert [s.id for s in edge.items] == ids and edge.previous and edge.next
    past = await api.session.list(cursor=edge.next)
    assert (past.items, past.previous, past.next) == ([], None, None)


async def test_switch_agent_and_model(api):
    sid = (await api.session.create()).id
    await api.session.switch_agent(sid, agent="plan")
    await api.session.switch_model(sid, model={"id": "a", "providerID": "p"})
    await api.session.switch_model(sid, model={"id": "a", "providerID": "p"})  # same model: publishes nothing
    info = await api.session.get(sid)
    assert info.agent == "plan" and info.model.id == "a"
    kinds = [m.type for m in (await api.session.messages(sid, order="asc")).items]
    assert kinds == ["agent-switched", "model-switched"]
    for call in (api.session.switch_agent("ses_nope", agent="x"),
                 api.session.switch_model("ses_nope", model={"id": "a", "providerID": "p"})):
        with pytest.raises(SessionNotFoundError):
            await call
    with pytest.raises(InvalidRequestError):
        await api.session.switch_model(sid, model={"id": "a"})


async def test_unknown_models_are_rejected_when_selected(api):
    sid = (await api.session.create()).id
    with pytest.raises(InvalidRequestError) as info:
        await api.session.switch_model(sid, model={"id": "nope", "providerID": "p"})
    assert info.value.field == "model" and "p/nope" in info.value.message
    with pytest.raises(InvalidRequestError):
        await api.session.switch_model(sid, model={"id": "m", "providerID": "elsewhere"})
    with pytest.raises(InvalidRequestError) as info:
        await api.session.create(model={"id": "nope", "providerID": "p"})
    assert info.value.field == "model"
    assert (await api.session.get(sid)).model is None
    assert (await api.session.messages(sid)).items == []  # nothing was switched


async def test_unknown_agent_is_rejected_at_creation_as_switch_agent_does(api, tmp_path):
    # an unknown agent accepted at creation made every prompt fail `agent.not-found` later
    with pytest.raises(InvalidRequestError) as info:
        await api.session.create(agent="nosuch", location={"directory": str(tmp_path)})
    assert info.value.field == "agent" and "nosuch" in info.value.message
    assert (await api.session.list(directory=str(tmp_path))).items == []  # nothing was created
    sid = (await api.session.create(agent="plan", location={"directory": str(tmp_path)})).id
    with pytest.raises(InvalidRequestError) as switched:
        await api.session.switch_agent(sid, agent="nosuch")
    assert switched.value.field == "agent"
    async with raw_http(api) as http:
        answer = await http.post("/api/session", json={"agent": "nosuch"})
    assert answer.status_code == 400 and answer.json()["_tag"] == "InvalidRequestError", answer.text


async def test_prompt_admission_retry_conflict_and_pending(api):
    sid = (await api.session.create()).id
    admitted = await api.session.prompt(sid, id="msg_api_fixed_1", prompt={"text": "hello"}, delivery="queue",
                                        resume=False)
    assert admitted.id == "msg_api_fixed_1" and admitted.delivery == "queue" and admitted.promotedSeq is None
    again = await api.session.prompt(sid, id="msg_api_fixed_1", prompt={"text": "hello"}, delivery="queue",
                                     resume=False)
    assert again == admitted
    with pytest.raises(ConflictError) as info:
        await api.session.prompt(sid, id="msg_api_fixed_1", prompt={"text": "changed"}, delivery="queue")
    assert info.value.resource == "msg_api_fixed_1"
    with pytest.raises(SessionNotFoundError):
        await api.session.prompt("ses_nope", prompt={"text": "x"})
    with pytest.raises(InvalidRequestError):
        await api.session.prompt(sid, prompt={"text": "x"}, delivery="later")
    # resume=false only admitted: nothing ran and nothing is visible in history
    assert await api.session.context(sid) == []
    assert await api.session.active() == {}


async def test_prompt_without_a_model_fails_execution_with_guidance(api):
    sid = (await api.session.create()).id
    await api.session.prompt(sid, prompt={"text": "hi"})
    await api.session.wait(sid)
    history = await api.session.context(sid)
    assert [m.type for m in history] == ["user"]  # promoted, visible, never lost
    log = await _events_until(api.session.log(sid), lambda item, _: item.type == "log.synced")
    failed = [e for e in log if e.type == "session.execution.failed"]
    assert failed and failed[0].data.error.type == "provider.no-model"
    assert "opencode.json" in failed[0].data.error.message


async def test_messages_page_and_single_message(api):
    sid = (await api.session.create()).id
    other = (await api.session.create()).id
    for name in ("build", "plan", "build"):
        await api.session.switch_agent(sid, agent=name)
    page = await api.session.messages(sid, limit=2)
    assert [m.agent for m in page.items] == ["build", "plan"] and page.next
    rest = await api.session.messages(sid, cursor=page.next)
    assert [m.agent for m in rest.items] == ["build"]
    assert (await api.session.messages(sid, cursor=rest.next)).items == []
    with pytest.raises(InvalidCursorError):
        await api.session.messages(other, cursor=page.next)
    with pytest.raises(InvalidRequestError):
        await api.session.messages(sid, limit=201)
    one = await api.session.message(sid, page.items[0].id)
    assert one == page.items[0]
    with pytest.raises(MessageNotFoundError):
        await api.session.message(other, page.items[0].id)
    with pytest.raises(SessionNotFoundError):
        await api.session.message("ses_nope", page.items[0].id)


async def test_interrupt_active_wait_on_idle_sessions(api):
    sid = (await api.session.create()).id
    assert (await api.session.interrupt(sid)).interrupted is False  # idle: nothing to stop
    assert await api.session.active() == {}
    await api.session.wait(sid)
    for call in (api.session.interrupt("ses_nope"), api.session.wait("ses_nope")):
        with pytest.raises(SessionNotFoundError):
            await call


async def test_session_events_replay_after_seq_then_live(api):
    sid = (await api.session.create()).id
    await api.session.switch_agent(sid, agent="plan")
    await api.session.switch_agent(sid, agent="build")
    stream = api.session.events(sid, after=1)

    def done(item, got):
        return len(got) == 2

    async def admit_later():
        await api.session.switch_agent(sid, agent="plan")

    got = []
    with anyio.fail_after(10):
        async for item in stream:
            got.append(item)
            if len(got) == 1:
                await admit_later()
            if len(got) == 2:
                break
    assert stream.last_event_id == "3"  # each frame's SSE id is its durable sequence
    await stream.aclose()
    assert [(e.durable.seq, e.data.agent) for e in got] == [(2, "build"), (3, "plan")]
    with pytest.raises(SessionNotFoundError):
        async for _ in api.session.events("ses_nope"):
            pass


async def test_log_without_follow_ends_after_marker(api):
    sid = (await api.session.create()).id
    await api.session.switch_agent(sid, agent="plan")
    items = [item async for item in api.session.log(sid, follow=False)]
    assert [i.type for i in items] == ["session.agent.selected", "log.synced"]
    assert items[-1].seq == 1
    empty_after = [item async for item in api.session.log(sid, after=1, follow=False)]
    assert [(i.type, i.seq) for i in empty_after] == [("log.synced", 1)]
    with pytest.raises(SessionNotFoundError):
        async for _ in api.session.log("ses_nope"):
            pass


async def test_log_follower_receives_live_events_while_prompts_are_admitted(api):
    sid = (await api.session.create()).id
    await api.session.prompt(sid, prompt={"text": "before"}, resume=False)
    follower = api.session.log(sid, follow=True)
    seen = []
    with anyio.fail_after(15):
        async for item in follower:
            seen.append(item)
            if item.type == "log.synced":
                for i in range(3):
                    await api.session.prompt(sid, prompt={"text": f"live {i}"}, resume=False)
            if len([s for s in seen if s.type == "session.input.admitted"]) == 4:
                break
    await follower.aclose()
    seqs = [s.durable.seq for s in seen if s.type != "log.synced"]
    assert seqs == list(range(1, 5))  # gap-free across replay and live
    texts = [s.data.input.data.text for s in seen if s.type == "session.input.admitted"]
    assert texts == ["before", "live 0", "live 1", "live 2"]


async def test_instance_event_stream_starts_connected_then_carries_live_events(api):
    stream = api.event.subscribe()
    sid = None
    got = []
    with anyio.fail_after(10):
        async for item in stream:
            got.append(item)
            if item.type == "server.connected":
                sid = (await api.session.create()).id
                await api.session.switch_agent(sid, agent="plan")
            elif item.type == "session.agent.selected" and item.data.get("sessionID") == sid:
                break
    await stream.aclose()
    assert got[0].type == "server.connected"


async def test_instruction_entries_put_list_remove(api):
    sid = (await api.session.create()).id
    await api.session.context_entry_put(sid, "style", value={"tone": "terse"})
    await api.session.context_entry_put(sid, "notes", value="plain text")
    entries = await api.session.context_entry_list(sid)
    assert [(e.key, e.value) for e in entries] == [("notes", "plain text"), ("style", {"tone": "terse"})]
    await api.session.context_entry_remove(sid, "notes")
    assert [e.key for e in await api.session.context_entry_list(sid)] == ["style"]
    with pytest.raises(InvalidRequestError):
        await api.session.context_entry_put(sid, "Bad Key", value=1)
    with pytest.raises(SessionNotFoundError):
        await api.session.context_entry_list("ses_nope")


async def test_a_null_entry_value_is_listed_as_null(api):
    sid = (await api.session.create()).id
    async with raw_http(api) as http:
        put = await http.put(f"/api/session/{sid}/context-entry/empty", json={"value": None})
        assert put.status_code == 204, put.text
        listed = await http.get(f"/api/session/{sid}/context-entry")
    assert listed.json() == {"data": [{"key": "empty", "value": None}]}  # the document requires `value`


async def test_unknown_route_and_bad_json_are_tagged_errors(api):
    async with raw_http(api) as http:
        response = await http.get("/api/nothing-here")
        assert response.status_code == 404 and response.json()["_tag"]
        response = await http.post("/api/session", content=b"{not json", headers={"content-type": "application/json"})
    assert response.status_code == 400 and response.json()["_tag"] == "InvalidRequestError"


@pytest.mark.parametrize(("method", "path", "allowed"), [
    ("TRACE", "/api/session", "GET, HEAD, POST"),  # two operations on one path: both methods
    ("TRACE", "/api/session/ses_x", "DELETE, GET, HEAD, PATCH"),
    ("PATCH", "/api/session/active", "GET, HEAD"),  # a literal path is never a session ID
    ("PATCH", "/api/session/ses_x/context-entry/k", "DELETE, PUT"),
    ("OPTIONS", "/doc", "GET, HEAD"),
])
async def test_a_method_the_path_lacks_is_a_405_naming_the_methods_it_has(api, method, path, allowed):
    async with raw_http(api) as http:
        response = await http.request(method, path)
    assert response.status_code == 405
    assert response.headers["allow"] == allowed  # RFC 9110: a 405 says what would have worked
    assert response.json()["_tag"] == "InvalidRequestError"


async def test_a_session_is_created_without_a_body_as_the_document_says(api):
    async with raw_http(api) as http:
        doc = (await http.get("/doc")).json()
        assert doc["paths"]["/api/session"]["post"]["requestBody"]["required"] is False
        response = await http.post("/api/session")
    assert response.status_code == 200, response.text
    assert (await api.session.get(response.json()["data"]["id"])).id == response.json()["data"]["id"]


async def test_durable_envelopes_say_where_they_happened(api, tmp_path):
    where = tmp_path / "place"
    where.mkdir()
    stream = api.event.subscribe()
    live = []
    with anyio.fail_after(10):
        async for item in stream:
            if item.type == "server.connected":
                sid = (await api.session.create(location={"directory": str(where)})).id
                await api.session.switch_agent(sid, agent="plan")
            elif item.data.get("sessionID") == sid:
                live.append(item)
                if item.type == "session.agent.selected":
                    break
    await stream.aclose()
    assert [e.type for e in live] == ["session.created", "session.agent.selected"]
    logged = [e for e in await _events_until(api.session.log(sid), lambda item, _: item.type == "log.synced")
              if e.type != "log.synced"]
    assert logged
    for event in live + logged:
        assert event.location is not None and event.location.directory == str(where.resolve())


async def test_wait_with_outcome_says_how_a_failed_execution_ended(api, tmp_path):
    # no model is configured: the execution fails before its first Step, leaving only the user's message
    sid = (await api.session.create(location={"directory": str(tmp_path)})).id
    await api.session.prompt(sid, prompt={"text": "hello"})
    with anyio.fail_after(30):
        await api.session.wait(sid)  # OpenCode's contract: 204, however it ended
        with pytest.raises(SessionExecutionFailedError) as failed:
            await api.session.wait(sid, outcome=True)
    assert (failed.value.sessionID, failed.value.type) == (sid, "provider.no-model")
    assert "model" in failed.value.message
    async with raw_http(api) as http:
        answer = await http.post(f"/api/session/{sid}/wait", params={"outcome": "true"})
        plain = await http.post(f"/api/session/{sid}/wait")
    assert answer.status_code == 422, answer.text
    assert answer.json()["_tag"] == "SessionExecutionFailedError" and answer.json()["type"] == "provider.no-model"
    assert plain.status_code == 204
    # a session that never executed has nothing to report
    await api.session.wait((await api.session.create(location={"directory": str(tmp_path)})).id, outcome=True)
