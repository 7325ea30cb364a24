"""The adapter registry, keyed by wire protocol, and `Providers`: the adapters one runtime uses, over one shared HTTP
client per provider that the runtime owns and closes."""

from __future__ import annotations

import importlib
import sys
import threading
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

import anyio

if TYPE_CHECKING:
    import ssl

    import httpx2

from .model import Provider, ResolvedModel, WireProtocol

AdapterFactory = Callable[..., Provider]


def _chat(**kw: Any) -> Provider:
    from .openai_chat import OpenAIChatProvider

    return OpenAIChatProvider(**kw)


def _responses(**kw: Any) -> Provider:
    from .openai_responses import OpenAIResponsesProvider

    return OpenAIResponsesProvider(**kw)


def _messages(**kw: Any) -> Provider:
    from .anthropic_messages import AnthropicMessagesProvider

    return AnthropicMessagesProvider(**kw)


# SDKs load when a protocol is first used, not when the server starts.
ADAPTERS: Mapping[WireProtocol, AdapterFactory] = {"chat": _chat, "responses": _responses, "messages": _messages}
_MODULES: Mapping[WireProtocol, str] = {"chat": "openai_chat", "responses": "openai_responses",
                                        "messages": "anthropic_messages"}


async def load_adapter(protocol: WireProtocol) -> None:
    """Import a protocol's adapter, and so its SDK, and build the TLS context of provider connections in a worker
    thread the first time they are needed: both take tens to hundreds of milliseconds, which on the event loop would
    stall every request and session meanwhile."""
    name = f"{__package__}.{_MODULES[protocol]}"
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
    pool = getattr(transport, "_pool", None)  # httpx takes no backend argument; its pool does (pinned versions)
    if pool is not None and hasattr(pool, "_network_backend"):
        pool._network_backend = CoalescingBackend()
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
                timeout=DEFAULT_TIMEOUT, follow_redirects=False)
        return client

    def for_model(self, model: ResolvedModel) -> Provider:
        if self._closed:
            raise RuntimeError("the runtime's providers are closed")
        key: _AdapterKey = (model.provider_id, model.protocol, model.base_url, model.api_key,
                            tuple(sorted(model.headers.items())), model.timeout)
        adapter = self._adapters.get(key)
        if adapter is None:
            adapter = self._adapters[key] = ADAPTERS[model.protocol](
                base_url=model.base_url, api_key=model.api_key, headers=model.headers, timeout=_timeout(model),
                http_client=self._http_client(model.provider_id))
        return adapter

    async def aclose(self) -> None:
        self._closed = True
        clients, self._http, self._adapters = list(self._http.values()), {}, {}
        for client in clients:
            await client.aclose()


__all__ = ["ADAPTERS", "Providers", "load_adapter"]
