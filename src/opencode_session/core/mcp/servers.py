"""The MCP servers of every Location: started lazily when a Step (or `POST /api/mcp/connect`) at that Location first
needs them (a status read never starts one), shared by its sessions, restarted when their configuration changes,
stopped when idle and when the runtime closes."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from ..config import Config
from .config import configured_servers
from .connection import BACKOFF_S, Launch, McpServer, Status, launch_of

log = logging.getLogger(__name__)

IDLE_STOP_S = 600.0  # a server no Step, call or status read used for this long is stopped (started again on need)
SWEEP_EVERY_S = 30.0
_READY_SLACK_S = 1.0  # beyond a server's own startup timeout, in case its task is slow to notice


@dataclass(frozen=True)
class McpStatus:
    """A server as `GET /api/mcp` reports it (OpenCode's MCP status): connected, disabled, or failed with why; or
    `stopped`: configured, not running (it starts with the next Step there, or a connect)."""

    status: Status | Literal["stopped"]
    error: str | None = None


class McpServers:
    """Servers by (Location directory, name). `at` returns those configured at a Location, starting the missing
    ones; `ready` also waits (each at most its startup timeout) for those still on their first attempt, so a
    Location without MCP servers never waits and a hanging server delays only the first Step there."""

    def __init__(self, env: Mapping[str, str], *, idle_stop_s: float = IDLE_STOP_S, backoff_s: float = BACKOFF_S,
                 overlay: Callable[[Path], Mapping[str, str]] | None = None) -> None:
        self.env = env
        self.idle_stop_s = idle_stop_s
        self.backoff_s = backoff_s
        self.overlay = overlay  # the host's environment additions for a local server in a directory
        self._servers: dict[tuple[Path, str], McpServer] = {}
        self._sweeper: asyncio.Task[None] | None = None
        self._closed = False
        self._listeners: list[Callable[[McpServer], None]] = []
        self._retiring: set[asyncio.Task[None]] = set()  # replaced servers being stopped
        self._configured: dict[Path, object] = {}  # the entries last seen configured per Location directory

    def _retire(self, server: McpServer) -> None:
        task = asyncio.create_task(server.stop(), name=f"mcp-stop-{server.name}")
        self._retiring.add(task)
        task.add_done_callback(self._retiring.discard)

    def on_change(self, listener: Callable[[McpServer], None]) -> None:
        """Have `listener` told of every server whose status or tools changed."""
        self._listeners.append(listener)

    def _changed(self, server: McpServer) -> None:
        for listener in self._listeners:
            listener(server)

    def at(self, directory: Path, config: Config) -> list[McpServer]:
        """The servers `config` names for the Location `directory`, in configuration order, started if they were
        not (or restarted, when their configuration or environment changed). Cheap when nothing changed."""
        entries = configured_servers(config)
        if self._configured.get(directory) is not entries:  # the configuration there changed: drop what it left out
            self._configured[directory] = entries
            for key in [key for key in self._servers if key[0] == directory and key[1] not in entries]:
                log.info("MCP server %s at %s: no longer configured, stopping it", key[1], directory)
                self._retire(self._servers.pop(key))
        if not entries:
            return []
        servers = []
        for name, entry in entries.items():
            key = (directory, name)
            server = self._servers.get(key)
            if server is None or server.launch.entry != entry:
                launch = launch_of(entry, directory, self.env, self.overlay)
                if server is None or server.launch != launch:
                    if server is not None:
                        log.info("MCP server %s at %s: its configuration changed, restarting it", name, directory)
                        self._retire(server)
                    server = self._start(key, launch)
            server.touch()
            servers.append(server)
        return servers

    def _start(self, key: tuple[Path, str], launch: Launch) -> McpServer:
        server = McpServer(launch, backoff_s=self.backoff_s, on_change=self._changed)
        self._servers[key] = server
        if self._closed:  # a runner that outlived its runtime: nothing is started any more
            server.status, server.error = "failed", "the runtime is closed"
            server.settled.set()
        else:
            server.start()
        if self._sweeper is None and not self._closed:
            self._sweeper = asyncio.create_task(self._sweep_forever(), name="mcp-idle-sweep")
        return server

    async def ready(self, directory: Path, config: Config) -> list[McpServer]:
        """`at`, once each server there has settled its first attempt (or its startup timeout has passed) and
        fetched the tool list a `tools/list_changed` announced (or its request timeout has passed)."""
        servers = self.at(directory, config)
        starting = [s for s in servers if not s.settled.is_set()]
        relisting = [s for s in servers if s.settled.is_set() and not s.listed.is_set()]
        if starting or relisting:
            limit = max([s.launch.entry.startup_timeout_s() for s in starting]
                        + [s.launch.entry.request_timeout_s() for s in relisting]) + _READY_SLACK_S
            waits = [asyncio.ensure_future(s.settled.wait()) for s in starting]
            waits += [asyncio.ensure_future(s.listed.wait()) for s in relisting]
            try:
                await asyncio.wait(waits, timeout=limit)
            finally:
                for wait in waits:
                    wait.cancel()
        return servers

    async def status(self, directory: Path, config: Config) -> dict[str, McpStatus]:
        """Every server configured at the Location, by name, as it stands once started."""
        return {s.name: McpStatus(s.status, s.error) for s in await self.ready(directory, config)}

    def statuses(self, directory: Path, config: Config) -> dict[str, McpStatus]:
        """Every server configured at the Location, by name, as it stands now: nothing is started (a GET starts no
        process), a server not running, or running under another configuration, is `stopped`."""
        answer: dict[str, McpStatus] = {}
        for name, entry in configured_servers(config).items():
            if not entry.enabled:
                answer[name] = McpStatus("failed", entry.problem) if entry.problem else McpStatus("disabled")
                continue
            server = self._servers.get((directory, name))
            if server is None or server.launch.entry != entry:
                answer[name] = McpStatus("stopped")
            else:
                answer[name] = McpStatus(server.status, server.error)
        return answer

    def running(self) -> list[McpServer]:
        return list(self._servers.values())

    async def stop_idle(self, now: float | None = None) -> int:
        """Stop the servers nobody used for `idle_stop_s`; how many were stopped."""
        now = time.monotonic() if now is None else now
        idle = [(key, s) for key, s in self._servers.items() if now - s.last_used >= self.idle_stop_s]
        for key, server in idle:
            del self._servers[key]
            self._configured.pop(key[0], None)
            log.info("MCP server %s at %s: idle, stopping it", server.name, key[0])
        await asyncio.gather(*(server.stop() for _, server in idle))
        return len(idle)

    async def release(self, directory: Path) -> int:
        """Stop the servers of a Location whose last session is gone; how many were stopped."""
        gone = [(key, s) for key, s in self._servers.items() if key[0] == directory]
        for key, _server in gone:
            del self._servers[key]
        self._configured.pop(directory, None)
        await asyncio.gather(*(server.stop() for _, server in gone))
        return len(gone)

    async def _sweep_forever(self) -> None:
        while True:
            await asyncio.sleep(min(SWEEP_EVERY_S, self.idle_stop_s))
            try:
                await self.stop_idle()
            except Exception:
                log.exception("stopping idle MCP servers failed")

    async def close(self) -> None:
        """Stop every server (the runtime is closing)."""
        self._closed = True
        if self._sweeper is not None:
            self._sweeper.cancel()
            await asyncio.gather(self._sweeper, return_exceptions=True)
        servers, self._servers = list(self._servers.values()), {}
        await asyncio.gather(*(server.stop() for server in servers), *self._retiring, return_exceptions=True)


__all__ = ["IDLE_STOP_S", "McpServers", "McpStatus"]
