"""Serving the app on a real socket with uvicorn, owning the shutdown order: stop accepting, end streams,
suspend active sessions, interrupt them, release the database."""

from __future__ import annotations

import asyncio
import contextlib
import errno
import logging
import signal
import socket
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any

import uvicorn

from ..compat import read_deadline_protocol, ready_server
from ..core import own_address
from ..core.execution.continuation import InvalidResumeBudget
from ..core.execution.ownership import InvalidLeaseTtl
from ..core.runtime import Runtime, RuntimeOptions
from ..core.store import BackendNotInstalledError, StoreError, describe_database, require_backend
from .app import create_app, lifespan
from .connections import ResourceExhaustionLog
from .guard import GuardOptions, is_loopback
from .sse import STREAM_CUT

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ConnectionLimits:
    """How long a client may take to send each request, stay idle between requests, and how many connections and
    requests may be open at once (beyond that, uvicorn answers 503); the proxies whose `X-Forwarded-For` and
    `X-Forwarded-Proto` name the client (none: every request's client is the peer that sent it, which the
    wrong-password throttle counts by)."""

    read_timeout: float = 30.0
    keep_alive: int = 5
    max_concurrency: int = 512
    trusted_proxies: tuple[str, ...] = ()


class ServeRefused(Exception):
    """A configuration `ocs serve` will not start with; the message says why in one line."""


_WILDCARDS = ("0.0.0.0", "::", "")


def check_exposure(host: str, env: Mapping[str, str], insecure_no_password: bool = False) -> None:
    """Refuse to listen beyond loopback without OPENCODE_SERVER_PASSWORD unless the operator insists."""
    if is_loopback(host) or env.get("OPENCODE_SERVER_PASSWORD") or insecure_no_password:
        return
    raise ServeRefused(
        f"refusing to listen on {host or 'all interfaces'} without OPENCODE_SERVER_PASSWORD: anyone who can reach it"
        " could run sessions and read files; set the password or pass --insecure-no-password")


def bind(host: str, port: int) -> socket.socket:
    """A listening socket; ServeRefused, with the fix, when the address is taken or not ours to use."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # an explicit IPPROTO_TCP lets asyncio set TCP_NODELAY on accepted connections (no 40 ms keep-alive stalls)
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(2048)
    except OSError as exc:
        sock.close()
        if exc.errno == errno.EADDRINUSE:
            raise ServeRefused(f"port {port} on {host} is already in use (another ocs serve?); choose another"
                               " with --port, or --port 0 for any free port") from None
        raise ServeRefused(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    sock.setblocking(False)
    return sock


async def serve(
    options: RuntimeOptions,
    host: str = "127.0.0.1",
    port: int = 0,
    *,
    on_ready: Callable[[str, Runtime], Any] | None = None,
    stop: asyncio.Event | None = None,
    heartbeat: float = 15.0,
    managed: bool = True,
    guard: GuardOptions | None = None,
    limits: ConnectionLimits | None = None,
    insecure_no_password: bool = False,
    stall_timeout: float = 15.0,
    own_logging: bool = False,
) -> None:
    """Run until SIGTERM/SIGINT (or `stop`). `managed` servers suspend active sessions on shutdown and resume
    the suspended ones at start (restart continuation), and continue the sessions a hard crash lost (within the
    resume budget). Raises ServeRefused before opening anything when `host`
    is beyond loopback and no password is set (unless `insecure_no_password`). With `own_logging` uvicorn leaves
    logging as the caller configured it (its records reach the root logger's handlers)."""
    check_exposure(host, options.env, insecure_no_password)
    stop = stop or asyncio.Event()
    guard = guard or GuardOptions()
    limits = limits or ConnectionLimits()
    if host not in _WILDCARDS and not is_loopback(host):
        guard = replace(guard, allowed_hosts=(*guard.allowed_hosts, host))  # the address it was told to serve
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(sig, stop.set)
    try:
        require_backend(options.db_path)
        runtime = Runtime(options)
    except (InvalidResumeBudget, InvalidLeaseTtl, BackendNotInstalledError) as bad:
        raise ServeRefused(str(bad)) from None
    app = create_app(runtime, heartbeat=heartbeat, guard=guard, stall_timeout=stall_timeout)
    # the app's lifespan, entered here rather than by uvicorn (`lifespan="off"` below), which would log a failure to
    # open and exit instead of raising it
    opened = lifespan(app)
    try:
        await opened.__aenter__()
    except (OSError, StoreError) as unusable:
        reason = unusable.strerror if isinstance(unusable, OSError) and unusable.strerror else unusable
        raise ServeRefused(f"cannot open the database {describe_database(options.db_path)}: {reason}"
                           " (choose another with --db)") from None
    previous_handler = loop.get_exception_handler()
    loop.set_exception_handler(ResourceExhaustionLog())
    served: tuple[str, int] | None = None
    try:
        # before this host runs anything: every execution claim left in the database is a lost host's
        lost = await runtime.lost_sessions() if managed else []
        sock = bind(host, port)
        logging_config: dict[str, Any] = {"log_config": None} if own_logging else {}
        config = uvicorn.Config(app, lifespan="off", log_level="warning", access_log=False, **logging_config,
                                timeout_graceful_shutdown=10, http=read_deadline_protocol(limits.read_timeout),
                                timeout_keep_alive=limits.keep_alive,
                                limit_concurrency=limits.max_concurrency,
                                # uvicorn believes forwarded headers from loopback unless told otherwise: any local
                                # process could then choose the client address the throttle counts by
                                proxy_headers=bool(limits.trusted_proxies),
                                forwarded_allow_ips=list(limits.trusted_proxies) or None)
        logging.getLogger("uvicorn.error").addFilter(STREAM_CUT)  # after Config: it (re)configures uvicorn's logging
        started = asyncio.Event()
        server = ready_server(config, started)
        serving = asyncio.create_task(server.serve(sockets=[sock]))
        ready = asyncio.create_task(started.wait())
        await asyncio.wait({serving, ready}, return_when=asyncio.FIRST_COMPLETED)
        ready.cancel()
        if serving.done():
            serving.result()  # re-raises why uvicorn stopped
        if not server.started:
            raise RuntimeError("the HTTP server did not start")
        bound = sock.getsockname()
        served = (host, bound[1])
        own_address.register(*served)  # the model's webfetch may not call it back
        url = f"http://{host if ':' not in host else f'[{host}]'}:{bound[1]}"
        if managed:
            await runtime.continue_lost(lost)
            await runtime.resume_suspended()
        if on_ready is not None:
            on_ready(url, runtime)
        stopper = asyncio.create_task(stop.wait())
        await asyncio.wait({serving, stopper}, return_when=asyncio.FIRST_COMPLETED)
        # 1. stop accepting and end every open stream so uvicorn's graceful wait can finish (the lifespan's end would
        # be too late: uvicorn waits for the streams first)
        app.state.ocs.shutdown.set()
        server.should_exit = True
        await serving
        stopper.cancel()
        # 2. mark active sessions suspended, then 3. interrupt them (inside runtime.close)
        if managed:
            await runtime.suspend_active()
    finally:
        for sig in (signal.SIGTERM, signal.SIGINT):
            with contextlib.suppress(NotImplementedError, RuntimeError):
                loop.remove_signal_handler(sig)
        await opened.__aexit__(None, None, None)  # ends the streams left and closes the runtime
        loop.set_exception_handler(previous_handler)
        if served is not None:
            own_address.unregister(*served)
