"""A loopback TCP proxy that can stop forwarding (a network partition between one host and its database): while
`cut`, nothing is read from either side of any connection, new ones included, so what was sent waits in the
sockets' buffers, as on a link that silently stopped delivering; `heal` forwards it all again. Its own event loop
runs in a thread, so it forwards whatever the test's loop is doing."""

from __future__ import annotations

import asyncio
import contextlib
import threading


class TcpProxy:
    def __init__(self, target_host: str, target_port: int) -> None:
        self.target = (target_host, target_port)
        self.port = 0
        self.connections = 0
        self._loop = asyncio.new_event_loop()
        self._flowing: asyncio.Event | None = None
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._thread = threading.Thread(target=self._loop.run_forever, name="tcp-proxy", daemon=True)

    def start(self) -> TcpProxy:
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self._start(), self._loop).result(10)
        return self

    async def _start(self) -> None:
        self._flowing = asyncio.Event()
        self._flowing.set()
        self._server = await asyncio.start_server(self._accepted, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]

    def cut(self) -> None:
        """Stop forwarding, both ways, on every connection (and answer no new one)."""
        self._call(lambda: self._flow().clear())

    def heal(self) -> None:
        """Forward again whatever waited, and everything after it."""
        self._call(lambda: self._flow().set())

    def stop(self) -> None:
        async def _stop() -> None:
            if self._server is not None:
                self._server.close()
            for task in list(self._tasks):
                task.cancel()
            await asyncio.gather(*self._tasks, return_exceptions=True)

        with contextlib.suppress(Exception):
            asyncio.run_coroutine_threadsafe(_stop(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)

    def _flow(self) -> asyncio.Event:
        assert self._flowing is not None
        return self._flowing

    def _call(self, fn) -> None:
        done = threading.Event()

        def run() -> None:
            fn()
            done.set()

        self._loop.call_soon_threadsafe(run)
        done.wait(10)

    async def _accepted(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        self.connections += 1
        try:
            await self._flow().wait()
            up_reader, up_writer = await asyncio.open_connection(*self.target)
            try:
                await asyncio.gather(self._pump(reader, up_writer), self._pump(up_reader, writer))
            finally:
                up_writer.close()
        except (OSError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()
            self._tasks.discard(task)

    async def _pump(self, source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> None:
        try:
            while True:
                await self._flow().wait()
                data = await source.read(65536)
                if not data:
                    break
                await self._flow().wait()  # (read just before a cut: held until the link heals)
                sink.write(data)
                await sink.drain()
        finally:
            with contextlib.suppress(OSError):
                sink.close()  # one side ended: so does the other
