"""The adapter registry, by wire protocol name (the built-ins, and any an extension registers), and `Providers`: the
adapters one runtime uses, over one shared HTTP client per provider that the runtime owns and closes."""

from __future__ import annotations

import importlib
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import anyio

if TYPE_CHECKING:
    import ssl

    import httpx2

from ...compat import set_network_backend
from ..telemetry import hooks, telemetry
from .model import Provider, ResolvedModel, WireProtocol

# Builds an adapter: called with base_url=, api_key=, headers=, timeout= and http_client= (the provider's shared
# httpx2.AsyncClient).
AdapterFactory = Callable[..., Provider]

OPENAI_COMPATIBLE_NPM = "@ai-sdk/openai-compatible"
OPENAI_NPM = "@ai-sdk/openai"
ANTHROPIC_NPM = "@ai-sdk/anthropic"


@dataclass(frozen=True)
class AdapterSpec:
    """One wire protocol's adapter, registered under the protocol's name: the module that defines it (imported, with
    its SDK, only when a model first uses the protocol), the name of its `AdapterFactory` there, and the provider
    packages (opencode.json's `npm`) whose providers speak the protocol."""

    protocol: str
    module: str
    factory: str
    npm: tuple[str, ...] = ()


_ADAPTERS: dict[str, AdapterSpec] = {}


def register_adapter(spec: AdapterSpec) -> None:
    """Make a protocol's adapter available; a protocol or provider package registered already raises ValueError."""
    if spec.protocol in _ADAPTERS:
        raise ValueError(f"an adapter is registered for protocol {spec.protocol!r} already")
    taken = [npm for npm in spec.npm if protocol_of_npm(npm) is not None]
    if taken:
        raise ValueError(f"provider package {taken[0]!r} has an adapter already")
    _ADAPTERS[spec.protocol] = spec


def unregister_adapter(protocol: str) -> None:
    _ADAPTERS.pop(protocol, None)


def adapter_spec(protocol: str) -> AdapterSpec:
    spec = _ADAPTERS.get(protocol)
    if spec is None:
        raise LookupError(f"no adapter is registered for protocol {protocol!r}")
    return spec


def protocol_of_npm(npm: str) -> str | None:
    """The protocol a provider package's providers speak; None when no registered adapter speaks it."""
    return next((spec.protocol for spec in _ADAPTERS.values() if npm in spec.npm), None)


def adapter_packages() -> list[str]:
    """Every provider package some adapter speaks, in registration order."""
    return [npm for spec in _ADAPTERS.values() for npm in spec.npm]


# The built-in adapters; their SDKs load when a protocol is first used, not when the server starts.
register_adapter(AdapterSpec("chat", f"{__package__}.openai_chat", "OpenAIChatProvider", (OPENAI_COMPATIBLE_NPM,)))
register_adapter(AdapterSpec("responses", f"{__package__}.openai_responses", "OpenAIResponsesProvider", (OPENAI_NPM,)))
register_adapter(AdapterSpec("messages", f"{__package__}.anthropic_messages", "AnthropicMessagesProvider",
                             (ANTHROPIC_NPM,)))


async def load_adapter(protocol: WireProtocol) -> None:
    """Import a protocol's adapter, and so its SDK, and build the TLS context of provider connections in a worker
    thread the first time they are needed: both take tens to hundreds of milliseconds, which on the event loop would
    stall every request and session meanwhile."""
    name = adapter_spec(protocol).module
    if name not in sys.modules or _TLS is None:
        await anyio.to_thread.run_sync(lambda: (importlib.import_module(name), _tls_context()))


_TLS: ssl.SSLContext | None = None
_TLS_LOCK = threading.Lock()


def _tls_context() -> ssl.SSLContext:
    """One verifying TLS context for every provider connection (httpx would build one per client, loading the CA
    bundle each time: ~0.1 s of CPU). Built once even when many sessions start together: without the lock, fifty
    first Steps each built their own in a worker thread."""
    global _TLS
    with _TLS_LOCK:
        if _TLS is None:
            import httpx2

            _TLS = httpx2.create_ssl_context()
        return _TLS


def _timeout(model: ResolvedModel) -> Any:
    if model.timeout is None:
        from .wire import DEFAULT_TIMEOUT  # with httpx2, which start-up does not load

        return DEFAULT_TIMEOUT
    return None if model.timeout == 0 else model.timeout


def _coalescing_transport(limits: httpx2.Limits) -> httpx2.AsyncHTTPTransport:
    """httpx's own transport (as a client would make it), whose connections send a request in one write."""
    import httpx2

    from .coalesce import CoalescingBackend

    transport = httpx2.AsyncHTTPTransport(verify=_tls_context(), limits=limits)
    set_network_backend(transport, CoalescingBackend())
    return transport


_AdapterKey = tuple[str, str, str, str | None, tuple[tuple[str, str], ...], float | None]


class Providers:
    """`for_model` hands out the adapter for a resolved model: one per (protocol, endpoint, credentials, headers,
    timeout), all of a provider sharing one HTTP connection pool. `aclose` releases every pool."""

    def __init__(self, transport: httpx2.AsyncBaseTransport | None = None) -> None:
        self._transport = transport  # tests replay recorded exchanges through it
        self._http: dict[str, httpx2.AsyncClient] = {}
        self._adapters: dict[_AdapterKey, Provider] = {}
        self._closed = False

    def _http_client(self, provider_id: str) -> httpx2.AsyncClient:
        client = self._http.get(provider_id)
        if client is None:
            import httpx2  # not at start-up: serving loads it with the first provider request

            from .wire import DEFAULT_TIMEOUT

            # the SDKs' own defaults for a client they would have made: generous pool, no redirects
            client = self._http[provider_id] = httpx2.AsyncClient(
                transport=self._transport or _coalescing_transport(
                    httpx2.Limits(max_connections=1000, max_keepalive_connections=100)),
                timeout=DEFAULT_TIMEOUT, follow_redirects=False,
                # while tracing, each request carries its provider attempt's traceparent
                event_hooks={"request": [hooks.inject_traceparent]} if telemetry.tracer is not None else None)
        return client

    def for_model(self, model: ResolvedModel) -> Provider:
        if self._closed:
            raise RuntimeError("the runtime's providers are closed")
        key: _AdapterKey = (model.provider_id, model.protocol, model.base_url, model.api_key,
                            tuple(sorted(model.headers.items())), model.timeout)
        adapter = self._adapters.get(key)
        if adapter is None:
            spec = adapter_spec(model.protocol)
            factory: AdapterFactory = getattr(importlib.import_module(spec.module), spec.factory)
            adapter = self._adapters[key] = factory(
                base_url=model.base_url, api_key=model.api_key, headers=model.headers, timeout=_timeout(model),
                http_client=self._http_client(model.provider_id))
        return adapter

    async def aclose(self) -> None:
        self._closed = True
        clients, self._http, self._adapters = list(self._http.values()), {}, {}
        for client in clients:
            await client.aclose()


__all__ = ["ANTHROPIC_NPM", "OPENAI_COMPATIBLE_NPM", "OPENAI_NPM", "AdapterFactory", "AdapterSpec", "Providers",
           "adapter_packages", "adapter_spec", "load_adapter", "protocol_of_npm", "register_adapter",
           "unregister_adapter"]
