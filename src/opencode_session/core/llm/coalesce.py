"""A network backend for the provider HTTP clients whose connections hold small writes until the next read, so a
request's headers and body leave in one write (one packet, one wake-up of the peer) instead of one each, and answer
the pool's idle-connection probe with one poll instead of anyio's attribute walk."""

from __future__ import annotations

import select
import socket
import ssl
import typing
from collections.abc import Iterable

import httpcore2
from httpcore2 import AsyncNetworkBackend, AsyncNetworkStream

# Held bytes beyond this go out at once: coalescing pays for small requests; a large body is sent as it comes.
HOLD_BYTES = 64 * 1024

SocketOption = tuple[int, int, int] | tuple[int, int, bytes | bytearray] | tuple[int, int, None, int]


class CoalescingStream(AsyncNetworkStream):
    """Writes are held until the next read (HTTP/1.1 reads the response only after the whole request was written),
    closing, a TLS upgrade, or `HOLD_BYTES`."""

    def __init__(self, inner: AsyncNetworkStream) -> None:
        self._inner = inner
        self._socket: socket.socket | None = inner.get_extra_info("socket")
        self._held: list[bytes] = []
        self._size = 0
        self._timeout: float | None = None

    async def _flush(self) -> None:
        if self._held:
            data = b"".join(self._held) if len(self._held) > 1 else self._held[0]
            self._held.clear()
            self._size = 0
            await self._inner.write(data, timeout=self._timeout)

    async def write(self, buffer: bytes, timeout: float | None = None) -> None:
        if not buffer:
            return
        self._held.append(buffer)
        self._size += len(buffer)
        self._timeout = timeout
        if self._size > HOLD_BYTES:
            await self._flush()

    async def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        await self._flush()
        return await self._inner.read(max_bytes, timeout=timeout)

    async def aclose(self) -> None:
        self._held.clear()  # a request abandoned before its response was read: nothing more goes out
        await self._inner.aclose()

    async def start_tls(self, ssl_context: ssl.SSLContext, server_hostname: str | None = None,
                        timeout: float | None = None) -> AsyncNetworkStream:
        await self._flush()
        return CoalescingStream(await self._inner.start_tls(ssl_context, server_hostname, timeout))

    def get_extra_info(self, info: str) -> typing.Any:
        if info == "is_readable":
            # The pool asks this of every idle connection each time a request starts or ends; anyio answers by
            # building a dict of every socket attribute (a getpeername each), ~25 us per connection.
            fd = -1 if self._socket is None else self._socket.fileno()
            if fd == -1:
                return True
            probe = select.poll()
            probe.register(fd, select.POLLIN)
            return bool(probe.poll(0))
        return self._inner.get_extra_info(info)


class CoalescingBackend(AsyncNetworkBackend):
    """httpcore's own backend, with every connection's stream wrapped in `CoalescingStream`."""

    def __init__(self, inner: AsyncNetworkBackend | None = None) -> None:
        self._inner = inner or httpcore2.AnyIOBackend()

    async def connect_tcp(self, host: str, port: int, timeout: float | None = None, local_address: str | None = None,
                          socket_options: Iterable[SocketOption] | None = None) -> AsyncNetworkStream:
        return CoalescingStream(await self._inner.connect_tcp(host, port, timeout=timeout, local_address=local_address,
                                                              socket_options=socket_options))

    async def connect_unix_socket(self, path: str, timeout: float | None = None,
                                  socket_options: Iterable[SocketOption] | None = None) -> AsyncNetworkStream:
        return CoalescingStream(await self._inner.connect_unix_socket(path, timeout=timeout,
                                                                      socket_options=socket_options))

    async def sleep(self, seconds: float) -> None:
        await self._inner.sleep(seconds)
