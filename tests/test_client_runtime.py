"""The network client against small servers: decoding, declared and infrastructure failures, headers, SSE streams."""

from __future__ import annotations

import base64
import json
import socket
import threading
from collections.abc import Iterator
from typing import Any

import anyio
import httpx2
import pytest
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from opencode_session import client as client_package
from opencode_session.client import (
    CallOptions,
    ClientError,
    EventStream,
    MessageNotFoundError,
    OpenCodeClient,
    Page,
    SessionNotFoundError,
)
from opencode_session.client.sse import SSEParser
from opencode_session.schema.errors import REGISTRY
from opencode_session.schema.events import GlobalDisposed, LogSynced, ServerConnected
from opencode_session.schema.session import SessionV2Info

SESSION = {
    "id": "ses_1",
    "projectID": "prj",
    "time": {"created": 1, "updated": 2},
    "title": "hello",
    "location": {"directory": "/work"},
}


def _agent_selected(seq: int, agent: str = "build") -> dict[str, Any]:
    return {
        "id": f"evt_{seq}",
        "created": 1,
        "type": "session.agent.selected",
        "durable": {"aggregateID": "ses_1", "seq": seq, "version": 1},
        "data": {"sessionID": "ses_1", "agent": agent},
    }


def _not_found(session_id: str) -> JSONResponse:
    body = {"_tag": "SessionNotFoundError", "sessionID": session_id, "message": f"Session not found: {session_id}"}
    return JSONResponse(body, status_code=404)


# --- a small JSON app over ASGITransport ----------------------------------------------------------


class Seen:
    """What the app received, for assertions about the request side."""

    def __init__(self) -> None:
        self.requests: list[Request] = []
        self.bodies: list[bytes] = []


def json_app(seen: Seen) -> Starlette:
    async def record(request: Request) -> None:
        seen.requests.append(request)
        seen.bodies.append(await request.body())

    async def get_session(request: Request) -> Response:
        await record(request)
        sid = request.path_params["sessionID"]
        if sid.startswith("ses_missing"):
            return _not_found(sid)
        if sid == "ses_wrong_tag":
            return JSONResponse({"_tag": "ConflictError", "message": "x"}, status_code=404)
        if sid == "ses_teapot":
            return JSONResponse({"_tag": "UnknownError", "message": "x"}, status_code=500)
        if sid == "ses_not_json":
            return Response("{not json", media_type="application/json")
        if sid == "ses_bad_shape":
            return JSONResponse({"data": {"id": "ses_x"}})
        if sid == "ses_newer_server":  # a later server version added fields this client does not know
            return JSONResponse({"data": {**SESSION, "id": sid, "futureField": 1,
                                          "time": {**SESSION["time"], "paused": 5}}})
        if sid == "ses_bad_error":
            return JSONResponse({"_tag": "SessionNotFoundError", "message": "no sessionID field"}, status_code=404)
        return JSONResponse({"data": {**SESSION, "id": sid}})

    async def create(request: Request) -> Response:
        await record(request)
        body = json.loads(seen.bodies[-1])
        return JSONResponse({"data": {**SESSION, "id": body.get("id", "ses_new"), "agent": body.get("agent")}})

    async def switch_agent(request: Request) -> Response:
        await record(request)
        return Response(status_code=204)

    async def put_entry(request: Request) -> Response:
        await record(request)
        return Response(status_code=204)

    async def messages(request: Request) -> Response:
        await record(request)
        item = {"id": "msg_1", "type": "user", "text": "hi", "time": {"created": 1}}
        return JSONResponse({"data": [item], "cursor": {"previous": "p1", "next": "n1"}})

    async def message(request: Request) -> Response:
        await record(request)
        sid, mid = request.path_params["sessionID"], request.path_params["messageID"]
        body = {
            "_tag": "MessageNotFoundError",
            "sessionID": sid,
            "messageID": mid,
            "message": f"Message not found: {mid}",
        }
        return JSONResponse(body, status_code=404)

    async def location(request: Request) -> Response:
        await record(request)
        return JSONResponse({"directory": "/w", "project": {"id": "prj", "directory": "/w"}})

    async def active(request: Request) -> Response:
        await record(request)
        return JSONResponse({"data": {"ses_1": {"type": "running"}}})

    return Starlette(
        routes=[
            Route("/api/session", create, methods=["POST"]),
            Route("/api/session/active", active),
            Route("/api/session/{sessionID}", get_session),
            Route("/api/session/{sessionID}/agent", switch_agent, methods=["POST"]),
            Route("/api/session/{sessionID}/context-entry/{key}", put_entry, methods=["PUT"]),
            Route("/api/session/{sessionID}/message", messages),
            Route("/api/session/{sessionID}/message/{messageID}", message),
            Route("/api/location", location),
        ]
    )


@pytest.fixture
def seen() -> Seen:
    return Seen()


@pytest.fixture
async def client(seen: Seen) -> Any:
    async with OpenCodeClient(
        "http://opencode.test",
        headers={"X-Client": "base", "X-Shared": "client"},
        transport=httpx2.ASGITransport(app=json_app(seen)),
    ) as c:
        yield c


@pytest.mark.anyio
async def test_success_is_decoded_into_schema_models(client, seen):
    info = await client.session.get("ses_1")
    assert isinstance(info, SessionV2Info)
    assert (info.id, info.title, info.location.directory) == ("ses_1", "hello", "/work")
    assert seen.requests[-1].headers["accept"] == "application/json"
    active = await client.session.active()
    assert list(active) == ["ses_1"] and active["ses_1"].type == "running"
    location = await client.location.get()
    assert location.project.id == "prj"


@pytest.mark.anyio
async def test_json_body_omits_absent_fields_and_encodes_models(client, seen):
    from opencode_session.schema.common import ModelRef

    info = await client.session.create(agent="plan", model=ModelRef(id="m", providerID="p"))
    assert info.agent == "plan"
    assert seen.requests[-1].headers["content-type"] == "application/json"
    assert json.loads(seen.bodies[-1]) == {"agent": "plan", "model": {"id": "m", "providerID": "p"}}


@pytest.mark.anyio
async def test_a_required_null_is_sent_and_204_returns_none(client, seen):
    assert await client.session.context_entry_put("ses_1", "notes", value=None) is None
    assert json.loads(seen.bodies[-1]) == {"value": None}
    assert await client.session.switch_agent("ses_1", agent="build") is None
    assert json.loads(seen.bodies[-1]) == {"agent": "build"}


@pytest.mark.anyio
async def test_path_parameters_are_uri_encoded(client, seen):
    info = await client.session.get("ses a?b#c")
    assert info.id == "ses a?b#c"
    assert seen.requests[-1].url.query == ""


@pytest.mark.anyio
async def test_page_and_query_encoding(client, seen):
    page = await client.session.messages("ses_1", limit=10, cursor="abc")
    assert isinstance(page, Page)
    assert [m.id for m in page.items] == ["msg_1"] and (page.previous, page.next) == ("p1", "n1")
    assert list(seen.requests[-1].query_params.multi_items()) == [("limit", "10"), ("cursor", "abc")]
    await client.location.get(location={"directory": "/x y", "workspace": None})
    assert list(seen.requests[-1].query_params.multi_items()) == [("location[directory]", "/x y")]


@pytest.mark.anyio
async def test_declared_errors_are_raised_as_tagged_errors(client):
    with pytest.raises(SessionNotFoundError) as raised:
        await client.session.get("ses_missing")
    assert raised.value.sessionID == "ses_missing"
    assert raised.value.message == "Session not found: ses_missing"
    with pytest.raises(MessageNotFoundError) as raised_message:
        await client.session.message("ses_1", "msg_2")
    assert (raised_message.value.sessionID, raised_message.value.messageID) == ("ses_1", "msg_2")


def test_every_tagged_error_a_call_can_raise_is_importable_from_the_client():
    for tag, error in REGISTRY.items():
        assert getattr(client_package, tag) is error, tag


@pytest.mark.anyio
async def test_undeclared_status_or_tag_is_unexpected_status(client):
    with pytest.raises(ClientError) as raised:
        await client.session.get("ses_teapot")
    assert (raised.value.reason, raised.value.status) == ("UnexpectedStatus", 500)
    with pytest.raises(ClientError) as raised:
        await client.session.get("ses_wrong_tag")
    assert (raised.value.reason, raised.value.status) == ("UnexpectedStatus", 404)


@pytest.mark.anyio
async def test_malformed_bodies_are_malformed_response(client):
    for sid in ("ses_not_json", "ses_bad_shape", "ses_bad_error"):
        with pytest.raises(ClientError) as raised:
            await client.session.get(sid)
        assert raised.value.reason == "MalformedResponse", sid


@pytest.mark.anyio
async def test_per_call_headers_override_client_headers(client, seen):
    await client.session.get("ses_1", options=CallOptions(headers={"x-shared": "call", "X-Call": "yes"}))
    headers = seen.requests[-1].headers
    assert (headers["x-client"], headers["x-shared"], headers["x-call"]) == ("base", "call", "yes")
    await client.session.get("ses_1")
    assert seen.requests[-1].headers["x-shared"] == "client"


@pytest.mark.anyio
async def test_basic_auth_and_per_call_timeout():
    captured: list[httpx2.Request] = []

    def handler(request: httpx2.Request) -> httpx2.Response:
        captured.append(request)
        return httpx2.Response(200, json={"healthy": True})

    async with OpenCodeClient("http://x/", auth=("opencode", "secret"), transport=httpx2.MockTransport(handler)) as c:
        assert (await c.health.get(options=CallOptions(timeout=1.5))).healthy is True
    assert captured[0].headers["authorization"] == "Basic " + base64.b64encode(b"opencode:secret").decode()
    assert captured[0].extensions["timeout"]["read"] == 1.5
    assert str(captured[0].url) == "http://x/api/health"


@pytest.mark.anyio
async def test_construction_is_network_free_and_closing_is_final():
    calls: list[httpx2.Request] = []
    c = OpenCodeClient("http://x", transport=httpx2.MockTransport(lambda r: calls.append(r) or httpx2.Response(204)))
    assert calls == []
    await c.session.wait("ses_1")
    assert len(calls) == 1
    await c.aclose()
    with pytest.raises(ClientError) as raised:
        await c.session.wait("ses_1")
    assert raised.value.reason == "Transport"


def _refused_url() -> str:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}"


@pytest.mark.anyio
async def test_connection_refused_is_transport():
    async with OpenCodeClient(_refused_url()) as c:
        with pytest.raises(ClientError) as raised:
            await c.health.get()
        assert raised.value.reason == "Transport" and raised.value.status is None
        assert isinstance(raised.value.cause, httpx2.TransportError)
        stream = c.event.subscribe()
        with pytest.raises(ClientError) as raised:
            await stream.__anext__()
        assert raised.value.reason == "Transport"


# --- SSE parser ------------------------------------------------------------------------------------


def test_parser_handles_split_line_ends_comments_and_multiline_data():
    parser = SSEParser()
    text = ": heartbeat\r\n\r\nid: 4\r\nevent: message\r\ndata: {\"a\":\r\ndata: 1}\r\r\nevent: nodata\n\ndata:x\r"
    out = []
    for i in range(len(text)):  # one character at a time: every split point, including inside CRLF
        out += parser.feed(text[i])
    assert parser.feed("\n") == []  # completes the CRLF begun by the last chunk; no blank line yet
    out += parser.feed("\r")
    assert [(m.id, m.event, m.data) for m in out] == [("4", "message", '{"a":\n1}'), (None, None, "x")]


def test_parser_bounds_one_event():
    parser = SSEParser(max_event_chars=25)
    assert parser.feed("data: 12345\ndata: 67\n\n")[0].data == "12345\n67"
    with pytest.raises(ClientError) as raised:
        parser.feed("data: 0123456789\ndata: 0123")
    assert raised.value.reason == "MalformedResponse"


# --- SSE over a real server -----------------------------------------------------------------------


class StreamState:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.disconnected: dict[str, threading.Event] = {}
        self.queries: list[str] = []

    def watch(self, token: str) -> threading.Event:
        with self.lock:
            return self.disconnected.setdefault(token, threading.Event())


class _Abort(Response):
    """Starts a stream, sends one event, then returns without finishing the body: the connection drops."""

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/event-stream")]})
        frame = f"data: {json.dumps(_agent_selected(1))}\n\n".encode()
        await send({"type": "http.response.body", "body": frame, "more_body": True})


def sse_app(state: StreamState) -> Starlette:
    def sse(frames: Iterator[str] | Any) -> StreamingResponse:
        return StreamingResponse(frames, media_type="text/event-stream")

    async def events(request: Request) -> Response:
        sid = request.path_params["sessionID"]
        state.queries.append(request.url.query)
        if sid == "ses_missing":
            return _not_found(sid)
        if sid == "ses_json":
            return JSONResponse({"data": []})
        if sid == "ses_drop":
            return _Abort()
        if sid == "ses_bad":
            return sse(iter(["data: {nope\n\n"]))
        if sid == "ses_bad_shape":  # JSON, but no event of the log
            return sse(iter(['data: {"type": "session.nope", "id": 1}\n\n']))
        if sid == "ses_huge":
            return sse(iter(["data: \"" + "x" * 1_048_577 + "\"\n\n"]))
        if sid.startswith("ses_forever"):
            gone = state.watch(sid)

            async def forever() -> Any:
                try:
                    yield f"id: 1\ndata: {json.dumps(_agent_selected(1))}\n\n"
                    await anyio.sleep_forever()
                finally:
                    gone.set()

            return sse(forever())
        first = json.dumps(_agent_selected(1), indent=1).replace("\n", "\r\ndata: ")
        frames = [
            ": heartbeat\r\n\r\n",
            f"id: 1\r\ndata: {first}\r\n\r\n",
            "event: ignored-without-data\n\n",
            f"id: 2\rdata: {json.dumps(_agent_selected(2, 'plan'))}\r\r",
        ]
        return sse(iter(frames))

    async def log(request: Request) -> Response:
        state.queries.append(request.url.query)
        future = {**_agent_selected(4), "type": "session.from.the.future", "data": {"sessionID": "ses_1"}}
        frames = [
            f"id: 3\ndata: {json.dumps(_agent_selected(3))}\n\n",
            f"id: 4\ndata: {json.dumps(future)}\n\n",  # a type a newer server added
            'data: {"type": "log.synced", "aggregateID": "ses_1", "seq": 4}\n\n',
        ]
        return sse(iter(frames))

    async def instance(request: Request) -> Response:
        frames = [
            'data: {"id": "evt_0", "created": 1, "type": "server.connected", "data": {}}\n\n',
            ": heartbeat\n\n",
            'data: {"id": "evt_9", "created": 2, "type": "global.disposed", "data": {}}\n\n',
        ]
        return sse(iter(frames))

    return Starlette(
        routes=[
            Route("/api/session/{sessionID}/event", events),
            Route("/api/session/{sessionID}/log", log),
            Route("/api/event", instance),
        ]
    )


class _ReadyServer(uvicorn.Server):
    def __init__(self, config: uvicorn.Config) -> None:
        super().__init__(config)
        self.ready = threading.Event()

    async def startup(self, sockets: Any = None) -> None:
        await super().startup(sockets=sockets)
        self.ready.set()


@pytest.fixture(scope="module")
def sse_server() -> Iterator[tuple[str, StreamState]]:
    state = StreamState()
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    config = uvicorn.Config(sse_app(state), log_level="critical", lifespan="off", timeout_graceful_shutdown=2)
    server = _ReadyServer(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    assert server.ready.wait(10), "uvicorn did not start"
    try:
        yield f"http://127.0.0.1:{port}", state
    finally:
        server.should_exit = True
        thread.join(10)
        sock.close()


@pytest.fixture
async def sse_client(sse_server) -> Any:
    async with OpenCodeClient(sse_server[0]) as c:
        yield c


async def _until_cut(stream: EventStream[Any]) -> Any:
    """The items of an endless stream whose server ends it: every item, then the ClientError that end is."""
    with pytest.raises(ClientError) as cut:
        async for item in stream:
            yield item
    assert cut.value.reason == "Transport"


async def _wait(event: threading.Event) -> bool:
    return await anyio.to_thread.run_sync(event.wait, 10)


@pytest.mark.anyio
async def test_stream_is_lazy():
    calls: list[httpx2.Request] = []

    def handler(request: httpx2.Request) -> httpx2.Response:
        calls.append(request)
        body = f"data: {json.dumps(_agent_selected(1))}\n\n".encode()
        return httpx2.Response(200, headers={"content-type": "text/event-stream"}, content=body)

    async with OpenCodeClient("http://x", transport=httpx2.MockTransport(handler)) as c:
        stream = c.session.events("ses_1", after=0)
        assert isinstance(stream, EventStream) and calls == []
        items = [item async for item in _until_cut(stream)]
        assert [i.durable.seq for i in items] == [1]
        assert calls[0].headers["accept"] == "text/event-stream"
        assert calls[0].url.query == b"after=0"


@pytest.mark.anyio
async def test_stream_parses_crlf_comments_and_multiline_data(sse_client, sse_server):
    stream = sse_client.session.events("ses_1", after=5)
    items = [item async for item in _until_cut(stream)]
    assert [(i.type, i.durable.seq, i.data.agent) for i in items] == [
        ("session.agent.selected", 1, "build"),
        ("session.agent.selected", 2, "plan"),
    ]
    assert stream.last_event_id == "2"
    assert sse_server[1].queries[-1] == "after=5"


@pytest.mark.anyio
async def test_log_stream_ends_with_synced_marker_and_sends_booleans(sse_client, sse_server):
    items = [item async for item in sse_client.session.log("ses_1", after=2, follow=False)]
    assert items[-1] == LogSynced(aggregateID="ses_1", seq=4)
    assert items[0].durable.seq == 3 and items[0].data.agent == "build"
    assert items[1].type == "session.from.the.future" and items[1].durable.seq == 4  # decoded, not fatal
    assert sse_server[1].queries[-1] == "after=2&follow=false"


@pytest.mark.anyio
async def test_instance_stream_starts_with_server_connected(sse_client):
    items = [item async for item in _until_cut(sse_client.event.subscribe())]
    assert isinstance(items[0], ServerConnected) and isinstance(items[1], GlobalDisposed)
    assert [i.type for i in items] == ["server.connected", "global.disposed"]


@pytest.mark.anyio
async def test_only_a_stream_that_ends_by_itself_ends_without_an_error(sse_client):
    # the same clean end of body: the end of a log read without follow, but a lost connection for a followed one
    assert [i.type async for i in sse_client.session.log("ses_1", follow=False)][-1] == "log.synced"
    followed = sse_client.session.log("ses_1", follow=True)
    with pytest.raises(ClientError) as cut:
        async for _ in followed:
            pass
    assert cut.value.reason == "Transport"
    with pytest.raises(StopAsyncIteration):  # and it stays ended
        await followed.__anext__()


@pytest.mark.anyio
async def test_stream_errors_surface_on_first_next(sse_client):
    stream = sse_client.session.events("ses_missing")
    with pytest.raises(SessionNotFoundError) as raised:
        await stream.__anext__()
    assert raised.value.sessionID == "ses_missing"
    with pytest.raises(StopAsyncIteration):
        await stream.__anext__()

    with pytest.raises(ClientError) as wrong:
        async for _ in sse_client.session.events("ses_json"):
            pass
    assert (wrong.value.reason, wrong.value.status) == ("UnsupportedContentType", 200)


@pytest.mark.anyio
async def test_bad_items_are_malformed_response(sse_client):
    for sid in ("ses_bad", "ses_bad_shape", "ses_huge"):
        with pytest.raises(ClientError) as raised:
            async for _ in sse_client.session.events(sid):
                pass
        assert raised.value.reason == "MalformedResponse", sid


@pytest.mark.anyio
async def test_a_dropped_stream_is_transport(sse_client):
    stream = sse_client.session.events("ses_drop")
    first = await stream.__anext__()
    assert first.durable.seq == 1
    with pytest.raises(ClientError) as raised:
        await stream.__anext__()
    assert raised.value.reason == "Transport"
    assert isinstance(raised.value.cause, httpx2.TransportError)


@pytest.mark.anyio
async def test_closing_the_stream_disconnects_the_server(sse_client, sse_server):
    state = sse_server[1]

    stream = sse_client.session.events("ses_forever_aclose")
    async for item in stream:
        assert item.durable.seq == 1
        break
    await stream.aclose()
    assert await _wait(state.watch("ses_forever_aclose"))

    async with sse_client.session.events("ses_forever_ctx") as s:
        assert (await s.__anext__()).durable.seq == 1
    assert await _wait(state.watch("ses_forever_ctx"))
    with pytest.raises(StopAsyncIteration):
        await s.__anext__()


@pytest.mark.anyio
async def test_cancelling_the_reader_disconnects_the_server(sse_client, sse_server):
    stream = sse_client.session.events("ses_forever_cancel")
    assert (await stream.__anext__()).durable.seq == 1
    with anyio.move_on_after(0.05):
        await stream.__anext__()  # the server sends nothing more; the timeout cancels this read
    assert await _wait(sse_server[1].watch("ses_forever_cancel"))


@pytest.mark.anyio
async def test_fields_added_by_a_newer_server_are_ignored(client):
    info = await client.session.get("ses_newer_server")
    assert info.id == "ses_newer_server" and not hasattr(info, "futureField")
