"""The client's default HTTP transport: httpx's own, with no cap on connections (every open event stream holds one)
and an idle-connection probe that costs one poll instead of anyio's attribute walk."""

from __future__ import annotations

import select
import socket
import ssl
import typing
from collections.abc import Iterable

import httpcore2
import httpx2
from httpcore2 import AsyncNetworkBackend, AsyncNetworkStream

from ..compat import set_network_backend

# Idle connections kept open for reuse; beyond this a finished request's connection is closed.
KEEPALIVE = 100

SocketOption = tuple[int, int, int] | tuple[int, int, bytes | bytearray] | tuple[int, int, None, int]


def readable(sock: socket.socket | None) -> bool:
    """True when an idle connection's socket has something to read: the server closed it (or broke the protocol)."""
    fd = -1 if sock is None else sock.fileno()
    if fd == -1:
        return True
    if not hasattr(select, "poll"):  # Windows
        return bool(select.select([fd], [], [], 0)[0])
    probe = select.poll()
    probe.register(fd, select.POLLIN)
    return bool(probe.poll(0))


class ProbedStream(AsyncNetworkStream):
    """A connection whose `is_readable` is one poll. httpcore asks it of every idle connection each time a request
    starts or ends; anyio answers by building every socket attribute (a getpeername each), ~25 us per connection,
    which made a client with hundreds of open streams quadratic."""

    def __init__(self, inner: AsyncNetworkStream) -> None:
        self._inner = inner
        self._socket: socket.socket | None = inner.get_extra_info("socket")

    async def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        return await self._inner.read(max_bytes, timeout=timeout)

    async def write(self, buffer: bytes, timeout: float | None = None) -> None:
        await self._inner.write(buffer, timeout=timeout)

    async def aclose(self) -> None:
        await self._inner.aclose()

    async def start_tls(self, ssl_context: ssl.SSLContext, server_hostname: str | None = None,
                        timeout: float | None = None) -> AsyncNetworkStream:
        return ProbedStream(await self._inner.start_tls(ssl_context, server_hostname, timeout))

    def get_extra_info(self, info: str) -> typing.Any:
        return readable(self._socket) if info == "is_readable" else self._inner.get_extra_info(info)


class ProbedBackend(AsyncNetworkBackend):
    """httpcore's own backend, every connection wrapped in `ProbedStream`."""

    def __init__(self) -> None:
        self._inner = httpcore2.AnyIOBackend()

    async def connect_tcp(self, host: str, port: int, timeout: float | None = None, local_address: str | None = None,
                          socket_options: Iterable[SocketOption] | None = None) -> AsyncNetworkStream:
        return ProbedStream(await self._inner.connect_tcp(host, port, timeout=timeout, local_address=local_address,
                                                          socket_options=socket_options))

    async def connect_unix_socket(self, path: str, timeout: float | None = None,
                                  socket_options: Iterable[SocketOption] | None = None) -> AsyncNetworkStream:
        return ProbedStream(await self._inner.connect_unix_socket(path, timeout=timeout,
                                                                  socket_options=socket_options))

    async def sleep(self, seconds: float) -> None:
        await self._inner.sleep(seconds)


def http_transport() -> httpx2.AsyncHTTPTransport:
    """The transport `OpenCodeClient` uses unless it is given one."""
    limits = httpx2.Limits(max_connections=None, max_keepalive_connections=KEEPALIVE)
    transport = httpx2.AsyncHTTPTransport(limits=limits)
    set_network_backend(transport, ProbedBackend())
    return transport
