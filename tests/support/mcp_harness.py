"""Helpers for tests with real MCP servers (tests/support/mcp_server.py): their opencode.json entries, one served over
HTTP on a free loopback port, and what processes this test process has as children."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

SERVER = Path(__file__).with_name("mcp_server.py")


def local(name: str, *, timeout: int | None = None, **environment: str) -> dict[str, Any]:
    """The `mcp` entry of a local (stdio) test server."""
    entry: dict[str, Any] = {"type": "local", "command": [sys.executable, str(SERVER), name],
                             "environment": environment}
    if timeout is not None:
        entry["timeout"] = timeout
    return entry


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_until(check: Callable[[], Any], timeout: float = 10.0, what: str = "the condition") -> Any:
    """Poll `check` until it answers something true; AssertionError after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)


class Served:
    """A test server over streamable HTTP (`http`) or SSE (`sse`) on a loopback port, as a process that `restart`
    ends and starts again on the same port (so it forgets every MCP session it had)."""

    def __init__(self, name: str, transport: str, environment: dict[str, str]) -> None:
        self.argv = [sys.executable, str(SERVER), name, transport]
        self.environment = environment
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/{'mcp' if transport == 'http' else 'sse'}"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        proc = self.proc = subprocess.Popen([*self.argv, str(self.port)], env={**os.environ, **self.environment},
                                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

        def listening() -> bool:
            assert proc.poll() is None, "the MCP test server exited"
            with socket.socket() as s:
                return s.connect_ex(("127.0.0.1", self.port)) == 0

        wait_until(listening, 20, "the MCP test server to listen")

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.terminate()
            self.proc.wait(10)
            self.proc = None

    def restart(self) -> None:
        self.stop()
        self.start()


@contextmanager
def serving(name: str, transport: str = "http", **environment: str) -> Iterator[Served]:
    """A test server over HTTP on a free port, stopped at the end."""
    server = Served(name, transport, environment)
    server.start()
    try:
        yield server
    finally:
        server.stop()


@contextmanager
def served(name: str, transport: str = "http", **environment: str) -> Iterator[str]:
    """A test server over streamable HTTP (`http`) or SSE (`sse`) on a free port; yields its URL."""
    with serving(name, transport, **environment) as server:
        yield server.url


def children(pid: int | None = None) -> list[int]:
    """The live (not zombie) processes whose parent is `pid` (this process by default), from /proc."""
    parent = os.getpid() if pid is None else pid
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path("/proc", entry, "stat").read_text()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        if fields[0] != "Z" and int(fields[1]) == parent:
            found.append(int(entry))
    return found


def alive(pid: int) -> bool:
    try:
        stat = Path("/proc", str(pid), "stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"
