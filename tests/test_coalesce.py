"""Provider connections send a request in one write: headers and body leave together (one packet and one wake-up of
the peer, not one each), on a kept-alive connection too, and a large body arrives whole. Provider and API client
pools drop an idle connection the server closed."""

from __future__ import annotations

import asyncio
import contextlib

import anyio
import httpcore2
import httpx2
import pytest

from opencode_session.client.transport import http_transport
from opencode_session.core.llm.coalesce import HOLD_BYTES, CoalescingBackend
from opencode_session.core.llm.providers import _coalescing_transport

pytestmark = pytest.mark.anyio


class CountingBackend(httpcore2.AnyIOBackend):
    """The real backend, counting the writes its connections make."""

    def __init__(self) -> None:
        self.writes: list[int] = []

    async def connect_tcp(self, *args, **kwargs):
        stream = await super().connect_tcp(*args, **kwargs)
        real_write, writes = stream.write, self.writes

        async def write(buffer: bytes, timeout: float | None = None) -> None:
            writes.append(len(buffer))
            await real_write(buffer, timeout)

        stream.write = write
        return stream


async def echo_server() -> tuple[asyncio.Server, str]:
    """Answers every request on a connection with its body's length."""

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while head := await reader.readuntil(b"\r\n\r\n"):
            length = next(int(line.split(b":")[1]) for line in head.split(b"\r\n")
                          if line.lower().startswith(b"content-length:"))
            body = await reader.readexactly(length)
            answer = str(len(body)).encode()
            writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: %d\r\n\r\n%s" % (len(answer), answer))
            await writer.drain()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    return server, f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}/v1/chat/completions"


async def test_a_request_leaves_in_one_write_and_a_large_body_arrives_whole():
    server, url = await echo_server()
    counting = CountingBackend()
    transport = _coalescing_transport(httpx2.Limits())
    transport._pool._network_backend = CoalescingBackend(counting)
    async with server, httpx2.AsyncClient(transport=transport) as client:
        for size in (10, 2_000):  # the second one reuses the kept-alive connection
            response = await client.post(url, content=b"x" * size, headers={"content-type": "application/json"})
            assert response.text == str(size)
        assert len(counting.writes) == 2  # one write per request
        big = HOLD_BYTES * 3
        response = await client.post(url, content=b"y" * big)
        assert response.text == str(big)
        assert sum(counting.writes[2:]) > big  # headers and the whole body went out


def test_the_providers_transport_uses_the_coalescing_backend():
    transport = _coalescing_transport(httpx2.Limits())
    assert isinstance(transport._pool._network_backend, CoalescingBackend)


@pytest.mark.parametrize("make", [lambda: _coalescing_transport(httpx2.Limits()), http_transport],
                         ids=["provider", "client"])
async def test_an_idle_connection_the_server_closed_is_not_reused(make):
    """The pool probes idle connections for readability (the provider pools' and the API client's answer with one
    poll); a peer's close makes one readable, so the next request opens a fresh connection instead of failing."""
    peers: list[asyncio.StreamWriter] = []

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        peers.append(writer)
        with contextlib.suppress(asyncio.IncompleteReadError, ConnectionError):  # the connection ends
            while head := await reader.readuntil(b"\r\n\r\n"):
                length = next(int(line.split(b":")[1]) for line in head.split(b"\r\n")
                              if line.lower().startswith(b"content-length:"))
                await reader.readexactly(length)
                writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok")
                await writer.drain()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    url = f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}/"
    async with server, httpx2.AsyncClient(transport=make()) as client:
        assert (await client.post(url, content=b"a")).text == "ok"
        stream = client._transport._pool.connections[0]._connection._network_stream
        assert stream.get_extra_info("is_readable") is False  # idle and open
        peers[0].close()
        await peers[0].wait_closed()
        with anyio.fail_after(5):
            while not stream.get_extra_info("is_readable"):  # the FIN is in flight on loopback
                await asyncio.sleep(0)
        assert (await client.post(url, content=b"b")).text == "ok"
        assert len(peers) == 2  # the second request went out on a new connection
