"""OpenCode, the Embedded host: an `async with`-scoped in-process runtime and server app reached through a
streaming in-memory transport (no listener, no socket), exposing the client API on one object."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from types import TracebackType
from typing import Any

import httpx2

from ..client.generated import OpenCodeClient
from ..client.websocket import WebSocketConnector
from ..core.llm.model import Provider, ResolvedModel
from ..core.llm.retry import Clock
from ..core.plugins import Plugin
from ..core.runtime import PtyEnvironment, Runtime, RuntimeOptions, no_overlay
from ..core.store import require_backend
from ..core.tools.arguments import as_tool
from ..core.tools.registry import ToolRegistry, default_registry
from ..core.tools.tool import Tool
from ..core.wiring import make_drain_factory
from ..server.app import create_app, lifespan
from ..server.guard import GuardOptions
from .transport import ASGIStreamingTransport
from .websocket import InMemoryWebSockets

EMBEDDED_HOST = "opencode.local"
EMBEDDED_BASE_URL = f"http://{EMBEDDED_HOST}"


class OpenCode(OpenCodeClient):
    """`async with OpenCode(db=...) as oc: await oc.session.create()`.

    Shares the networked client's methods, routing, middleware, codecs and errors; only the transport differs.
    Embedded-only: `tools` (Python tools the runner may call, tool objects or typed functions; read when the host
    opens; `oc.tools.tool` is a decorator for more), `runtime`
    (the core objects), `transport`
    and `websockets` (the in-memory HTTP transport and WebSocket connector, for another client of the same host) and
    `pty_environment` (the host's additions to a new terminal's environment), `plugins` (Python plugins given in code)
    and `discover_plugins` (also load the installed ones and opencode.json's `python:` entries, as `ocs` does).
    `pty.connect` works as over the network: its WebSocket runs in memory through the same app, middleware and
    handlers.
    `trust_all=True` gives every Location's project configuration its authority (hooks, MCP servers, plugins,
    permissions) without the user trusting it first, as `OCS_TRUST_ALL=1` does (None: as that variable says); an
    embedder whose repositories are its own may want it (docs/security.md).
    With `create=False` a database file that does not exist is not created: `open` raises DatabaseNotFoundError
    (a StoreError, as is a database that cannot be opened, e.g. in a read-only place).
    Closing releases the database, ends every stream and stops every drain. The default database is in memory; a
    `postgresql://` one needs the `postgres` extra (without it the constructor raises BackendNotInstalledError).
    """

    def __init__(
        self,
        *,
        db: str | Path = ":memory:",
        directory: str | Path | None = None,
        env: Mapping[str, str] | None = None,
        tools: Sequence[Tool | Callable[..., Any]] = (),
        provider: Callable[[ResolvedModel], Provider] | None = None,
        clock: Clock | None = None,
        heartbeat: float = 15.0,
        headers: Mapping[str, str] | None = None,
        stall_timeout: float = 15.0,
        pty_environment: PtyEnvironment = no_overlay,
        plugins: Sequence[Plugin] = (),
        discover_plugins: bool = False,
        create: bool = True,
        trust_all: bool | None = None,
    ) -> None:
        require_backend(db)  # a postgresql:// address without the `postgres` extra: BackendNotInstalledError, now
        self.tools: ToolRegistry = default_registry()
        for tool in tools:
            self.tools.register(as_tool(tool))
        self._options = RuntimeOptions(
            db_path=db, directory=directory or os.getcwd(), env=dict(os.environ if env is None else env),
            drain_factory=make_drain_factory(tools=self.tools, provider=provider, clock=clock),
            plugins=tuple(plugins), discover_plugins=discover_plugins, create_database=create,
            pty_environment=pty_environment, trust_all=trust_all,
        )
        self._heartbeat = heartbeat
        self._stall_timeout = stall_timeout
        self._runtime: Runtime | None = None
        self._app: Any = None
        self._lifespan: AbstractAsyncContextManager[None] | None = None
        self._in_memory = ASGIStreamingTransport(self._serve)
        self._websockets = InMemoryWebSockets(lambda: self._app)
        password = self._options.env.get("OPENCODE_SERVER_PASSWORD")
        auth = (self._options.env.get("OPENCODE_SERVER_USERNAME") or "opencode", password) if password else None
        super().__init__(EMBEDDED_BASE_URL, headers=headers, auth=auth, transport=self._in_memory,
                         websocket=self._websockets.connect)

    @property
    def transport(self) -> ASGIStreamingTransport:
        """The in-memory transport into this host's app: another client built with it (and EMBEDDED_BASE_URL) talks
        to this same host, e.g. with other credentials."""
        return self._in_memory

    @property
    def websockets(self) -> WebSocketConnector:
        """The in-memory WebSocket connector into this host's app, for another client (`websocket=`) of it: what
        carries `pty.connect`, which the HTTP transport cannot."""
        return self._websockets.connect

    async def _serve(self, scope: Any, receive: Any, send: Any) -> None:
        if self._app is None:  # a call before `open` or after `aclose`: the client reports a Transport failure
            raise httpx2.ConnectError("the embedded host is not open: use `async with OpenCode(...)`")
        await self._app(scope, receive, send)

    @property
    def runtime(self) -> Runtime:
        if self._runtime is None:
            raise RuntimeError("the embedded host is not open: use `async with OpenCode(...)`")
        return self._runtime

    async def open(self) -> OpenCode:
        runtime = Runtime(self._options)
        # The in-memory transport's requests name EMBEDDED_BASE_URL's host; nothing else can reach this app.
        guard = GuardOptions(allowed_hosts=(EMBEDDED_HOST,))
        app = create_app(runtime, env=self._options.env, heartbeat=self._heartbeat, guard=guard,
                         stall_timeout=self._stall_timeout)
        opened = lifespan(app)
        await opened.__aenter__()  # opens the runtime: a failure closes it again and is raised here
        self._runtime, self._app, self._lifespan = runtime, app, opened
        return self

    async def aclose(self) -> None:
        if self._app is not None:
            self._app.state.ocs.shutdown.set()  # end streams before the transport waits for their tasks
        await super().aclose()
        await self._websockets.aclose()
        await self._in_memory.aclose()
        self._app = None
        if self._lifespan is not None:
            opened, self._lifespan = self._lifespan, None
            await opened.__aexit__(None, None, None)  # closes the runtime
            self._runtime = None

    async def __aenter__(self) -> OpenCode:
        return await self.open()

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        await self.aclose()
