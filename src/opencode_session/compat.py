"""Every place this program reaches into a dependency's private names, in one module below all layers (core and the
client both use it), each checked against the release it was tested with (pyproject.toml bounds the same): with
another release installed, or a private name gone, a patch degrades to the dependency's public path (a logged line
says so once) instead of failing the Step that first uses it. Nothing is imported or read until a patch is first
used; `check_versions` is the start-up check, naming each package that will take the public path."""

from __future__ import annotations

import functools
import importlib.metadata
import logging
from collections.abc import Callable, Generator, Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import asyncio

    import uvicorn

log = logging.getLogger(__name__)

# The packages patched below and the versions the patches were written for (requirements.lock pins the same;
# pyproject.toml admits their patch releases: the same major.minor).
WRITTEN_FOR: Mapping[str, str] = {
    "httpx2": "2.16.2",  # AsyncHTTPTransport._pool
    "httpcore2": "2.16.2",  # AsyncConnectionPool._network_backend
    "openai": "3.51.0",  # the client's _client, _make_status_error_from_response, _custom_headers; AsyncStream(...)
    "anthropic": "2.10.0",  # the same, _credential_headers, and the auth_headers its client subclass overrides
    "uvicorn": "0.54.0",  # H11Protocol's conn, transport, loop and on_response_complete; Server.capture_signals
}
_said: set[str] = set()


class IncompatibleDependencyError(ImportError):
    """A package the runtime needs is not installed at all (another version only degrades a patch)."""


def installed_version(package: str) -> str | None:
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return None


def _release(version: str) -> tuple[str, ...]:
    return tuple(version.split(".")[:2])


def untested(expected: Mapping[str, str] = WRITTEN_FOR) -> dict[str, str | None]:
    """The packages of `expected` installed at a release (major.minor) other than the one their patches were
    tested with, with the installed version (None: not installed)."""
    found = {package: installed_version(package) for package in expected}
    return {package: version for package, version in found.items()
            if version is None or _release(version) != _release(expected[package])}


def check_versions(expected: Mapping[str, str] = WRITTEN_FOR) -> list[str]:
    """The start-up check: one line per package whose patches will take the public path (empty when every package
    is within its tested release). Raises IncompatibleDependencyError, naming it, for a package not installed."""
    lines = []
    for package, version in untested(expected).items():
        if version is None:
            raise IncompatibleDependencyError(f"{package} is not installed: install {package}=={expected[package]}"
                                              " (requirements.lock)")
        lines.append(f"{package} {version} is not the release opencode_session.compat was tested with "
                     f"({expected[package]}): it uses {package}'s public path instead")
    return lines


@functools.cache
def patched(package: str) -> bool:
    """Whether the patches of `package` apply (it is installed within its tested release), read once per process."""
    return package not in untested({package: WRITTEN_FOR[package]})


def _degraded(package: str, what: str) -> None:
    """Log once per package and patch that it takes the public path."""
    key = f"{package}:{what}"
    if key not in _said:
        _said.add(key)
        version = installed_version(package)
        log.warning("%s %s is not the release opencode_session.compat was tested with (%s): %s", package, version,
                    WRITTEN_FOR[package], what)


# --- httpx2 / httpcore2 ---------------------------------------------------------------------------------------


def set_network_backend(transport: Any, backend: Any) -> bool:
    """Have an httpx2.AsyncHTTPTransport's connections made by `backend` (an httpcore2.AsyncNetworkBackend): httpx
    takes no backend argument, its connection pool does. Another release keeps httpcore's own backend (False)."""
    pool = getattr(transport, "_pool", None)
    if not (patched("httpx2") and patched("httpcore2") and hasattr(pool, "_network_backend")):
        _degraded("httpx2", "connections use httpcore's own network backend")
        return False
    pool._network_backend = backend  # type: ignore[union-attr]
    return True


# --- the openai and anthropic SDK clients ---------------------------------------------------------------------


def _package(client: Any) -> str:
    return "anthropic" if any(k.__module__.startswith("anthropic") for k in type(client).__mro__) else "openai"


def can_resend(client: Any) -> bool:
    """Whether a request may be sent again outside the SDK's `post` (`sdk_http_client`, `sdk_status_error` and
    `sdk_stream` work on `client`); otherwise every request takes the SDK's own path."""
    package = _package(client)
    if patched(package) and all(hasattr(client, name) for name in ("_client", "_make_status_error_from_response")):
        return True
    _degraded(package, "every request is sent through the SDK's own post")
    return False


def sdk_http_client(client: Any) -> Any:
    """The httpx2.AsyncClient an SDK client sends through (only where `can_resend`)."""
    return client._client


def sdk_status_error(client: Any, response: Any) -> Exception:
    """The SDK's own error for a failed HTTP response, as its `post` would raise it (only where `can_resend`)."""
    error: Exception = client._make_status_error_from_response(response)
    return error


def sdk_stream(stream_cls: Any, client: Any, response: Any) -> Any:
    """The SDK's stream over a response sent outside its `post` (items decoded as JSON, not into models; only where
    `can_resend`)."""
    return stream_cls(cast_to=object, response=response, client=client)


def sdk_custom_headers(client: Any) -> Mapping[str, str]:
    """The custom headers an SDK client sends (after `pin_sdk_headers`: exactly the provider entry's; none known
    where the SDK keeps them elsewhere)."""
    headers: Mapping[str, str] = getattr(client, "_custom_headers", None) or {}
    return headers


def pin_sdk_headers(client: Any, headers: Mapping[str, str], *, drop_credential_headers: bool = False) -> None:
    """Send exactly `headers` as the client's custom headers: the SDKs merge in ones from the environment
    (OPENAI_CUSTOM_HEADERS, ANTHROPIC_CUSTOM_HEADERS, a profile's) whatever server they talk to. Anthropic's client
    also keeps credential headers of its own, which `drop_credential_headers` clears. Where the SDK keeps them under
    other names, its own (public) header handling stays, and a line is logged once."""
    package = _package(client)
    names = ("_custom_headers", "_credential_headers") if drop_credential_headers else ("_custom_headers",)
    if not all(hasattr(client, name) for name in names):
        _degraded(package, "its headers are the SDK's own, environment headers included")
        return
    if not patched(package):
        _degraded(package, "its private header names are still used, as their names are unchanged")
    client._custom_headers = dict(headers)
    if drop_credential_headers:
        client._credential_headers = {}


# --- uvicorn --------------------------------------------------------------------------------------------------


def ready_server(config: uvicorn.Config, ready: asyncio.Event) -> uvicorn.Server:
    """A uvicorn server that leaves signals to its owner and sets `ready` when its startup is over (also when it
    failed). uvicorn has no hook for either: this overrides Server.capture_signals and Server.startup, which it
    calls on itself. Another release keeps the overrides (their names are unchanged), and a line is logged once."""
    if not patched("uvicorn"):
        _degraded("uvicorn", "its server's signal capture and startup are still overridden")
    return _ready_server_class()(config, ready)


@functools.cache
def _ready_server_class() -> Callable[[uvicorn.Config, asyncio.Event], uvicorn.Server]:
    import contextlib
    import socket

    import uvicorn

    class ReadyServer(uvicorn.Server):
        def __init__(self, config: uvicorn.Config, ready: asyncio.Event) -> None:
            super().__init__(config)
            self.ready = ready

        @contextlib.contextmanager
        def capture_signals(self) -> Generator[None, None, None]:
            yield  # signals are the owner's: uvicorn must not re-raise them after its own shutdown

        async def startup(self, sockets: list[socket.socket] | None = None) -> None:
            try:
                await super().startup(sockets=sockets)
            finally:
                self.ready.set()  # also on failure, so the owner stops waiting and sees the error

    return ReadyServer


def read_deadline_protocol(read_timeout: float) -> type[asyncio.Protocol] | str:
    """uvicorn's h11 protocol (`Config(http=...)`) with a deadline of `read_timeout` seconds on every request read:
    from the connection (or the first byte of the next request) until the request, body included, has arrived; a
    client that misses it is disconnected. uvicorn only times out idle keep-alive connections, so a client that
    sends nothing, or trickles its headers or body (slowloris), would otherwise hold a connection forever. It
    subclasses uvicorn's H11Protocol, using its private state; another release gets plain "h11" (no deadline)."""
    if not patched("uvicorn"):
        _degraded("uvicorn", "requests are read without a deadline (plain h11)")
        return "h11"
    return type("ReadDeadlineH11Protocol", (_read_deadline_class(),), {"read_timeout": read_timeout})


@functools.cache
def _read_deadline_class() -> type[asyncio.Protocol]:

    import h11
    from uvicorn.protocols.http.h11_impl import H11Protocol

    class ReadDeadlineH11Protocol(H11Protocol):
        read_timeout: float = 30.0
        _deadline: asyncio.TimerHandle | None = None

        # uvicorn's own signature, narrower than asyncio's BaseTransport
        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            self._arm()

        def data_received(self, data: bytes) -> None:
            super().data_received(data)
            self._track()

        def on_response_complete(self) -> None:
            super().on_response_complete()
            self._track()  # a pipelined request may already be half-read

        def connection_lost(self, exc: Exception | None) -> None:
            self._disarm()
            super().connection_lost(exc)

        def _reading_a_request(self) -> bool:
            state = self.conn.their_state
            return state is h11.SEND_BODY or (state is h11.IDLE and bool(self.conn.trailing_data[0]))

        def _track(self) -> None:
            if self._reading_a_request():
                if self._deadline is None:
                    self._arm()
            else:
                self._disarm()

        def _arm(self) -> None:
            self._deadline = self.loop.call_later(self.read_timeout, self._expired)

        def _disarm(self) -> None:
            if self._deadline is not None:
                self._deadline.cancel()
                self._deadline = None

        def _expired(self) -> None:
            self._deadline = None
            state = self.conn.their_state
            if state in (h11.IDLE, h11.SEND_BODY) and not self.transport.is_closing():
                # A request handler waiting for the rest of the body sees the disconnect and stops.
                self.transport.close()

    return ReadDeadlineH11Protocol


def late_accept_retry(context: Mapping[str, Any]) -> bool:
    """Whether an event loop error is one of asyncio's accept retries firing on a server socket closed since: out
    of descriptors, asyncio (3.11) schedules a retry for each failed accept of a pass, up to the backlog, and each
    fails once the server has stopped. Read from the failed callback (the timer handle's `_callback` and `_args`,
    private in every release): where they are gone, False, and the error is reported as any other."""
    import socket

    handle = context.get("handle")
    callback = getattr(handle, "_callback", None)
    return (getattr(callback, "__name__", None) == "_start_serving"
            and any(isinstance(arg, socket.socket) and arg.fileno() == -1 for arg in getattr(handle, "_args", ())))


__all__ = ["WRITTEN_FOR", "IncompatibleDependencyError", "can_resend", "check_versions", "installed_version",
           "late_accept_retry", "patched", "pin_sdk_headers", "read_deadline_protocol", "ready_server",
           "sdk_custom_headers", "sdk_http_client", "sdk_status_error", "sdk_stream", "set_network_backend",
           "untested"]
