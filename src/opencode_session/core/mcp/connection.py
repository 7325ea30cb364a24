"""One MCP server, connected through the official SDK and kept connected: a local one as a subprocess over stdio in
its Location, a remote one over streamable HTTP (SSE for older servers); the Location is offered as the client's
roots. Its tools and instructions are learnt at connect and its tool list again on
`notifications/tools/list_changed`; a server that fails to start or dies is reported and restarted with backoff;
calls go through `call`."""

from __future__ import annotations

import asyncio
import logging
import os
import shutil
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any, Literal

import anyio

from ..child_env import inherited
from ..config import McpLocalConfig, McpRemoteConfig
from ..telemetry import hooks
from . import parent_death
from .config import CONNECT_TIMEOUT_MS, ServerEntry

log = logging.getLogger(__name__)

Status = Literal["starting", "connected", "failed", "disabled"]

BACKOFF_S = 1.0  # the first restart's delay; each failure in a row doubles it
MAX_BACKOFF_S = 60.0
# A local server whose command is not found is tried this many times in a row (with the backoff between), then left
# failed until its configuration (or environment) changes: the Location's servers are then started anew.
MISSING_COMMAND_ATTEMPTS = 6
# A call whose server keeps reporting progress may run this long in all (OpenCode's execution limit).
MAX_CALL_S = 12 * 3600.0
STOP_GRACE_S = 10.0  # how long stopping may take before the connection's task is cancelled outright
_MAX_TOOL_PAGES = 100


class McpStartFailed(Exception):
    """Why a server could not be connected, already said in words (no exception type is added to it)."""


class McpCommandMissing(McpStartFailed):
    """A local server's command is not there (not found, or not executable)."""


class McpUnavailable(Exception):
    """A call to a server that is not connected, or whose connection broke during the call: the tool error."""


@dataclass(frozen=True)
class Launch:
    """How one server runs: its configuration, the Location directory (a local server's working directory) and the
    environment a local server gets (the PTY Environment rule: the runtime's, the entry's, the host's overlay)."""

    entry: ServerEntry
    directory: Path
    env: tuple[tuple[str, str], ...]

    @property
    def name(self) -> str:
        return self.entry.name


def _leaf(exc: BaseException) -> BaseException:
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


def describe(exc: BaseException) -> str:
    """A one-line account of why a connection failed (task groups wrap the real error in groups)."""
    leaf = _leaf(exc)
    if isinstance(leaf, TimeoutError):
        return "timed out"
    if isinstance(leaf, McpStartFailed):
        return str(leaf)
    text = str(leaf).strip()
    return f"{type(leaf).__name__}: {text}" if text else type(leaf).__name__


class _Watched:
    """The transport's read stream, telling the server when it ends (the process exited, the stream closed)."""

    def __init__(self, inner: Any, ended: Callable[[], None]) -> None:
        self._inner = inner
        self._ended = ended

    @property
    def last_context(self) -> Any:
        return getattr(self._inner, "last_context", None)

    async def receive(self) -> Any:
        try:
            return await self._inner.receive()
        except (anyio.EndOfStream, anyio.ClosedResourceError):
            self._ended()
            raise

    async def aclose(self) -> None:
        await self._inner.aclose()

    def __aiter__(self) -> _Watched:
        return self

    async def __anext__(self) -> Any:
        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None

    async def __aenter__(self) -> _Watched:
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        await self.aclose()


@asynccontextmanager
async def _stdio(config: McpLocalConfig, launch: Launch) -> AsyncIterator[Any]:
    from mcp.client.stdio import StdioServerParameters, stdio_client

    env = hooks.with_traceparent(dict(launch.env))  # while tracing, the server joins the trace that started it
    program = config.command[0]
    found = (str(launch.directory / program) if os.sep in program else
             shutil.which(program, path=env.get("PATH", os.defpath)))
    if found is None or not os.access(found, os.X_OK):
        raise McpCommandMissing(f"command not found: {program}")
    argv = parent_death.wrapped([found, *config.command[1:]])
    params = StdioServerParameters(command=argv[0], args=argv[1:], env=env, cwd=launch.directory)
    with open(os.devnull, "w") as errlog:
        async with stdio_client(params, errlog=errlog) as streams:
            yield streams


@asynccontextmanager
async def _streamable(config: McpRemoteConfig, timeout_s: float) -> AsyncIterator[Any]:
    import httpx2
    from mcp.client.streamable_http import streamable_http_client

    async with httpx2.AsyncClient(headers=config.headers, timeout=httpx2.Timeout(max(timeout_s, 30), read=300)) \
            as client, streamable_http_client(config.url, http_client=client) as streams:
        yield streams


@asynccontextmanager
async def _sse(config: McpRemoteConfig, timeout_s: float) -> AsyncIterator[Any]:
    from mcp.client.sse import sse_client

    async with sse_client(config.url, headers=config.headers, timeout=timeout_s) as streams:
        yield streams


class _SessionExpired(Exception):
    """The server answered that it does not know the MCP session (so it did not run the request)."""


def _session_expired(error: Any) -> bool:
    """Whether an error is a streamable HTTP server's 404 for a session it no longer has: the SDK's servers say
    "Session not found" (in a JSON-RPC error body), the SDK's client "Session terminated" for a bare 404."""
    text = str(getattr(error, "message", "") or error).lower()
    return "session not found" in text or "session terminated" in text


class _NotConnected(Exception):
    """The transport or the handshake failed before the server was connected."""


class McpServer:
    """One server's connection, kept by a task: `status` ("starting", "connected", "failed", "disabled"), the
    `error` that failed it, its `tools` (the MCP tool definitions of the latest list) and `instructions`. `settled`
    is set once the first attempt to connect ended either way. `on_change` is told whenever its tools or status
    change."""

    def __init__(self, launch: Launch, *, backoff_s: float = BACKOFF_S, max_backoff_s: float = MAX_BACKOFF_S,
                 on_change: Callable[[McpServer], None] = lambda _server: None) -> None:
        self.launch = launch
        self.name = launch.name
        self.status: Status = "starting" if launch.entry.enabled else "disabled"
        self.error: str | None = launch.entry.problem
        if launch.entry.problem is not None:
            self.status = "failed"
        self.tools: tuple[Any, ...] = ()  # mcp_types.Tool
        self.instructions: str | None = None
        self.resources = False  # the connected server offers resources (`resources/list`, `resources/read`)
        self.generation = 0  # bumped with every new tool list (the tools built from it are cached by it)
        self.settled = asyncio.Event()
        # clear from a `tools/list_changed` until the list is fetched again (or the connection is gone): the next
        # Step's boundary waits for it, so a change the model caused reaches its next Step
        self.listed = asyncio.Event()
        self.listed.set()
        self.last_used = time.monotonic()
        self.failures = 0
        self.gave_up = False  # no more attempts: its command is missing (a changed configuration starts anew)
        self._on_change = on_change
        self._backoff_s = backoff_s
        self._max_backoff_s = max_backoff_s
        self._session: Any = None
        self._wake = asyncio.Event()
        self._stopping = False
        self._relist = False
        self._ended = False
        # a new MCP session being set up because the server forgot ours (it restarted): the calls waiting for it
        self._renewal: asyncio.Future[Any] | None = None
        self._task: asyncio.Task[None] | None = None

    # --- lifetime -------------------------------------------------------------------------------------------

    def start(self) -> None:
        """Connect in the background (a server that is switched off or misconfigured is settled at once)."""
        if self.status != "starting":
            self.settled.set()
            if self.error is not None:
                log.error("MCP server %s cannot start: %s", self.name, self.error)
            return
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name=f"mcp-{self.name}")

    async def stop(self) -> None:
        """Disconnect (a local server's process is ended: stdin closed, then terminated, then killed)."""
        self._stopping = True
        self._wake.set()
        task = self._task
        if task is None:
            return
        done, _ = await asyncio.wait({task}, timeout=STOP_GRACE_S)
        if not done:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)

    def touch(self) -> None:
        self.last_used = time.monotonic()

    # --- calls ----------------------------------------------------------------------------------------------

    async def call(self, tool: str, arguments: dict[str, Any], timeout_s: float) -> Any:
        """One `tools/call`; McpUnavailable when the server is not connected or the connection broke meanwhile,
        TimeoutError after `timeout_s` (the SDK tells the server the request is cancelled, as it does when the
        awaiting task is cancelled: an interrupt). A server that answers that it does not know our MCP session (a
        remote one that restarted: 404, "Session not found") never ran the call: a new session is initialized, once,
        and the call sent again on it."""
        with hooks.mcp_call(self.name, tool):
            return await self._request(
                lambda session, progressed: session.call_tool(tool, arguments, progress_callback=progressed),
                timeout_s)

    async def read_resource(self, uri: str, timeout_s: float) -> Any:
        """One `resources/read` (a `ReadResourceResult`), failing as `call` does."""
        return await self._request(lambda session, _progressed: session.read_resource(uri), timeout_s)

    async def list_resources(self, timeout_s: float) -> tuple[list[Any], list[Any]]:
        """The server's resources and resource templates (each list's pages, up to a bound), failing as `call`."""
        from mcp_types import PaginatedRequestParams

        async def pages(session: Any, method: str, field: str) -> list[Any]:
            listed = await getattr(session, method)()
            items, count = list(getattr(listed, field)), 1
            while listed.next_cursor and count < _MAX_TOOL_PAGES:
                listed = await getattr(session, method)(params=PaginatedRequestParams(cursor=listed.next_cursor))
                items.extend(getattr(listed, field))
                count += 1
            return items

        async def both(session: Any, _progressed: Any) -> tuple[list[Any], list[Any]]:
            return (await pages(session, "list_resources", "resources"),
                    await pages(session, "list_resource_templates", "resource_templates"))

        return await self._request(both, timeout_s)

    async def _request(self, send: Callable[[Any, Any], Awaitable[Any]], timeout_s: float) -> Any:
        self.touch()
        session = self._session
        if session is None:
            raise McpUnavailable(self.unavailable())
        try:
            return await self._call(session, send, timeout_s)
        except _SessionExpired:
            pass
        session = await self._renew(session)
        try:
            return await self._call(session, send, timeout_s)
        except _SessionExpired:
            self._lost(session, "the server does not know the MCP session it just began")
            raise McpUnavailable(f"the MCP server {self.name} does not keep its MCP session") from None

    async def _renew(self, expired: Any) -> Any:
        """A session to use instead of `expired`, which the server no longer knows: the connection is begun again
        (a new transport and initialize, at once, not after a backoff) unless another call did so already."""
        current = self._session
        if current is not None and current is not expired:
            return current
        if self._renewal is None or self._renewal.done():
            self._renewal = asyncio.get_running_loop().create_future()
            if self._session is expired:
                log.info("MCP server %s no longer knows our MCP session (it restarted?): initializing a new one",
                         self.name)
                self._session = None
                self._ended = True
                self._wake.set()
        try:
            async with asyncio.timeout(self.launch.entry.startup_timeout_s()):
                return await asyncio.shield(self._renewal)
        except TimeoutError:
            raise McpUnavailable(f"the MCP server {self.name} lost its MCP session and did not begin a new one in "
                                 f"time") from None

    def _renewed(self, session: Any | None, reason: str | None = None) -> None:
        renewal, self._renewal = self._renewal, None
        if renewal is not None and not renewal.done():
            if session is not None:
                renewal.set_result(session)
            else:
                renewal.set_exception(McpUnavailable(
                    f"the MCP server {self.name} lost its MCP session and could not begin a new one: {reason}"))
                renewal.exception()  # retrieved: a renewal nobody waits for any more is not reported

    async def _call(self, session: Any, send: Callable[[Any, Any], Awaitable[Any]], timeout_s: float) -> Any:
        """`send(session, progressed)`, the request with a progress token: each progress notification the server
        sends for it gives it `timeout_s` more from then (as OpenCode's client does), up to MAX_CALL_S in all."""
        from mcp.shared.exceptions import MCPError
        from mcp_types import CONNECTION_CLOSED, REQUEST_TIMEOUT

        now = anyio.current_time()
        limit = now + max(MAX_CALL_S, timeout_s)
        scope = anyio.CancelScope(deadline=now + timeout_s)

        async def progressed(_progress: float, _total: float | None, _message: str | None) -> None:
            scope.deadline = min(anyio.current_time() + timeout_s, limit)

        try:
            with scope:
                return await send(session, progressed)
        except MCPError as error:
            if _session_expired(error):
                raise _SessionExpired() from None
            if error.code == REQUEST_TIMEOUT:
                raise TimeoutError(f"the MCP server {self.name} did not answer within {timeout_s:g} s") from None
            if error.code == CONNECTION_CLOSED:
                self._lost(session, "the server closed the connection")
                raise McpUnavailable(f"the MCP server {self.name} closed the connection during the call") from None
            raise
        except (OSError, anyio.BrokenResourceError, anyio.ClosedResourceError) as broken:
            self._lost(session, describe(broken))  # a remote server that went away: connect again
            raise McpUnavailable(f"the connection to the MCP server {self.name} failed: {describe(broken)}") from None
        # the scope's deadline passed (the SDK told the server the request is cancelled)
        raise TimeoutError(f"the MCP server {self.name} did not answer within {timeout_s:g} s")

    def _lost(self, session: Any, reason: str) -> None:
        """The connection `session` belongs to is gone: no call may use it from now on, and the task ends it and
        connects again. Nothing happens when that connection has already been replaced."""
        if session is not None and self._session is session:
            self._session = None
            self.status, self.error = "failed", reason
            self._ended = True
            self._wake.set()

    def unavailable(self) -> str:
        if self.status == "disabled":
            return f"the MCP server {self.name} is disabled"
        if self.status == "starting":
            return f"the MCP server {self.name} is still starting"
        if self.gave_up:
            return f"the MCP server {self.name} is not connected ({self.error})"
        return f"the MCP server {self.name} is not connected ({self.error or 'no reason given'}); it is restarted"

    # --- the connection's task -------------------------------------------------------------------------------

    def _changed(self) -> None:
        try:
            self._on_change(self)
        except Exception:
            log.exception("MCP server %s: a change listener failed", self.name)

    async def _run(self) -> None:
        while not self._stopping:
            renewing = self._renewal is not None  # this attempt is the new session a call waits for
            missing = False
            try:
                await self._connect()
                reason = "the server closed the connection"
            except Exception as failed:
                reason = describe(failed)
                missing = isinstance(_leaf(failed), McpCommandMissing)
            if not renewing and self._renewal is not None and not self._stopping:
                continue  # the old session ended to make way for a new one: begin it now
            self._renewed(None, "the runtime is closing" if self._stopping else reason)
            if self._stopping:
                break
            self.failures += 1
            delay = min(self._backoff_s * 2 ** (self.failures - 1), self._max_backoff_s)
            self.status, self.error = "failed", reason
            self._session = None
            if missing and self.failures >= MISSING_COMMAND_ATTEMPTS:
                self.gave_up = True
                self.error = f"{reason} (tried {self.failures} times; it is tried again when its configuration changes)"
                log.error("MCP server %s failed: %s", self.name, self.error)
                self.settled.set()
                self._changed()
                break
            log.error("MCP server %s failed: %s; restarting in %g s", self.name, reason, delay)
            self.settled.set()
            self._changed()
            self._wake.clear()
            if self._stopping:
                break
            try:
                await asyncio.wait_for(self._wake.wait(), delay)
            except TimeoutError:
                pass
        self._session = None

    def _transports(self) -> list[tuple[str, Callable[[], Any]]]:
        config = self.launch.entry.config
        timeout = self.launch.entry.request_timeout_s()
        if isinstance(config, McpLocalConfig):
            return [("stdio", lambda: _stdio(config, self.launch))]
        assert isinstance(config, McpRemoteConfig)
        return [("streamable HTTP", lambda: _streamable(config, timeout)), ("SSE", lambda: _sse(config, timeout))]

    async def _connect(self) -> None:
        problems = []
        missing = True
        for label, opener in self._transports():
            try:
                await self._serve(opener)
                return
            except _NotConnected as failed:
                problems.append(f"{label}: {describe(failed.__cause__ or failed)}")
                missing = missing and isinstance(_leaf(failed.__cause__ or failed), McpCommandMissing)
        kind = McpCommandMissing if missing else McpStartFailed
        raise kind("; ".join(problems) if len(problems) > 1 else problems[0].split(": ", 1)[1])

    async def _serve(self, opener: Callable[[], Any]) -> None:
        """Connect over one transport and stay connected until stopped or the connection ends; _NotConnected when
        it fails before the handshake and the tool list are through."""
        from mcp.client.session import ClientSession
        from mcp_types import Implementation

        timeout = self.launch.entry.request_timeout_s()
        connected = False
        self._ended = False

        def ended() -> None:
            self._ended = True
            self._lost(self._session, "the server closed the connection")
            self._wake.set()

        try:
            async with opener() as (read, write), ClientSession(
                    _Watched(read, ended), write, message_handler=self._on_message, list_roots_callback=self._roots,
                    client_info=Implementation(name="opencode-session", version="1")) as session:
                with anyio.fail_after(CONNECT_TIMEOUT_MS / 1000):
                    initialized = await session.initialize()
                with anyio.fail_after(timeout):
                    tools = await _list_tools(session)
                self._session, self.instructions = session, initialized.instructions
                self.resources = initialized.capabilities.resources is not None
                self._tools(tools)
                self.status, self.error, self.failures, connected = "connected", None, 0, True
                log.info("MCP server %s connected: %d tools", self.name, len(tools))
                self._renewed(session)
                self.settled.set()
                self._changed()
                while not (self._stopping or self._ended):
                    await self._wake.wait()
                    self._wake.clear()
                    if self._relist and not (self._stopping or self._ended):
                        self._relist = False
                        with anyio.fail_after(timeout):
                            self._tools(await _list_tools(session))
                        if not self._relist:
                            self.listed.set()
                        self._changed()
        except Exception as failed:
            if not connected:
                raise _NotConnected() from failed
            raise
        finally:
            self._session = None
            self.listed.set()

    async def _roots(self, context: Any) -> Any:
        """`roots/list`: the Location the server serves (as OpenCode offers it)."""
        from mcp_types import ListRootsResult, Root

        return ListRootsResult(roots=[Root(uri=self.launch.directory.resolve().as_uri(),  # type: ignore[arg-type]
                                           name=self.launch.directory.name or None)])

    def _tools(self, tools: list[Any]) -> None:
        self.tools = tuple(tools)
        self.generation += 1

    async def _on_message(self, message: Any) -> None:
        from mcp_types import ToolListChangedNotification

        if isinstance(message, ToolListChangedNotification):
            self._relist = True
            self.listed.clear()
            self._wake.set()


async def _list_tools(session: Any) -> list[Any]:
    from mcp_types import PaginatedRequestParams

    listed = await session.list_tools()
    tools = list(listed.tools)
    pages = 1
    while listed.next_cursor and pages < _MAX_TOOL_PAGES:
        listed = await session.list_tools(params=PaginatedRequestParams(cursor=listed.next_cursor))
        tools.extend(listed.tools)
        pages += 1
    return tools


def launch_of(entry: ServerEntry, directory: Path, env: Mapping[str, str],
              overlay: Callable[[Path], Mapping[str, str]] | None = None) -> Launch:
    """The Launch of `entry` in the Location `directory`: a local server's environment is `env` (less the server's
    password and provider keys), then the entry's `environment`, then the host's overlay for that directory."""
    config = entry.config
    extra = config.environment if isinstance(config, McpLocalConfig) else {}
    merged = {**inherited(env), **extra, **(overlay(directory) if overlay else {})}
    return Launch(entry, directory, tuple(sorted(merged.items())) if isinstance(config, McpLocalConfig) else ())


__all__ = ["BACKOFF_S", "Launch", "MAX_BACKOFF_S", "MISSING_COMMAND_ATTEMPTS", "McpCommandMissing", "McpServer",
           "McpStartFailed", "McpUnavailable", "Status", "describe", "launch_of"]

