"""The in-process streaming ASGI transport, driven through httpx2.AsyncClient against a tiny Starlette app."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from typing import Any

import anyio
import httpx2
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from opencode_session.sdk.transport import ASGIStreamingTransport

pytestmark = pytest.mark.anyio

# Only a safety net so a regression fails instead of hanging; no test relies on it elapsing.
DEADLINE = 5


class Feed:
    """Lets a test decide when the endless SSE route produces each frame, and see what the route went through."""

    def __init__(self) -> None:
        self.frames: asyncio.Queue[str] = asyncio.Queue()
        self.produced: list[str] = []
        # Each time the route waits for its next frame it reports how many it has already produced.
        self.asked: asyncio.Queue[int] = asyncio.Queue()
        self.stopped = asyncio.Event()

    async def events(self) -> AsyncIterator[str]:
        try:
            while True:
                self.asked.put_nowait(len(self.produced))
                frame = await self.frames.get()
                self.produced.append(frame)
                yield f"data: {frame}\n\n"
        finally:
            self.stopped.set()


class DisconnectRecorder:
    """ASGI middleware that notes when the app is handed an `http.disconnect` message."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.disconnect_seen = asyncio.Event()

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        async def recording_receive() -> Any:
            message = await receive()
            if message["type"] == "http.disconnect":
                self.disconnect_seen.set()
            return message

        await self.app(scope, recording_receive, send)


def make_app(feed: Feed) -> DisconnectRecorder:
    async def hello(request: Request) -> Response:
        return JSONResponse(
            {
                "name": request.path_params["name"],
                "greeting": request.query_params.get("greeting"),
                "agent": request.headers.get("x-agent"),
                "client": list(request.client) if request.client else None,
            },
            headers={"x-served-by": "test-app"},
        )

    async def echo(request: Request) -> Response:
        body = await request.body()
        return Response(body, status_code=201, media_type=request.headers.get("content-type"))

    async def events(request: Request) -> Response:
        return StreamingResponse(feed.events(), media_type="text/event-stream")

    async def explode(request: Request) -> Response:
        raise RuntimeError("route failed")

    async def explode_midway(request: Request) -> Response:
        async def body() -> AsyncIterator[bytes]:
            yield b"first part\n"
            raise RuntimeError("stream failed halfway")

        return StreamingResponse(body(), media_type="text/plain")

    app = Starlette(
        routes=[
            Route("/hello/{name}", hello),
            Route("/echo", echo, methods=["POST"]),
            Route("/events", events),
            Route("/explode", explode),
            Route("/explode-midway", explode_midway),
        ]
    )
    return DisconnectRecorder(app)


async def next_data_line(lines: AsyncIterator[str]) -> str:
    async for line in lines:
        if line:
            return line
    raise AssertionError("stream ended before another SSE frame arrived")


@pytest.fixture
def feed() -> Feed:
    return Feed()


@pytest.fixture
def app(feed: Feed) -> DisconnectRecorder:
    return make_app(feed)


@pytest.fixture
async def transport(app: DisconnectRecorder) -> AsyncIterator[ASGIStreamingTransport]:
    transport = ASGIStreamingTransport(app, client=("10.0.0.7", 4242))
    yield transport
    await transport.aclose()


@pytest.fixture
async def client(transport: ASGIStreamingTransport) -> AsyncIterator[httpx2.AsyncClient]:
    async with httpx2.AsyncClient(transport=transport, base_url="http://embedded") as client:
        yield client


async def test_json_and_post_bodies_round_trip_with_status_and_headers(client, transport):
    with anyio.fail_after(DEADLINE):
        got = await client.get("/hello/w%20orld", params={"greeting": "hi there"}, headers={"X-Agent": "pytest"})
        assert got.status_code == 200
        assert got.headers["x-served-by"] == "test-app"
        assert got.headers["content-type"] == "application/json"
        assert got.json() == {"name": "w orld", "greeting": "hi there", "agent": "pytest", "client": ["10.0.0.7", 4242]}

        payload = b'{"chunks": [1, 2, 3]}' * 500
        posted = await client.post("/echo", content=payload, headers={"content-type": "application/json"})
        assert posted.status_code == 201
        assert posted.headers["content-type"] == "application/json"
        assert posted.content == payload

        missing = await client.get("/nowhere")
        assert missing.status_code == 404

    assert transport.running_tasks == ()


async def test_sse_frames_arrive_as_sent_and_closing_disconnects_the_app(client, transport, feed, app):
    with anyio.fail_after(DEADLINE):
        async with client.stream("GET", "/events") as response:
            assert response.status_code == 200
            assert response.headers["content-type"].startswith("text/event-stream")
            async with contextlib.aclosing(response.aiter_lines()) as lines:
                assert await feed.asked.get() == 0
                feed.frames.put_nowait("one")
                assert await next_data_line(lines) == "data: one"
                # The first frame is in hand while the app is still waiting to be told to make the second.
                assert feed.produced == ["one"]
                assert await feed.asked.get() == 1

                feed.frames.put_nowait("two")
                assert await next_data_line(lines) == "data: two"

            assert not app.disconnect_seen.is_set()
            assert len(transport.running_tasks) == 1

        assert app.disconnect_seen.is_set()
        assert feed.stopped.is_set()
        assert feed.produced == ["one", "two"]
        assert transport.running_tasks == ()


async def test_exception_before_response_start_propagates_to_the_caller():
    async def broken_app(scope, receive, send):
        raise ValueError("no response for you")

    transport = ASGIStreamingTransport(broken_app)
    async with httpx2.AsyncClient(transport=transport, base_url="http://embedded") as client:
        with anyio.fail_after(DEADLINE), pytest.raises(ValueError, match="no response for you"):
            await client.get("/")
        assert transport.running_tasks == ()


async def test_app_that_never_answers_is_a_protocol_error():
    async def silent_app(scope, receive, send):
        await receive()

    transport = ASGIStreamingTransport(silent_app)
    async with httpx2.AsyncClient(transport=transport, base_url="http://embedded") as client:
        with anyio.fail_after(DEADLINE), pytest.raises(httpx2.RemoteProtocolError):
            await client.get("/")


async def test_exception_after_response_start_surfaces_as_transport_error_while_reading(client, transport):
    received: list[bytes] = []
    with anyio.fail_after(DEADLINE):
        async with client.stream("GET", "/explode-midway") as response:
            assert response.status_code == 200
            with pytest.raises(httpx2.TransportError) as caught:
                async for chunk in response.aiter_bytes():
                    received.append(chunk)
    assert received == [b"first part\n"]
    assert isinstance(caught.value.__cause__, RuntimeError)
    assert "stream failed halfway" in str(caught.value.__cause__)
    assert transport.running_tasks == ()


async def test_route_error_is_answered_by_the_server_error_middleware_and_logged(client, transport, caplog):
    with anyio.fail_after(DEADLINE), caplog.at_level(logging.ERROR, logger="opencode_session.sdk.transport"):
        response = await client.get("/explode")
    assert response.status_code == 500
    assert response.text == "Internal Server Error"
    assert any(record.exc_info and "route failed" in str(record.exc_info[1]) for record in caplog.records)
    assert transport.running_tasks == ()


async def test_aclose_cancels_a_still_running_stream(client, transport, feed):
    with anyio.fail_after(DEADLINE):
        async with client.stream("GET", "/events") as response:
            async with contextlib.aclosing(response.aiter_lines()) as lines:
                feed.frames.put_nowait("only")
                assert await next_data_line(lines) == "data: only"
                assert len(transport.running_tasks) == 1

                await transport.aclose()

                assert transport.running_tasks == ()
                assert feed.stopped.is_set()
                with pytest.raises(httpx2.TransportError):
                    await next_data_line(lines)


async def test_cancelling_the_caller_before_the_response_starts_stops_the_app():
    entered = asyncio.Event()
    app_cancelled = asyncio.Event()

    async def slow_app(scope, receive, send):
        entered.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            app_cancelled.set()
            raise

    transport = ASGIStreamingTransport(slow_app)
    async with httpx2.AsyncClient(transport=transport, base_url="http://embedded") as client:
        request = asyncio.create_task(client.get("/"))
        with anyio.fail_after(DEADLINE):
            await entered.wait()
            request.cancel()
            with pytest.raises(asyncio.CancelledError):
                await request
        assert app_cancelled.is_set()
        assert transport.running_tasks == ()


async def test_contrast_stock_asgi_transport_withholds_the_first_frame_of_an_endless_stream(app, feed):
    # EXPECTATION: the stock transport runs the app to completion before returning anything, so even after the
    # app has sent its first frame the caller still has no response. This is why ASGIStreamingTransport exists.
    async with httpx2.AsyncClient(transport=httpx2.ASGITransport(app), base_url="http://embedded") as client:

        async def open_stream() -> None:
            async with client.stream("GET", "/events"):
                pass

        request = asyncio.create_task(open_stream())
        with anyio.fail_after(DEADLINE):
            assert await feed.asked.get() == 0
            feed.frames.put_nowait("one")
            # The app has handed frame one to send() and is now waiting to be asked for frame two.
            assert await feed.asked.get() == 1
        assert not request.done()

        request.cancel()
        with pytest.raises(asyncio.CancelledError):
            await request
        assert feed.stopped.is_set()
